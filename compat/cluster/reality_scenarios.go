package main

// The reality stage's scenarios: each bug class run for real, broken and fixed side by side.
// Each pod's outcome is asserted from what the node did (pod phase, exit codes, the kubelet's
// times, the containers' own logs and the test workload's counts), then held against
// meshlife's check, explain and diagnose (reality_judges.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// realityScenario is one bug class: its rule and how to run it.
type realityScenario struct {
	rule string
	run  func(r *reality, ctx context.Context) error
}

func realityScenarios() []realityScenario {
	return []realityScenario{
		{"ML101", (*reality).startupRace},
		{"ML102", (*reality).holdNotFirst},
		{"ML103", (*reality).nativeStartupGate},
		{"ML301", (*reality).jobCompletion},
		{"ML401", (*reality).drainPastGrace},
		{"ML404", (*reality).streamsCut},
		{"ML201", (*reality).initWithoutNetwork},
		{"ML202", (*reality).initAfterRedirect},
		{"ML402", (*reality).proxyGoneFirst},
		{"ML406", (*reality).listenersClose},
		{"ML405", (*reality).preStopPastGrace},
		{"ML502", (*reality).readinessGate},
		{"ML407", (*reality).inPlaceRestart},
		{"ML304", (*reality).jobHelper},
		{"ML603", (*reality).waypointGrace},
		{"drill", (*reality).drills},
		{"drill-serve", (*reality).drillServe},
	}
}

// Pod annotations of the fixes, as users write them.
const (
	holdAnnotation   = `proxy.istio.io/config: '{"holdApplicationUntilProxyStarts": true}'`
	nativeAnnotation = `sidecar.istio.io/nativeSidecar: "true"`
	classicNamespace = "reality-istio"
)

// record holds what meshlife says of the pod against its outcome and keeps the result.
func (r *reality) record(ctx context.Context, result scenarioResult, namespace, name, rule string, broken bool) {
	r.judgePod(ctx, &result, namespace, name, rule, broken)
	r.results = append(r.results, result)
}

// meshedNamespace is a namespace Istio's injector serves (classic by the mesh's default).
func meshedNamespace(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s, labels: {istio-injection: enabled}}\n", name)
}

// podManifest is a Pod of the test workload in namespace, held by the keep finalizer.
func podManifest(namespace, name string, annotations []string, grace int, args ...string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  finalizers: [%s]
  annotations: {%s}
spec:
  terminationGracePeriodSeconds: %d
  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
    args: [%s]
    readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}
`, name, namespace, keepFinalizer, strings.Join(annotations, ", "), grace, workloadImage, quoteArgs(args))
}

func quoteArgs(args []string) string {
	quoted := make([]string, len(args))
	for i, arg := range args {
		quoted[i] = strconv.Quote(arg)
	}
	return strings.Join(quoted, ", ")
}

// startupRace, ML101: an app that calls out at once. Without the hold its first calls
// fail until the classic proxy is ready; with the hold, and with a native proxy, none fail.
func (r *reality) startupRace(ctx context.Context) error {
	namespace := classicNamespace + "-startup"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	variants := []struct {
		name, variant string
		annotations   []string
		broken        bool
	}{
		{"no-hold", "classic proxy, no hold (broken)", nil, true},
		{"hold", "classic proxy with holdApplicationUntilProxyStarts (fixed)", []string{holdAnnotation}, false},
		{"native", "native sidecar (fixed)", []string{nativeAnnotation}, false},
	}
	for _, v := range variants {
		manifest := podManifest(namespace, "race-"+v.name, v.annotations, 5, r.startupCallArgs()...)
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	for _, v := range variants {
		name := "race-" + v.name
		happened, failed, err := r.startupCalls(ctx, namespace, name)
		if err != nil {
			return err
		}
		r.recordStartup(ctx, "ML101", v.variant, happened, failed > 0, namespace, name, v.broken)
	}
	return nil
}

// startupCallArgs make the test workload call the peer 40 times, every 100 ms, from its start,
// then serve (and turn ready).
func (r *reality) startupCallArgs() []string {
	return []string{"call", "-url", r.peerURL, "-count", "40", "-interval", "100ms", "-timeout", "1s", "-then", "serve"}
}

// startupCalls waits for the pod's app to be done calling and says what its calls got.
func (r *reality) startupCalls(ctx context.Context, namespace, name string) (string, int, error) {
	if _, err := r.waitPod(ctx, namespace, name, 120*time.Second, "done calling", func(pod *corev1.Pod) bool {
		return containerRunning(pod, "app") && podReady(pod)
	}); err != nil {
		return "", 0, err
	}
	var summary *workloadEvent
	if err := waitUntil(ctx, 30*time.Second, name+"'s call summary", func() (bool, error) {
		log, err := r.containerLog(ctx, namespace, name, "app")
		if err != nil {
			return false, nil
		}
		summary = lastEvent(workloadEvents(log), "calls")
		return summary != nil, nil
	}); err != nil {
		return "", 0, err
	}
	failed, _ := strconv.Atoi(summary.fields["failed"])
	happened := fmt.Sprintf("%s of %s calls at start failed (first ok: call %s)", summary.fields["failed"], summary.fields["total"], summary.fields["first-ok-n"])
	return happened, failed, nil
}

// recordStartup records a startup race's outcome: calls failed at start, or none did.
func (r *reality) recordStartup(ctx context.Context, rule, variant, happened string, callsFailed bool, namespace, name string, broken bool) {
	result := scenarioResult{rule: rule, variant: variant, happened: happened, ok: callsFailed == broken}
	if !result.ok {
		result.happened += fmt.Sprintf("; expected %s", map[bool]string{true: "failed calls", false: "none failed"}[broken])
	}
	r.record(ctx, result, namespace, name, rule, broken)
}

// nativeStartupGate, ML103: a native proxy without a startupProbe counts as started as soon as
// its process runs, so the kubelet starts the app at once and its first calls fail until Envoy
// is ready. The probe goes when the mesh's values turn it off or a later webhook strips it;
// here the stage strips it from istiod's own native injection (a dry run in a namespace istiod
// serves, created where it does not: see createElsewhere). With the probe kept, none fail.
func (r *reality) nativeStartupGate(ctx context.Context) error {
	meshed, namespace := classicNamespace+"-gate-injector", classicNamespace+"-gate"
	if err := r.apply(ctx, meshedNamespace(meshed)+"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: "+namespace+"}\n"); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, meshed)
	defer r.removeNamespace(ctx, namespace)
	variants := []struct {
		name, variant string
		broken        bool
	}{
		{"stripped", "native sidecar, its startupProbe stripped (broken)", true},
		{"kept", "native sidecar with the injector's startupProbe (fixed)", false},
	}
	for _, v := range variants {
		injected, err := r.injectedPod(ctx, podManifest(meshed, "gate-"+v.name, []string{nativeAnnotation}, 5, r.startupCallArgs()...), nil)
		if err != nil {
			return err
		}
		proxy := -1
		for i, container := range injected.Spec.InitContainers {
			if container.Name == "istio-proxy" {
				proxy = i
			}
		}
		if proxy < 0 || injected.Spec.InitContainers[proxy].StartupProbe == nil {
			return fmt.Errorf("istiod's native injection has no istio-proxy init container with a startupProbe: %s", containerNames(injected))
		}
		if v.broken {
			injected.Spec.InitContainers[proxy].StartupProbe = nil
		}
		if err := r.createElsewhere(ctx, injected, namespace); err != nil {
			return err
		}
	}
	for _, v := range variants {
		name := "gate-" + v.name
		happened, failed, err := r.startupCalls(ctx, namespace, name)
		if err != nil {
			return err
		}
		r.recordStartup(ctx, "ML103", v.variant, happened, failed > 0, namespace, name, v.broken)
	}
	return nil
}

// holdNotFirst, ML102: the hold's postStart hook gates only the containers after the proxy. A
// later webhook (or a hand edit) that puts an app container before istio-proxy leaves that app
// ungated: it starts at once and its first calls fail until Envoy is ready. With the injector's
// order (istio-proxy first) none fail. Both pods are istiod's injection with the hold (a dry
// run), created where it does not inject again (see createElsewhere).
func (r *reality) holdNotFirst(ctx context.Context) error {
	meshed, namespace := classicNamespace+"-order-injector", classicNamespace+"-order"
	if err := r.apply(ctx, meshedNamespace(meshed)+"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: "+namespace+"}\n"); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, meshed)
	defer r.removeNamespace(ctx, namespace)
	variants := []struct {
		name, variant string
		broken        bool
	}{
		{"app-first", "the hold, with the app moved before istio-proxy (broken)", true},
		{"proxy-first", "the hold, in the injector's order: istio-proxy first (fixed)", false},
	}
	for _, v := range variants {
		injected, err := r.injectedPod(ctx, podManifest(meshed, "order-"+v.name, []string{holdAnnotation}, 5, r.startupCallArgs()...), nil)
		if err != nil {
			return err
		}
		containers := injected.Spec.Containers
		if len(containers) != 2 || containers[0].Name != "istio-proxy" || containers[0].Lifecycle == nil || containers[0].Lifecycle.PostStart == nil {
			return fmt.Errorf("istiod's injection with the hold does not put istio-proxy first with a postStart hook: %s", containerNames(injected))
		}
		if v.broken {
			injected.Spec.Containers = []corev1.Container{containers[1], containers[0]}
		}
		if err := r.createElsewhere(ctx, injected, namespace); err != nil {
			return err
		}
	}
	for _, v := range variants {
		name := "order-" + v.name
		happened, failed, err := r.startupCalls(ctx, namespace, name)
		if err != nil {
			return err
		}
		r.recordStartup(ctx, "ML102", v.variant, happened, failed > 0, namespace, name, v.broken)
	}
	return nil
}

// containerNames lists a pod's init containers and containers, for an error.
func containerNames(pod *corev1.Pod) string {
	var names []string
	for _, container := range pod.Spec.InitContainers {
		names = append(names, "init "+container.Name)
	}
	for _, container := range pod.Spec.Containers {
		names = append(names, container.Name)
	}
	return strings.Join(names, ", ")
}

// jobCompletion, ML301 and ML302: a Job whose app finishes. Under a classic proxy that nobody
// stops the pod stays Running and the Job never completes; with the quit endpoint, or a native
// proxy, it completes.
func (r *reality) jobCompletion(ctx context.Context) error {
	namespace := classicNamespace + "-jobs"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	const stillRunningAfter = 20 * time.Second
	variants := []struct {
		name, variant string
		annotations   []string
		args          []string
		broken        bool
	}{
		{"no-quit", "classic proxy, app exits (broken)", nil, nil, true},
		{"quit", "classic proxy, app calls /quitquitquit (fixed)", nil, []string{"-quit-url", "http://127.0.0.1:15020/quitquitquit"}, false},
		{"native", "native sidecar (fixed)", []string{nativeAnnotation}, nil, false},
	}
	for _, v := range variants {
		args := append([]string{"job", "-url", r.peerURL, "-count", "3", "-interval", "200ms", "-timeout", "2s"}, v.args...)
		manifest := fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: job-%s, namespace: %s}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {%s}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 5
      containers:
      - name: app
        image: %s
        imagePullPolicy: Never
        args: [%s]
`, v.name, namespace, strings.Join(append(v.annotations, holdAnnotation), ", "), workloadImage, quoteArgs(args))
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	for _, v := range variants {
		job := "job-" + v.name
		podName, err := r.newestPod(ctx, namespace, "job-name="+job, 60*time.Second)
		if err != nil {
			return err
		}
		pod, err := r.waitPod(ctx, namespace, podName, 120*time.Second, "app finished", func(pod *corev1.Pod) bool {
			return containerTerminated(pod, "app") != nil
		})
		if err != nil {
			return err
		}
		appEnd := containerTerminated(pod, "app").FinishedAt.Time
		// Give the pod the time any Job needs to complete once its work is done.
		var completed bool
		_ = waitUntil(ctx, stillRunningAfter, job+" complete", func() (bool, error) {
			got, err := r.h.k.core.BatchV1().Jobs(namespace).Get(ctx, job, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			completed = jobCondition(got, batchv1.JobComplete)
			return completed, nil
		})
		pod, err = r.h.k.core.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var happened string
		if completed {
			happened = fmt.Sprintf("the app exited %s; the pod %s, the Job Complete", appEnd.UTC().Format("15:04:05"), pod.Status.Phase)
		} else {
			happened = fmt.Sprintf("the app exited %s; %s later the pod is still %s (istio-proxy %s), the Job not complete",
				appEnd.UTC().Format("15:04:05"), stillRunningAfter, pod.Status.Phase, containerStateWord(pod, "istio-proxy"))
		}
		result := scenarioResult{rule: "ML301", variant: v.variant, happened: happened, ok: completed != v.broken}
		r.record(ctx, result, namespace, podName, "ML301", v.broken)
	}
	return nil
}

// drainPastGrace, ML401: a classic proxy told to drain for 20 s in a pod with a 5 s grace
// period is killed by the kubelet at 5 s (exit 137); with a drain within the grace period it
// exits on its own.
func (r *reality) drainPastGrace(ctx context.Context) error {
	namespace := classicNamespace + "-drain"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	// The native proxy's pod: an app that keeps calling out for 6 s of its own shutdown, to see
	// what its outbound calls get while its proxy drains (istio/istio#51855: the native
	// template's preStop drains Envoy at the deletion, not when the app has gone).
	variants := []struct {
		name, variant string
		annotations   []string
		grace         int
		broken        bool
		args          []string
	}{
		{"cut", "classic proxy, drain 20s, grace 5s (broken)", []string{`proxy.istio.io/config: '{"terminationDrainDuration": "20s"}'`}, 5, true, nil},
		{"within", "classic proxy, drain 3s, grace 15s (fixed)", []string{`proxy.istio.io/config: '{"terminationDrainDuration": "3s"}'`}, 15, false, nil},
		{"native", "native proxy, app calls out for 6s of its shutdown, grace 20s (fixed)", []string{nativeAnnotation}, 20, false,
			[]string{"-shutdown-delay", "6s", "-call-on-term", r.peerURL, "-call-on-term-every", "250ms", "-timeout", "1s"}},
	}
	for _, v := range variants {
		args := append([]string{"serve", "-listen", ":8080"}, v.args...)
		manifest := podManifest(namespace, "drain-"+v.name, v.annotations, v.grace, args...)
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	for _, v := range variants {
		name := "drain-" + v.name
		ready, err := r.waitPod(ctx, namespace, name, 120*time.Second, "Ready", podReady)
		if err != nil {
			return err
		}
		r.followDeletion(ctx, ready)
		deleted := time.Now()
		if err := r.h.k.core.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		pod, err := r.waitPod(ctx, namespace, name, time.Duration(v.grace+30)*time.Second, "finished", func(pod *corev1.Pod) bool {
			return containerTerminated(pod, "istio-proxy") != nil && containerTerminated(pod, "app") != nil
		})
		if err != nil {
			return err
		}
		proxy := containerTerminated(pod, "istio-proxy")
		happened := fmt.Sprintf("deleted at %s; istio-proxy exit code %d (%s) %.0fs after the deletion (grace %ds)",
			deleted.UTC().Format("15:04:05"), proxy.ExitCode, proxy.Reason, proxy.FinishedAt.Sub(deleted).Seconds(), v.grace)
		killed := proxy.ExitCode == 137
		if v.args != nil {
			shutdown, _, err := r.shutdownCallCounts(ctx, pod)
			if err != nil {
				return err
			}
			happened += "; " + shutdown
		}
		result := scenarioResult{rule: "ML401", variant: v.variant, happened: happened, ok: killed == v.broken}
		r.record(ctx, result, namespace, name, "ML401", v.broken)
		r.release(ctx, namespace, name)
	}
	return nil
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func containerRunning(pod *corev1.Pod, name string) bool {
	status := containerStatus(pod, name)
	return status != nil && status.State.Running != nil
}

func containerTerminated(pod *corev1.Pod, name string) *corev1.ContainerStateTerminated {
	status := containerStatus(pod, name)
	if status == nil {
		return nil
	}
	return status.State.Terminated
}

func containerStateWord(pod *corev1.Pod, name string) string {
	status := containerStatus(pod, name)
	switch {
	case status == nil:
		return "absent"
	case status.State.Running != nil:
		return "running"
	case status.State.Terminated != nil:
		return fmt.Sprintf("exited %d", status.State.Terminated.ExitCode)
	default:
		return "waiting"
	}
}

func podReady(pod *corev1.Pod) bool {
	for _, condition := range pod.Status.Conditions {
		if condition.Type == corev1.PodReady {
			return condition.Status == corev1.ConditionTrue
		}
	}
	return false
}

func jobCondition(job *batchv1.Job, kind batchv1.JobConditionType) bool {
	for _, condition := range job.Status.Conditions {
		if condition.Type == kind && condition.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// shutdownCallCounts says what the app's outbound calls during its own shutdown got (and how
// many failed), beside when
// its proxy said it started draining (pilot-agent's log) and when it exited.
func (r *reality) shutdownCallCounts(ctx context.Context, pod *corev1.Pod) (string, int, error) {
	appLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "app")
	if err != nil {
		return "", 0, err
	}
	events := workloadEvents(appLog)
	sigterm := lastEvent(events, "sigterm")
	if sigterm == nil {
		return "", 0, fmt.Errorf("%s: the app's log has no sigterm line", pod.Name)
	}
	var ok, failed int
	var firstFailure string
	for _, event := range events {
		if event.fields["phase"] != "term" {
			continue
		}
		switch event.event {
		case "call-ok":
			ok++
		case "call-failed":
			failed++
			if firstFailure == "" {
				firstFailure = fmt.Sprintf(" (first at +%.2fs: %s)", event.at.Sub(sigterm.at).Seconds(), event.fields["error"])
			}
		}
	}
	if ok+failed == 0 {
		return "", 0, fmt.Errorf("%s: the app made no call during its shutdown", pod.Name)
	}
	proxyLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "istio-proxy")
	if err != nil {
		return "", 0, err
	}
	drain := "the proxy's log says no drain"
	for _, line := range strings.Split(proxyLog, "\n") {
		fields := strings.Fields(line)
		// pilot-agent's own words when a drain begins: the preStop's /drain request (native),
		// or SIGTERM's (classic); not its configuration's drainDuration lines.
		if len(fields) == 0 || !(strings.Contains(line, "starting drain") || strings.Contains(line, "Agent draining")) {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, fields[0]); err == nil {
			drain = fmt.Sprintf("the proxy started draining at %+.2fs from the app's SIGTERM (%q)", at.Sub(sigterm.at).Seconds(), strings.Join(fields[3:], " "))
			break
		}
	}
	proxyEnd := ""
	if proxy := containerTerminated(pod, "istio-proxy"); proxy != nil {
		proxyEnd = fmt.Sprintf(", istio-proxy exited %d at %+.0fs", proxy.ExitCode, proxy.FinishedAt.Sub(sigterm.at).Seconds())
	}
	return fmt.Sprintf("during the app's shutdown %d outbound calls ok, %d failed%s; %s%s", ok, failed, firstFailure, drain, proxyEnd), failed, nil
}

// streamsCut, ML404: a gRPC stream and a WebSocket, each held open through a ClusterIP Service
// by a meshed client, are cut when the server's pod is deleted (classic proxy, grace 5 s, no
// preStop): the clients see them broken at the pod's exit and must reconnect.
func (r *reality) streamsCut(ctx context.Context) error {
	namespace := classicNamespace + "-streams"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	server := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: streams-server
  namespace: %[1]s
  labels: {app: streams}
  finalizers: [%[2]s]
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: grpc
    image: %[3]s
    imagePullPolicy: Never
    args: [grpc-server, -listen, ":9090", -http-listen, ":8080"]
    ports: [{name: grpc, containerPort: 9090}]
    readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}
  - name: ws
    image: %[3]s
    imagePullPolicy: Never
    args: [ws-server, -listen, ":8081"]
    ports: [{name: websocket, containerPort: 8081}]
    readinessProbe: {httpGet: {path: /ready, port: 8081}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: streams, namespace: %[1]s}
spec:
  selector: {app: streams}
  ports:
  - {name: grpc, port: 9090, targetPort: 9090}
  - {name: websocket, port: 8081, targetPort: 8081}
`, namespace, keepFinalizer, workloadImage)
	if err := r.apply(ctx, server); err != nil {
		return err
	}
	serverPod, err := r.waitPod(ctx, namespace, "streams-server", 120*time.Second, "Ready", podReady)
	if err != nil {
		return err
	}
	service, err := r.h.k.core.CoreV1().Services(namespace).Get(ctx, "streams", metav1.GetOptions{})
	if err != nil {
		return err
	}
	client := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: streams-client
  namespace: %[1]s
  annotations: {%[2]s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: grpc-client
    image: %[3]s
    imagePullPolicy: Never
    args: [grpc-client, -target, "%[4]s:9090", -reconnect, -listen, ""]
  - name: ws-client
    image: %[3]s
    imagePullPolicy: Never
    args: [ws-client, -url, "ws://%[4]s:8081/ws", -reconnect, -listen, ""]
`, namespace, holdAnnotation, workloadImage, service.Spec.ClusterIP)
	if err := r.apply(ctx, client); err != nil {
		return err
	}
	clientEvents := func(container string) []workloadEvent {
		log, err := r.containerLog(ctx, namespace, "streams-client", container)
		if err != nil {
			return nil
		}
		return workloadEvents(log)
	}
	if err := waitUntil(ctx, 90*time.Second, "both streams open", func() (bool, error) {
		return lastEvent(clientEvents("grpc-client"), "stream-open") != nil && lastEvent(clientEvents("ws-client"), "ws-open") != nil, nil
	}); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // a few messages on each stream before the deletion
	r.followDeletion(ctx, serverPod)
	if err := r.h.k.core.CoreV1().Pods(namespace).Delete(ctx, "streams-server", metav1.DeleteOptions{}); err != nil {
		return err
	}
	pod, err := r.waitPod(ctx, namespace, "streams-server", 60*time.Second, "finished", func(pod *corev1.Pod) bool {
		return containerTerminated(pod, "grpc") != nil && containerTerminated(pod, "ws") != nil && containerTerminated(pod, "istio-proxy") != nil
	})
	if err != nil {
		return err
	}
	serverLog, err := r.containerLog(ctx, namespace, "streams-server", "grpc")
	if err != nil {
		return err
	}
	sigterm := lastEvent(workloadEvents(serverLog), "sigterm")
	if sigterm == nil {
		return fmt.Errorf("streams-server: the gRPC server's log has no sigterm line")
	}
	// The first end of each stream after the server's SIGTERM, as its client saw it.
	firstEnd := func(events []workloadEvent, words ...string) *workloadEvent {
		for i := range events {
			for _, word := range words {
				if events[i].event == word && !events[i].at.Before(sigterm.at) {
					return &events[i]
				}
			}
		}
		return nil
	}
	grpcEnd := firstEnd(clientEvents("grpc-client"), "stream-broken", "stream-closed")
	wsEnd := firstEnd(clientEvents("ws-client"), "ws-broken")
	describeEnd := func(end *workloadEvent, detail string) string {
		if end == nil {
			return "not ended"
		}
		return fmt.Sprintf("%s %+.1fs after SIGTERM (%s, %s messages received)", end.event, end.at.Sub(sigterm.at).Seconds(), end.fields[detail], end.fields["received"])
	}
	happened := fmt.Sprintf("server pod deleted, grace 5s; the gRPC stream: %s; the WebSocket: %s",
		describeEnd(grpcEnd, "code"), describeEnd(wsEnd, "close-code"))
	cut := grpcEnd != nil && grpcEnd.event == "stream-broken" && wsEnd != nil
	result := scenarioResult{rule: "ML404", variant: "gRPC and WebSocket server, classic proxy, grace 5s, no preStop", happened: happened, ok: cut}
	r.judgePod(ctx, &result, namespace, pod.Name, "ML404", true)
	r.results = append(r.results, result)
	r.release(ctx, namespace, "streams-server")
	return nil
}

// initAfterRedirect, ML202: a user init container that calls out. Istio's injector puts
// istio-init last among the init containers, so the call runs before the redirect and works;
// a mutating webhook that runs after the mesh's and appends its init container (a Vault agent)
// puts it after the redirect, with no proxy yet: every call is refused and the pod never starts.
// The second webhook is played by the stage: the pod istiod injected (a server-side dry run in
// a namespace it serves) is created, with the init container moved after istio-init, in a
// namespace it does not serve (it would inject an injected pod again, in its own order).
func (r *reality) initAfterRedirect(ctx context.Context) error {
	meshed, namespace := classicNamespace+"-init-injector", classicNamespace+"-init"
	if err := r.apply(ctx, meshedNamespace(meshed)+"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: "+namespace+"}\n"); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, meshed)
	defer r.removeNamespace(ctx, namespace)
	variants := []struct {
		name, variant string
		afterRedirect bool
	}{
		{"after-redirect", "an init container appended after istio-init by a later webhook (broken)", true},
		{"before-redirect", "the injector's own order, istio-init last (fixed)", false},
	}
	for _, v := range variants {
		injected, err := r.injectedPod(ctx, podManifest(meshed, "init-"+v.name, nil, 5, "serve", "-listen", ":8080"), func(pod *corev1.Pod) {
			pod.Spec.InitContainers = []corev1.Container{r.migrateContainer()}
		})
		if err != nil {
			return err
		}
		var order []corev1.Container
		var migrate corev1.Container
		for _, container := range injected.Spec.InitContainers {
			if container.Name == "migrate" {
				migrate = container
				continue
			}
			order = append(order, container)
		}
		if v.afterRedirect {
			order = append(order, migrate)
		} else {
			order = append([]corev1.Container{migrate}, order...)
		}
		injected.Spec.InitContainers = order
		if err := r.createElsewhere(ctx, injected, namespace); err != nil {
			return err
		}
	}
	for _, v := range variants {
		name := "init-" + v.name
		_, happened, broke, err := r.migrateOutcome(ctx, namespace, name)
		if err != nil {
			return err
		}
		result := scenarioResult{rule: "ML202", variant: v.variant, happened: happened, ok: broke == v.afterRedirect}
		r.record(ctx, result, namespace, name, "ML202", v.afterRedirect)
	}
	return nil
}

// migrateContainer is the init container of ML201 and ML202: three calls to the peer, exit 1
// when any fails.
func (r *reality) migrateContainer() corev1.Container {
	return corev1.Container{
		Name: "migrate", Image: workloadImage, ImagePullPolicy: corev1.PullNever,
		Args: []string{"job", "-url", r.peerURL, "-count", "3", "-interval", "300ms", "-timeout", "1s", "-fail-exit-code", "1"},
	}
}

// migrateOutcome waits until the pod is Ready or its init container migrate failed, and says
// what happened: the pod, the init container's calls and exit and the pod's state in words, and
// whether it broke (not Ready, no call ok).
func (r *reality) migrateOutcome(ctx context.Context, namespace, name string) (*corev1.Pod, string, bool, error) {
	pod, err := r.waitPod(ctx, namespace, name, 120*time.Second, "past its init containers", func(pod *corev1.Pod) bool {
		status := containerStatus(pod, "migrate")
		failed := status != nil && (status.RestartCount > 0 || (status.State.Terminated != nil && status.State.Terminated.ExitCode != 0))
		return podReady(pod) || failed
	})
	if err != nil {
		return nil, "", false, err
	}
	log, err := r.containerLog(ctx, namespace, name, "migrate")
	if err != nil {
		return nil, "", false, err
	}
	summary := lastEvent(workloadEvents(log), "calls")
	if summary == nil {
		return nil, "", false, fmt.Errorf("%s: the init container's log has no call summary", name)
	}
	status := containerStatus(pod, "migrate")
	exit := status.State.Terminated
	if exit == nil {
		exit = status.LastTerminationState.Terminated
	}
	happened := fmt.Sprintf("the init container's calls: %s of %s failed; it exited %d; the pod %s", summary.fields["failed"], summary.fields["total"], exit.ExitCode,
		map[bool]string{true: "Ready", false: "stuck in its init containers"}[podReady(pod)])
	return pod, happened, !podReady(pod) && summary.fields["ok"] == "0", nil
}

// injectedPod is the pod istiod's injector makes of manifest (a Pod in a namespace it serves,
// changed by edit first, when given): a server-side dry run, so that nothing is created.
func (r *reality) injectedPod(ctx context.Context, manifest string, edit func(*corev1.Pod)) (*corev1.Pod, error) {
	objects, err := decodeObjects([]byte(manifest))
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	data, _ := json.Marshal(objects[0].Object)
	if err := json.Unmarshal(data, &pod); err != nil {
		return nil, err
	}
	if edit != nil {
		edit(&pod)
	}
	return r.h.k.core.CoreV1().Pods(pod.Namespace).Create(ctx, &pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// createElsewhere creates an injected pod, as a later webhook left it, in a namespace istiod
// does not serve: there it is not injected a second time, in the injector's own order.
func (r *reality) createElsewhere(ctx context.Context, injected *corev1.Pod, namespace string) error {
	injected.Namespace, injected.ResourceVersion, injected.UID, injected.CreationTimestamp = namespace, "", "", metav1.Time{}
	_, err := r.h.k.core.CoreV1().Pods(namespace).Create(ctx, injected, metav1.CreateOptions{})
	return err
}
