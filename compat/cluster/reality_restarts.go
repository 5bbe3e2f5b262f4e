package main

// ML407 on the real node: a container restart rule with the action RestartAllContainers
// (KEP-5532, alpha in Kubernetes 1.35 behind RestartAllContainersOnContainerExits) restarts
// the whole pod in place when its container exits with a matching code. The kubelet kills
// every other container with a grace period of 0 (kuberuntime_manager.go, SyncPod: "Killing
// containers without grace period"), removes them and runs the init containers again, in the
// same sandbox. The stage lets an app exit 88 once in a classic Istio pod whose proxy would
// drain 10 s at a normal termination, and watches the proxy's end, the init containers and the
// pod; the action Restart restarts the app alone.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// restartAllGates are the feature gates the API server and the kubelet run with: the action
// RestartAllContainers and what it depends on (ContainerRestartRules is beta and on in 1.35;
// NodeDeclaredFeatures is alpha). They only add behaviour, which no other scenario uses.
const restartAllGates = "RestartAllContainersOnContainerExits=true,NodeDeclaredFeatures=true,ContainerRestartRules=true"

// apiServerFeatureGates are the API server's --feature-gates: restartAllGates when the reality
// stage runs (main.go), else none.
var apiServerFeatureGates string

// restartDrain is the proxy's terminationDrainDuration: what a normal termination would drain.
const restartDrain = "10s"

// restartObservation is what one pod did from the app's exit 88 until it was Ready again.
type restartObservation struct {
	uid, ip                 string
	appExit                 time.Time // the app's own exit line
	proxyBefore, initBefore string    // container IDs before the exit
	agent                   int       // pilot-agent's PID before the exit
	agentGone               time.Time // when that pid was first seen gone (zero: it lived on)
	proxyLog                string    // istio-proxy's log, followed through the exit
	proxyTerminated         *corev1.ContainerStateTerminated
	restarting              *corev1.PodCondition // AllContainersRestarting True, as first seen
	after                   *corev1.Pod
	graceKills              []string // the kubelet's "Killing container with a grace period" of this pod
	proxyStop               string   // how containerd stopped the old istio-proxy
	proxySIGKILL            bool     // containerd sent it SIGKILL
	initLogAfter            string
}

// inPlaceRestart, ML407: two classic Istio pods (hold on, terminationDrainDuration 10s) whose
// app serves, then exits 88 once (a marker on an emptyDir keeps the second run serving); the
// app's restartPolicyRules say RestartAllContainers (broken) or Restart (fixed) for 88.
func (r *reality) inPlaceRestart(ctx context.Context) error {
	namespace := classicNamespace + "-restarts"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	variants := []struct {
		name, action, variant string
		broken                bool
	}{
		{"all", "RestartAllContainers", "classic proxy (drain " + restartDrain + "), the app exits 88 under action RestartAllContainers (broken)", true},
		{"one", "Restart", "classic proxy (drain " + restartDrain + "), the app exits 88 under action Restart (fixed)", false},
	}
	for _, v := range variants {
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: restart-%[1]s
  namespace: %[2]s
  finalizers: [%[3]s]
  annotations:
    proxy.istio.io/config: '{"terminationDrainDuration": "%[6]s", "holdApplicationUntilProxyStarts": true}'
spec:
  terminationGracePeriodSeconds: 30
  volumes: [{name: marker, emptyDir: {}}]
  containers:
  - name: app
    image: %[4]s
    imagePullPolicy: Never
    args: [serve, -listen, ":8080", -exit-after, 15s, -exit-after-code, "88", -exit-once, /marker/exited]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}
    volumeMounts: [{name: marker, mountPath: /marker}]
    restartPolicy: Never
    restartPolicyRules:
    - action: %[5]s
      exitCodes: {operator: In, values: [88]}
`, v.name, namespace, keepFinalizer, workloadImage, v.action, restartDrain)
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	observations := make([]*restartObservation, len(variants))
	errs := make([]error, len(variants))
	var wg sync.WaitGroup
	for i, v := range variants {
		wg.Add(1)
		go func(i int, name string) {
			defer wg.Done()
			observations[i], errs[i] = r.watchRestart(ctx, namespace, name)
		}(i, "restart-"+v.name)
	}
	wg.Wait()
	for i, v := range variants {
		name := "restart-" + v.name
		if errs[i] != nil {
			return fmt.Errorf("%s: %w", name, errs[i])
		}
		o := observations[i]
		happened, restartedAll, ranOn := o.describe()
		result := scenarioResult{rule: "ML407", variant: v.variant, happened: happened, ok: map[bool]bool{true: restartedAll, false: ranOn}[v.broken]}
		if !result.ok {
			result.happened += "; expected " + map[bool]string{
				true:  "istio-proxy killed within about 2 s of the app's exit without its drain's end, istio-init run again, AllContainersRestarting, then Ready with the same IP and UID",
				false: "istio-proxy running on, istio-init not run again, the app alone restarted",
			}[v.broken]
		}
		r.record(ctx, result, namespace, name, "ML407", v.broken)
	}
	return nil
}

// watchRestart waits for the pod to be Ready, follows its proxy through the app's exit 88 and
// waits for it to be Ready again with a new app.
func (r *reality) watchRestart(ctx context.Context, namespace, name string) (*restartObservation, error) {
	pod, err := r.waitPod(ctx, namespace, name, 120*time.Second, "Ready", podReady)
	if err != nil {
		return nil, err
	}
	o := &restartObservation{uid: string(pod.UID), ip: pod.Status.PodIP}
	if status := containerStatus(pod, "istio-proxy"); status != nil {
		o.proxyBefore = status.ContainerID
	}
	if status := containerStatus(pod, "istio-init"); status != nil {
		o.initBefore = status.ContainerID
	}
	if o.agent, err = proxyAgentPID(namespace, name); err != nil {
		return nil, err
	}
	proxyLog, proxyDone := r.followLog(ctx, namespace, name, "istio-proxy")
	appLog, _ := r.followLog(ctx, namespace, name, "app")

	// Every 100 ms until the app has run again and the pod is Ready: pilot-agent's process, the
	// pod's status as the kubelet reports it.
	appRestarted := func(pod *corev1.Pod) bool {
		status := containerStatus(pod, "app")
		return status != nil && status.State.Running != nil && status.RestartCount > 0
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		if o.agentGone.IsZero() && processName(o.agent) != "pilot-agent" {
			o.agentGone = time.Now()
		}
		pod, err := r.h.k.core.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			if terminated := containerTerminated(pod, "istio-proxy"); terminated != nil && o.proxyTerminated == nil {
				o.proxyTerminated = terminated.DeepCopy()
			}
			for _, condition := range pod.Status.Conditions {
				if condition.Type == corev1.AllContainersRestarting && condition.Status == corev1.ConditionTrue && o.restarting == nil {
					o.restarting = condition.DeepCopy()
				}
			}
			if o.appExit.IsZero() {
				if exit := lastEvent(workloadEvents(appLog.String()), "exit"); exit != nil && exit.fields["code"] == "88" {
					o.appExit = exit.at
				}
			}
			// The pod counts as back once the app runs again and the pod is Ready, and, when
			// pilot-agent went, a new one serves.
			if !o.appExit.IsZero() && appRestarted(pod) && podReady(pod) && (o.agentGone.IsZero() || containerRunning(pod, "istio-proxy")) {
				o.after = pod
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("not Ready again with a restarted app within 120s (app exit seen: %v, pilot-agent gone: %v, last status: %s)",
				!o.appExit.IsZero(), !o.agentGone.IsZero(), containerStateWord(pod, "app"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !o.agentGone.IsZero() {
		select {
		case <-proxyDone:
		case <-time.After(5 * time.Second):
		}
	}
	o.proxyLog = proxyLog.String()
	o.graceKills = r.kubeletGraceKills(namespace, name)
	if !o.agentGone.IsZero() {
		o.proxyStop, o.proxySIGKILL = r.containerdStop(o.proxyBefore, o.appExit)
	}
	if log, err := r.containerLog(ctx, namespace, name, "istio-init"); err == nil {
		o.initLogAfter = log
	}
	return o, nil
}

// followLog follows one container's log (`kubectl logs -f --timestamps`) until its container
// ends; done closes then.
func (r *reality) followLog(ctx context.Context, namespace, pod, container string) (*lockedBuffer, <-chan struct{}) {
	log := &lockedBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		stream, err := r.h.k.core.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true, Timestamps: true}).Stream(ctx)
		if err != nil {
			return
		}
		defer stream.Close()
		scanner := bufio.NewScanner(stream)
		scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
		for scanner.Scan() {
			_, _ = log.Write(append(scanner.Bytes(), '\n'))
		}
	}()
	return log, done
}

// kubeletGraceKills are the kubelet's own lines (at --v 2) about killing this pod's
// containers: "Killing container with a grace period" with the grace period it used.
func (r *reality) kubeletGraceKills(namespace, name string) []string {
	file, err := os.Open(r.node.kubelet.logFile)
	if err != nil {
		return nil
	}
	defer file.Close()
	var kills []string
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.Contains(line, `"Killing container with a grace period"`) || !strings.Contains(line, `pod="`+namespace+"/"+name+`"`) {
			continue
		}
		kills = append(kills, fmt.Sprintf("%s gracePeriod=%s at %s", klogField(line, "containerName"), klogField(line, "gracePeriod"), strings.Fields(line)[1]))
	}
	return kills
}

// containerdStop is how containerd's CRI stopped the container, from its ID as the kubelet
// reports it (containerd://ID): when it sent SIGTERM ("Stop container ... with signal
// terminated"), SIGKILL ("Kill container", only when the process outlived the timeout) and
// removed it, from since. The exit status itself is logged nowhere at containerd's info level,
// and the kubelet removes a container it kills for RestartAllContainers before its status
// shows the exit.
func (r *reality) containerdStop(containerID string, since time.Time) (string, bool) {
	_, id, _ := strings.Cut(containerID, "://")
	file, err := os.Open(r.node.containerd.logFile)
	if err != nil || id == "" {
		return "containerd's log unreadable", false
	}
	defer file.Close()
	var steps []string
	killed := false
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.Contains(line, id) {
			continue
		}
		var step string
		switch {
		case strings.Contains(line, "with timeout"):
			_, rest, _ := strings.Cut(line, "with timeout ")
			step = "StopContainer with timeout " + strings.Fields(rest)[0] + " s"
		case strings.Contains(line, "with signal terminated"):
			step = "SIGTERM"
		case strings.Contains(line, `msg="Kill container`):
			step, killed = "SIGKILL", true
		case strings.Contains(line, "RemoveContainer") && strings.Contains(line, "returns successfully"):
			step = "removed"
		default:
			continue
		}
		_, stamp, _ := strings.Cut(line, `time="`)
		if at, err := time.Parse(time.RFC3339Nano, strings.SplitN(stamp, `"`, 2)[0]); err == nil {
			step += fmt.Sprintf(" %+.2fs", at.Sub(since).Seconds())
		}
		steps = append(steps, step)
	}
	return orNone(strings.Join(steps, ", ")), killed
}

// klogField is key's value in a structured klog line (key="v" or key=v).
func klogField(line, key string) string {
	_, rest, found := strings.Cut(line, " "+key+"=")
	if !found {
		return "?"
	}
	if strings.HasPrefix(rest, `"`) {
		value, _, _ := strings.Cut(rest[1:], `"`)
		return value
	}
	return strings.Fields(rest)[0]
}

// proxyLines are pilot-agent's own lines about its termination (not Envoy's), with their time
// from the app's exit; drainAt is its "Graceful termination period" line's, lastAt the time of
// the log's last line, both from the app's exit (zero when absent).
func (o *restartObservation) proxyLines() (lines []string, drainAt, lastAt time.Duration, terminated bool) {
	for _, line := range strings.Split(o.proxyLog, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, fields[0])
		if err != nil {
			continue
		}
		since := at.Sub(o.appExit)
		lastAt = since
		text := strings.Join(fields[3:], " ")
		if since < -time.Second || strings.HasPrefix(text, "envoy ") {
			continue
		}
		switch {
		case strings.Contains(line, "Graceful termination period"):
			if drainAt == 0 {
				drainAt = since
			}
		case strings.Contains(line, "Agent has successfully terminated"):
			terminated = true
		case strings.Contains(line, "Agent draining"), strings.Contains(line, "starting drain"), strings.Contains(line, "terminat"):
		default:
			continue
		}
		if len(text) > 100 {
			text = text[:100] + "..."
		}
		lines = append(lines, fmt.Sprintf("%+.2fs %q", since.Seconds(), text))
	}
	return lines, drainAt, lastAt, terminated
}

// describe says what the pod did, and whether it restarted in full: pilot-agent killed (gone
// within 3 s of the app's exit, without "Agent has successfully terminated"), istio-init run
// again, AllContainersRestarting seen, the same pod (UID, IP) Ready again.
func (o *restartObservation) describe() (string, bool, bool) {
	after := o.after
	lines, drainAt, lastAt, terminated := o.proxyLines()
	var parts []string
	parts = append(parts, fmt.Sprintf("the app exited 88 at %s", o.appExit.UTC().Format("15:04:05.000")))
	proxyGone := "pilot-agent (pid %d) ran on"
	if !o.agentGone.IsZero() {
		proxyGone = fmt.Sprintf("pilot-agent (pid %%d) gone %+.2fs after it (polled every 100 ms)", o.agentGone.Sub(o.appExit).Seconds())
	}
	parts = append(parts, fmt.Sprintf(proxyGone, o.agent))
	if o.proxyTerminated != nil {
		parts = append(parts, fmt.Sprintf("istio-proxy reported terminated: exit %d (%s), finishedAt %+.0fs", o.proxyTerminated.ExitCode, o.proxyTerminated.Reason,
			o.proxyTerminated.FinishedAt.Sub(o.appExit.Truncate(time.Second)).Seconds()))
	} else if !o.agentGone.IsZero() {
		parts = append(parts, "the kubelet reported no terminated state (exit code) of the old istio-proxy: removed before its status showed it")
	}
	if !o.agentGone.IsZero() {
		parts = append(parts, "containerd stopped the old istio-proxy: "+o.proxyStop+" from the app's exit")
	}
	parts = append(parts, fmt.Sprintf("pilot-agent's termination lines: %s", orNone(strings.Join(lines, ", "))))
	if drainAt != 0 && !o.agentGone.IsZero() {
		parts = append(parts, fmt.Sprintf("istio-proxy's log ends %+.2fs from the app's exit, %.2fs after its drain began (of %s), without \"Agent has successfully terminated\": %v",
			lastAt.Seconds(), (lastAt-drainAt).Seconds(), restartDrain, !terminated))
	}
	parts = append(parts, fmt.Sprintf("the kubelet's kills: %s", orNone(strings.Join(o.graceKills, "; "))))
	initAgain := false
	if status := containerStatus(after, "istio-init"); status != nil {
		initAgain = status.ContainerID != o.initBefore
		started := ""
		if status.State.Terminated != nil {
			started = fmt.Sprintf(", exit %d, started %+.2fs from the app's exit", status.State.Terminated.ExitCode, status.State.Terminated.StartedAt.Sub(o.appExit.Truncate(time.Second)).Seconds())
		}
		parts = append(parts, fmt.Sprintf("istio-init %s (restartCount %d%s; its log now %d lines, the first at %s)",
			map[bool]string{true: "ran again: a new container", false: "not run again: the same container"}[initAgain],
			status.RestartCount, started, strings.Count(strings.TrimSpace(o.initLogAfter), "\n")+1, firstLogTime(o.initLogAfter)))
	}
	proxyNew := false
	if status := containerStatus(after, "istio-proxy"); status != nil {
		proxyNew = status.ContainerID != o.proxyBefore
		parts = append(parts, fmt.Sprintf("istio-proxy now %s (restartCount %d, %s)", containerStateWord(after, "istio-proxy"), status.RestartCount,
			map[bool]string{true: "a new container", false: "the same container"}[proxyNew]))
	}
	if status := containerStatus(after, "app"); status != nil {
		parts = append(parts, fmt.Sprintf("app restartCount %d", status.RestartCount))
	}
	condition := "AllContainersRestarting never True"
	if o.restarting != nil {
		condition = fmt.Sprintf("AllContainersRestarting True (%s: %s)", o.restarting.Reason, o.restarting.Message)
	}
	parts = append(parts, condition)
	same := string(after.UID) == o.uid && after.Status.PodIP == o.ip
	parts = append(parts, fmt.Sprintf("Ready again at %s, %s (IP %s, UID %s)", readySince(after).UTC().Format("15:04:05"),
		map[bool]string{true: "the same pod", false: "a different pod"}[same], after.Status.PodIP, shortUID(string(after.UID))))
	killedFast := !o.agentGone.IsZero() && o.agentGone.Sub(o.appExit) < 3500*time.Millisecond && !terminated && o.proxySIGKILL
	restartedAll := killedFast && initAgain && proxyNew && o.restarting != nil && same
	ranOn := o.agentGone.IsZero() && !initAgain && !proxyNew && o.restarting == nil && same
	return strings.Join(parts, "; "), restartedAll, ranOn
}

func firstLogTime(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if fields := strings.Fields(line); len(fields) > 0 {
			if at, err := time.Parse(time.RFC3339Nano, fields[0]); err == nil {
				return at.UTC().Format("15:04:05.000")
			}
		}
	}
	return "none"
}

func shortUID(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// jobHelper, ML304: a Job, outside the mesh, whose app exits 0 after 3 s beside a helper that
// serves until stopped (the test workload, marked with meshlife.io/sidecars). As a regular
// container the helper keeps the pod Running and the Job never completes; as a native sidecar
// the kubelet stops it once the app has exited and the Job completes.
func (r *reality) jobHelper(ctx context.Context) error {
	namespace := "reality-helpers"
	if err := r.apply(ctx, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+namespace+"}\n"); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	const stillRunningAfter = 20 * time.Second
	helper := fmt.Sprintf(`- name: helper
        image: %s
        imagePullPolicy: Never
        args: [serve, -listen, ":8081"]`, workloadImage)
	app := fmt.Sprintf(`- name: app
        image: %s
        imagePullPolicy: Never
        args: [sleep, -exit-after, 3s]`, workloadImage)
	variants := []struct {
		name, variant, containers string
		broken                    bool
	}{
		{"regular", "the helper a regular container (broken)", "containers:\n      " + app + "\n      " + helper, true},
		{"native", "the helper a native sidecar (fixed)", "initContainers:\n      " + helper + "\n        restartPolicy: Always\n      containers:\n      " + app, false},
	}
	for _, v := range variants {
		manifest := fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: helper-%s, namespace: %s}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {meshlife.io/sidecars: "helper"}
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 5
      %s
`, v.name, namespace, v.containers)
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	for _, v := range variants {
		job := "helper-" + v.name
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
		appEnd := containerTerminated(pod, "app")
		var completed bool
		_ = waitUntil(ctx, stillRunningAfter, job+" complete", func() (bool, error) {
			got, err := r.h.k.core.BatchV1().Jobs(namespace).Get(ctx, job, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			completed = jobCondition(got, batchv1.JobComplete)
			return completed, nil
		})
		if pod, err = r.h.k.core.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{}); err != nil {
			return err
		}
		helperState := containerStateWord(pod, "helper")
		if helper := containerTerminated(pod, "helper"); helper != nil {
			helperState += fmt.Sprintf(" (%s) %+.0fs after the app", helper.Reason, helper.FinishedAt.Sub(appEnd.FinishedAt.Time).Seconds())
		}
		var happened string
		if completed {
			happened = fmt.Sprintf("the app exited %d at %s; the helper %s; the pod %s, the Job Complete",
				appEnd.ExitCode, appEnd.FinishedAt.UTC().Format("15:04:05"), helperState, pod.Status.Phase)
		} else {
			happened = fmt.Sprintf("the app exited %d at %s; %s later the pod is still %s (the helper %s), the Job not complete",
				appEnd.ExitCode, appEnd.FinishedAt.UTC().Format("15:04:05"), stillRunningAfter, pod.Status.Phase, helperState)
		}
		result := scenarioResult{rule: "ML304", variant: v.variant, happened: happened, ok: completed != v.broken && appEnd.ExitCode == 0}
		r.record(ctx, result, namespace, podName, "ML304", v.broken)
	}
	return nil
}
