package main

// What meshlife says of each real pod, held against what happened to it: check on the pod as
// the API server stored it (injected by istiod), explain's predicted order beside the observed
// one, and diagnose pod/NAME live, reading the real container logs through the kubelet.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// explainedTimeline is the part of `meshlife explain -o json` the stage compares.
type explainedTimeline struct {
	Mode   string `json:"mode"`
	Events []struct {
		Phase     string `json:"phase"`
		Kind      string `json:"kind"`
		AtMs      int64  `json:"atMs"`
		Container string `json:"container"`
		What      string `json:"what"`
	} `json:"events"`
	Fates []struct {
		Request string `json:"request"`
		Phase   string `json:"phase"`
		Outcome string `json:"outcome"`
	} `json:"fates"`
	Completion *struct {
		Completes bool   `json:"completes"`
		Why       string `json:"why"`
	} `json:"completion"`
}

// judgePod runs check, explain and diagnose on one pod and marks result failed where what
// meshlife says of rule disagrees with the pod being broken or not.
func (r *reality) judgePod(ctx context.Context, result *scenarioResult, namespace, name, rule string, broken bool) {
	pod, err := r.h.k.core.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		result.check, result.ok = "cannot read the pod: "+err.Error(), false
		return
	}
	file, err := r.writePod(pod)
	if err != nil {
		result.check, result.ok = err.Error(), false
		return
	}
	r.saveEvidence(ctx, pod)
	r.judge(ctx, result, pod, file, rule, broken)
}

// judgeTemplate is judgePod for a rule that judges pod templates: check and explain read the
// Deployment as stored, with its Namespace, and diagnose its pod.
func (r *reality) judgeTemplate(ctx context.Context, result *scenarioResult, namespace, deployment, podName, rule string, broken bool) {
	pod, err := r.h.k.core.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		result.check, result.ok = "cannot read the pod: "+err.Error(), false
		return
	}
	object, err := r.h.k.core.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		result.check, result.ok = "cannot read the Deployment: "+err.Error(), false
		return
	}
	object.APIVersion, object.Kind = "apps/v1", "Deployment"
	object.ManagedFields = nil
	// The Namespace beside it, as `kubectl get namespace,deployment -o json` lists them: its
	// istio-injection label is what meshes the template.
	ns, err := r.h.k.core.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		result.check, result.ok = "cannot read the Namespace: "+err.Error(), false
		return
	}
	ns.APIVersion, ns.Kind = "v1", "Namespace"
	ns.ManagedFields = nil
	list := map[string]interface{}{"apiVersion": "v1", "kind": "List", "items": []interface{}{ns, object}}
	file, err := r.writeObject(namespace+"-deployment-"+deployment, list)
	if err == nil {
		_, err = r.writePod(pod)
	}
	if err != nil {
		result.check, result.ok = err.Error(), false
		return
	}
	r.saveEvidence(ctx, pod)
	r.judge(ctx, result, pod, file, rule, broken)
}

// judge holds check and explain of the file (the pod, or what made it) and diagnose of the pod
// against the pod being broken or not.
func (r *reality) judge(ctx context.Context, result *scenarioResult, pod *corev1.Pod, file, rule string, broken bool) {
	namespace, name := pod.Namespace, pod.Name

	// check: the object exactly, as kubectl get -o json gives it; for ML407 with the node's
	// kubelet version, as `kubectl get nodes` gives it (the rule needs 1.35, check assumes 1.33).
	var facts []string
	if rule == "ML407" {
		facts = []string{"--kubernetes", r.node.kubeletVersion}
	}
	flagged, err := r.checkFlags(file, rule, facts...)
	switch {
	case err != nil:
		result.check, result.ok = err.Error(), false
	case flagged == broken:
		result.check = map[bool]string{true: "flags " + rule, false: "does not flag " + rule}[flagged]
	default:
		result.check = map[bool]string{true: "flags " + rule + " on a pod that did not break", false: "misses " + rule}[flagged]
		result.ok = false
	}

	// explain: the predicted order against the observed one.
	var assumptions []string
	if rule == "ML405" {
		// The test app's own shutdown after SIGTERM, not explain's default of 1 s.
		assumptions = []string{"--app-exit", appShutdown}
	}
	if rule == "ML407" {
		// explain draws nothing of its own for ML407: its finding beside the timeline is held.
		said, agrees := r.explainFinding(file, rule, broken, facts...)
		result.explain = said
		result.ok = result.ok && agrees
	} else if timeline, err := r.explain(file, assumptions...); err != nil {
		result.explain, result.ok = err.Error(), false
	} else if said, agrees := r.explainAgrees(ctx, timeline, pod, rule, broken); agrees {
		result.explain = said
	} else {
		result.explain, result.ok = said, false
	}

	// diagnose, live: confirmed on the broken pod, ruled out on the fixed one.
	status, summary, err := r.diagnoseLive(namespace, name, rule)
	want := map[bool]string{true: "confirmed", false: "ruled-out"}[broken]
	// A cut stream is never ruled out from the server's logs alone, and only its clients
	// could confirm it (docs/cli.md): either answer but ruled-out agrees.
	streamsUndecided := rule == "ML404" && broken && status == "cannot-tell"
	// ML304 and ML407 on the fixed pod: ruled out (the Job complete, the app restarted alone),
	// or not concluded from what the pod shows; never confirmed.
	fixedUndecided := (rule == "ML304" || rule == "ML407") && !broken && status == "cannot-tell"
	// ML406 is read from istio-proxy's log, which the kubelet no longer serves once it has
	// removed the deleted pod's containers (after saveEvidence, before diagnose runs): without
	// it diagnose cannot tell, and says so; never the wrong answer.
	logGone := rule == "ML406" && status == "cannot-tell" && strings.HasPrefix(summary, "no log of istio-proxy")
	switch {
	case err != nil:
		result.diagnose, result.ok = err.Error(), false
	case status == want || streamsUndecided || fixedUndecided:
		result.diagnose = fmt.Sprintf("%s %s (%s)", rule, status, summary)
	case logGone:
		result.diagnose = fmt.Sprintf("%s %s (%s; the kubelet had removed the containers, and their logs, when diagnose read them)", rule, status, summary)
	default:
		result.diagnose, result.ok = fmt.Sprintf("%s %s, expected %s (%s)", rule, status, want, summary), false
	}
}

// writePod writes the pod as `kubectl get pod -o json` prints it.
func (r *reality) writePod(pod *corev1.Pod) (string, error) {
	copy := pod.DeepCopy()
	copy.APIVersion, copy.Kind = "v1", "Pod"
	copy.ManagedFields = nil
	return r.writeObject(pod.Namespace+"-"+pod.Name, copy)
}

// writeObject writes an object as JSON to the work folder's NAME.json.
func (r *reality) writeObject(name string, object interface{}) (string, error) {
	data, err := json.MarshalIndent(object, "", "  ")
	if err != nil {
		return "", err
	}
	file := filepath.Join(r.dir, name+".json")
	return file, os.WriteFile(file, data, 0o644)
}

// saveEvidence keeps, for a pod, what a user would paste: its object, events and the logs of
// every container with times, under the work folder's reality/evidence/NAMESPACE-NAME/.
func (r *reality) saveEvidence(ctx context.Context, pod *corev1.Pod) {
	dir := filepath.Join(r.dir, "evidence", pod.Namespace+"-"+pod.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	if data, err := os.ReadFile(filepath.Join(r.dir, pod.Namespace+"-"+pod.Name+".json")); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "pod.json"), data, 0o644)
	}
	events, err := r.h.k.core.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
	if err == nil {
		events.APIVersion, events.Kind = "v1", "List"
		for i := range events.Items {
			events.Items[i].APIVersion, events.Items[i].Kind = "v1", "Event"
			events.Items[i].ManagedFields = nil
		}
		if data, err := json.MarshalIndent(events, "", "  "); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "events.json"), data, 0o644)
		}
	}
	for _, container := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if log, err := r.containerLog(ctx, pod.Namespace, pod.Name, container.Name); err == nil {
			_ = os.WriteFile(filepath.Join(dir, container.Name+".log"), []byte(log), 0o644)
		}
	}
}

// checkFlags says whether `meshlife check -o json` finds rule in the file.
func (r *reality) checkFlags(file, rule string, facts ...string) (bool, error) {
	run, err := r.h.runMeshlife(append([]string{"check", file, "-o", "json", "--fail-on", "none"}, facts...)...)
	if err != nil || run.code != 0 {
		return false, fmt.Errorf("meshlife check %s: exit %d %v: %s", filepath.Base(file), run.code, err, firstLine(run.stderr))
	}
	var report struct {
		Findings []struct {
			Rule string `json:"rule"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(run.stdout), &report); err != nil {
		return false, fmt.Errorf("meshlife check -o json: %w", err)
	}
	for _, finding := range report.Findings {
		if finding.Rule == rule {
			return true, nil
		}
	}
	return false, nil
}

// explainFinding says whether `meshlife explain -o json` lists rule among the pod's findings:
// required on the broken pod only.
func (r *reality) explainFinding(file, rule string, broken bool, facts ...string) (string, bool) {
	run, err := r.h.runMeshlife(append([]string{"explain", file, "-o", "json"}, facts...)...)
	if err != nil || run.code != 0 {
		return fmt.Sprintf("meshlife explain %s: exit %d %v: %s", filepath.Base(file), run.code, err, firstLine(run.stderr)), false
	}
	var document []struct {
		Findings []struct {
			Rule     string `json:"rule"`
			Severity string `json:"severity"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(run.stdout), &document); err != nil {
		return "meshlife explain -o json: " + err.Error(), false
	}
	for _, spec := range document {
		for _, finding := range spec.Findings {
			if finding.Rule == rule {
				return fmt.Sprintf("lists %s (%s) beside the timeline", rule, finding.Severity), true
			}
		}
	}
	return fmt.Sprintf("does not list %s", rule), !broken
}

// explain is the pod's predicted timeline.
func (r *reality) explain(file string, assumptions ...string) (*explainedTimeline, error) {
	run, err := r.h.runMeshlife(append([]string{"explain", file, "-o", "json"}, assumptions...)...)
	if err != nil || run.code != 0 {
		return nil, fmt.Errorf("meshlife explain %s: exit %d %v: %s", filepath.Base(file), run.code, err, firstLine(run.stderr))
	}
	var document interface{}
	if err := json.Unmarshal([]byte(run.stdout), &document); err != nil {
		return nil, fmt.Errorf("meshlife explain -o json: %w", err)
	}
	found := findTimeline(document)
	if found == nil {
		return nil, fmt.Errorf("meshlife explain -o json drew no timeline for %s", filepath.Base(file))
	}
	data, _ := json.Marshal(found)
	var timeline explainedTimeline
	if err := json.Unmarshal(data, &timeline); err != nil {
		return nil, err
	}
	return &timeline, nil
}

// findTimeline is the first object in the document with both events and lanes.
func findTimeline(value interface{}) map[string]interface{} {
	switch v := value.(type) {
	case map[string]interface{}:
		if _, ok := v["events"]; ok {
			if _, ok := v["lanes"]; ok {
				return v
			}
		}
		keys := make([]string, 0, len(v))
		for key := range v {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			if found := findTimeline(v[key]); found != nil {
				return found
			}
		}
	case []interface{}:
		for _, item := range v {
			if found := findTimeline(item); found != nil {
				return found
			}
		}
	}
	return nil
}

// eventWhat is what the first event of kind in phase (for container, when given) says.
func (t *explainedTimeline) eventWhat(phase, kind, container string) string {
	for _, event := range t.Events {
		if event.Phase == phase && event.Kind == kind && (container == "" || event.Container == container) {
			return event.What
		}
	}
	return ""
}

// predictedAt is the first predicted moment of kind in phase (for container, when given).
func (t *explainedTimeline) predictedAt(phase, kind, container string) (int64, bool) {
	for _, event := range t.Events {
		if event.Phase == phase && event.Kind == kind && (container == "" || event.Container == container) {
			return event.AtMs, true
		}
	}
	return 0, false
}

// explainAgrees holds explain's prediction for rule against what the pod did.
func (r *reality) explainAgrees(ctx context.Context, t *explainedTimeline, pod *corev1.Pod, rule string, broken bool) (string, bool) {
	switch rule {
	case "ML101", "ML102", "ML103":
		appAt, okApp := t.predictedAt("startup", "app-started", "app")
		readyAt, okReady := t.predictedAt("startup", "proxy-ready", "")
		if !okApp || !okReady {
			return fmt.Sprintf("no app-started or proxy-ready in the %s timeline", t.Mode), false
		}
		predictedFirst := appAt < readyAt
		observedApp, observedReady, err := r.observedStartup(ctx, pod)
		if err != nil {
			return err.Error(), false
		}
		observedFirst := observedApp.Before(observedReady)
		said := fmt.Sprintf("%s: app %s the proxy's readiness (predicted %d ms vs %d ms; observed app %s, proxy ready %s)",
			t.Mode, map[bool]string{true: "before", false: "after"}[predictedFirst], appAt, readyAt,
			observedApp.UTC().Format("15:04:05.000"), observedReady.UTC().Format("15:04:05.000"))
		return said, predictedFirst == observedFirst
	case "ML301", "ML304":
		if t.Completion == nil {
			return "no completion in the timeline of a Job's pod", false
		}
		said := fmt.Sprintf("%s: %s", t.Mode, map[bool]string{true: "the pod completes", false: "the pod never completes"}[t.Completion.Completes])
		return said, t.Completion.Completes != broken
	case "ML603":
		return r.waypointDrainJudged(ctx, t, pod, broken)
	case "ML401":
		killAt, okKill := t.predictedAt("shutdown", "sigkill", "")
		exitAt, okExit := t.predictedAt("shutdown", "proxy-exit", "")
		if !okKill {
			return "no sigkill in the timeline", false
		}
		predictedKilled := !okExit || exitAt >= killAt
		proxy := containerTerminated(pod, "istio-proxy")
		if proxy == nil {
			return "the proxy's end was not recorded", false
		}
		// SIGTERM reached the app and the classic proxy at once; the app's own line has it to
		// the nanosecond, the kubelet's Killing event only to the second.
		appLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "app")
		if err != nil {
			return err.Error(), false
		}
		sigterm := lastEvent(workloadEvents(appLog), "sigterm")
		if sigterm == nil {
			return "the app's log has no sigterm line", false
		}
		observedExit := proxy.FinishedAt.Sub(sigterm.at)
		said := fmt.Sprintf("%s: proxy %s (predicted exit %d ms, SIGKILL %d ms after SIGTERM; observed exit %.1f s after the app's SIGTERM, code %d)", t.Mode,
			map[bool]string{true: "killed at the grace period", false: "exits before the grace period"}[predictedKilled],
			exitAt, killAt, observedExit.Seconds(), proxy.ExitCode)
		// finishedAt is cut to the second: the kill lies within a second after it.
		agrees := predictedKilled == broken
		if broken {
			predicted := time.Duration(killAt) * time.Millisecond
			agrees = agrees && observedExit > predicted-time.Second-250*time.Millisecond && observedExit < predicted+time.Second
		}
		return said, agrees
	case "ML201":
		captureAt, okCapture := t.predictedAt("startup", "capture-installed", "")
		initAt, okInit := t.predictedAt("startup", "init-container", "migrate")
		if !okCapture || !okInit {
			return fmt.Sprintf("no capture-installed or init-container migrate in the %s timeline", t.Mode), false
		}
		// explain says of each init container whether it has network ("no network: capture is
		// on and no proxy runs yet", "network direct: runs as the proxy's UID ...", "network
		// through the proxy").
		predictedNoNetwork := strings.Contains(t.eventWhat("startup", "init-container", "migrate"), "no network")
		captured, err := r.cniRedirectInstalled(pod.Name)
		if err != nil {
			return err.Error(), false
		}
		migrateLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "migrate")
		if err != nil {
			return err.Error(), false
		}
		migrated := workloadEvents(migrateLog)
		summary := lastEvent(migrated, "calls")
		if len(migrated) == 0 || summary == nil {
			return "migrate's log has no time or no call summary", false
		}
		observedAfter := migrated[0].at.After(captured)
		observedNoNetwork := summary.fields["ok"] == "0"
		said := fmt.Sprintf("%s: migrate %s, after the CNI's capture (predicted %d ms vs capture %d ms; observed redirect %s, migrate's first line %s, %s of %s calls ok)", t.Mode,
			map[bool]string{true: "without network", false: "with network"}[predictedNoNetwork], initAt, captureAt,
			captured.UTC().Format("15:04:05.000"), migrated[0].at.UTC().Format("15:04:05.000"), summary.fields["ok"], summary.fields["total"])
		return said, initAt >= captureAt && observedAfter && predictedNoNetwork == observedNoNetwork && predictedNoNetwork == broken
	case "ML202":
		captureAt, okCapture := t.predictedAt("startup", "capture-installed", "")
		initAt, okInit := t.predictedAt("startup", "init-container", "migrate")
		if !okCapture || !okInit {
			return fmt.Sprintf("no capture-installed or init-container migrate in the %s timeline", t.Mode), false
		}
		predictedAfter := initAt >= captureAt
		// Observed: istio-init's last line (its rules, written) against migrate's first.
		initLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "istio-init")
		if err != nil {
			return err.Error(), false
		}
		migrateLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "migrate")
		if err != nil {
			return err.Error(), false
		}
		captured, migrated := lastLogTime(initLog), workloadEvents(migrateLog)
		if captured.IsZero() || len(migrated) == 0 {
			return "istio-init's or migrate's log has no time", false
		}
		observedAfter := migrated[0].at.After(captured)
		said := fmt.Sprintf("%s: migrate %s the redirect (predicted %d ms vs capture %d ms; observed migrate %s, istio-init's last line %s)", t.Mode,
			map[bool]string{true: "after", false: "before"}[predictedAfter], initAt, captureAt,
			migrated[0].at.UTC().Format("15:04:05.000"), captured.UTC().Format("15:04:05.000"))
		return said, predictedAfter == observedAfter && predictedAfter == broken
	case "ML402":
		proxyAt, okProxy := t.predictedAt("shutdown", "proxy-exit", "")
		appAt, okApp := t.predictedAt("shutdown", "app-exit", "app")
		if !okProxy || !okApp {
			return fmt.Sprintf("no proxy-exit or app-exit in the %s timeline", t.Mode), false
		}
		predictedFirst := proxyAt < appAt
		proxy := containerTerminated(pod, "istio-proxy")
		appLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "app")
		if err != nil || proxy == nil {
			return fmt.Sprintf("the proxy's end or the app's log is missing (%v)", err), false
		}
		sigterm := lastEvent(workloadEvents(appLog), "sigterm")
		if sigterm == nil {
			return "the app's log has no sigterm line", false
		}
		// finishedAt is cut to the second: the proxy's end lies within the second after it.
		observedFirst := proxy.FinishedAt.Add(time.Second).Before(sigterm.at)
		said := fmt.Sprintf("%s: the proxy %s (predicted proxy exit %d ms, app exit %d ms; observed istio-proxy ended %s, the app's SIGTERM %s)", t.Mode,
			map[bool]string{true: "exits before the app", false: "outlives the app"}[predictedFirst], proxyAt, appAt,
			proxy.FinishedAt.UTC().Format("15:04:05"), sigterm.at.UTC().Format("15:04:05.000"))
		return said, predictedFirst == observedFirst && predictedFirst == broken
	case "ML405":
		killAt, okKill := t.predictedAt("shutdown", "sigkill", "")
		exitAt, okExit := t.predictedAt("shutdown", "app-exit", "app")
		if !okKill || !okExit {
			return fmt.Sprintf("no sigkill or app-exit in the %s timeline", t.Mode), false
		}
		predictedKilled := exitAt >= killAt
		app := containerTerminated(pod, "app")
		if app == nil {
			return "the app's end was not recorded", false
		}
		// The kubelet's Killing event is when it began to stop the app (the preStop's start):
		// explain's t = 0. Both it and finishedAt are cut to the second.
		killing, err := r.killingEvent(ctx, pod, "app")
		if err != nil {
			return err.Error(), false
		}
		observedExit := app.FinishedAt.Sub(killing)
		said := fmt.Sprintf("%s: app %s (predicted exit %d ms, last SIGKILL %d ms after the kubelet began stopping it; observed exit %.0f s after its Killing event, code %d)", t.Mode,
			map[bool]string{true: "killed mid-shutdown", false: "exits before its SIGKILL"}[predictedKilled], exitAt, killAt, observedExit.Seconds(), app.ExitCode)
		predicted := time.Duration(exitAt) * time.Millisecond
		inTime := observedExit > predicted-1500*time.Millisecond && observedExit < predicted+1500*time.Millisecond
		return said, predictedKilled == broken && (app.ExitCode == 137) == broken && inTime
	case "ML502":
		startedAt, okStarted := t.predictedAt("startup", "app-started", "app")
		readyAt, okReady := t.predictedAt("startup", "app-ready", "app")
		if !okStarted || !okReady {
			return fmt.Sprintf("no app-started or app-ready in the %s timeline", t.Mode), false
		}
		predictedAtOnce := readyAt <= startedAt
		appLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "app")
		if err != nil {
			return err.Error(), false
		}
		listening := lastEvent(workloadEvents(appLog), "listening")
		if listening == nil {
			return "the app's log has no listening line", false
		}
		// The Ready condition's time is cut to the second: Ready counts as before the app
		// listened only when it is a whole second before.
		observedBefore := readySince(pod).Add(time.Second).Before(listening.at)
		said := fmt.Sprintf("%s: app %s (predicted ready %d ms, started %d ms; observed pod Ready %s, app listening %s)", t.Mode,
			map[bool]string{true: "counts as ready at once", false: "ready after it starts"}[predictedAtOnce], readyAt, startedAt,
			readySince(pod).UTC().Format("15:04:05"), listening.at.UTC().Format("15:04:05.000"))
		return said, predictedAtOnce == observedBefore && predictedAtOnce == broken
	case "ML406":
		return r.listenersAgree(t, pod, broken)
	case "ML404":
		for _, fate := range t.Fates {
			if fate.Request == "long-lived-stream" {
				said := fmt.Sprintf("%s: a long-lived stream open at SIGTERM is %s", t.Mode, fate.Outcome)
				return said, (fate.Outcome == "cut") == broken
			}
		}
		return "no long-lived stream's fate in the timeline", false
	}
	return "no comparison for " + rule, false
}

// observedStartup is when the app started (its first log line) and when the proxy was ready
// (pilot-agent's "Envoy proxy is ready" line), both from the containers' own logs.
func (r *reality) observedStartup(ctx context.Context, pod *corev1.Pod) (time.Time, time.Time, error) {
	appLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "app")
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	events := workloadEvents(appLog)
	if len(events) == 0 {
		return time.Time{}, time.Time{}, fmt.Errorf("the app's log has no line of the workload")
	}
	proxyLog, err := r.containerLog(ctx, pod.Namespace, pod.Name, "istio-proxy")
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	for _, line := range strings.Split(proxyLog, "\n") {
		if strings.Contains(line, "Envoy proxy is ready") {
			at, err := time.Parse(time.RFC3339Nano, strings.Fields(line)[0])
			if err == nil {
				return events[0].at, at, nil
			}
		}
	}
	return time.Time{}, time.Time{}, fmt.Errorf("istio-proxy's log has no \"Envoy proxy is ready\" line")
}

// diagnoseLive runs `meshlife diagnose pod/NAME -n NS --kubeconfig` and returns rule's
// conclusion.
func (r *reality) diagnoseLive(namespace, name, rule string) (string, string, error) {
	run, err := r.h.runMeshlife("diagnose", "pod/"+name, "-n", namespace, "--kubeconfig", r.h.cp.adminKC, "-o", "json")
	if err != nil || (run.code != 0 && run.code != 1) {
		return "", "", fmt.Errorf("meshlife diagnose pod/%s: exit %d %v: %s", name, run.code, err, firstLine(run.stderr))
	}
	var d diagnosis
	if err := json.Unmarshal([]byte(run.stdout), &d); err != nil {
		return "", "", fmt.Errorf("meshlife diagnose -o json: %w", err)
	}
	for _, pod := range d.Diagnoses {
		for _, c := range pod.Conclusions {
			if c.Rule == rule {
				return c.Status, c.Summary, nil
			}
		}
	}
	return "absent", "no conclusion about " + rule, nil
}

// lastLogTime is the time of a `--timestamps` log's last line.
func lastLogTime(log string) time.Time {
	var last time.Time
	for _, line := range strings.Split(log, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, fields[0]); err == nil {
			last = at
		}
	}
	return last
}

// killingEvent is when the kubelet recorded Killing ("Stopping container NAME") for the
// container: the moment it began to stop it.
func (r *reality) killingEvent(ctx context.Context, pod *corev1.Pod, container string) (time.Time, error) {
	events, err := r.h.k.core.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
	if err != nil {
		return time.Time{}, err
	}
	for _, event := range events.Items {
		if event.Reason == "Killing" && event.InvolvedObject.FieldPath == "spec.containers{"+container+"}" {
			if !event.EventTime.IsZero() {
				return event.EventTime.Time, nil
			}
			return event.FirstTimestamp.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("no Killing event for %s of %s", container, pod.Name)
}
