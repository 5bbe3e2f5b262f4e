package main

// The diagnose stage: `meshlife diagnose pod/NAME --kubeconfig` against pods whose status and
// events reach the real API server as a kubelet writes them, and the offline mode on the same
// data read back (`kubectl get pod -o json`, `kubectl get events --field-selector ... -o json`)
// must conclude the same. Each fixture of host-test/tests/data/diagnose that has a pod.json is
// one case: its pod is created from the fixture's spec and metadata, its status written through
// the status subresource, its events (events.json) created against the pod's real uid, and a
// pod the fixture shows Terminating is deleted with the fixture's grace period. No kubelet runs,
// so no log can be read live: the live run must say so and diagnose the rest.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// diagnoseFixtures is where the fixtures are, in the repository.
const diagnoseFixtures = "host-test/tests/data/diagnose"

// diagnoseConfirmed is, per case, what the API server's data alone (a pod and its events, no
// log) must confirm: rule -> summary, as the offline mode gives it on the fixture's own
// pod.json and events.json. Every other rule must be ruled out or left open.
var diagnoseConfirmed = map[string]map[string]string{
	// The Started event of web (10:00:03) and istio-proxy's failed readiness probes (the
	// Unhealthy event, 10:00:04 to 10:00:05, count 2) with its Ready condition.
	"istio-startup-race": {
		"ML101": "web started at 10:00:03 (to the second), before istio-proxy was ready (between 10:00:05.999 and 10:00:09.999)",
	},
	"istio-hold":                {},
	"istio-job-never-completes": {"ML301": "the app finished at 02:03:41, and istio-proxy was still running when the data was taken: the Job cannot complete"},
	// SIGTERM is the proxy's Killing event (14:30:00), not the deletion: the API server sets
	// deletionTimestamp to the moment of the delete plus the grace period (now, not 14:30:30
	// as in the fixture), and meshlife takes the Killing event first, so the round trip
	// confirms what the fixture does; the grace period is the deletion's own, 30 s, as there.
	"istio-drain-killed": {
		"ML401": "istio-proxy was killed (exit 137) 30 s after SIGTERM, at the grace period (30 s, the pod's own)",
	},
	"linkerd-init-no-network": {},
	"linkerd-job-shutdown":    {},
	// The real pods of the reality stage: app's Started event (21:22:08) and istio-proxy's
	// failed startup probes (21:22:09 to 21:22:10) with its ContainersReady (21:22:13).
	"istio-real-startup-no-hold": {
		"ML101": "app started at 21:22:08 (to the second), before istio-proxy was ready (between 21:22:10.999 and 21:22:13.999)",
	},
	// Ruled out by the kubelet's order: the hold's postStart hook with istio-proxy's Started
	// event counted once and no FailedPostStartHook; the native sidecar's startupProbe.
	"istio-real-startup-hold":   {},
	"istio-real-startup-native": {},
	// The reality stage's init container after istio-init: its failure is in its log only;
	// the one in the injector's order completed, and its classic app (no hold) started before
	// istio-proxy was ready.
	"istio-real-init-after-redirect": {},
	"istio-real-init-before-redirect": {
		"ML101": "app started at 21:41:03 (to the second), before istio-proxy was ready (between 21:41:05.999 and 21:41:10.999)",
	},
	// The later scenarios' pods. Their apps call out from the start without the hold, so
	// ML101 is confirmed on most; the rest of each scenario's rule is in its logs, or in its
	// pod object and events alone where the kubelet recorded it:
	"istio-real-exits-drain-long": {
		"ML101": "app started at 01:04:03 (to the second), before istio-proxy was ready (after 01:04:05.999)",
	},
	// ML402 from the containers' ends: istio-proxy's exit 0 five seconds before the app's.
	"istio-real-exits-drain-short": {
		"ML101": "app started at 01:04:03 (to the second), before istio-proxy was ready (after 01:04:05.999)",
		"ML402": "istio-proxy ended (exit 0) at 01:04:13 (to the second), 5 s before app, which still ran (it ended at 01:04:18 (to the second)); app's preStop (`sleep 8`, 8 s) held its SIGTERM back; without app's log, whether its calls failed then is not seen",
	},
	// Native proxies: the startupProbe's absence is read with the app's log only.
	"istio-real-gate-kept":     {},
	"istio-real-gate-stripped": {},
	// ML102 from spec.containers' order and the Started events.
	"istio-real-order-app-first": {
		"ML101": "app started at 01:03:49 (to the second), before istio-proxy was ready (between 01:03:50 and 01:04:01.999)",
		"ML102": "app (spec.containers[0]) comes before istio-proxy (spec.containers[1]) and its hold hook (`pilot-agent wait`): the kubelet starts it without waiting for the hook; it started at 01:03:49 (to the second), before istio-proxy was ready (between 01:03:50 and 01:04:01.999)",
	},
	"istio-real-order-proxy-first": {},
	// ML405 from FailedPreStopHook, the Killing event and the app's exit 137; ML401 from
	// istio-proxy's exit 137 at the grace period.
	"istio-real-prestop-exec-past": {
		"ML101": "app started at 00:33:23 (to the second), before istio-proxy was ready (after 00:33:25.999)",
		"ML401": "istio-proxy was killed (exit 137) 5 s after SIGTERM, at the grace period (5 s, the pod's own)",
		"ML405": "app's preStop (`/workload sleep -exit-after 8s`) takes a time the spec does not say, but it was still running at the end of the grace period (5 s): the kubelet recorded FailedPreStopHook at 00:33:36 (to the second), as the container was killed under it; the kubelet's Killing event says it began to stop it at 00:33:29 (to the second), abandoned the hook at the grace period and gave the app 2 s after SIGTERM; app was killed: exit 137 at 00:33:36 (to the second), 7 s after the Killing",
	},
	"istio-real-prestop-none": {
		"ML101": "app started at 00:33:24 (to the second), before istio-proxy was ready (after 00:33:25.999)",
	},
	"istio-real-prestop-sleep-at": {
		"ML101": "app started at 00:33:24 (to the second), before istio-proxy was ready (after 00:33:25.999)",
		"ML401": "istio-proxy was killed (exit 137) 5 s after SIGTERM, at the grace period (5 s, the pod's own (its deletionGracePeriodSeconds of 0 is the kubelet's final deletion once its containers had stopped))",
		"ML405": "app's preStop (`sleep 5s`, 5 s) is not shorter than the grace period (5 s): the kubelet's Killing event says it began to stop it at 00:33:29 (to the second), abandoned the hook at the grace period and gave the app 2 s after SIGTERM; app was killed: exit 137 at 00:33:36 (to the second), 7 s after the Killing",
	},
	"istio-real-prestop-within": {
		"ML101": "app started at 00:33:23 (to the second), before istio-proxy was ready (after 00:33:25.999)",
	},
	// ML502 needs the app's listening line, in its log.
	"istio-real-readiness-no-probe": {
		"ML101": "app started at 00:33:38 (to the second), before istio-proxy was ready (between 00:33:40.999 and 00:33:41.999)",
	},
	"istio-real-readiness-probe": {
		"ML101": "app started at 00:33:38 (to the second), before istio-proxy was ready (between 00:33:40.999 and 00:33:47.999)",
	},
	// Derived from the hold pod: its hook failed (FailedPostStartHook at 21:23:08), the app
	// started at 21:23:13, istio-proxy again at 21:23:14.
	"istio-startup-hold-hook-failed": {
		"ML101": "app started at 21:23:13 (to the second), before istio-proxy was ready (after 21:23:14); istio-proxy's postStart hook had failed (at 21:23:08 (to the second)): the kubelet stops the proxy and starts the containers after it anyway",
	},
	// The rules of 2026 (issue 43). ML406 is read from istio-proxy's log only, so the pod
	// and its events confirm nothing about it; the short-drain pod's app outlived its proxy
	// (ML402, from the containers' ends). ML407 from the restart counts, the condition and
	// the kubelet's Killing (the real 1.35 pod keeps no lastState); the restart-one pod's app
	// restarted alone. ML304 from the containers' states: the app ended, the helper ran on.
	"istio-real-listeners-long-drain": {},
	"istio-real-listeners-native":     {},
	"istio-real-listeners-short-drain": {
		"ML402": "istio-proxy ended (exit 0) at 11:09:34 (to the second), 3 s before app, which still ran (it ended at 11:09:37 (to the second)); app's preStop (`sleep 12`, 12 s) held its SIGTERM back; without app's log, whether its calls failed then is not seen",
	},
	"istio-real-restart-all": {
		"ML407": "app's RestartAllContainers rule (exit codes In [88]) restarted every container in place: istio-proxy restarted with app (restartCount 1 each); istio-init ran again (restartCount 1); the pod's AllContainersRestarting condition is False, last changed at 11:10:40; the kubelet killed istio-proxy at 11:10:37: the proxy was killed with the app, without its preStop or drain, and its connections cut",
	},
	"istio-real-restart-one": {},
	// The reality stage's waypoint pods (ML603): the proxy's exit 137 at the 2 s grace period,
	// from the Killing event and finishedAt, both to the second; the fixed one exited 0.
	"istio-real-waypoint-killed": {
		"ML603": "istio-proxy was killed (exit 137) 3 s after SIGTERM, at the grace period (2 s, the pod's own)",
	},
	"istio-real-waypoint-drained": {},
	"istio-restart-all-containers": {
		"ML407": "app's RestartAllContainers rule (exit codes In [88]) restarted every container in place: istio-proxy restarted with app (restartCount 1 each); its earlier run ended at 11:10:39 (Error (exit 137)), 2 s after the app's at 11:10:37; istio-init ran again (restartCount 1); the pod's AllContainersRestarting condition is False, last changed at 11:10:40; the kubelet killed istio-proxy at 11:10:37: the proxy was killed with the app, without its preStop or drain, and its connections cut",
	},
	"job-helper-cloud-sql-proxy": {
		"ML304": "report exited 0 at 02:07:41; \"cloud-sql-proxy\" (a helper the rule says runs until stopped) was still running 1 s after the app's end (at 02:07:42, the data's last moment): the pod stays Running and its Job cannot complete",
	},
	"job-helper-native-sidecar": {},
	"real-job-helper-native":    {},
	"real-job-helper-regular": {
		"ML304": "app exited 0 at 11:10:49; \"helper\" (a helper the rule says runs until stopped) was still running 19 s after the app's end (at 11:11:08, the data's last moment): the pod stays Running and its Job cannot complete",
	},
}

// diagnosis is one run of `meshlife diagnose -o json`.
type diagnosis struct {
	Diagnoses []struct {
		Pod         string `json:"pod"`
		Conclusions []struct {
			Rule    string `json:"rule"`
			Status  string `json:"status"`
			Summary string `json:"summary"`
		} `json:"conclusions"`
	} `json:"diagnoses"`
	Notes  []string `json:"notes"`
	Errors []string `json:"errors"`
	code   int
	stderr string
}

// lines are each diagnosed pod's conclusions, one `pod rule status: summary` each, in order.
func (d diagnosis) lines() []string {
	var out []string
	for _, pod := range d.Diagnoses {
		for _, c := range pod.Conclusions {
			out = append(out, fmt.Sprintf("%s %s %s: %s", pod.Pod, c.Rule, c.Status, c.Summary))
		}
	}
	return out
}

// confirmed is rule -> summary of what the run confirms.
func (d diagnosis) confirmed() map[string]string {
	out := map[string]string{}
	for _, pod := range d.Diagnoses {
		for _, c := range pod.Conclusions {
			if c.Status == "confirmed" {
				out[c.Rule] = c.Summary
			}
		}
	}
	return out
}

func (h *harness) diagnoseRun(args ...string) (diagnosis, error) {
	run, err := h.runMeshlife(append([]string{"diagnose"}, args...)...)
	if err != nil {
		return diagnosis{}, err
	}
	var d diagnosis
	if err := json.Unmarshal([]byte(run.stdout), &d); err != nil {
		return diagnosis{}, fmt.Errorf("meshlife diagnose %s (exit %d) printed no JSON: %v\n%s",
			strings.Join(args, " "), run.code, err, run.stderr)
	}
	d.code, d.stderr = run.code, run.stderr
	return d, nil
}

// diagnoseCase is one fixture and what was made of it in the API server.
type diagnoseCase struct {
	name      string
	dir       string
	fixture   corev1.Pod
	events    []corev1.Event
	pod       *corev1.Pod
	namespace string
}

func (h *harness) runDiagnose(ctx context.Context) error {
	fmt.Println("\ndiagnose: meshlife diagnose pod/NAME --kubeconfig against pods and events written as a kubelet writes them, and the offline mode on the same data")
	started := time.Now()
	dirs, err := filepath.Glob(filepath.Join(h.repo, diagnoseFixtures, "*", "pod.json"))
	if err != nil {
		return err
	}
	sort.Strings(dirs)
	cases, same := 0, 0
	for _, podFile := range dirs {
		name := filepath.Base(filepath.Dir(podFile))
		c, err := h.createDiagnoseCase(ctx, name, filepath.Dir(podFile))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		cases++
		if h.judgeDiagnoseCase(ctx, c) {
			same++
		}
		if err := h.removeDiagnoseCase(ctx, c); err != nil {
			return fmt.Errorf("%s: removing it: %w", name, err)
		}
	}
	line := fmt.Sprintf("diagnose: %d fixture pods through the API server, %d diagnosed live as offline with every check passing (%.1fs)", cases, same, time.Since(started).Seconds())
	fmt.Println(line)
	h.summary = append(h.summary, line)
	return nil
}

// createDiagnoseCase writes the fixture into the API server as the kubelet and the scheduler
// would have: the pod (bound to its node), its status, its events, its deletion.
func (h *harness) createDiagnoseCase(ctx context.Context, name, dir string) (*diagnoseCase, error) {
	c := &diagnoseCase{name: name, dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, "pod.json"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &c.fixture); err != nil {
		return nil, fmt.Errorf("pod.json: %w", err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "events.json")); err == nil {
		var list corev1.EventList
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("events.json: %w", err)
		}
		c.events = list.Items
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	c.namespace = c.fixture.Namespace
	if err := ensureNamespace(ctx, h.k, c.namespace); err != nil {
		return nil, err
	}
	// kube-controller-manager, not run here, makes `default`; the pods name their own account,
	// and the ServiceAccount admission refuses a pod whose account is missing.
	account := c.fixture.Spec.ServiceAccountName
	if account == "" {
		account = "default"
	}
	_, err = h.k.core.CoreV1().ServiceAccounts(c.namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: account}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("ServiceAccount %s/%s: %w", c.namespace, account, err)
	}
	pods := h.k.core.CoreV1().Pods(c.namespace)
	// The spec as the fixture has it (spec.nodeName kept: the pod is scheduled), and the
	// metadata a user or controller gives; what the API server sets is its own. The
	// finalizers too: a pod deleted with grace period 0 goes at once, and only a finalizer
	// keeps it readable, Terminating, as the reality stage kept its pods.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.fixture.Name, Namespace: c.namespace, Labels: c.fixture.Labels,
			Annotations: c.fixture.Annotations, OwnerReferences: c.fixture.OwnerReferences,
			Finalizers: c.fixture.Finalizers,
		},
		Spec: c.fixture.Spec,
	}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{FieldManager: "cluster-compat"})
	if err != nil {
		return nil, fmt.Errorf("creating pod %s/%s: %w", c.namespace, pod.Name, err)
	}
	if c.fixture.DeletionTimestamp != nil {
		// Deleted before its status is written, as it was while it ran: the API server deletes
		// a pod that ended (Succeeded, Failed) with grace period 0 whatever is asked. No
		// kubelet confirms the stop, so the pod stays, Terminating: deletionTimestamp is the
		// delete plus the grace period, as the API server sets it.
		grace := c.fixture.DeletionGracePeriodSeconds
		if grace == nil {
			grace = c.fixture.Spec.TerminationGracePeriodSeconds
		}
		if err := pods.Delete(ctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: grace}); err != nil {
			return nil, fmt.Errorf("deleting pod %s/%s: %w", c.namespace, pod.Name, err)
		}
		if created, err = pods.Get(ctx, created.Name, metav1.GetOptions{}); err != nil {
			return nil, fmt.Errorf("pod %s/%s after its graceful delete: %w", c.namespace, pod.Name, err)
		}
		if created.DeletionTimestamp == nil {
			return nil, fmt.Errorf("pod %s/%s: the API server set no deletionTimestamp", c.namespace, pod.Name)
		}
	}
	// status.qosClass is the API server's, set at the create from the spec's resources and
	// immutable: the fixtures say Burstable of containers whose resources they leave out.
	qos := created.Status.QOSClass
	created.Status = c.fixture.Status
	created.Status.QOSClass = qos
	if created, err = pods.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "cluster-compat"}); err != nil {
		return nil, fmt.Errorf("the status of pod %s/%s: %w", c.namespace, pod.Name, err)
	}
	c.pod = created
	// The events as the kubelet (and the scheduler, for Scheduled) record them: the pod's
	// reference with its real uid, and the fixture's source, times, count, type, reason and
	// message.
	for _, fixture := range c.events {
		event := &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: fixture.Name, Namespace: c.namespace},
			InvolvedObject: corev1.ObjectReference{
				Kind: "Pod", APIVersion: "v1", Namespace: c.namespace, Name: created.Name,
				UID: created.UID, ResourceVersion: created.ResourceVersion, FieldPath: fixture.InvolvedObject.FieldPath,
			},
			Reason: fixture.Reason, Message: fixture.Message, Source: fixture.Source,
			FirstTimestamp: fixture.FirstTimestamp, LastTimestamp: fixture.LastTimestamp,
			Count: fixture.Count, Type: fixture.Type, EventTime: fixture.EventTime,
			ReportingController: fixture.ReportingController, ReportingInstance: fixture.ReportingInstance,
			// A real kubelet's and scheduler's events (the reality stage's pods) carry eventTime,
			// which the API server accepts only with the action beside it.
			Action: fixture.Action,
		}
		if _, err := h.k.core.CoreV1().Events(c.namespace).Create(ctx, event, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("event %s: %w", fixture.Name, err)
		}
	}
	return c, nil
}

// readBack writes the pod and its events as `kubectl get pod NAME -o json` and `kubectl get
// events --field-selector involvedObject.kind=Pod,involvedObject.name=NAME -o json` give them.
func (h *harness) readBack(ctx context.Context, c *diagnoseCase, dir string) (podFile, eventsFile string, err error) {
	rest := h.k.core.CoreV1().RESTClient()
	raw, err := rest.Get().Namespace(c.namespace).Resource("pods").Name(c.pod.Name).DoRaw(ctx)
	if err != nil {
		return "", "", err
	}
	var pod map[string]interface{}
	if err := json.Unmarshal(raw, &pod); err != nil {
		return "", "", err
	}
	// kubectl leaves managedFields out (--show-managed-fields=false).
	delete(pod["metadata"].(map[string]interface{}), "managedFields")
	raw, err = rest.Get().Namespace(c.namespace).Resource("events").
		Param("fieldSelector", "involvedObject.kind=Pod,involvedObject.name="+c.pod.Name).DoRaw(ctx)
	if err != nil {
		return "", "", err
	}
	var served struct {
		Items []map[string]interface{} `json:"items"`
	}
	if err := json.Unmarshal(raw, &served); err != nil {
		return "", "", err
	}
	// kubectl prints a v1 List whose items carry their apiVersion and kind.
	items := []interface{}{}
	for _, item := range served.Items {
		item["apiVersion"], item["kind"] = "v1", "Event"
		delete(item["metadata"].(map[string]interface{}), "managedFields")
		items = append(items, item)
	}
	list := map[string]interface{}{"apiVersion": "v1", "kind": "List", "items": items,
		"metadata": map[string]interface{}{"resourceVersion": ""}}
	podFile, eventsFile = filepath.Join(dir, "pod.json"), filepath.Join(dir, "events.json")
	for file, value := range map[string]interface{}{podFile: pod, eventsFile: list} {
		data, err := json.MarshalIndent(value, "", "    ")
		if err != nil {
			return "", "", err
		}
		if err := writeFile(file, append(data, '\n')); err != nil {
			return "", "", err
		}
	}
	if len(served.Items) != len(c.events) {
		return "", "", fmt.Errorf("%d events created, %d listed by the field selector", len(c.events), len(served.Items))
	}
	return podFile, eventsFile, nil
}

// judgeDiagnoseCase runs both modes and compares; it says whether every check passed.
func (h *harness) judgeDiagnoseCase(ctx context.Context, c *diagnoseCase) bool {
	failures := h.failures
	dir := filepath.Join(h.dir, "diagnose", c.name)
	podFile, eventsFile, err := h.readBack(ctx, c, dir)
	if err != nil {
		h.fail("%s: reading pod %s/%s back: %v", c.name, c.namespace, c.pod.Name, err)
		return false
	}
	offline, err := h.diagnoseRun(podFile, eventsFile, "-o", "json")
	if err != nil {
		h.fail("%s: offline: %v", c.name, err)
		return false
	}
	live, err := h.diagnoseRun("pod/"+c.pod.Name, "-n", c.namespace, "--kubeconfig", h.cp.adminKC, "-o", "json")
	if err != nil {
		h.fail("%s: live: %v", c.name, err)
		return false
	}
	terminating := ""
	if c.pod.DeletionTimestamp != nil {
		terminating = ", Terminating"
	}
	fmt.Printf("  %s: pod %s/%s (%d events%s)\n", c.name, c.namespace, c.pod.Name, len(c.events), terminating)
	h.check(offline.code != 2 && len(offline.Errors) == 0 && len(offline.Diagnoses) == 1,
		"%s: offline on the pod and events read back: exit %d, %d pods, errors %v", c.name, offline.code, len(offline.Diagnoses), offline.Errors)
	h.check(live.code != 2 && len(live.Errors) == 0 && len(live.Diagnoses) == 1,
		"%s: live pod/%s: exit %d, %d pods, errors %v", c.name, c.pod.Name, live.code, len(live.Diagnoses), live.Errors)
	h.compareDiagnoses(c.name, "offline", "live pod/"+c.pod.Name, offline, live)
	// No kubelet serves a log: the live run says, for every container, that its log was not
	// read, and diagnoses without.
	var unread []string
	for _, container := range append(append([]corev1.Container{}, c.pod.Spec.InitContainers...), c.pod.Spec.Containers...) {
		said := false
		for _, note := range live.Notes {
			if strings.Contains(note, "container "+container.Name+" (current run)") && strings.Contains(note, "not used") {
				said = true
			}
		}
		if !said {
			unread = append(unread, container.Name)
		}
	}
	logNote := ""
	for _, note := range live.Notes {
		if strings.Contains(note, "get the log of") {
			logNote = note
			break
		}
	}
	h.check(len(unread) == 0 && strings.Contains(live.stderr, logNote),
		"%s: live: each container's log is said unread, on stderr too (%q)%s", c.name, logNote, missingList(unread))
	// The round trip through the API server loses nothing the diagnosis uses: the fixture's
	// own pod.json and events.json (no log) conclude the same.
	files := []string{filepath.Join(c.dir, "pod.json")}
	if len(c.events) > 0 {
		files = append(files, filepath.Join(c.dir, "events.json"))
	}
	if fixture, err := h.diagnoseRun(append(files, "-o", "json")...); err != nil {
		h.fail("%s: offline on the fixture: %v", c.name, err)
	} else {
		h.compareDiagnoses(c.name, "the fixture's pod.json and events.json", "the pod and events read back", fixture, offline)
	}
	// What the API server's data alone confirms.
	want := diagnoseConfirmed[c.name]
	got := offline.confirmed()
	if want == nil {
		h.fail("%s: no expectation in diagnoseConfirmed for this fixture", c.name)
	} else if !h.check(equalMaps(got, want), "%s: confirmed from the pod and its events alone: %s", c.name, ruleList(want)) {
		for rule, summary := range got {
			fmt.Printf("       got  %s: %s\n", rule, summary)
		}
		for rule, summary := range want {
			fmt.Printf("       want %s: %s\n", rule, summary)
		}
	}
	if c.name == "istio-startup-race" {
		h.deploymentDiagnoseCheck(ctx, c, live)
		h.kubectlPluginCheck(c, live)
	}
	return h.failures == failures
}

// compareDiagnoses checks that run b gives the (rule, status, summary) list and the exit code
// of run a.
func (h *harness) compareDiagnoses(name, aName, bName string, a, b diagnosis) {
	ours, theirs := stripPods(a.lines()), stripPods(b.lines())
	if !h.check(strings.Join(ours, "\n") == strings.Join(theirs, "\n") && len(ours) > 0,
		"%s: %s concludes as %s (%d conclusions, %s)", name, bName, aName, len(theirs), ruleList(b.confirmed())) {
		fmt.Printf("       %s:\n", aName)
		for _, line := range ours {
			fmt.Println("         " + line)
		}
		fmt.Printf("       %s:\n", bName)
		for _, line := range theirs {
			fmt.Println("         " + line)
		}
	}
	h.check(a.code == b.code, "%s: %s exits as %s (%d, %d)", name, bName, aName, b.code, a.code)
}

// stripPods drops the pod's name from each line when it is one pod (the lines are compared
// by rule, status and summary).
func stripPods(lines []string) []string {
	out := make([]string, len(lines))
	for i, line := range lines {
		_, rest, _ := strings.Cut(line, " ")
		out[i] = helperRunningUntil.ReplaceAllString(rest, "was still running after the app's end (until the data's end)")
	}
	return out
}

// helperRunningUntil is how long ML304 saw a helper run on after the app's end: until the
// data's last moment offline, until the pod was read live, which for a fixture replayed into
// the API server is now. Only that span may differ between the two.
var helperRunningUntil = regexp.MustCompile(`was still running [^()]* after the app's end \(at [^)]*\)`)

// deploymentDiagnoseCheck: `meshlife diagnose deployment/NAME` finds the pod by the
// Deployment's selector and concludes as pod/NAME does. No controller runs, so the Deployment
// makes no pod of its own: the fixture's pod is the one its selector matches.
func (h *harness) deploymentDiagnoseCheck(ctx context.Context, c *diagnoseCase, byPod diagnosis) {
	app := c.pod.Labels["app"]
	labels := map[string]string{"app": app}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app + "-diagnosed", Namespace: c.namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: app, Image: "registry.invalid/" + app + ":1"}}},
			},
		},
	}
	deployments := h.k.core.AppsV1().Deployments(c.namespace)
	if _, err := deployments.Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		h.fail("%s: Deployment %s/%s: %v", c.name, c.namespace, deployment.Name, err)
		return
	}
	defer func() { _ = deployments.Delete(ctx, deployment.Name, metav1.DeleteOptions{}) }()
	target := "deployment/" + deployment.Name
	live, err := h.diagnoseRun(target, "-n", c.namespace, "--kubeconfig", h.cp.adminKC, "-o", "json")
	if err != nil {
		h.fail("%s: %s: %v", c.name, target, err)
		return
	}
	var pods []string
	for _, d := range live.Diagnoses {
		pods = append(pods, d.Pod)
	}
	h.check(live.code != 2 && len(live.Errors) == 0 && len(pods) == 1 && strings.HasSuffix(pods[0], c.pod.Name),
		"%s: live %s (selector app=%s) diagnoses the pod %s: %v (exit %d, errors %v)",
		c.name, target, app, c.pod.Name, pods, live.code, live.Errors)
	h.compareDiagnoses(c.name, "pod/"+c.pod.Name, "live "+target, byPod, live)
}

// removeDiagnoseCase deletes the pod at once (no kubelet would confirm a graceful stop), its
// finalizers first, and its events; the Namespace and ServiceAccount stay, as everywhere in
// the harness.
func (h *harness) removeDiagnoseCase(ctx context.Context, c *diagnoseCase) error {
	pods := h.k.core.CoreV1().Pods(c.namespace)
	if len(c.fixture.Finalizers) > 0 {
		_, err := pods.Patch(ctx, c.pod.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	err := pods.Delete(ctx, c.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for _, event := range c.events {
		err := h.k.core.CoreV1().Events(c.namespace).Delete(ctx, event.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return waitUntil(ctx, 30*time.Second, "pod "+c.pod.Name+" gone", func() (bool, error) {
		_, err := h.k.core.CoreV1().Pods(c.namespace).Get(ctx, c.pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for key, value := range a {
		if other, ok := b[key]; !ok || other != value {
			return false
		}
	}
	return true
}

// ruleList names the confirmed rules: "ML101 confirmed", or "none confirmed".
func ruleList(confirmed map[string]string) string {
	var rules []string
	for rule := range confirmed {
		rules = append(rules, rule)
	}
	sort.Strings(rules)
	if len(rules) == 0 {
		return "none confirmed"
	}
	return strings.Join(rules, ", ") + " confirmed"
}

func missingList(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return "; not said for " + strings.Join(names, ", ")
}
