// Command cluster-compat runs meshlife's three installs in a real control plane: etcd and
// kube-apiserver (Kubernetes v1.35.4), Gatekeeper's own manager and Kyverno's own admission
// controller, all built from the Go module proxy by install.sh, on free loopback ports. Every
// example is applied as a user applies the folder, through a server-side dry run and a real
// create, under every cluster file, and each answer must be the one `meshlife check
// --constraint` gives. See compat/README-cluster.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	os.Exit(run())
}

func run() int {
	meshlife := flag.String("meshlife", "", "the meshlife binary")
	repo := flag.String("repo", ".", "the meshlife repository")
	bin := flag.String("bin", "", "the folder of etcd, kube-apiserver, gatekeeper and kyverno (compat/cluster/bin)")
	engines := flag.String("engines", "facts,diagnose,webhook,gatekeeper,kyverno", "the stages to run, comma-separated: facts (the cluster reader against the meshes' installs), diagnose (meshlife diagnose against pods and events in the API server), the engines, and reality (a real node and Istio's data plane; root, not in the default list)")
	istioCharts := flag.String("istio-charts", "", "Istio's charts (manifests/charts of the istio.io/istio module), for the facts stage")
	gatekeeperModule := flag.String("gatekeeper-module", "", "Gatekeeper's module folder (its CRDs)")
	kyvernoModule := flag.String("kyverno-module", "", "Kyverno's module folder (its CRDs)")
	keep := flag.Bool("keep", false, "keep the work folder (logs, certificates) after the run")
	hold := flag.Duration("hold-on-failure", 0, "on a failure, keep every process running this long (to look at the cluster with work-folder/admin.kubeconfig)")
	benchN := flag.Int("bench", 300, "dry-run creates of the typical Deployment per latency figure (0: no figures)")
	benchOnly := flag.Bool("bench-only", false, "only the latency figures: no examples, audit, faults or security checks")
	helm := flag.String("helm", "", "the helm binary (compat/helm/bin/helm): charts/meshlife is installed, upgraded and uninstalled for each engine")
	markdown := flag.String("markdown", "", "write the latency table into this Markdown file (BENCHMARKS.md), replacing its section")
	loadUsers := flag.Int("load-users", 0, "virtual users of each configuration's load run, each creating a Pod then a Deployment again and again (0: no load runs)")
	loadDuration := flag.Duration("load-duration", 20*time.Second, "how long each load run lasts")
	profileDir := flag.String("profile", "", "take CPU profiles of Gatekeeper and Kyverno during their figures into this folder, and print each one's top functions")
	scenarios := flag.String("scenarios", "", "the stage reality's scenarios to run, by rule, comma-separated (default: all)")
	flag.Parse()
	if *meshlife == "" || *bin == "" {
		fmt.Fprintln(os.Stderr, "usage: cluster-compat -meshlife PATH -bin DIR [-repo DIR] [-engines LIST]")
		return 2
	}
	dir, err := os.MkdirTemp("", "meshlife-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	procs := newProcesses(dir)
	h := &harness{meshlife: *meshlife, repo: *repo, bin: *bin, dir: dir, procs: procs, benchN: *benchN, markdown: *markdown, benchOnly: *benchOnly, helm: *helm, istioCharts: *istioCharts, realityScenarios: *scenarios, profileDir: *profileDir, loadUsers: *loadUsers, loadDuration: *loadDuration}
	code := h.run(strings.Split(*engines, ","), *gatekeeperModule, *kyvernoModule)
	if code != 0 && *hold > 0 {
		fmt.Printf("cluster-compat: holding the cluster for %v: KUBECONFIG=%s\n", *hold, filepath.Join(dir, "admin.kubeconfig"))
		time.Sleep(*hold)
	}
	procs.stopAll()
	if code != 0 || *keep {
		// The logs of every process, and the failure is in them.
		fmt.Printf("cluster-compat: logs of every process in %s\n", dir)
	} else {
		os.RemoveAll(dir)
	}
	return code
}

func (h *harness) run(engines []string, gatekeeperModule, kyvernoModule string) int {
	ctx := context.Background()
	var err error
	if h.files, err = readExamples(h.repo); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-compat:", err)
		return 2
	}
	h.clusters, _ = filepath.Glob(filepath.Join(h.repo, "constraints/gatekeeper/clusters/*.yaml"))
	sort.Strings(h.clusters)
	for i, cluster := range h.clusters {
		h.clusters[i], _ = filepath.Rel(h.repo, cluster)
	}
	started := time.Now()
	for _, engine := range engines {
		if engine == "reality" || engine == "diagnose" {
			// The reality stage's alpha gates (reality_restarts.go), on the API server only
			// when that stage or diagnose is among the engines (CI's full run included): they
			// add behaviour only for pods that carry restartPolicyRules, which only reality's
			// pods and the diagnose fixtures recorded from them (istio-real-restart-*) have.
			apiServerFeatureGates = restartAllGates
		}
	}
	if h.cp, err = startControlPlane(ctx, h.procs, h.bin, h.dir); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-compat: the control plane:", err)
		return 2
	}
	if h.k, err = newKube(h.cp.admin); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-compat:", err)
		return 2
	}
	if _, err := h.k.applyAll(ctx, workloadCRDs(), 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-compat: the examples' CRDs:", err)
		return 2
	}
	version, _ := h.k.core.Discovery().ServerVersion()
	fmt.Printf("kube-apiserver %s with etcd on 127.0.0.1:%d, ready in %.1fs\n", version, h.cp.apiPort, time.Since(started).Seconds())
	if h.benchN > 0 {
		if h.benchObject, err = h.typicalDeployment(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster-compat: the typical Deployment:", err)
			return 2
		}
		if err := h.measure(ctx, configNoPolicy, h.benchN); err != nil {
			fmt.Fprintln(os.Stderr, "cluster-compat:", err)
			return 2
		}
		if err := h.load(ctx, configNoPolicy, nil, nil); err != nil {
			fmt.Fprintln(os.Stderr, "cluster-compat:", err)
			return 2
		}
	}
	for _, engine := range engines {
		var err error
		switch engine {
		case "":
			continue
		case "facts":
			if h.benchOnly {
				continue
			}
			err = h.runMeshFacts(ctx, h.istioCharts)
		case "diagnose":
			if h.benchOnly {
				continue
			}
			err = h.runDiagnose(ctx)
		case "reality":
			if h.benchOnly {
				continue
			}
			err = h.runReality(ctx)
		case "webhook":
			err = h.runWebhook(ctx)
		case "gatekeeper":
			err = h.runGatekeeper(ctx, gatekeeperModule)
		case "kyverno":
			err = h.runKyverno(ctx, kyvernoModule)
		default:
			err = fmt.Errorf("no stage %q (facts, diagnose, webhook, gatekeeper, kyverno, reality)", engine)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cluster-compat: %s: %v\n", engine, err)
			return 2
		}
	}
	if len(h.latencies) > 0 {
		table := h.latencyTable()
		fmt.Printf("\nadmission latency through the API server (%d server-side dry-run creates of the typical Deployment per figure)\n%s", h.benchN, table)
		if len(h.loadFigures) > 0 {
			fmt.Printf("\nunder load (%d users for %s each, creating a Pod then a Deployment again and again)\n%s", h.loadUsers, h.loadDuration, h.loadTable())
		}
		fmt.Println("\ntargets")
		for _, line := range h.targetLines() {
			fmt.Println("  " + line)
		}
		if h.markdown != "" {
			if err := h.writeLatencySection(h.markdown); err != nil {
				fmt.Fprintln(os.Stderr, "cluster-compat:", err)
				return 2
			}
		}
	}
	fmt.Println("\nsummary")
	for _, line := range h.summary {
		fmt.Println("  " + line)
	}
	if h.failures > 0 {
		fmt.Printf("cluster-compat: FAIL (%d failed checks or differences)\n", h.failures)
		return 1
	}
	fmt.Println("cluster-compat: PASS")
	return 0
}

func (h *harness) runWebhook(ctx context.Context) error {
	fmt.Println("\n== the plain webhook (meshlife install webhook)")
	if err := h.chartCheck(ctx, "webhook"); err != nil {
		return err
	}
	w := &webhookEngine{h: h}
	for _, cluster := range h.checkedClusters() {
		if err := w.install(ctx, cluster); err != nil {
			return err
		}
		if err := h.judge(ctx, "webhook", cluster, true); err != nil {
			return err
		}
	}
	cluster := filepath.Join("constraints/gatekeeper/clusters", benchCluster)
	if err := w.install(ctx, cluster); err != nil {
		return err
	}
	if err := h.measureWith(ctx, configWebhook, h.benchN, w.server); err != nil {
		return err
	}
	if err := h.load(ctx, configWebhook, w.server, nil); err != nil {
		return err
	}
	if h.benchOnly {
		w.server.stop()
		return h.k.remove(ctx, objectFor("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "meshlife"))
	}
	s, err := h.newScenario("relabel-webhook", cluster)
	if err != nil {
		return err
	}
	s.relabelCheck(ctx, "webhook")
	if err := w.apiServerRestartCheck(ctx, s); err != nil {
		return err
	}
	unjudged := func(v verdict) bool {
		return v.err == nil && !v.refused && len(rulesIn(v.warnings...)) == 0
	}
	s.floodCheck(ctx, "webhook", w.server, 1500, 5*time.Second)
	restart := func() error { return w.server.start(ctx) }
	if err := s.faultChecks(ctx, "webhook", &w.server, unjudged, restart, w.rotate); err != nil {
		return err
	}
	if err := w.securityChecks(ctx); err != nil {
		return err
	}
	w.server.stop()
	return h.k.remove(ctx, objectFor("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "meshlife"))
}

func (h *harness) runGatekeeper(ctx context.Context, module string) error {
	fmt.Println("\n== Gatekeeper v3.23.0's manager with meshlife's External Data provider (meshlife install gatekeeper)")
	g := &gatekeeperEngine{h: h, module: module}
	if err := g.start(ctx); err != nil {
		return err
	}
	if err := h.chartCheck(ctx, "gatekeeper"); err != nil {
		return err
	}
	// The audit: objects made before the constraints, listed in each constraint's status.
	existing := map[string]bool{}
	if !h.benchOnly {
		var err error
		if existing, err = h.createExamples(ctx); err != nil {
			return err
		}
	}
	for _, cluster := range h.checkedClusters() {
		if err := g.install(ctx, cluster); err != nil {
			return err
		}
		// Enforced by the webhook now; the audit's own client may lag behind that, so only
		// an audit that starts from here on counts.
		applied := time.Now()
		if err := g.auditCheck(ctx, cluster, applied, existing); err != nil {
			return err
		}
	}
	if !h.benchOnly {
		if err := h.deleteExamples(ctx); err != nil {
			return err
		}
	}
	for _, cluster := range h.checkedClusters() {
		if err := g.install(ctx, cluster); err != nil {
			return err
		}
		if err := h.judge(ctx, "gatekeeper", cluster, false); err != nil {
			return err
		}
	}
	cluster := filepath.Join("constraints/gatekeeper/clusters", benchCluster)
	if !h.benchOnly {
		if err := g.installElsewhere(ctx, cluster, "admission"); err != nil {
			return err
		}
	}
	if err := g.install(ctx, cluster); err != nil {
		return err
	}
	if err := h.measureWith(ctx, configGatekeeper, h.benchN, g.server); err != nil {
		return err
	}
	if err := h.profile(ctx, "gatekeeper-meshlife", g.pprofURL); err != nil {
		return err
	}
	if err := h.load(ctx, configGatekeeper, g.server, g.manager); err != nil {
		return err
	}
	if h.benchOnly {
		return g.finish(ctx)
	}
	s, err := h.newScenario("relabel-gatekeeper", cluster)
	if err != nil {
		return err
	}
	s.relabelCheck(ctx, "gatekeeper")
	// providerFailure: ignore admits; the warn constraint says the object was not checked.
	unjudged := func(v verdict) bool {
		return v.err == nil && !v.refused && strings.Join(rulesIn(v.warnings...), ",") == "ML000"
	}
	if err := g.securityChecks(ctx); err != nil {
		return err
	}
	// Gatekeeper calls the provider with its 3 s webhook timeout (the Provider's own is 2 s).
	s.floodCheck(ctx, "gatekeeper", g.server, 1500, 2*time.Second)
	restart := func() error { return g.server.start(ctx) }
	if err := s.faultChecks(ctx, "gatekeeper", &g.server, unjudged, restart, g.rotate); err != nil {
		return err
	}
	return g.finish(ctx)
}

// finish measures the Rego peer and stops Gatekeeper, its webhook unregistered.
func (g *gatekeeperEngine) finish(ctx context.Context) error {
	if err := g.benchThreeRules(ctx); err != nil {
		return err
	}
	g.server.stop()
	if err := g.h.k.remove(ctx, objectFor("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "gatekeeper-validating-webhook-configuration")); err != nil {
		return err
	}
	g.manager.stop(20 * time.Second)
	g.h.procs.forget(g.manager)
	return nil
}

// kyvernoPairName names a pair of `meshlife install kyverno` as the chart's engine value does:
// kyverno for the ValidatingPolicy pair (the default), kyverno-clusterpolicy for the other.
func kyvernoPairName(cel bool) string {
	if cel {
		return "kyverno"
	}
	return "kyverno-clusterpolicy"
}

func (h *harness) runKyverno(ctx context.Context, module string) error {
	fmt.Println("\n== Kyverno v1.19.0's admission controller calling meshlife serve (meshlife install kyverno)")
	ky := &kyvernoEngine{h: h, module: module}
	if err := ky.start(ctx); err != nil {
		return err
	}
	for _, engine := range []string{"kyverno", "kyverno-clusterpolicy"} {
		if err := h.chartCheck(ctx, engine); err != nil {
			return err
		}
	}
	for _, cluster := range h.clusters {
		for _, cel := range []bool{false, true} {
			if h.benchOnly && !isBenchCluster(cluster) {
				continue
			}
			if err := ky.install(ctx, cluster, cel); err != nil {
				return err
			}
			name := kyvernoPairName(cel)
			if !h.benchOnly {
				if err := h.judge(ctx, name, cluster, false); err != nil {
					return err
				}
				if isBenchCluster(cluster) {
					warnings := map[bool]string{false: "meshlife-warnings", true: "meshlife-warnings-cel"}[cel]
					if err := ky.reportsCheck(ctx, name, cluster, warnings); err != nil {
						return err
					}
				}
			}
			if isBenchCluster(cluster) {
				config := configKyverno
				if cel {
					config = configKyvernoCEL
				}
				if err := h.measureWith(ctx, config, h.benchN, ky.server); err != nil {
					return err
				}
				if err := h.profile(ctx, name+"-meshlife", ky.pprofURL); err != nil {
					return err
				}
				if err := h.load(ctx, config, ky.server, ky.controller); err != nil {
					return err
				}
			}
		}
	}
	if h.benchOnly {
		return ky.finish(ctx)
	}
	cluster := filepath.Join("constraints/gatekeeper/clusters", benchCluster)
	for _, cel := range []bool{false, true} {
		name := kyvernoPairName(cel)
		if err := ky.install(ctx, cluster, cel); err != nil {
			return err
		}
		s, err := h.newScenario("relabel-"+name, cluster)
		if err != nil {
			return err
		}
		if cel {
			// The Job is refused when judged: refused by the errors policy's second call
			// failing after its first judged it, or admitted by its first call failing while
			// the warnings policy's call was answered (the Job has no warning to give).
			s.splitCall = func(v verdict) bool {
				refusedOnSecondCall := v.refused && strings.Contains(v.message, "Policy meshlife-errors-cel error:") && strings.Contains(v.message, "request failed")
				admittedOnFirstCall := v.err == nil && !v.refused && len(v.warnings) == 0
				return refusedOnSecondCall || admittedOnFirstCall
			}
		}
		s.relabelCheck(ctx, name)
		// The ClusterPolicies' context default: the errors policy admits, the warnings policy
		// says the object was not checked. The CEL pair: the errors policy's match condition
		// fails and failurePolicy Ignore admits; the warnings policy's variable fails and
		// Kyverno warns with the error.
		unjudged := func(v verdict) bool {
			if v.err != nil || v.refused || len(rulesIn(v.warnings...)) > 0 {
				return false
			}
			said := strings.Join(v.warnings, " ")
			if cel {
				return strings.Contains(said, "Policy meshlife-warnings-cel error:") && strings.Contains(said, "request failed")
			}
			return strings.Contains(said, "not checked")
		}
		restart := func() error { return ky.server.start(ctx) }
		rotate := ky.rotate
		if cel {
			rotate = ky.rotateCEL
		}
		if err := ky.securityChecks(ctx, s); err != nil {
			return err
		}
		if err := s.faultChecks(ctx, name, &ky.server, unjudged, restart, rotate); err != nil {
			return err
		}
	}
	return ky.finish(ctx)
}

// finish measures the CEL peer and stops Kyverno.
func (ky *kyvernoEngine) finish(ctx context.Context) error {
	if err := ky.benchThreeRules(ctx); err != nil {
		return err
	}
	ky.server.stop()
	for _, proc := range []*process{ky.controller, ky.reports} {
		proc.stop(20 * time.Second)
		ky.h.procs.forget(proc)
	}
	return nil
}
