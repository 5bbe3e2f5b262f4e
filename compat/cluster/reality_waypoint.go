package main

// ML603 on the real node: a waypoint's proxy is Envoy under pilot-agent, which answers SIGTERM
// by draining for terminationDrainDuration and then exits. The stage runs no ambient data plane
// (istio.go: upstream Envoy has none of the filters waypoints are configured with), so the
// waypoint pod is built here as istiod's gateway controller renders one: the proxy container
// istiod's injector makes (its image, environment, volumes and identity), running `proxy
// waypoint` with the labels istiod puts on waypoint pods, alone in its pod. What is judged is
// pilot-agent's own drain against the kubelet's grace period, which needs no configuration
// from istiod. One change to what pilot-agent does: a waypoint's Envoy bootstrap always holds
// Istio's metadata-discovery extension (pkg/bootstrap/config.go, "Waypoint overrides"), which
// upstream Envoy lacks and exits on; the waypoint reads Istio's own bootstrap template with
// that block turned off, through pilot-agent's ISTIO_BOOTSTRAP (pkg/bootstrap/instance.go).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// waypointDrain is the drain the waypoint's proxy config asks for: Istio's default.
const waypointDrain = "5s"

// waypointBootstrap names the ConfigMap, volume and folder of the waypoint's bootstrap template.
const waypointBootstrap = "waypoint-bootstrap"

// waypointGrace, ML603: a waypoint with Istio's pre-1.28 grace period of 2 s is killed 2 s
// into its 5 s drain; with the default 30 s (Istio 1.28 and later) it drains and exits.
func (r *reality) waypointGrace(ctx context.Context) error {
	injecting := classicNamespace + "-waypoint-inject"
	namespace := classicNamespace + "-waypoint"
	for _, manifest := range []string{
		meshedNamespace(injecting),
		fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", namespace),
	} {
		if err := r.apply(ctx, manifest); err != nil {
			return err
		}
	}
	defer r.removeNamespace(ctx, injecting)
	defer r.removeNamespace(ctx, namespace)
	drainConfig := fmt.Sprintf(`{"terminationDrainDuration": %q}`, waypointDrain)
	injected, err := r.injectedPod(ctx, podManifest(injecting, "waypoint-template",
		[]string{"proxy.istio.io/config: '" + drainConfig + "'"}, 30, "serve", "-listen", ":8080"), nil)
	if err != nil {
		return fmt.Errorf("the injector's proxy for the waypoint: %w", err)
	}
	template, err := os.ReadFile(filepath.Join(r.istioModule(), "tools", "packaging", "common", "envoy_bootstrap.json"))
	if err != nil {
		return fmt.Errorf("Istio's bootstrap template: %w", err)
	}
	const discovery = "{{- if .metadata_discovery }}"
	if !strings.Contains(string(template), discovery) {
		return fmt.Errorf("Istio's bootstrap template has no %q block to turn off", discovery)
	}
	bootstrap := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: waypointBootstrap, Namespace: namespace},
		Data:       map[string]string{"envoy_bootstrap_tmpl.json": strings.ReplaceAll(string(template), discovery, "{{- if false }}")},
	}
	if _, err := r.h.k.core.CoreV1().ConfigMaps(namespace).Create(ctx, bootstrap, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("the waypoint's bootstrap template: %w", err)
	}
	proxy := containerNamed(injected.Spec.Containers, "istio-proxy")
	if proxy == nil {
		proxy = containerNamed(injected.Spec.InitContainers, "istio-proxy")
	}
	if proxy == nil || len(proxy.Args) < 2 || proxy.Args[0] != "proxy" {
		return fmt.Errorf("the injector made no istio-proxy running `proxy sidecar`: %s", containerNames(injected))
	}
	variants := []struct {
		name, variant string
		grace         int64
		broken        bool
	}{
		{"short", "waypoint, drain " + waypointDrain + ", grace 2s as Istio rendered it before 1.28 (broken)", 2, true},
		{"default", "waypoint, drain " + waypointDrain + ", grace 30s as Istio 1.28 and later render it (fixed)", 30, false},
	}
	for _, v := range variants {
		pod := waypointPod(injected, proxy, namespace, "waypoint-"+v.name, drainConfig, v.grace)
		if _, err := r.h.k.core.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("waypoint-%s: %w", v.name, err)
		}
	}
	for _, v := range variants {
		name := "waypoint-" + v.name
		running, err := r.waitPod(ctx, namespace, name, 120*time.Second, "running its proxy", func(pod *corev1.Pod) bool {
			return containerRunning(pod, "istio-proxy")
		})
		if err != nil {
			return err
		}
		r.followDeletion(ctx, running)
		// pilot-agent starts Envoy within a few seconds of its start; Envoy that cannot load its
		// bootstrap exits as soon, so it must still run a few seconds later.
		if err := waitUntil(ctx, 30*time.Second, name+"'s pilot-agent running Envoy", func() (bool, error) {
			log, err := r.containerLog(ctx, namespace, name, "istio-proxy")
			return err == nil && strings.Contains(log, "Envoy command:"), nil
		}); err != nil {
			return err
		}
		time.Sleep(3 * time.Second)
		if pod, err := r.h.k.core.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		} else if status := containerStatus(pod, "istio-proxy"); status == nil || status.State.Running == nil || status.RestartCount > 0 {
			log, _ := r.containerLog(ctx, namespace, name, "istio-proxy")
			return fmt.Errorf("%s: istio-proxy does not keep running (%s); its log ends: %s", name, containerStateWord(pod, "istio-proxy"), lastLines(log, 5))
		}
		deleted := time.Now()
		if err := r.h.k.core.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		pod, err := r.waitPod(ctx, namespace, name, time.Duration(v.grace+30)*time.Second, "finished", func(pod *corev1.Pod) bool {
			return containerTerminated(pod, "istio-proxy") != nil
		})
		if err != nil {
			return err
		}
		end := containerTerminated(pod, "istio-proxy")
		happened := fmt.Sprintf("deleted at %s; istio-proxy exit code %d (%s) %.0fs after the deletion (grace %ds, drain %s)",
			deleted.UTC().Format("15:04:05"), end.ExitCode, end.Reason, end.FinishedAt.Sub(deleted).Seconds(), v.grace, waypointDrain)
		killed := end.ExitCode == 137
		result := scenarioResult{rule: "ML603", variant: v.variant, happened: happened, ok: killed == v.broken}
		r.record(ctx, result, namespace, name, "ML603", v.broken)
		r.release(ctx, namespace, name)
	}
	return nil
}

// waypointPod is a waypoint's pod as istiod renders it: the injected proxy alone, running
// `proxy waypoint`, with the labels istiod gives waypoint pods and no readiness gate (no
// istiod here configures a waypoint's listeners, so Envoy's readiness never comes).
func waypointPod(injected *corev1.Pod, proxy *corev1.Container, namespace, name, drainConfig string, grace int64) *corev1.Pod {
	container := *proxy.DeepCopy()
	container.Args = append([]string{"proxy", "waypoint"}, proxy.Args[2:]...)
	container.ReadinessProbe, container.StartupProbe, container.LivenessProbe = nil, nil, nil
	container.Lifecycle = nil
	container.RestartPolicy = nil
	// Istio's bootstrap template without the metadata-discovery block (see the file's head):
	// with it, upstream Envoy exits at once (`Didn't find a registered implementation for
	// 'metadata_discovery'`).
	container.Env = append(container.Env, corev1.EnvVar{Name: "ISTIO_BOOTSTRAP", Value: "/etc/istio/waypoint-bootstrap/envoy_bootstrap_tmpl.json"})
	container.VolumeMounts = append(container.VolumeMounts, corev1.VolumeMount{Name: waypointBootstrap, MountPath: "/etc/istio/waypoint-bootstrap", ReadOnly: true})
	volumes := append(append([]corev1.Volume{}, injected.Spec.Volumes...), corev1.Volume{
		Name:         waypointBootstrap,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: waypointBootstrap}}},
	})
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:       name,
			Namespace:  namespace,
			Finalizers: []string{keepFinalizer},
			Labels: map[string]string{
				"gateway.istio.io/managed":                     "istio.io-mesh-controller",
				"gateway.networking.k8s.io/gateway-class-name": "istio-waypoint",
				"gateway.networking.k8s.io/gateway-name":       "waypoint",
				"istio.io/dataplane-mode":                      "none",
				"sidecar.istio.io/inject":                      "false",
			},
			Annotations: map[string]string{"proxy.istio.io/config": drainConfig},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			ServiceAccountName:            injected.Spec.ServiceAccountName,
			Containers:                    []corev1.Container{container},
			Volumes:                       volumes,
			SecurityContext:               injected.Spec.SecurityContext,
		},
	}
}

func containerNamed(containers []corev1.Container, name string) *corev1.Container {
	for i := range containers {
		if containers[i].Name == name {
			return &containers[i]
		}
	}
	return nil
}

// waypointDrainJudged holds explain's prediction for a waypoint against its proxy's end: the
// drain's start is pilot-agent's own line, `Graceful termination period is 5s, starting...`.
func (r *reality) waypointDrainJudged(ctx context.Context, t *explainedTimeline, pod *corev1.Pod, broken bool) (string, bool) {
	killAt, okKill := t.predictedAt("shutdown", "sigkill", "")
	exitAt, okExit := t.predictedAt("shutdown", "app-exit", "istio-proxy")
	if !okKill || !okExit {
		return fmt.Sprintf("no sigkill or istio-proxy exit in the %s timeline", t.Mode), false
	}
	predictedKilled := exitAt >= killAt
	end := containerTerminated(pod, "istio-proxy")
	if end == nil {
		return "the proxy's end was not recorded", false
	}
	log, err := r.containerLog(ctx, pod.Namespace, pod.Name, "istio-proxy")
	if err != nil {
		return err.Error(), false
	}
	var drainStart time.Time
	for _, line := range strings.Split(log, "\n") {
		if stamp, text, ok := strings.Cut(line, " "); ok && strings.Contains(text, "Graceful termination period") {
			if at, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
				drainStart = at
				break
			}
		}
	}
	if drainStart.IsZero() {
		return "istio-proxy's log has no `Graceful termination period` line", false
	}
	observedExit := end.FinishedAt.Sub(drainStart)
	said := fmt.Sprintf("%s: istio-proxy %s (predicted exit %d ms, SIGKILL %d ms after SIGTERM; observed exit %.1f s after pilot-agent's drain began, code %d)", t.Mode,
		map[bool]string{true: "killed at the grace period", false: "exits at the end of its drain"}[predictedKilled],
		exitAt, killAt, observedExit.Seconds(), end.ExitCode)
	// finishedAt is cut to the second: the exit lies within a second after it.
	predicted := time.Duration(exitAt) * time.Millisecond
	agrees := predictedKilled == broken && observedExit > predicted-time.Second-250*time.Millisecond && observedExit < predicted+time.Second
	return said, agrees
}

// lastLines is the end of a log, for an error.
func lastLines(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
