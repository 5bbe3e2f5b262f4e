package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// benchNamespace holds the typical Deployment, in a namespace Istio injects, so that every
// policy judges a meshed workload.
const benchNamespace = "bench-shop"

// The configurations each figure names: the targets pair meshlife's with its engine's peer
// and subtract no policy's by these names.
const (
	configNoPolicy       = "no policy"
	configWebhook        = "plain webhook (meshlife install webhook)"
	configGatekeeper     = "Gatekeeper + meshlife (External Data)"
	configGatekeeperPeer = "Gatekeeper + three-rule Rego ConstraintTemplate (peer)"
	configKyverno        = "Kyverno + meshlife (ClusterPolicy pair, service call)"
	configKyvernoCEL     = "Kyverno + meshlife (ValidatingPolicy pair, CEL http)"
	configKyvernoPeer    = "Kyverno + three-rule CEL ValidatingPolicy (peer)"
)

// latency is one configuration's admission latency at one concurrency, on one object sent
// again and again or on a new object each time.
type latency struct {
	config      string
	objects     string
	concurrency int
	n           int
	p50, p95    time.Duration
	p99, max    time.Duration
	// calls is how many requests meshlife serve answered for these n admissions; -1: no
	// meshlife serve in this configuration.
	calls   int
	answers map[string]int
}

// The two ways each figure is taken. The same object again: an engine that caches answers
// (Gatekeeper's External Data cache, keyed by the object) answers from its cache. A new object
// each time (a new name): every admission reaches meshlife serve, as a rollout's new Pods do.
const (
	sameObject = "same"
	newObjects = "new"
)

// typicalDeployment is `meshlife bench`'s typical Deployment (its --save-inputs), the object
// every latency figure of BENCHMARKS.md is measured on.
func (h *harness) typicalDeployment() (*unstructured.Unstructured, error) {
	dir := filepath.Join(h.dir, "bench-inputs")
	cmd := exec.Command(h.meshlife, "bench", "--save-inputs", dir, "--budget-ms", "1")
	cmd.Dir = h.repo
	if output, err := cmd.CombinedOutput(); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "deployment-typical.json")); statErr != nil {
			return nil, fmt.Errorf("meshlife bench --save-inputs: %v\n%s", err, output)
		}
	}
	obj, err := readBenchInput(filepath.Join(dir, "deployment-typical.json"))
	if err != nil {
		return nil, err
	}
	obj.SetNamespace(benchNamespace)
	return obj, nil
}

// measure sends n server-side dry-run creates at each concurrency, of the same object and of
// a new object each time, and records the percentiles of each admission's round trip, from the
// Go client to the API server and back.
func (h *harness) measure(ctx context.Context, config string, n int) error {
	return h.measureWith(ctx, config, n, nil)
}

// measureWith also counts the requests srv answered during each figure: an engine that caches
// answers (Gatekeeper's External Data cache) calls the server less than once per admission, and
// an engine that calls once per policy calls it more.
func (h *harness) measureWith(ctx context.Context, config string, n int, srv *server) error {
	if h.benchObject == nil {
		return nil
	}
	ns := objectFor("v1", "Namespace", "", benchNamespace)
	ns.SetLabels(map[string]string{"istio-injection": "enabled"})
	if _, err := h.k.apply(ctx, ns); err != nil {
		return err
	}
	for _, objects := range []string{sameObject, newObjects} {
		for _, concurrency := range []int{1, 4} {
			if err := h.measureOne(ctx, config, objects, concurrency, n, srv); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchObjectAt is the object the index-th admission of a figure sends: the typical Deployment
// itself, or under a name no earlier admission of this run used.
func (h *harness) benchObjectAt(objects string, index int) *unstructured.Unstructured {
	if objects == sameObject {
		return h.benchObject
	}
	obj := h.benchObject.DeepCopy()
	h.benchSerial++
	obj.SetName(fmt.Sprintf("%s-%d", h.benchObject.GetName(), h.benchSerial))
	return obj
}

func (h *harness) measureOne(ctx context.Context, config, objects string, concurrency, n int, srv *server) error {
	client, err := h.unthrottledClient()
	if err != nil {
		return err
	}
	// Warm: connections, caches, the engine's compiled policies.
	for i := 0; i < 20; i++ {
		_, _ = client.create(ctx, h.benchObject, true)
	}
	before, refusedBefore := 0.0, 0.0
	if srv != nil {
		before = srv.metric("meshlife_requests_total{")
		refusedBefore = srv.metric("meshlife_refusals_total{")
	}
	inputs := make([]*unstructured.Unstructured, n)
	for i := range inputs {
		inputs[i] = h.benchObjectAt(objects, i)
	}
	samples := make([]time.Duration, n)
	answers := map[string]int{}
	var sample string
	var mu sync.Mutex
	var next int
	var wg sync.WaitGroup
	for worker := 0; worker < concurrency; worker++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				index := next
				next++
				mu.Unlock()
				if index >= n {
					return
				}
				started := time.Now()
				v := verdictOf(client.create(ctx, inputs[index], true))
				samples[index] = time.Since(started)
				mu.Lock()
				answers[v.wordWithRules()]++
				if sample == "" && (len(v.warnings) > 0 || v.message != "" || v.err != nil) {
					sample = fmt.Sprintf("%q %q %v", v.warnings, truncate(v.message, 200), v.err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	l := latency{config: config, objects: objects, concurrency: concurrency, n: n,
		p50: samples[n/2], p95: samples[(n*95)/100], p99: samples[(n*99)/100], max: samples[n-1],
		calls: -1, answers: answers}
	if srv != nil {
		l.calls = int(srv.metric("meshlife_requests_total{") - before)
	}
	h.latencies = append(h.latencies, l)
	fmt.Printf("  bench %-44s %s c=%d  p50 %6.2f  p95 %6.2f  p99 %6.2f  max %6.2f ms  %v\n", config, objects, concurrency,
		ms(l.p50), ms(l.p95), ms(l.p99), ms(l.max), answers)
	if srv != nil {
		h.checkJudged(fmt.Sprintf("%s, %s objects, c=%d", config, objects, concurrency), answers)
	}
	if sample != "" && concurrency == 1 && objects == sameObject {
		fmt.Printf("        for example: %s\n", sample)
	}
	if srv != nil {
		fmt.Printf("        meshlife serve answered %d requests for these %d admissions (refused %.0f connections or requests, connections given way included)\n", l.calls, n, srv.metric("meshlife_refusals_total{")-refusedBefore)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// latencyTable is the Markdown table of every figure, each with what it adds to no policy's
// figure of the same objects and concurrency.
func (h *harness) latencyTable() string {
	type figure struct {
		objects     string
		concurrency int
	}
	base := map[figure]latency{}
	for _, l := range h.latencies {
		if l.config == configNoPolicy {
			base[figure{l.objects, l.concurrency}] = l
		}
	}
	var b strings.Builder
	b.WriteString("| configuration | objects | concurrency | p50 ms | p95 ms | p99 ms | max ms | p50 added | p99 added | meshlife calls per admission | answers |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, l := range h.latencies {
		keys := make([]string, 0, len(l.answers))
		for k := range l.answers {
			keys = append(keys, fmt.Sprintf("%s %d", k, l.answers[k]))
		}
		sort.Strings(keys)
		calls := "-"
		if l.calls >= 0 {
			calls = fmt.Sprintf("%.2f", float64(l.calls)/float64(l.n))
		}
		zero := base[figure{l.objects, l.concurrency}]
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %+.2f | %+.2f | %s | %s |\n", l.config, l.objects, l.concurrency,
			ms(l.p50), ms(l.p95), ms(l.p99), ms(l.max), ms(l.p50-zero.p50), ms(l.p99-zero.p99), calls, strings.Join(keys, ", "))
	}
	return b.String()
}

// threeRulesTemplate is host-test/src/commands/bench/three_rules.rego as a Gatekeeper
// ConstraintTemplate (what a Gatekeeper user writes instead of calling meshlife), and a
// constraint of it over the same kinds.
func (h *harness) threeRulesTemplate() ([]*unstructured.Unstructured, error) {
	rego, err := os.ReadFile(filepath.Join(h.repo, "host-test/src/commands/bench/three_rules.rego"))
	if err != nil {
		return nil, err
	}
	// Rego v1 as the file is written, through the template's `code` field (Gatekeeper takes
	// no import but data.lib's; v1 needs no rego.v1 import).
	text := strings.Replace(string(rego), "package meshlife.bench", "package threerules", 1)
	text = strings.Replace(text, "import rego.v1\n", "", 1)
	template := objectFor("templates.gatekeeper.sh/v1", "ConstraintTemplate", "", "threerules")
	template.Object["spec"] = map[string]interface{}{
		"crd": map[string]interface{}{"spec": map[string]interface{}{"names": map[string]interface{}{"kind": "ThreeRules"}}},
		"targets": []interface{}{map[string]interface{}{
			"target": "admission.k8s.gatekeeper.sh",
			"code": []interface{}{map[string]interface{}{
				"engine": "Rego",
				"source": map[string]interface{}{"version": "v1", "rego": text},
			}},
		}},
	}
	constraint := objectFor("constraints.gatekeeper.sh/v1beta1", "ThreeRules", "", "three-rules")
	constraint.Object["spec"] = map[string]interface{}{
		"enforcementAction": "deny",
		"match": map[string]interface{}{"kinds": []interface{}{
			map[string]interface{}{"apiGroups": []interface{}{""}, "kinds": []interface{}{"Pod"}},
			map[string]interface{}{"apiGroups": []interface{}{"apps"}, "kinds": []interface{}{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}},
			map[string]interface{}{"apiGroups": []interface{}{"batch"}, "kinds": []interface{}{"Job", "CronJob"}},
		}},
	}
	return []*unstructured.Unstructured{template, constraint}, nil
}

// benchCluster is the cluster file the latency figures are taken under.
const benchCluster = "istio-1.26-classic.yaml"

func isBenchCluster(cluster string) bool { return filepath.Base(cluster) == benchCluster }

// benchThreeRules measures the Rego peer: meshlife's constraints and template removed, the
// three-rule ConstraintTemplate and a deny constraint of it in their place.
func (g *gatekeeperEngine) benchThreeRules(ctx context.Context) error {
	h := g.h
	if h.benchN == 0 {
		return nil
	}
	// The constraints before their template: Gatekeeper refuses a constraint's deletion once
	// its template is gone.
	for i := len(g.installed) - 1; i >= 0; i-- {
		obj := g.installed[i]
		if obj.GetKind() == "MeshLifecycle" || obj.GetKind() == "ConstraintTemplate" {
			if err := h.k.remove(ctx, obj); err != nil {
				return err
			}
		}
	}
	peer, err := h.threeRulesTemplate()
	if err != nil {
		return err
	}
	if _, err := h.k.applyAll(ctx, peer, 90*time.Second); err != nil {
		status := ""
		if live, getErr := h.k.get(ctx, peer[0]); getErr == nil {
			status = fmt.Sprint(live.Object["status"])
		}
		return fmt.Errorf("the three-rule ConstraintTemplate: %w (template status: %s)", err, status)
	}
	if err := g.waitEnforced(ctx, peer[1]); err != nil {
		return err
	}
	// Enforced: the next admission of the typical Deployment is judged by the Rego.
	if err := waitUntil(ctx, 60*time.Second, "the three-rule constraint judging", func() (bool, error) {
		v := verdictOf(h.k.create(ctx, h.benchObject, true))
		return v.refused || len(v.warnings) > 0, nil
	}); err != nil {
		return err
	}
	if err := h.measure(ctx, configGatekeeperPeer, h.benchN); err != nil {
		return err
	}
	if err := h.profile(ctx, "gatekeeper-three-rules", g.pprofURL); err != nil {
		return err
	}
	if err := h.load(ctx, configGatekeeperPeer, nil, g.manager); err != nil {
		return err
	}
	for i := len(peer) - 1; i >= 0; i-- {
		if err := h.k.remove(ctx, peer[i]); err != nil {
			return err
		}
	}
	return nil
}

// benchThreeRules measures the CEL peer: meshlife's policies removed, the three-rule
// ValidatingPolicy pair in their place.
func (ky *kyvernoEngine) benchThreeRules(ctx context.Context) error {
	h := ky.h
	if h.benchN == 0 {
		return nil
	}
	for _, policy := range ky.policies {
		if err := h.k.remove(ctx, policy); err != nil {
			return err
		}
	}
	ky.policies = nil
	data, err := os.ReadFile(filepath.Join(h.repo, "compat/cluster/peers/three-rules-validatingpolicy.yaml"))
	if err != nil {
		return err
	}
	peer, err := decodeObjects(data)
	if err != nil {
		return err
	}
	if err := h.applyInstall(ctx, "the three-rule ValidatingPolicy pair", peer); err != nil {
		return err
	}
	if err := ky.waitReady(ctx, peer); err != nil {
		return err
	}
	if err := waitUntil(ctx, 60*time.Second, "the three-rule ValidatingPolicy judging", func() (bool, error) {
		v := verdictOf(h.k.create(ctx, h.benchObject, true))
		return v.refused || len(v.warnings) > 0, nil
	}); err != nil {
		return err
	}
	if err := h.measure(ctx, configKyvernoPeer, h.benchN); err != nil {
		return err
	}
	if err := h.profile(ctx, "kyverno-three-rules", ky.pprofURL); err != nil {
		return err
	}
	if err := h.load(ctx, configKyvernoPeer, nil, ky.controller); err != nil {
		return err
	}
	ky.policies = peer
	return nil
}

// targetLines say, from this run's figures, whether each target of the admission cost was
// reached: meshlife's added latency at most its engine's hand-written peer's (p50 and p99, at
// each concurrency, objects repeated and new), and under load p99 under 100 ms with no error.
func (h *harness) targetLines() []string {
	type figure struct {
		config, objects string
		concurrency     int
	}
	byFigure := map[figure]latency{}
	for _, l := range h.latencies {
		byFigure[figure{l.config, l.objects, l.concurrency}] = l
	}
	pairs := []struct{ meshlife, peer string }{
		{configGatekeeper, configGatekeeperPeer},
		{configKyvernoCEL, configKyvernoPeer},
		{configKyverno, configKyvernoPeer},
	}
	var lines []string
	for _, pair := range pairs {
		var parts []string
		met := true
		seen := false
		for _, objects := range []string{sameObject, newObjects} {
			for _, concurrency := range []int{1, 4} {
				base, ok0 := byFigure[figure{configNoPolicy, objects, concurrency}]
				mine, ok1 := byFigure[figure{pair.meshlife, objects, concurrency}]
				peer, ok2 := byFigure[figure{pair.peer, objects, concurrency}]
				if !ok0 || !ok1 || !ok2 {
					continue
				}
				seen = true
				p50, p99 := mine.p50-base.p50, mine.p99-base.p99
				peer50, peer99 := peer.p50-base.p50, peer.p99-base.p99
				if p50 > peer50 || p99 > peer99 {
					met = false
				}
				parts = append(parts, fmt.Sprintf("%s c=%d p50 %+.2f (peer %+.2f), p99 %+.2f (peer %+.2f)",
					objects, concurrency, ms(p50), ms(peer50), ms(p99), ms(peer99)))
			}
		}
		if !seen {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s, added ms against %s: %s: %s", pair.meshlife, pair.peer, strings.Join(parts, "; "), reached(met)))
	}
	for _, f := range h.loadFigures {
		lines = append(lines, fmt.Sprintf("%s under load (%d users), p99 under 100 ms and no error: p99 %.2f ms, %d errors: %s",
			f.config, f.users, ms(f.p99), f.errors, reached(f.p99 < 100*time.Millisecond && f.errors == 0)))
	}
	return lines
}

func reached(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// writeLatencySection puts the tables and the targets into FILE under their own heading,
// replacing the section a previous run wrote.
func (h *harness) writeLatencySection(file string) error {
	const heading = "## Admission latency through a real API server"
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(data)
	if start := strings.Index(text, heading); start >= 0 {
		end := strings.Index(text[start+len(heading):], "\n## ")
		if end < 0 {
			text = text[:start]
		} else {
			text = text[:start] + text[start+len(heading)+end+1:]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n`bash compat/cluster/run.sh -- -markdown BENCHMARKS.md ...` (`just cluster-bench`), on %s: %d server-side\n"+
		"dry-run creates of `meshlife bench`'s typical Deployment per figure (in a namespace Istio injects,\n"+
		"under constraints/gatekeeper/clusters/%s) from a client-go client, at concurrency 1 and 4,\n"+
		"through kube-apiserver v1.35.4 and each engine, everything on this one machine (%d cores) over\n"+
		"loopback. Objects `same`: the same object every time (Gatekeeper answers from its External Data\n"+
		"cache); `new`: a new name each time, so every admission reaches meshlife serve. The added\n"+
		"columns are each figure minus no policy's at the same objects and concurrency. Answers: how\n"+
		"many admissions got each answer, with the meshlife rules it names (the API server's own\n"+
		"duplicate-port warnings make every answer `warned`); a configuration with meshlife fails the\n"+
		"run if any admission names none.\n\n%s\n",
		heading, time.Now().UTC().Format("2006-01-02"), h.benchN, benchCluster, runtime.NumCPU(), h.latencyTable())
	if len(h.loadFigures) > 0 {
		fmt.Fprintf(&b, "Under load, in the style of Kyverno's scaling tests: %d users for %s per configuration, each\n"+
			"creating a new Pod (`meshlife bench`'s small Pod) then a new Deployment (the typical one), again\n"+
			"and again, as real creates stored in etcd. CPU is each process's user and system time over the\n"+
			"run, in cores, with its share of what the whole machine spent.\n\n%s\n", h.loadUsers, h.loadDuration, h.loadTable())
	}
	b.WriteString("Targets, from these figures:\n\n")
	for _, line := range h.targetLines() {
		fmt.Fprintf(&b, "- %s\n", line)
	}
	text = strings.TrimRight(text, "\n") + "\n\n" + b.String()
	return os.WriteFile(file, []byte(strings.TrimLeft(text, "\n")), 0o644)
}

// checkJudged holds a figure of a configuration with meshlife to every admission judged: the
// objects measured have findings under the bench cluster, so an answer naming no meshlife rule
// is a verdict lost (a call refused, timed out or failed open), and a figure that flatters.
func (h *harness) checkJudged(figure string, answers map[string]int) {
	unjudged, total := 0, 0
	for word, count := range answers {
		total += count
		// ML000 is Gatekeeper's template saying the provider could not be called.
		if rules := strings.Join(rulesIn(word), ","); rules == "" || rules == "ML000" {
			unjudged += count
		}
	}
	h.check(unjudged == 0, "%s: every admission judged by meshlife (%d of %d answers name no meshlife rule: %v)", figure, unjudged, total, answers)
}
