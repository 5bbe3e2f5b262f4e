package main

// ML406 on the real node: a classic istio-proxy answers the pod's SIGTERM (at the deletion: it
// has no preStop) by asking Envoy for `/drain_listeners?inboundonly&graceful`, without
// `skip_exit`, so Envoy stops its inbound listeners after --drain-time-s (drainDuration), while
// pilot-agent keeps it running for terminationDrainDuration. When drainDuration is the shorter
// and the app still sleeps in its preStop, new connections to the app are refused from
// drainDuration until the proxy exits. A native proxy's preStop asks for the same drain with
// `skip_exit`: its listeners stay open. The stage connects anew to each deleted pod's IP through
// the app's preStop and watches Envoy's inbound listener (15006, where the pod's redirect sends
// every inbound connection) in the pod's network namespace.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every pod's app sleeps listenersPreStop in its preStop, then serves listenersAppShutdown more
// after SIGTERM, so that the connections of the preStop's last second do not meet an app
// already stopping.
const (
	listenersPreStop     = 12 * time.Second
	listenersAppShutdown = "3s"
	// envoyInboundPort is the virtual inbound listener istio-init redirects inbound TCP to.
	envoyInboundPort = 15006
	// The first refused connection must come within this much before or after explain's
	// listeners-closed (the probes are 250 ms apart; the drain's start is pilot-agent's line,
	// or the kubelet's Killing event cut to the second).
	listenersEarly = time.Second
	listenersLate  = 3 * time.Second
)

// listenersSeen is what the stage's own connections met, by namespace/pod: no container's log
// holds it, and the explain judge (listenersAgree) compares it with the prediction.
var listenersSeen sync.Map

// listenersObservation is one deleted pod's shutdown as the stage saw it from outside and in
// its containers' logs; every duration is from the deletion.
type listenersObservation struct {
	deleted time.Time
	// attempts are the new connections, one every 250 ms from the deletion.
	attempts []connectAttempt
	// listenerGone is when 15006 was first seen not listening (zero: listening while the proxy
	// ran).
	listenerGone time.Duration
	// drainTime is Envoy's own --drain-time-s, read from its command line.
	drainTime string
	// adminStats is Envoy's admin answer about its listeners, read during the preStop.
	adminStats string
	adminAt    time.Duration
	// killing is the kubelet's Killing event of the app (its preStop's start), cut to the second.
	killing   time.Duration
	killingAt time.Time
	// drainLogged is pilot-agent's first drain line (SIGTERM's "Agent draining Proxy for
	// termination" for a classic proxy, the native preStop's "handling /drain, starting drain"):
	// explain's t = 0 to the millisecond.
	drainLogged time.Duration
	drainLine   string
	// drainRequest is what pilot-agent asked Envoy's admin, as Envoy logged it.
	drainRequest string
	// proxyExit is pilot-agent's "Agent has successfully terminated", else the kubelet's
	// finishedAt of istio-proxy.
	proxyExit time.Duration
	sigterm   time.Duration // the app's SIGTERM line
	requests  int           // the app's requests to / between the deletion and its SIGTERM
}

// connectAttempt is one new connection to the app's port on the pod's IP.
type connectAttempt struct {
	at time.Duration // from the deletion
	// failure is the error or the HTTP status when the app did not answer 200; empty when it did.
	failure string
	// closing: the response said Connection: close, which a draining Envoy adds.
	closing bool
}

// listenersClose, ML406: three pods whose apps sleep 12 s in their preStop, deleted together.
// A classic proxy with drainDuration 4s and terminationDrainDuration 12s (broken: its listeners
// close at 4 s and it leaves at 12 s); a classic proxy with drainDuration 15s and
// terminationDrainDuration 14s (fixed: it leaves before the drain would stop them); a native
// proxy with drainDuration 4s (its drain keeps the listeners open).
func (r *reality) listenersClose(ctx context.Context) error {
	namespace := classicNamespace + "-listeners"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	variants := []struct {
		name, variant string
		annotations   []string
		broken        bool
	}{
		{"short-drain", "classic proxy, drainDuration 4s, terminationDrainDuration 12s, preStop sleep 12, grace 30s (broken)",
			[]string{`proxy.istio.io/config: '{"drainDuration": "4s", "terminationDrainDuration": "12s", "holdApplicationUntilProxyStarts": true}'`}, true},
		{"long-drain", "classic proxy, drainDuration 15s, terminationDrainDuration 14s, preStop sleep 12, grace 30s (fixed)",
			[]string{`proxy.istio.io/config: '{"drainDuration": "15s", "terminationDrainDuration": "14s", "holdApplicationUntilProxyStarts": true}'`}, false},
		{"native", "native proxy, drainDuration 4s, preStop sleep 12, grace 30s (fixed)",
			[]string{nativeAnnotation, `proxy.istio.io/config: '{"drainDuration": "4s"}'`}, false},
	}
	for _, v := range variants {
		// Envoy's admin logs the drain_listeners request pilot-agent makes only at debug.
		annotations := append([]string{`sidecar.istio.io/componentLogLevel: "admin:debug"`}, v.annotations...)
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: listeners-%[1]s
  namespace: %[2]s
  finalizers: [%[3]s]
  annotations:
    %[4]s
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: %[5]s
    imagePullPolicy: Never
    args: [serve, -listen, ":8080", -shutdown-delay, %[6]s, -log-requests]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}
    lifecycle: {preStop: {exec: {command: [sleep, "%[7]d"]}}}
`, v.name, namespace, keepFinalizer, strings.Join(annotations, "\n    "), workloadImage, listenersAppShutdown, int(listenersPreStop.Seconds()))
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	pods := make([]*corev1.Pod, len(variants))
	agents := make([]int, len(variants))
	observations := make([]*listenersObservation, len(variants))
	for i, v := range variants {
		pod, err := r.waitPod(ctx, namespace, "listeners-"+v.name, 120*time.Second, "Ready", podReady)
		if err != nil {
			return err
		}
		agent, err := proxyAgentPID(namespace, pod.Name)
		if err != nil {
			return err
		}
		observations[i] = &listenersObservation{drainTime: envoyDrainTime(agent)}
		pods[i], agents[i] = pod, agent
	}

	// All deleted together; each probed from its own goroutine until the app's preStop is over
	// and a little past its SIGTERM: the kubelet may run the preStops a second or two after the
	// deletion.
	window := listenersPreStop + 4*time.Second
	errs := make([]error, len(variants))
	var wg sync.WaitGroup
	for i := range variants {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			pod, o := pods[i], observations[i]
			// A response before the deletion, to tell the drain's Connection: close from a
			// habit of the app or of Envoy.
			if before := connectAnew(pod.Status.PodIP); before.closing || before.failure != "" {
				errs[i] = fmt.Errorf("%s before its deletion: %+v", pod.Name, before)
				return
			}
			r.followDeletion(ctx, pod)
			o.deleted = time.Now()
			if errs[i] = r.h.k.core.CoreV1().Pods(namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); errs[i] != nil {
				return
			}
			// Envoy's listener stats between drainDuration (4 s) and the classic proxies' exit
			// (12 s), with room for the kubelet's lag in running the preStops.
			adminAt := 10 * time.Second
			tick := time.NewTicker(250 * time.Millisecond)
			for at := time.Since(o.deleted); at <= window; at = time.Since(o.deleted) {
				if listening, err := listensOn(agents[i], envoyInboundPort); err == nil && !listening && o.listenerGone == 0 {
					o.listenerGone = at
				}
				attempt := connectAnew(pod.Status.PodIP)
				attempt.at = time.Since(o.deleted)
				o.attempts = append(o.attempts, attempt)
				if o.adminStats == "" && at >= adminAt {
					o.adminAt, o.adminStats = time.Since(o.deleted), envoyListenerStats(agents[i])
				}
				<-tick.C
			}
			tick.Stop()
			pods[i], errs[i] = r.waitPod(ctx, namespace, pod.Name, 60*time.Second, "finished", func(pod *corev1.Pod) bool {
				return containerTerminated(pod, "app") != nil && containerTerminated(pod, "istio-proxy") != nil
			})
		}(i)
	}
	wg.Wait()

	for i, v := range variants {
		name := "listeners-" + v.name
		if errs[i] != nil {
			return fmt.Errorf("%s: %w", name, errs[i])
		}
		o := observations[i]
		if err := r.readShutdown(ctx, pods[i], o); err != nil {
			return err
		}
		listenersSeen.Store(namespace+"/"+name, o)
		// The claim: refused from about drainDuration after the drain began until the proxy
		// left, on the broken pod only.
		failed := o.failedBeforeSigterm()
		ok := (failed > 0) == v.broken
		if v.broken && failed > 0 {
			ok = ok && o.failsNear(4*time.Second) && o.refusedThrough()
		}
		result := scenarioResult{rule: "ML406", variant: v.variant, happened: o.describe(), ok: ok}
		if !ok {
			result.happened += "; expected " + map[bool]string{
				true:  "every new connection refused from about 4s after the drain began until the proxy exited",
				false: "every new connection answered until the app's SIGTERM",
			}[v.broken]
		}
		r.record(ctx, result, namespace, name, "ML406", v.broken)
		r.release(ctx, namespace, name)
	}
	return nil
}

// readShutdown reads, from the app's and the proxy's logs and the kubelet's events, when the
// drain began, what pilot-agent asked Envoy, when the app got SIGTERM and when the proxy left.
func (r *reality) readShutdown(ctx context.Context, pod *corev1.Pod, o *listenersObservation) error {
	appLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "app")
	if err != nil {
		return err
	}
	events := workloadEvents(appLog)
	sigterm := lastEvent(events, "sigterm")
	if sigterm == nil {
		return fmt.Errorf("%s: the app's log has no sigterm line", pod.Name)
	}
	o.sigterm = sigterm.at.Sub(o.deleted)
	for _, event := range events {
		if event.event == "request" && event.fields["path"] == "/" && event.at.After(o.deleted) && event.at.Before(sigterm.at) {
			o.requests++
		}
	}
	if killing, err := r.killingEvent(ctx, pod, "app"); err == nil {
		o.killing, o.killingAt = killing.Sub(o.deleted), killing
	}
	proxyLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "istio-proxy")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(proxyLog, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, fields[0])
		if err != nil {
			continue
		}
		switch {
		case o.drainLine == "" && (strings.Contains(line, "starting drain") || strings.Contains(line, "Agent draining")):
			o.drainLogged, o.drainLine = at.Sub(o.deleted), strings.Join(fields[3:], " ")
		case o.proxyExit == 0 && strings.Contains(line, "Agent has successfully terminated"):
			o.proxyExit = at.Sub(o.deleted)
		}
		if _, path, found := strings.Cut(line, "request complete: path: "); found && strings.Contains(path, "drain_listeners") && o.drainRequest == "" {
			o.drainRequest = strings.Fields(path)[0]
		}
	}
	if o.proxyExit == 0 {
		if proxy := containerTerminated(pod, "istio-proxy"); proxy != nil {
			o.proxyExit = proxy.FinishedAt.Sub(o.deleted)
		}
	}
	return nil
}

// drainStart is when the drain began, from the deletion: pilot-agent's line, else the kubelet's
// Killing event of the app.
func (o *listenersObservation) drainStart() time.Duration {
	if o.drainLine != "" {
		return o.drainLogged
	}
	return o.killing
}

// servedUntil is the end of the stretch the rule speaks of: the app's SIGTERM (it still serves
// before it), or the proxy's exit when earlier.
func (o *listenersObservation) servedUntil() time.Duration {
	if o.proxyExit > 0 && o.proxyExit < o.sigterm {
		return o.proxyExit
	}
	return o.sigterm
}

// failedBeforeSigterm counts the new connections before the app's SIGTERM that it did not answer.
func (o *listenersObservation) failedBeforeSigterm() int {
	failed := 0
	for _, attempt := range o.attempts {
		if attempt.at < o.sigterm && attempt.failure != "" {
			failed++
		}
	}
	return failed
}

// firstFailure is the first new connection before the app's SIGTERM that the app did not answer.
func (o *listenersObservation) firstFailure() *connectAttempt {
	for i, attempt := range o.attempts {
		if attempt.at < o.sigterm && attempt.failure != "" {
			return &o.attempts[i]
		}
	}
	return nil
}

// failsNear says whether the first failure was refused about close after the drain began.
func (o *listenersObservation) failsNear(close time.Duration) bool {
	first := o.firstFailure()
	if first == nil || !strings.Contains(first.failure, "connection refused") {
		return false
	}
	since := first.at - o.drainStart()
	return since >= close-listenersEarly && since <= close+listenersLate
}

// refusedThrough says whether every new connection from the first failure until the proxy left
// (or the app's SIGTERM, when earlier) was refused.
func (o *listenersObservation) refusedThrough() bool {
	first := o.firstFailure()
	if first == nil {
		return false
	}
	for _, attempt := range o.attempts {
		if attempt.at >= first.at && attempt.at < o.servedUntil() && !strings.Contains(attempt.failure, "connection refused") {
			return false
		}
	}
	return true
}

// describe says what the pod's shutdown looked like from outside and in its logs.
func (o *listenersObservation) describe() string {
	var ok, closing, failed, failedAfter int
	var firstClosing, firstFailure, firstAfter, lastOK string
	for _, attempt := range o.attempts {
		switch {
		case attempt.at >= o.sigterm && attempt.failure != "":
			failedAfter++
			if firstAfter == "" {
				firstAfter = fmt.Sprintf(" (the first at %+.2fs)", attempt.at.Seconds())
			}
		case attempt.failure != "":
			failed++
			if firstFailure == "" {
				firstFailure = fmt.Sprintf(" (the first at %+.2fs, %+.2fs from the drain: %s)", attempt.at.Seconds(), (attempt.at - o.drainStart()).Seconds(), attempt.failure)
			}
		case attempt.at < o.sigterm:
			ok++
			lastOK = fmt.Sprintf("%+.2fs", attempt.at.Seconds())
			if attempt.closing {
				closing++
				if firstClosing == "" {
					firstClosing = fmt.Sprintf(", the first at %+.2fs", attempt.at.Seconds())
				}
			}
		}
	}
	killing := "no Killing event of the app"
	if !o.killingAt.IsZero() {
		killing = "the app's Killing event at " + o.killingAt.UTC().Format("15:04:05") + ", cut to the second"
	}
	drain := fmt.Sprintf("pilot-agent logged no drain (%s)", killing)
	if o.drainLine != "" {
		drain = fmt.Sprintf("pilot-agent's %q at %+.2fs (%s), Envoy's admin asked %s", o.drainLine, o.drainLogged.Seconds(), killing, orNone(o.drainRequest))
	}
	listener := fmt.Sprintf("Envoy's :%d listening while the proxy ran", envoyInboundPort)
	if o.listenerGone > 0 {
		listener = fmt.Sprintf("Envoy's :%d gone from the pod's listening sockets at %+.2fs", envoyInboundPort, o.listenerGone.Seconds())
	}
	return fmt.Sprintf("deleted at %s; Envoy ran with --drain-time-s %s; %s; %s; of %d new connections to the pod's IP before the app's SIGTERM (%+.2fs, %+.2fs from the drain), %d answered (last at %s; %d with Connection: close%s; the app logged %d requests to /), %d failed%s; %d failed after it%s; istio-proxy left at %+.2fs (%+.2fs from the drain); Envoy's admin at %+.1fs: %s",
		o.deleted.UTC().Format("15:04:05.000"), o.drainTime, drain, listener, ok+failed, o.sigterm.Seconds(), (o.sigterm - o.drainStart()).Seconds(), ok, orNone(lastOK), closing, firstClosing,
		o.requests, failed, firstFailure, failedAfter, firstAfter, o.proxyExit.Seconds(), (o.proxyExit - o.drainStart()).Seconds(), o.adminAt.Seconds(), orNone(o.adminStats))
}

// listenersAgree holds explain's listeners-closed of istio-proxy (drawn only for a classic proxy
// whose drainDuration ends before terminationDrainDuration) and, for a native proxy, its
// drain-start at the deletion, against what the stage's connections met.
func (r *reality) listenersAgree(t *explainedTimeline, pod *corev1.Pod, broken bool) (string, bool) {
	seen, found := listenersSeen.Load(pod.Namespace + "/" + pod.Name)
	if !found {
		return "the stage recorded no connections to " + pod.Name, false
	}
	o := seen.(*listenersObservation)
	closeAt, predictedClose := t.predictedAt("shutdown", "listeners-closed", "istio-proxy")
	observed := "none failed before the app's SIGTERM"
	if first := o.firstFailure(); first != nil {
		observed = fmt.Sprintf("the first failed %.2fs after the drain began", (first.at - o.drainStart()).Seconds())
	}
	predicted := "no listeners-closed"
	if predictedClose {
		predicted = fmt.Sprintf("listeners-closed at %d ms", closeAt)
	}
	agrees := predictedClose == broken && (o.firstFailure() != nil) == predictedClose
	if predictedClose {
		// explain's t = 0 is when the kubelet stops the pod: pilot-agent's drain line.
		agrees = agrees && closeAt == 4000 && o.failsNear(time.Duration(closeAt)*time.Millisecond)
	}
	if isNativeProxy(pod) {
		drainAt, drains := t.predictedAt("shutdown", "drain-start", "istio-proxy")
		if drains {
			predicted += fmt.Sprintf(", drain-start at %d ms", drainAt)
		} else {
			predicted += ", no drain-start"
		}
		agrees = agrees && drains && drainAt == 0
	}
	return fmt.Sprintf("%s: %s (observed %s)", t.Mode, predicted, observed), agrees
}

// isNativeProxy says whether the pod's istio-proxy is a native sidecar (an init container).
func isNativeProxy(pod *corev1.Pod) bool {
	for _, container := range pod.Spec.InitContainers {
		if container.Name == "istio-proxy" {
			return true
		}
	}
	return false
}

// connectAnew is a GET on a new connection to the app's port (the pod's redirect hands it to
// Envoy's inbound listener). Keep-alive stays on, so a Connection: close is the server's.
func connectAnew(podIP string) connectAttempt {
	transport := &http.Transport{Proxy: nil}
	defer transport.CloseIdleConnections()
	client := &http.Client{Timeout: time.Second, Transport: transport}
	response, err := client.Get("http://" + podIP + ":8080/")
	if err != nil {
		return connectAttempt{failure: err.Error()}
	}
	defer response.Body.Close()
	attempt := connectAttempt{closing: response.Close}
	if response.StatusCode != http.StatusOK {
		attempt.failure = response.Status
	}
	return attempt
}

// proxyAgentPID is the pilot-agent of the pod's istio-proxy on this node, found by the
// POD_NAME and POD_NAMESPACE the injector puts in its environment.
func proxyAgentPID(namespace, name string) (int, error) {
	want := []string{"POD_NAME=" + name, "POD_NAMESPACE=" + namespace}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || processName(pid) != "pilot-agent" {
			continue
		}
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		variables := strings.Split(string(environ), "\x00")
		if containsAll(variables, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no pilot-agent of %s/%s among this node's processes", namespace, name)
}

func containsAll(list, wanted []string) bool {
	for _, w := range wanted {
		found := false
		for _, item := range list {
			if item == w {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// processName is the base name of the process's program (its first argument).
func processName(pid int) string {
	args := processArgs(pid)
	if len(args) == 0 {
		return ""
	}
	return filepath.Base(args[0])
}

func processArgs(pid int) []string {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
}

// envoyDrainTime is the --drain-time-s pilot-agent started its Envoy with: drainDuration as
// Envoy got it.
func envoyDrainTime(agent int) string {
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || processName(pid) != "envoy" || parentPID(pid) != agent {
			continue
		}
		args := processArgs(pid)
		for i, arg := range args {
			if arg == "--drain-time-s" && i+1 < len(args) {
				return args[i+1]
			}
		}
		return "unset (" + strings.Join(args, " ") + ")"
	}
	return "unknown (no envoy under pilot-agent " + strconv.Itoa(agent) + ")"
}

// parentPID is the fourth field of /proc/PID/stat.
func parentPID(pid int) int {
	fields, ok := procStat(pid)
	if !ok || len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[4-3])
	return ppid
}

// listensOn says whether a socket of the process's network namespace (the pod's, for a process
// of its containers) listens on the TCP port; an error when the process is gone.
func listensOn(pid, port int) (bool, error) {
	wanted := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			// sl local_address rem_address st ...: 0A is LISTEN.
			fields := strings.Fields(line)
			if len(fields) > 3 && strings.HasSuffix(fields[1], wanted) && fields[3] == "0A" {
				return true, nil
			}
		}
	}
	return false, nil
}

// envoyListenerStats asks Envoy's admin, inside the pod's network namespace (it answers on
// localhost only), what its listener manager counts: listener_stopped turns 1 when the drain's
// end stops the listeners.
func envoyListenerStats(agent int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(agent), "-n", "curl", "-sS", "-G",
		"--data-urlencode", `filter=^listener_manager\.(listener_stopped|total_listeners_(active|draining))$|downstream_cx_drain_close$|^server\.state$`,
		"http://127.0.0.1:15000/stats").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("unreadable (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	return strings.Join(strings.Fields(string(out)), " ")
}
