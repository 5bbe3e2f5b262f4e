package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
)

// harness holds what every engine's checks share: the control plane, the admin client, the
// examples and the cluster files, and the tally of failures.
type harness struct {
	meshlife, repo, bin, dir string
	procs                    *processes
	cp                       *controlPlane
	k                        *kube
	files                    []exampleFile
	clusters                 []string
	failures                 int
	summary                  []string
	// benchObject is the typical Deployment the latency figures use; nil: no figures.
	benchObject *unstructured.Unstructured
	latencies   []latency
	// benchSerial numbers the new objects of the figures, so that none repeats a name.
	benchSerial int
	// unthrottled is the admin client the figures, the profiles and the load send through.
	unthrottled *kube
	// profileDir, when set, receives CPU profiles of the engines during their figures.
	profileDir string
	// loadUsers clients create objects for loadDuration in each configuration's load run;
	// 0: no load runs.
	loadUsers    int
	loadDuration time.Duration
	loadFigures  []loadFigure
	benchN       int
	markdown     string
	benchOnly    bool
	// helm is compat/helm's binary; empty: the chart is not checked.
	helm string
	// istioCharts is manifests/charts of the pinned istio.io/istio module (the facts stage).
	istioCharts string
	// realityScenarios are the rules whose scenarios the stage reality runs; empty: all.
	realityScenarios string
}

// unthrottledClient is an admin client without client-go's rate limit: a figure's pace is its
// callers', not the client library's. The harness's own client keeps the limit (200 per
// second, 400 at once), under which every figure that ran faster than 200 admissions a second
// once its burst was spent measured client-go's wait instead: no policy's and the peers'
// figures at concurrency 4 read 20 ms, four queued 5 ms slots.
func (h *harness) unthrottledClient() (*kube, error) {
	if h.unthrottled != nil {
		return h.unthrottled, nil
	}
	config := rest.CopyConfig(h.cp.admin)
	config.QPS = -1
	config.RateLimiter = nil
	client, err := newKube(config)
	if err != nil {
		return nil, err
	}
	h.unthrottled = client
	return client, nil
}

// checkedClusters are the cluster files the examples are judged under (none with -bench-only).
func (h *harness) checkedClusters() []string {
	if h.benchOnly {
		return nil
	}
	return h.clusters
}

func (h *harness) fail(format string, args ...interface{}) {
	h.failures++
	fmt.Printf("  FAIL "+format+"\n", args...)
}

func (h *harness) pass(format string, args ...interface{}) {
	fmt.Printf("  ok   "+format+"\n", args...)
}

// check counts a failed check; it says whether the check passed.
func (h *harness) check(ok bool, format string, args ...interface{}) bool {
	if ok {
		h.pass(format, args...)
	} else {
		h.fail(format, args...)
	}
	return ok
}

// applyInstall applies what `meshlife install` printed, as `kubectl apply -f -` does, and
// fails a check when the API server warns about any of it (a deprecated version, say).
func (h *harness) applyInstall(ctx context.Context, what string, objs []*unstructured.Unstructured) error {
	warnings, err := h.k.applyAll(ctx, objs, 90*time.Second)
	if err != nil {
		return fmt.Errorf("applying %s: %w", what, err)
	}
	// Kyverno 1.17+ says so of every ClusterPolicy (the kind goes in 1.20): a fact of the
	// engine, not of the install, printed for the reader; any other warning fails.
	var others, kindNotices []string
	for _, warning := range warnings {
		if strings.HasPrefix(warning, "ClusterPolicy (kyverno.io) is deprecated") {
			kindNotices = append(kindNotices, warning)
		} else {
			others = append(others, warning)
		}
	}
	h.check(len(others) == 0, "%s applies without a warning from the API server %v", what, others)
	if len(kindNotices) > 0 {
		fmt.Printf("  note %s: Kyverno says of each ClusterPolicy: %q (the ValidatingPolicy pair, the default install, has none)\n", what, kindNotices[0])
	}
	return nil
}

// judge runs every example through the engine under one cluster file and prints its line.
func (h *harness) judge(ctx context.Context, engine, cluster string, fixInMessage bool) error {
	findings, err := meshlifeCheck(h.meshlife, h.repo, cluster, exampleDirs)
	if err != nil {
		return err
	}
	want := expectations(findings)
	started := time.Now()
	t, err := judgeExamples(ctx, h.k, h.files, want, fixInMessage, func(line string) {
		fmt.Println("  " + line)
	})
	if err != nil {
		return err
	}
	h.failures += t.differences
	line := fmt.Sprintf("%-21s %-26s objects %3d  refused %3d  warned %3d  clean %3d  invalid %d  differences from meshlife check %d  (%.1fs)",
		engine, filepath.Base(cluster), t.objects, t.refused, t.warned, t.clean, t.invalid, t.differences, time.Since(started).Seconds())
	fmt.Println(line)
	h.summary = append(h.summary, line)
	return nil
}

// waitCalled waits until an admission through the cluster reaches the server (its route's
// request count grows): the engine has the configuration just applied and uses it.
func (h *harness) waitCalled(ctx context.Context, s *server, route string, timeout time.Duration) error {
	probe := h.probeObject("meshlife-probe")
	if err := ensureNamespace(ctx, h.k, "meshlife-probe"); err != nil {
		return err
	}
	metric := fmt.Sprintf(`meshlife_requests_total{route="%s"`, route)
	before := s.metric(metric)
	return waitUntil(ctx, timeout, "an admission reaching meshlife serve's "+route+" route", func() (bool, error) {
		probe.SetName(fmt.Sprintf("probe-%d", time.Now().UnixNano()))
		_, _ = h.k.create(ctx, probe, true)
		return s.metric(metric) > before, nil
	})
}

// probeObject is a plain Deployment, judged by every engine.
func (h *harness) probeObject(namespace string) *unstructured.Unstructured {
	obj := objectFor("apps/v1", "Deployment", namespace, "probe")
	obj.Object["spec"] = map[string]interface{}{
		"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "probe"}},
		"template": map[string]interface{}{
			"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "probe"}},
			"spec": map[string]interface{}{"containers": []interface{}{
				map[string]interface{}{"name": "app", "image": "registry.invalid/app:1"},
			}},
		},
	}
	return obj
}

func httpGet(url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	response, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	return string(body), err
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func indentLines(text string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "\n    ")
}

// applyFile applies every object of a YAML file (an engine's CRDs, say).
func (h *harness) applyFile(ctx context.Context, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if _, err := h.k.applyAll(ctx, objs, 30*time.Second); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

func (h *harness) applyObject(ctx context.Context, obj *unstructured.Unstructured) error {
	_, err := h.k.applyAll(ctx, []*unstructured.Unstructured{obj}, 30*time.Second)
	return err
}

// postTLS posts body to url trusting caPEM, with a client certificate when given.
func postTLS(url string, caPEM []byte, client *issued, body string) (int, string, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	config := &tls.Config{RootCAs: pool}
	if client != nil {
		pair, err := tls.X509KeyPair(client.certPEM, client.keyPEM)
		if err != nil {
			return 0, "", err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: config}}
	response, err := httpClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer response.Body.Close()
	answer, err := io.ReadAll(response.Body)
	return response.StatusCode, string(answer), err
}

func truncate(text string, n int) string {
	if len(text) <= n {
		return text
	}
	return text[:n] + "..."
}
