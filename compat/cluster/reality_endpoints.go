package main

// The reality stage's scenarios about when a pod gets traffic and when it stops getting it:
// a preStop delay against the grace period and the endpoint's removal (ML405), and a pod that
// turns Ready before its app serves (ML502).

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appShutdown is how long the test app keeps serving after its SIGTERM before it exits: an
// app with work to finish, which the kubelet's last two seconds after an overrun hook cut.
const appShutdown = "3s"

// preStopPastGrace, ML405: the grace period covers the preStop hook. A hook that outlasts it is
// abandoned at the grace period; the kubelet then sends the app SIGTERM with its minimum window
// of 2 s (minimumGracePeriodInSeconds, pkg/kubelet/kuberuntime), too short for an app that
// needs 3 s: it is killed (exit 137). With the hook within the grace period the app gets SIGTERM
// when the hook ends and exits cleanly. Each pod's endpoint is watched, to show what a preStop
// delay is for: the endpoint leaves its Service at the deletion, the app's SIGTERM comes after
// the hook; without a hook the two race.
func (r *reality) preStopPastGrace(ctx context.Context) error {
	namespace := classicNamespace + "-prestop"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)

	// The API server refuses a sleep action longer than the grace period: only an exec or
	// httpGet hook can overrun it, or a sleep action of exactly the grace period.
	refusal, refused := r.sleepActionRefusal(ctx, namespace)

	sleepFor := func(seconds int) string { return fmt.Sprintf("{sleep: {seconds: %d}}", seconds) }
	variants := []struct {
		name, variant string
		grace         int
		preStop       string
		broken        bool
	}{
		{"exec-past", "exec preStop sleep 8, grace 5s (broken)", 5, `{exec: {command: [sleep, "8"]}}`, true},
		{"sleep-at", "preStop sleep action of 5s, grace 5s (broken)", 5, sleepFor(5), true},
		{"within", "preStop sleep action of 3s, grace 10s (fixed)", 10, sleepFor(3), false},
		{"none", "no preStop, grace 10s (fixed; the endpoint's removal against SIGTERM without a delay)", 10, "", false},
	}
	for _, v := range variants {
		lifecycle := ""
		if v.preStop != "" {
			lifecycle = "\n    lifecycle: {preStop: " + v.preStop + "}"
		}
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: prestop-%[1]s
  namespace: %[2]s
  finalizers: [%[3]s]
  labels: {app: prestop-%[1]s}
spec:
  terminationGracePeriodSeconds: %[4]d
  containers:
  - name: app
    image: %[5]s
    imagePullPolicy: Never
    args: [serve, -listen, ":8080", -shutdown-delay, %[6]s]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}%[7]s
---
apiVersion: v1
kind: Service
metadata: {name: prestop-%[1]s, namespace: %[2]s}
spec:
  selector: {app: prestop-%[1]s}
  ports: [{name: http, port: 80, targetPort: 8080}]
`, v.name, namespace, keepFinalizer, v.grace, workloadImage, appShutdown, lifecycle)
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}

	// All four are deleted together, each watched from its own goroutine.
	type outcome struct {
		deleted, endpointOut time.Time
		pod                  *corev1.Pod
		err                  error
	}
	outcomes := make([]outcome, len(variants))
	for _, v := range variants {
		name := "prestop-" + v.name
		if _, err := r.waitPod(ctx, namespace, name, 120*time.Second, "Ready", podReady); err != nil {
			return err
		}
		if err := r.waitEndpoint(ctx, namespace, name, true, 30*time.Second); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	for i, v := range variants {
		wg.Add(1)
		go func(i int, name string, grace int) {
			defer wg.Done()
			o := &outcomes[i]
			pod, err := r.h.k.core.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				o.err = err
				return
			}
			r.followDeletion(ctx, pod)
			o.deleted = time.Now()
			if o.err = r.h.k.core.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); o.err != nil {
				return
			}
			if o.err = r.waitEndpoint(ctx, namespace, name, false, 10*time.Second); o.err != nil {
				return
			}
			o.endpointOut = time.Now()
			o.pod, o.err = r.waitPod(ctx, namespace, name, time.Duration(grace+30)*time.Second, "finished", func(pod *corev1.Pod) bool {
				return containerTerminated(pod, "app") != nil && containerTerminated(pod, "istio-proxy") != nil
			})
		}(i, "prestop-"+v.name, v.grace)
	}
	wg.Wait()

	for i, v := range variants {
		o := outcomes[i]
		if o.err != nil {
			return fmt.Errorf("prestop-%s: %w", v.name, o.err)
		}
		name := o.pod.Name
		appLog, err := r.containerLog(ctx, namespace, name, "app")
		if err != nil {
			return err
		}
		app := containerTerminated(o.pod, "app")
		sigterm := "the app got no SIGTERM"
		if event := lastEvent(workloadEvents(appLog), "sigterm"); event != nil {
			sigterm = fmt.Sprintf("the app's SIGTERM at %+.2fs", event.at.Sub(o.deleted).Seconds())
		}
		stopping := "no Killing event"
		if killing, err := r.killingEvent(ctx, o.pod, "app"); err == nil {
			stopping = fmt.Sprintf("the kubelet's Killing at %+.0fs", killing.Sub(o.deleted.Truncate(time.Second)).Seconds())
		}
		happened := fmt.Sprintf("deleted at %s; its endpoint out of the Service at %+.2fs (as seen by a 300 ms poll); %s; %s; the app exited %d (%s) at %+.0fs (grace %ds)",
			o.deleted.UTC().Format("15:04:05.000"), o.endpointOut.Sub(o.deleted).Seconds(), stopping, sigterm, app.ExitCode, app.Reason,
			app.FinishedAt.Sub(o.deleted).Seconds(), v.grace)
		ok := (app.ExitCode == 137) == v.broken
		if v.name == "sleep-at" {
			happened += "; " + refusal
			ok = ok && refused
		}
		result := scenarioResult{rule: "ML405", variant: v.variant, happened: happened, ok: ok}
		r.record(ctx, result, namespace, name, "ML405", v.broken)
		r.release(ctx, namespace, name)
	}
	return nil
}

// proxyGoneFirst, ML402: a classic istio-proxy has no preStop: it drains from the deletion and
// exits after terminationDrainDuration, while the app still sleeps in its preStop. The app's
// calls during its own shutdown, after the hook, then find no proxy. With the drain longer than
// the hook they go through.
func (r *reality) proxyGoneFirst(ctx context.Context) error {
	namespace := classicNamespace + "-exits"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	variants := []struct {
		name, variant, drain string
		broken               bool
	}{
		{"drain-short", "preStop sleep 8, the mesh's drain of 5s, grace 20s (broken)", "5s", true},
		{"drain-long", "preStop sleep 8, terminationDrainDuration 12s, grace 20s (fixed)", "12s", false},
	}
	for _, v := range variants {
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: exits-%[1]s
  namespace: %[2]s
  finalizers: [%[3]s]
  annotations: {proxy.istio.io/config: '{"terminationDrainDuration": "%[4]s"}'}
spec:
  terminationGracePeriodSeconds: 20
  containers:
  - name: app
    image: %[5]s
    imagePullPolicy: Never
    args: [serve, -listen, ":8080", -shutdown-delay, 2s, -call-on-term, %[6]q, -call-on-term-every, 250ms, -timeout, 1s]
    readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}
    lifecycle: {preStop: {exec: {command: [sleep, "8"]}}}
`, v.name, namespace, keepFinalizer, v.drain, workloadImage, r.peerURL)
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	for _, v := range variants {
		name := "exits-" + v.name
		ready, err := r.waitPod(ctx, namespace, name, 120*time.Second, "Ready", podReady)
		if err != nil {
			return err
		}
		r.followDeletion(ctx, ready)
		if err := r.h.k.core.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		pod, err := r.waitPod(ctx, namespace, name, 60*time.Second, "finished", func(pod *corev1.Pod) bool {
			return containerTerminated(pod, "istio-proxy") != nil && containerTerminated(pod, "app") != nil
		})
		if err != nil {
			return err
		}
		shutdown, failed, err := r.shutdownCallCounts(ctx, pod)
		if err != nil {
			return err
		}
		result := scenarioResult{rule: "ML402", variant: v.variant, happened: shutdown, ok: (failed > 0) == v.broken}
		r.record(ctx, result, namespace, name, "ML402", v.broken)
		r.release(ctx, namespace, name)
	}
	return nil
}

// sleepActionRefusal says how the API server answers a preStop sleep action longer than the
// grace period (a dry run), and whether it refused it, as it must.
func (r *reality) sleepActionRefusal(ctx context.Context, namespace string) (string, bool) {
	grace, seconds := int64(5), int64(8)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prestop-sleep-past", Namespace: namespace},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: workloadImage, ImagePullPolicy: corev1.PullNever,
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: seconds}}},
			}},
		},
	}
	_, err := r.h.k.core.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		return "the API server accepted a sleep action of 8s with grace 5s", false
	}
	message := err.Error()
	if at := strings.Index(message, "lifecycle.preStop.sleep.seconds"); at >= 0 {
		message = message[at:]
	}
	return "a sleep action of 8s with grace 5s is refused by the API server: " + message, true
}

// waitEndpoint waits until the Service's EndpointSlices list a ready endpoint (ready true) or
// none (ready false).
func (r *reality) waitEndpoint(ctx context.Context, namespace, service string, ready bool, timeout time.Duration) error {
	what := map[bool]string{true: "a ready endpoint", false: "no ready endpoint"}[ready]
	return waitUntil(ctx, timeout, fmt.Sprintf("Service %s/%s with %s", namespace, service, what), func() (bool, error) {
		slices, err := r.h.k.core.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + service})
		if err != nil {
			return false, err
		}
		found := false
		for _, slice := range slices.Items {
			for _, endpoint := range slice.Endpoints {
				if endpoint.Conditions.Ready != nil && *endpoint.Conditions.Ready {
					found = true
				}
			}
		}
		return found == ready, nil
	})
}

// readinessGate, ML502: a Deployment's app that needs 8 s to load before it listens. Without a
// readinessProbe the pod turns Ready as soon as its proxy is, and the requests sent to it from
// then fail until the app listens; with the probe the pod turns Ready only once the app serves.
// The requests are the stage's own, to the pod's IP from the moment it is Ready: what its
// Service sends it once its endpoint is ready.
func (r *reality) readinessGate(ctx context.Context) error {
	namespace := classicNamespace + "-readiness"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	variants := []struct {
		name, variant, probe string
		broken               bool
	}{
		{"no-probe", "app loading 8s, no readinessProbe (broken)", "", true},
		{"probe", "app loading 8s, with a readinessProbe (fixed)", "\n        readinessProbe: {httpGet: {path: /ready, port: 8080}, periodSeconds: 1}", false},
	}
	for _, v := range variants {
		manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: loading-%[1]s, namespace: %[2]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: loading-%[1]s}}
  template:
    metadata: {labels: {app: loading-%[1]s}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: app
        image: %[3]s
        imagePullPolicy: Never
        args: [serve, -listen, ":8080", -listen-after, 8s]
        ports: [{name: http, containerPort: 8080}]%[4]s
`, v.name, namespace, workloadImage, v.probe)
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	type outcome struct {
		pod                *corev1.Pod
		ready              time.Time
		ok, failed         int
		firstOK, lastError string
		err                error
	}
	outcomes := make([]outcome, len(variants))
	var wg sync.WaitGroup
	for i, v := range variants {
		wg.Add(1)
		go func(i int, deployment string) {
			defer wg.Done()
			o := &outcomes[i]
			var name string
			if name, o.err = r.newestPod(ctx, namespace, "app="+deployment, 60*time.Second); o.err != nil {
				return
			}
			if o.pod, o.err = r.waitPod(ctx, namespace, name, 120*time.Second, "Ready", podReady); o.err != nil {
				return
			}
			o.ready = time.Now()
			// Calls every 200 ms for 12 s from Ready: past the app's 8 s of loading either way.
			client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
			for at := time.Now(); time.Since(at) < 12*time.Second; time.Sleep(200 * time.Millisecond) {
				response, err := client.Get("http://" + o.pod.Status.PodIP + ":8080/")
				switch {
				case err != nil:
					o.failed++
					o.lastError = err.Error()
				case response.StatusCode >= 400:
					o.failed++
					o.lastError = response.Status
				default:
					if o.ok == 0 {
						o.firstOK = fmt.Sprintf("%+.1fs", time.Since(o.ready).Seconds())
					}
					o.ok++
				}
				if response != nil {
					response.Body.Close()
				}
			}
		}(i, "loading-"+v.name)
	}
	wg.Wait()
	for i, v := range variants {
		o := outcomes[i]
		if o.err != nil {
			return fmt.Errorf("loading-%s: %w", v.name, o.err)
		}
		appLog, err := r.containerLog(ctx, namespace, o.pod.Name, "app")
		if err != nil {
			return err
		}
		listening := lastEvent(workloadEvents(appLog), "listening")
		if listening == nil {
			return fmt.Errorf("%s: the app's log has no listening line", o.pod.Name)
		}
		readyAt := readySince(o.pod)
		happened := fmt.Sprintf("the pod Ready at %s, the app listening at %s (%+.1fs from Ready); of the requests from Ready on, %d failed (last: %s), first ok at %s",
			readyAt.UTC().Format("15:04:05"), listening.at.UTC().Format("15:04:05.000"), listening.at.Sub(readyAt).Seconds(),
			o.failed, orNone(o.lastError), orNone(o.firstOK))
		result := scenarioResult{rule: "ML502", variant: v.variant, happened: happened, ok: (o.failed > 0) == v.broken}
		r.judgeTemplate(ctx, &result, namespace, "loading-"+v.name, o.pod.Name, "ML502", v.broken)
		r.results = append(r.results, result)
	}
	return nil
}

// readySince is when the pod's Ready condition last turned true (to the second).
func readySince(pod *corev1.Pod) time.Time {
	for _, condition := range pod.Status.Conditions {
		if condition.Type == corev1.PodReady {
			return condition.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func orNone(text string) string {
	if text == "" {
		return "none"
	}
	return text
}
