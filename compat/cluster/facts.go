package main

// The mesh-facts stage: meshlife's cluster reader (`meshlife constraint --from-cluster`, `check
// --kubeconfig`) against the meshes' installs in the real API server. Istio's come from its own
// charts (istio.io/istio, rendered by the real Helm); Linkerd's chart is not on the Go module
// proxy, so its objects are written here after it (charts/linkerd-control-plane: linkerd-config
// keeps the install's values, the proxy injector's Deployment and webhook). Only the API objects
// matter: no kubelet runs, so no pod starts; the Nodes are created with the kubelet version in
// their status, as a kubelet registers them.

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// helmRender is one `helm template` of an Istio chart.
type helmRender struct {
	release, chart, namespace string
	sets                      []string
}

// linkerdInstall is Linkerd's control plane as its chart writes it, with these values.
type linkerdInstall struct {
	version       string
	nativeSidecar string // "true", "false" or "" (not set: the version's default)
	cni           bool
}

type meshScenario struct {
	name string
	// The shipped cluster file whose parameters `constraint --from-cluster` must give, and under
	// which `check --constraint` must find what `check --kubeconfig` finds; "" when the scenario
	// expects an error.
	clusterFile string
	kubelets    []string
	namespaces  map[string]map[string]string
	istio       []helmRender
	linkerd     *linkerdInstall
	// A substring of the error `constraint --from-cluster` must fail with.
	wantError string
	// What else the constraint's parameters must hold (path -> JSON value), and what the
	// reader's notes on stderr must say.
	wantParameters map[string]string
	wantNotes      []string
	// Checks of its own, for an install no shipped file describes.
	custom func(h *harness, scenario meshScenario, written []*unstructured.Unstructured)
}

func istiod(tag string, sets ...string) helmRender {
	return helmRender{"istiod", "istio-control/istio-discovery", "istio-system",
		append([]string{"global.hub=docker.io/istio", "global.tag=" + tag}, sets...)}
}

func meshScenarios() []meshScenario {
	shop := map[string]string{"istio-injection": "enabled"}
	istioNamespaces := map[string]map[string]string{"istio-system": nil, "shop": shop}
	with := func(extra map[string]map[string]string) map[string]map[string]string {
		out := map[string]map[string]string{}
		for name, labels := range istioNamespaces {
			out[name] = labels
		}
		for name, labels := range extra {
			out[name] = labels
		}
		return out
	}
	return []meshScenario{
		{name: "Istio 1.26, classic sidecars", clusterFile: "istio-1.26-classic.yaml",
			kubelets: []string{"v1.32.1", "v1.31.4"}, namespaces: istioNamespaces,
			istio: []helmRender{istiod("1.26.3")}},
		{name: "Istio 1.27, native sidecars (ENABLE_NATIVE_SIDECARS auto on 1.33 kubelets)",
			clusterFile: "istio-1.27-native.yaml", kubelets: []string{"v1.33.2"},
			namespaces: istioNamespaces, istio: []helmRender{istiod("1.27.1")}},
		{name: "Istio 1.26 with istio-cni", clusterFile: "istio-cni.yaml",
			kubelets: []string{"v1.31.4"}, namespaces: istioNamespaces,
			istio: []helmRender{istiod("1.26.3", "pilot.cni.enabled=true"),
				{"istio-cni", "istio-cni", "istio-system", []string{"global.hub=docker.io/istio", "global.tag=1.26.3"}}}},
		{name: "two Istio revisions configured differently (canary holds)", kubelets: []string{"v1.31.4"},
			namespaces: with(map[string]map[string]string{"canary-apps": {"istio.io/rev": "canary"}}),
			istio: []helmRender{istiod("1.26.3"),
				{"istiod-canary", "istio-control/istio-discovery", "istio-system",
					[]string{"global.hub=docker.io/istio", "global.tag=1.27.1", "revision=canary",
						"meshConfig.defaultConfig.holdApplicationUntilProxyStarts=true"}}},
			wantNotes: []string{"Istio revisions are configured differently"},
			custom:    (*harness).revisionChecks},
		{name: "Istio from the chart's default image tag (latest)", kubelets: []string{"v1.31.4"},
			namespaces: istioNamespaces,
			istio: []helmRender{{"istiod", "istio-control/istio-discovery", "istio-system",
				[]string{"global.hub=docker.io/istio"}}},
			wantError: "whose tag is no Istio version"},
		{name: "Istio revision canary behind the revision tag prod", clusterFile: "istio-1.26-classic.yaml",
			kubelets:   []string{"v1.31.4"},
			namespaces: map[string]map[string]string{"istio-system": nil, "shop": {"istio.io/rev": "prod"}},
			istio: []helmRender{{"istiod-canary", "istio-control/istio-discovery", "istio-system",
				[]string{"global.hub=docker.io/istio", "global.tag=1.26.3", "revision=canary", "revisionTags={prod}"}}},
			wantNotes: []string{"(revision canary, tags prod)"}},
		{name: "Istio with ztunnel and a namespace in ambient mode", clusterFile: "istio-1.26-classic.yaml",
			kubelets:   []string{"v1.31.4"},
			namespaces: with(map[string]map[string]string{"mesh-ambient": {"istio.io/dataplane-mode": "ambient"}}),
			istio: []helmRender{istiod("1.26.3"),
				{"ztunnel", "ztunnel", "istio-system", []string{"global.hub=docker.io/istio", "global.tag=1.26.3"}}},
			wantParameters: map[string]string{"istio.ambientNamespaces": `["mesh-ambient"]`},
			wantNotes:      []string{"ambient: DaemonSet istio-system/ztunnel runs"}},
		{name: "Linkerd 2.19, classic sidecars", clusterFile: "linkerd-2.19-classic.yaml",
			kubelets:   []string{"v1.31.4"},
			namespaces: map[string]map[string]string{"linkerd": nil},
			linkerd:    &linkerdInstall{version: "enterprise-2.19.1", nativeSidecar: "false"}},
		{name: "Linkerd 2.20, native sidecars by default", clusterFile: "linkerd-2.20-native.yaml",
			kubelets:   []string{"v1.33.1"},
			namespaces: map[string]map[string]string{"linkerd": nil},
			linkerd:    &linkerdInstall{version: "enterprise-2.20.0"}},
	}
}

// runMeshFacts runs every scenario: install, read, compare, remove.
func (h *harness) runMeshFacts(ctx context.Context, istioCharts string) error {
	fmt.Println("\nmesh facts: meshlife constraint --from-cluster and check --kubeconfig against the meshes' installs")
	if istioCharts == "" || h.helm == "" {
		return errors.New("-istio-charts and -helm are needed (compat/cluster/run.sh passes both)")
	}
	for i, scenario := range meshScenarios() {
		objects, err := h.meshObjects(scenario, istioCharts)
		if err != nil {
			return fmt.Errorf("%s: %w", scenario.name, err)
		}
		if err := h.installMesh(ctx, scenario, objects); err != nil {
			return fmt.Errorf("%s: %w", scenario.name, err)
		}
		h.judgeMeshFacts(ctx, scenario, i == 0)
		if err := h.removeMesh(ctx, scenario, objects); err != nil {
			return fmt.Errorf("%s: removing it: %w", scenario.name, err)
		}
	}
	h.summary = append(h.summary, fmt.Sprintf("mesh facts: %d installs read", len(meshScenarios())))
	return nil
}

func (h *harness) meshObjects(scenario meshScenario, istioCharts string) ([]*unstructured.Unstructured, error) {
	var objects []*unstructured.Unstructured
	for _, render := range scenario.istio {
		args := []string{"template", render.release, filepath.Join(istioCharts, render.chart), "-n", render.namespace}
		for _, set := range render.sets {
			args = append(args, "--set", set)
		}
		text, err := h.helmCommand(args...)
		if err != nil {
			return nil, err
		}
		rendered, err := decodeObjects([]byte(text))
		if err != nil {
			return nil, err
		}
		objects = append(objects, rendered...)
	}
	if scenario.linkerd != nil {
		rendered, err := decodeObjects([]byte(scenario.linkerd.manifests()))
		if err != nil {
			return nil, err
		}
		objects = append(objects, rendered...)
	}
	return objects, nil
}

func (h *harness) installMesh(ctx context.Context, scenario meshScenario, objects []*unstructured.Unstructured) error {
	for name, labels := range scenario.namespaces {
		namespace := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": name}}}
		if len(labels) > 0 {
			namespace.SetLabels(labels)
		}
		if _, err := h.k.apply(ctx, namespace); err != nil {
			return err
		}
	}
	for i, version := range scenario.kubelets {
		if err := h.registerNode(ctx, fmt.Sprintf("node-%d", i+1), version); err != nil {
			return err
		}
	}
	_, err := h.k.applyAll(ctx, objects, 30*time.Second)
	return err
}

// registerNode creates a Node with its kubelet version in its status, as a kubelet does.
func (h *harness) registerNode(ctx context.Context, name, kubelet string) error {
	node, err := h.k.core.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	node.Status.NodeInfo.KubeletVersion = kubelet
	_, err = h.k.core.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// removeMesh deletes what installMesh made; the Namespaces stay (no namespace controller runs
// here to finish deleting them) with their labels taken off.
func (h *harness) removeMesh(ctx context.Context, scenario meshScenario, objects []*unstructured.Unstructured) error {
	for _, obj := range objects {
		if err := h.k.remove(ctx, obj); err != nil {
			return err
		}
	}
	for i := range scenario.kubelets {
		err := h.k.core.CoreV1().Nodes().Delete(ctx, fmt.Sprintf("node-%d", i+1), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for name := range scenario.namespaces {
		namespace := &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]interface{}{"name": name}}}
		if _, err := h.k.apply(ctx, namespace); err != nil {
			return err
		}
	}
	return nil
}

// meshlifeRun is one run of the meshlife binary.
type meshlifeRun struct {
	stdout, stderr string
	code           int
}

func (h *harness) runMeshlife(args ...string) (meshlifeRun, error) {
	cmd := exec.Command(h.meshlife, args...)
	cmd.Dir = h.repo
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run := meshlifeRun{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		run.code = exit.ExitCode()
	default:
		return run, err
	}
	return run, nil
}

func (h *harness) judgeMeshFacts(ctx context.Context, scenario meshScenario, first bool) {
	fmt.Printf("  %s\n", scenario.name)
	out := filepath.Join(h.dir, "from-cluster.yaml")
	os.Remove(out)
	run, err := h.runMeshlife("constraint", "--kubeconfig", h.cp.adminKC, "-o", out)
	if err != nil {
		h.fail("%s: meshlife constraint: %v", scenario.name, err)
		return
	}
	if scenario.wantError != "" {
		h.check(run.code == 2 && strings.Contains(run.stderr, scenario.wantError),
			"%s: constraint --from-cluster refuses it (exit %d): %s", scenario.name, run.code, firstLine(run.stderr))
		return
	}
	if !h.check(run.code == 0, "%s: constraint --from-cluster (exit %d)", scenario.name, run.code) {
		fmt.Print(indentLines(run.stderr))
		return
	}
	// The facts read and their sources, as meshlife said them.
	fmt.Println(indentLines(indentLines(strings.TrimRight(run.stderr, "\n"))))
	for _, note := range scenario.wantNotes {
		h.check(strings.Contains(run.stderr, note), "%s: the reader says %q", scenario.name, note)
	}
	generated, err := readConstraints(out)
	if err != nil {
		h.fail("%s: the written constraint: %v", scenario.name, err)
		return
	}
	if scenario.custom != nil {
		scenario.custom(h, scenario, generated)
		return
	}
	shippedFile := filepath.Join("constraints/gatekeeper/clusters", scenario.clusterFile)
	shipped, err := readConstraints(filepath.Join(h.repo, shippedFile))
	if err != nil {
		h.fail("%s: %v", shippedFile, err)
		return
	}
	h.compareParameters(scenario, generated, shipped, shippedFile)
	h.compareChecks(scenario, shippedFile)
	if first {
		h.liveNamespaceCheck(ctx, scenario, shippedFile)
		h.rbacChecks(ctx, generated)
		h.serveFactsCheck(ctx, scenario)
	}
}

// serveFactsCheck: `meshlife serve --kubeconfig` reads the facts at start, says so at /readyz,
// and POST /admission denies what the cluster file's deny constraint denies.
func (h *harness) serveFactsCheck(ctx context.Context, scenario meshScenario) {
	serving, err := h.cp.ca.issue(pkix.Name{CommonName: "meshlife-facts"}, loopback, nil, true, false)
	if err != nil {
		h.fail("serve: %v", err)
		return
	}
	certFile, keyFile, err := serving.write(h.dir, "serve-facts")
	if err != nil {
		h.fail("serve: %v", err)
		return
	}
	routesPort, err := freePort()
	if err != nil {
		h.fail("serve: %v", err)
		return
	}
	healthPort, err := freePort()
	if err != nil {
		h.fail("serve: %v", err)
		return
	}
	proc, err := h.procs.start("meshlife-serve-facts", h.meshlife, []string{"serve",
		"--listen", fmt.Sprintf("127.0.0.1:%d", routesPort),
		"--health-listen", fmt.Sprintf("127.0.0.1:%d", healthPort),
		"--tls-cert", certFile, "--tls-key", keyFile, "--kubeconfig", h.cp.adminKC}, nil)
	if err != nil {
		h.fail("serve: %v", err)
		return
	}
	defer func() {
		proc.stop(10 * time.Second)
		h.procs.forget(proc)
	}()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)
	if err := waitHTTP(ctx, proc, readyz, 30*time.Second); err != nil {
		h.fail("serve --kubeconfig: not ready: %v", err)
		return
	}
	body, err := httpGet(readyz)
	h.check(err == nil && strings.Contains(body, "facts read at start from context cluster-compat") &&
		strings.Contains(body, "kubernetes 1.31, istio 1.26.3 (revision default)"),
		"%s: serve --kubeconfig names the facts at /readyz: %q", scenario.name, strings.TrimSpace(body))
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"facts-1",
"kind":{"group":"batch","version":"v1","kind":"Job"},"resource":{"group":"batch","version":"v1","resource":"jobs"},
"namespace":"shop","operation":"CREATE","userInfo":{"username":"cluster-compat"},
"object":{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"report","namespace":"shop"},
"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"report","image":"example/report:1"}]}}}}}}`
	status, answer, err := postTLS(fmt.Sprintf("https://127.0.0.1:%d/admission", routesPort), h.cp.ca.certPEM, nil, review)
	h.check(err == nil && status == 200 && strings.Contains(answer, `"allowed":false`) && strings.Contains(answer, "ML301"),
		"%s: serve --kubeconfig denies a Job in shop (istio-injection=enabled in the cluster) that never stops its sidecar: %d %s",
		scenario.name, status, truncate(answer, 160))
}

func readConstraints(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return decodeObjects(data)
}

// normalParameters is spec.parameters with what equals a default left out (the shipped files
// spell out `injectedNamespaces: []` and `proxyUID: 1337`; the generator leaves them implicit),
// and what the scenario adds on purpose.
func normalParameters(obj *unstructured.Unstructured, ignore map[string]string) map[string]interface{} {
	parameters, _, _ := unstructured.NestedMap(obj.Object, "spec", "parameters")
	for _, mesh := range []string{"istio", "linkerd"} {
		section, ok := parameters[mesh].(map[string]interface{})
		if !ok {
			continue
		}
		for key, value := range section {
			if list, isList := value.([]interface{}); isList && len(list) == 0 {
				delete(section, key)
			}
			if key == "proxyUID" && (fmt.Sprint(value) == "1337" || fmt.Sprint(value) == "2102") {
				delete(section, key)
			}
			if _, ignored := ignore[mesh+"."+key]; ignored {
				delete(section, key)
			}
		}
	}
	return parameters
}

func (h *harness) compareParameters(scenario meshScenario, generated, shipped []*unstructured.Unstructured, shippedFile string) {
	if !h.check(len(generated) == len(shipped), "%s: %d constraints written, %d in %s",
		scenario.name, len(generated), len(shipped), shippedFile) {
		return
	}
	for path, want := range scenario.wantParameters {
		steps := append([]string{"spec", "parameters"}, strings.Split(path, ".")...)
		value, _, _ := unstructured.NestedFieldNoCopy(generated[0].Object, steps...)
		got, _ := json.Marshal(value)
		h.check(string(got) == want, "%s: %s is %s (want %s)", scenario.name, path, got, want)
	}
	for i := range shipped {
		got := normalParameters(generated[i], scenario.wantParameters)
		want := normalParameters(shipped[i], nil)
		if !h.check(reflect.DeepEqual(got, want), "%s: %s has the parameters of %s's %s",
			scenario.name, generated[i].GetName(), shippedFile, shipped[i].GetName()) {
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(want)
			fmt.Printf("       written %s\n       shipped %s\n", gotJSON, wantJSON)
		}
	}
}

// compareChecks: `check --kubeconfig` on the examples finds what `check --constraint` with the
// shipped file finds (each finding once: the file's pair repeats a denied ML401 as a warning).
func (h *harness) compareChecks(scenario meshScenario, shippedFile string) {
	live, err := h.findingsOf("check", "-o", "json", "--kubeconfig", h.cp.adminKC, "examples/")
	if err != nil {
		h.fail("%s: check --kubeconfig: %v", scenario.name, err)
		return
	}
	file, err := h.findingsOf("check", "-o", "json", "--constraint", shippedFile, "examples/")
	if err != nil {
		h.fail("%s: check --constraint: %v", scenario.name, err)
		return
	}
	missing, extra := minus(file, live), minus(live, file)
	if !h.check(len(missing) == 0 && len(extra) == 0 && len(live) > 0,
		"%s: check --kubeconfig examples/ finds what check --constraint %s finds (%d findings)",
		scenario.name, shippedFile, len(live)) {
		for _, line := range missing {
			fmt.Println("       only under the file:", line)
		}
		for _, line := range extra {
			fmt.Println("       only under the cluster:", line)
		}
	}
}

// findingsOf runs a check and gives each finding once, as file, object, rule and message.
func (h *harness) findingsOf(args ...string) ([]string, error) {
	run, err := h.runMeshlife(args...)
	if err != nil {
		return nil, err
	}
	if run.code > 1 {
		return nil, fmt.Errorf("exit %d: %s", run.code, run.stderr)
	}
	var out struct {
		Findings []finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(run.stdout), &out); err != nil {
		return nil, fmt.Errorf("no JSON envelope: %w", err)
	}
	set := map[string]bool{}
	for _, f := range out.Findings {
		set[f.File+" "+f.object()+" "+f.Rule+" "+oneLine(f.Msg)] = true
	}
	lines := make([]string, 0, len(set))
	for line := range set {
		lines = append(lines, line)
	}
	sort.Strings(lines)
	return lines, nil
}

// revisionChecks: each revision's constraints carry its facts and select its namespaces, and
// check --kubeconfig judges a Deployment by the revision its namespace is injected by.
func (h *harness) revisionChecks(scenario meshScenario, written []*unstructured.Unstructured) {
	var names []string
	holds := map[string]bool{}
	for _, obj := range written {
		names = append(names, obj.GetName())
		hold, _, _ := unstructured.NestedBool(obj.Object, "spec", "parameters", "istio", "holdApplicationUntilProxyStarts")
		holds[obj.GetName()] = hold
	}
	h.check(len(written) == 6 && holds["mesh-lifecycle-canary-errors"] && !holds["mesh-lifecycle-default-errors"],
		"%s: a pair per revision's namespaces, each with its revision's hold: %v", scenario.name, names)
	manifest := filepath.Join(h.dir, "revisions.yaml")
	deployment := func(namespace string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %s}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: example/api:1}]
`, namespace)
	}
	if err := os.WriteFile(manifest, []byte(deployment("canary-apps")+"---\n"+deployment("shop")), 0o600); err != nil {
		h.fail("%s: %v", scenario.name, err)
		return
	}
	live, err := h.findingsOf("check", "-o", "json", "--kubeconfig", h.cp.adminKC, manifest)
	if err != nil {
		h.fail("%s: check --kubeconfig: %v", scenario.name, err)
		return
	}
	text := strings.Join(live, "\n")
	h.check(strings.Contains(text, "Deployment shop/api ML101") && !strings.Contains(text, "Deployment canary-apps/api ML101"),
		"%s: check --kubeconfig: ML101 in shop (default revision, no hold), none in canary-apps (canary holds)", scenario.name)
}

// liveNamespaceCheck: a Deployment in a namespace the cluster labels for injection (and the
// input does not define) is judged as meshed under --kubeconfig; under the file, which knows
// no Namespace, it is not.
func (h *harness) liveNamespaceCheck(ctx context.Context, scenario meshScenario, shippedFile string) {
	namespace := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]interface{}{"name": "live-injected", "labels": map[string]interface{}{"istio.io/rev": "default"}}}}
	if _, err := h.k.apply(ctx, namespace); err != nil {
		h.fail("live Namespaces: %v", err)
		return
	}
	defer func() {
		namespace.SetLabels(nil)
		_, _ = h.k.apply(ctx, namespace)
	}()
	manifest := filepath.Join(h.dir, "live-namespace.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: live-injected}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: api, image: example/api:1}]
`), 0o600); err != nil {
		h.fail("live Namespaces: %v", err)
		return
	}
	live, err := h.findingsOf("check", "-o", "json", "--kubeconfig", h.cp.adminKC, manifest)
	if err != nil {
		h.fail("live Namespaces: %v", err)
		return
	}
	file, err := h.findingsOf("check", "-o", "json", "--constraint", shippedFile, manifest)
	if err != nil {
		h.fail("live Namespaces: %v", err)
		return
	}
	h.check(len(file) == 0 && len(live) > 0 && strings.Contains(strings.Join(live, "\n"), "ML101"),
		"%s: check --kubeconfig reads the cluster's Namespace live-injected (istio.io/rev=default): %d findings, %d under the file alone",
		scenario.name, len(live), len(file))
}

// rbacChecks: a user without list on daemonsets is told which verb and resource it lacks;
// the ClusterRole `meshlife install facts-reader` prints is enough to read everything.
func (h *harness) rbacChecks(ctx context.Context, generated []*unstructured.Unstructured) {
	partial := []*unstructured.Unstructured{}
	decoded, err := decodeObjects([]byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: facts-reader-without-daemonsets}
rules:
- {apiGroups: [""], resources: [nodes, namespaces], verbs: [list]}
- {apiGroups: [""], resources: [configmaps], verbs: [get, list]}
- {apiGroups: [apps], resources: [deployments], verbs: [list]}
- {apiGroups: [admissionregistration.k8s.io], resources: [mutatingwebhookconfigurations], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: facts-reader-without-daemonsets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: facts-reader-without-daemonsets}
subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: partial-reader}]
`))
	if err != nil {
		h.fail("RBAC: %v", err)
		return
	}
	partial = append(partial, decoded...)
	printed, err := h.runMeshlife("install", "facts-reader", "--user", "full-reader")
	if err != nil || printed.code != 0 {
		h.fail("RBAC: meshlife install facts-reader: %v %s", err, printed.stderr)
		return
	}
	full, err := decodeObjects([]byte(printed.stdout))
	if err != nil {
		h.fail("RBAC: the printed ClusterRole: %v", err)
		return
	}
	all := append(partial, full...)
	if _, err := h.k.applyAll(ctx, all, 30*time.Second); err != nil {
		h.fail("RBAC: %v", err)
		return
	}
	defer func() {
		for _, obj := range all {
			_ = h.k.remove(ctx, obj)
		}
	}()
	kubeconfig := func(user string) (string, error) {
		cert, err := h.cp.ca.issue(pkix.Name{CommonName: user}, nil, nil, false, true)
		if err != nil {
			return "", err
		}
		certFile, keyFile, err := cert.write(h.dir, user)
		if err != nil {
			return "", err
		}
		path := filepath.Join(h.dir, user+".kubeconfig")
		return path, writeKubeconfig(path, h.cp.admin.Host, h.cp.ca.certPEM, func(auth *clientcmdapi.AuthInfo) {
			auth.ClientCertificate, auth.ClientKey = certFile, keyFile
		})
	}
	partialConfig, err := kubeconfig("partial-reader")
	if err != nil {
		h.fail("RBAC: %v", err)
		return
	}
	run, err := h.runMeshlife("constraint", "--kubeconfig", partialConfig)
	h.check(err == nil && run.code == 2 && strings.Contains(run.stderr, "forbids list on daemonsets.apps") &&
		strings.Contains(run.stderr, "meshlife install facts-reader"),
		"RBAC: without list on daemonsets, the error names the verb and resource: %s", firstLine(run.stderr))
	fullConfig, err := kubeconfig("full-reader")
	if err != nil {
		h.fail("RBAC: %v", err)
		return
	}
	out := filepath.Join(h.dir, "full-reader.yaml")
	run, err = h.runMeshlife("constraint", "--kubeconfig", fullConfig, "-o", out)
	if !h.check(err == nil && run.code == 0, "RBAC: the ClusterRole of meshlife install facts-reader reads everything (exit %d)", run.code) {
		fmt.Print(indentLines(run.stderr))
		return
	}
	again, err := readConstraints(out)
	h.check(err == nil && len(again) == len(generated) &&
		reflect.DeepEqual(normalParameters(again[0], nil), normalParameters(generated[0], nil)),
		"RBAC: as full-reader, the same parameters as the admin reads")
}

func firstLine(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	return line
}

// manifests are Linkerd's control-plane objects the reader reads, as its chart makes them.
func (l *linkerdInstall) manifests() string {
	native := ""
	if l.nativeSidecar != "" {
		native = "\n      nativeSidecar: " + l.nativeSidecar
	}
	text := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: linkerd-config
  namespace: linkerd
  labels: {linkerd.io/control-plane-component: controller, linkerd.io/control-plane-ns: linkerd}
data:
  linkerd-crds-chart-version: linkerd-crds-1.0.0-edge
  values: |
    cniEnabled: %t
    controllerImage: cr.l5d.io/linkerd/controller
    linkerdVersion: %s
    proxy:
      await: true
      enableShutdownEndpoint: false%s
      uid: 2102
      waitBeforeExitSeconds: 0
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: linkerd-proxy-injector
  namespace: linkerd
  labels: {linkerd.io/control-plane-component: proxy-injector, linkerd.io/control-plane-ns: linkerd}
spec:
  selector: {matchLabels: {linkerd.io/control-plane-component: proxy-injector}}
  template:
    metadata: {labels: {linkerd.io/control-plane-component: proxy-injector}}
    spec:
      containers:
      - name: proxy-injector
        image: cr.l5d.io/linkerd/controller:%s
        args: [proxy-injector, -log-level=info]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: linkerd-proxy-injector-webhook-config
  labels: {linkerd.io/control-plane-component: proxy-injector, linkerd.io/control-plane-ns: linkerd}
webhooks:
- name: linkerd-proxy-injector.linkerd.io
  namespaceSelector:
    matchExpressions:
    - {key: config.linkerd.io/admission-webhooks, operator: NotIn, values: [disabled]}
    - {key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, cert-manager]}
  objectSelector:
    matchExpressions:
    - {key: linkerd.io/control-plane-component, operator: DoesNotExist}
    - {key: linkerd.io/cni-resource, operator: DoesNotExist}
  clientConfig:
    service: {name: linkerd-proxy-injector, namespace: linkerd, path: /}
  failurePolicy: Ignore
  admissionReviewVersions: [v1, v1beta1]
  reinvocationPolicy: IfNeeded
  rules:
  - operations: [CREATE]
    apiGroups: [""]
    apiVersions: [v1]
    resources: [pods, services]
    scope: Namespaced
  sideEffects: None
  timeoutSeconds: 10
`, l.cni, l.version, native, l.version)
	return text
}
