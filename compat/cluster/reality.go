package main

// The reality stage: a real node (kubelet, containerd, runc, the CNI bridge, the controller
// manager, the scheduler, kube-proxy) and Istio's own data plane (istiod's injector and CA,
// pilot-agent and a real Envoy in the proxy image) run the bug classes meshlife's rules are
// about, each broken and fixed side by side, and every prediction is held against what the
// kubelet and the containers did: `meshlife check` must flag the broken pod and not the fixed
// one, `meshlife explain` must order the events as they happened, and `meshlife diagnose
// pod/NAME`, live with the real container logs, must confirm the rule on the broken pod and
// rule it out on the fixed one. See compat/README-cluster.md, stage reality.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Image references the pods use; every image is built here and imported, never pulled.
const (
	workloadImage = "meshlife.local/workload:dev"
	proxyImage    = "meshlife.local/proxyv2:dev"
	// keepFinalizer holds a deleted pod's object (its final status) until the stage has read
	// it: the kubelet finishes the pod, and the API server keeps it while the finalizer is on.
	keepFinalizer = "meshlife.dev/keep-for-reading"
)

// reality is the stage's state: the node, istiod and the namespaces it made.
type reality struct {
	h     *harness
	node  *node
	istio *istioControlPlane
	dir   string
	// peerURL is the echo server's ClusterIP Service, outside the mesh: what the apps call.
	peerURL string
	results []scenarioResult
	started time.Time
	// followed are the logs of containers followed through their pod's deletion, by
	// namespace/pod/container: the kubelet may remove a deleted pod's containers, and their
	// logs, as soon as they have exited.
	followed sync.Map
}

// scenarioResult is one line of the stage's report.
type scenarioResult struct {
	rule, variant, happened, check, explain, diagnose string
	ok                                                bool
}

func (h *harness) runReality(ctx context.Context) error {
	fmt.Println("\n== reality: a real node and Istio's data plane run every bug class, broken and fixed")
	r := &reality{h: h, dir: filepath.Join(h.dir, "reality"), started: time.Now()}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	archives, err := r.buildImages()
	if err != nil {
		return err
	}
	if err := r.clearWebhooks(ctx); err != nil {
		return err
	}
	started := time.Now()
	if r.node, err = startNode(ctx, h); err != nil {
		return fmt.Errorf("the node: %w", err)
	}
	if err := r.node.importImages(ctx, archives...); err != nil {
		return err
	}
	if err := r.node.startKubernetes(ctx); err != nil {
		return fmt.Errorf("the node: %w", err)
	}
	fmt.Printf("  node %s Ready in %.1fs\n", nodeName, time.Since(started).Seconds())
	if r.istio, err = startIstiod(ctx, h, h.bin, false); err != nil {
		return fmt.Errorf("istiod: %w", err)
	}
	r.printVersions()
	if err := r.startPeer(ctx); err != nil {
		return err
	}
	for _, scenario := range realityScenarios() {
		if h.realityScenarios != "" && !strings.Contains(","+h.realityScenarios+",", ","+scenario.rule+",") {
			continue
		}
		if err := scenario.run(r, ctx); err != nil {
			return fmt.Errorf("%s: %w", scenario.rule, err)
		}
	}
	r.report()
	r.istio.stop()
	r.node.teardown()
	return nil
}

// clearWebhooks removes the admission webhooks earlier stages left registered for engines
// that no longer run (Kyverno registers its own and leaves them): a pod created here must meet
// istiod's injector and nothing else.
func (r *reality) clearWebhooks(ctx context.Context) error {
	admission := r.h.k.core.AdmissionregistrationV1()
	var removed []string
	validating, err := admission.ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, config := range validating.Items {
		if err := admission.ValidatingWebhookConfigurations().Delete(ctx, config.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		removed = append(removed, "validating "+config.Name)
	}
	mutating, err := admission.MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, config := range mutating.Items {
		if err := admission.MutatingWebhookConfigurations().Delete(ctx, config.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		removed = append(removed, "mutating "+config.Name)
	}
	if len(removed) > 0 {
		fmt.Printf("  removed the webhooks earlier stages left: %s\n", strings.Join(removed, ", "))
	}
	return nil
}

// buildImages writes the image archives: the pause image the runtime's sandboxes need, the
// test workload, and the proxy image laid out as Istio's proxyv2.
func (r *reality) buildImages() ([]string, error) {
	bin := r.h.bin
	proxyFiles, err := proxyImageFiles(filepath.Join(bin, "pilot-agent"), filepath.Join(bin, "envoy"), r.istioModule())
	if err != nil {
		return nil, fmt.Errorf("the proxy image: %w", err)
	}
	meshlifeFiles, err := meshlifeImageFiles(r.h.meshlife)
	if err != nil {
		return nil, fmt.Errorf("the meshlife image: %w", err)
	}
	images := []struct {
		ref    string
		files  []imageFile
		config imageConfig
	}{
		{pauseImageRef, pauseImageFiles(filepath.Join(bin, "pause")), pauseImageConfig()},
		{workloadImage, workloadImageFiles(filepath.Join(bin, "workload")), workloadImageConfig()},
		{proxyImage, proxyFiles, proxyImageConfig()},
		{meshlifeImage, meshlifeFiles, meshlifeImageConfig()},
	}
	var archives []string
	for i, image := range images {
		archive := filepath.Join(r.dir, fmt.Sprintf("image-%d.tar", i))
		if err := writeImageArchiveWith(archive, image.ref, image.config, image.files); err != nil {
			return nil, fmt.Errorf("%s: %w", image.ref, err)
		}
		archives = append(archives, archive)
	}
	return archives, nil
}

// printVersions names what runs, each as the program itself reports it.
func (r *reality) printVersions() {
	// The first line that names a version: pilot-agent logs before it prints.
	version := func(program string, args ...string) string {
		out, err := exec.Command(program, args...).CombinedOutput()
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(strings.ToLower(line), "version") || envoyVersionPattern.MatchString(line) {
				return strings.TrimSpace(line)
			}
		}
		return strings.TrimSpace(string(out))
	}
	bin := r.h.bin
	fmt.Printf("  kubelet %s, containerd %s, runc %s\n", r.node.kubeletVersion,
		strings.Fields(version("containerd", "--version"))[2], strings.TrimPrefix(version("runc", "--version"), "runc version "))
	// `go install` stamps no version into Istio's binaries: the module and its VERSION file say it.
	module := r.istioModule()
	pseudo := module[strings.LastIndex(module, "@")+1:]
	release, _ := os.ReadFile(filepath.Join(module, "VERSION"))
	fmt.Printf("  istiod (pilot-discovery), pilot-agent and the istio-cni plugin built from istio.io/istio@%s (master of %s, VERSION %s-dev)\n",
		pseudo, istioModuleDate(pseudo), strings.TrimSpace(string(release)))
	fmt.Printf("  envoy %s\n", envoyVersion(version(filepath.Join(bin, "envoy"), "--version")))
}

// istioModule is the folder of the istio.io/istio module istio-charts.sh pins (the one pin,
// which install.sh builds istiod and pilot-agent at): the charts are its manifests/charts, and
// the module cache names it istio.io/istio@VERSION.
func (r *reality) istioModule() string {
	return filepath.Dir(filepath.Dir(r.h.istioCharts))
}

// istioModuleDate is the commit date a pseudo-version carries.
func istioModuleDate(pseudo string) string {
	parts := strings.Split(pseudo, "-")
	if len(parts) < 3 {
		return "an unknown date"
	}
	if at, err := time.Parse("20060102150405", parts[1]); err == nil {
		return at.Format("2006-01-02")
	}
	return parts[1]
}

var envoyVersionPattern = regexp.MustCompile(`version: \S+/(\d+\.\d+\.\d+)/\S+`)

func envoyVersion(text string) string {
	if m := envoyVersionPattern.FindStringSubmatch(text); m != nil {
		return m[1] + " (" + text + ")"
	}
	return text
}

// startPeer runs the server every app calls: an echo Deployment outside the mesh behind a
// ClusterIP Service, which kube-proxy answers.
func (r *reality) startPeer(ctx context.Context) error {
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: reality-peer}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo, namespace: reality-peer}
spec:
  replicas: 1
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      containers:
      - name: echo
        image: %[1]s
        imagePullPolicy: Never
        args: [serve, -listen, ":8080"]
        readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: reality-peer}
spec:
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: 8080}]
`, workloadImage)
	if err := r.apply(ctx, manifest); err != nil {
		return err
	}
	service, err := r.h.k.core.CoreV1().Services("reality-peer").Get(ctx, "echo", metav1.GetOptions{})
	if err != nil {
		return err
	}
	r.peerURL = "http://" + service.Spec.ClusterIP + "/"
	return waitUntil(ctx, 90*time.Second, "the echo server's endpoint", func() (bool, error) {
		slices, err := r.h.k.core.DiscoveryV1().EndpointSlices("reality-peer").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=echo"})
		if err != nil {
			return false, nil
		}
		for _, slice := range slices.Items {
			for _, endpoint := range slice.Endpoints {
				if endpoint.Conditions.Ready != nil && *endpoint.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, nil
	})
}

func (r *reality) apply(ctx context.Context, manifest string) error {
	objects, err := decodeObjects([]byte(manifest))
	if err != nil {
		return err
	}
	_, err = r.h.k.applyAll(ctx, objects, 60*time.Second)
	return err
}

// waitPod waits until done says the pod is where the scenario needs it, and returns it.
func (r *reality) waitPod(ctx context.Context, namespace, name string, timeout time.Duration, what string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := waitUntil(ctx, timeout, fmt.Sprintf("pod %s/%s %s", namespace, name, what), func() (bool, error) {
		pod, err := r.h.k.core.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = pod
		return done(pod), nil
	})
	if err != nil && last != nil {
		status, _ := json.Marshal(last.Status)
		err = fmt.Errorf("%w; its status: %s", err, status)
	}
	return last, err
}

// newestPod is the newest pod the label selector matches (job-name=JOB for a Job's).
func (r *reality) newestPod(ctx context.Context, namespace, selector string, timeout time.Duration) (string, error) {
	var name string
	err := waitUntil(ctx, timeout, "a pod with "+selector, func() (bool, error) {
		pods, err := r.h.k.core.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		sort.Slice(pods.Items, func(i, j int) bool {
			return pods.Items[i].CreationTimestamp.Before(&pods.Items[j].CreationTimestamp)
		})
		name = pods.Items[len(pods.Items)-1].Name
		return true, nil
	})
	return name, err
}

// release removes the keep finalizer, so that a deleted pod goes.
func (r *reality) release(ctx context.Context, namespace, name string) {
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	_, _ = r.h.k.core.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// containerLog is one container's log as `kubectl logs --timestamps` gives it: as followed
// through the pod's deletion when it was (followDeletion), else read now.
func (r *reality) containerLog(ctx context.Context, namespace, pod, container string) (string, error) {
	if followed, ok := r.followed.Load(namespace + "/" + pod + "/" + container); ok {
		return followed.(func() string)(), nil
	}
	data, err := r.h.k.core.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Timestamps: true}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("the log of %s/%s %s: %w", namespace, pod, container, err)
	}
	return string(data), nil
}

// followDeletion follows the log of each of the pod's containers (`kubectl logs -f
// --timestamps`) from before its deletion until each container has exited, so that what they
// print during their shutdown is read even when the kubelet has removed them since.
func (r *reality) followDeletion(ctx context.Context, pod *corev1.Pod) {
	containers := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, container := range containers {
		log := &lockedBuffer{}
		done := make(chan struct{})
		go func(name string) {
			defer close(done)
			stream, err := r.h.k.core.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: name, Follow: true, Timestamps: true}).Stream(ctx)
			if err != nil {
				return
			}
			defer stream.Close()
			_, _ = io.Copy(log, stream)
		}(container.Name)
		r.followed.Store(pod.Namespace+"/"+pod.Name+"/"+container.Name, func() string {
			// A container that exited ends its stream at once; one still running (an init
			// container long done, say) has said all it will.
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
			return log.String()
		})
	}
}

// lockedBuffer is a buffer one goroutine writes while another may read it.
type lockedBuffer struct {
	mu   sync.Mutex
	data bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.data.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.data.String()
}

// workloadEvent is one line the test workload printed: `TIME EVENT k=v ...`, read from its log.
type workloadEvent struct {
	at     time.Time
	event  string
	fields map[string]string
}

// workloadEvents reads the workload's own lines out of a `--timestamps` log (the kubelet's
// time first, then the workload's).
func workloadEvents(log string) []workloadEvent {
	var events []workloadEvent
	scanner := bufio.NewScanner(strings.NewReader(log))
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 3 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, fields[1])
		if err != nil {
			continue
		}
		event := workloadEvent{at: at, event: fields[2], fields: map[string]string{}}
		rest := strings.SplitN(scanner.Text(), fields[2], 2)[1]
		for _, pair := range splitPairs(rest) {
			if key, value, ok := strings.Cut(pair, "="); ok {
				if unquoted, err := strconv.Unquote(value); err == nil {
					value = unquoted
				}
				event.fields[key] = value
			}
		}
		events = append(events, event)
	}
	return events
}

// splitPairs splits `k=v k="a b"` at the spaces outside quotes.
func splitPairs(text string) []string {
	var pairs []string
	var current strings.Builder
	quoted, escaped := false, false
	for _, c := range text {
		switch {
		case escaped:
			escaped = false
		case c == '\\' && quoted:
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == ' ' && !quoted:
			if current.Len() > 0 {
				pairs = append(pairs, current.String())
				current.Reset()
			}
			continue
		}
		current.WriteRune(c)
	}
	if current.Len() > 0 {
		pairs = append(pairs, current.String())
	}
	return pairs
}

// lastEvent is the last line with that event word, or nil.
func lastEvent(events []workloadEvent, name string) *workloadEvent {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].event == name {
			return &events[i]
		}
	}
	return nil
}

// removeNamespace deletes a namespace's pods at once (grace 0) and the namespace.
func (r *reality) removeNamespace(ctx context.Context, namespace string) {
	pods, err := r.h.k.core.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, pod := range pods.Items {
			r.release(ctx, namespace, pod.Name)
		}
	}
	zero := int64(0)
	_ = r.h.k.core.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	if err := r.h.k.core.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Printf("  note: deleting namespace %s: %v\n", namespace, err)
	}
}

// report prints a line per scenario and the verdict.
func (r *reality) report() {
	fmt.Println("\n  reality: each rule, what happened, and what meshlife said of it")
	failed := 0
	for _, result := range r.results {
		mark := "ok  "
		if !result.ok {
			mark = "FAIL"
			failed++
		}
		fmt.Printf("  %s %s %s: %s\n         check: %s; explain: %s; diagnose: %s\n", mark, result.rule, result.variant, result.happened, result.check, result.explain, result.diagnose)
	}
	if failed > 0 {
		r.h.failures += failed
		r.h.summary = append(r.h.summary, fmt.Sprintf("reality: FAIL (%d of %d pods: reality and meshlife disagree)", failed, len(r.results)))
		fmt.Printf("  reality: FAIL (%d of %d)\n", failed, len(r.results))
		return
	}
	r.h.summary = append(r.h.summary, fmt.Sprintf("reality: PASS (%d pods, each as meshlife predicted and diagnosed, in %.0f s)", len(r.results), time.Since(r.started).Seconds()))
	fmt.Printf("  reality: PASS (%d pods in %.0f s)\n", len(r.results), time.Since(r.started).Seconds())
}
