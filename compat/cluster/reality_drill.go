package main

// The stage reality's drills: `meshlife drill` run against Deployments on the real node, one
// well configured and one per known defect, each restarted under the load of meshlife's own
// load pod (the meshlife binary in an image, `meshlife drill-client`, meshed by istiod's
// injector as any client of the namespace). The clean one must end with 0 errors and exit 0;
// each defect must show errors, put down to the rule `check` gives for it, and exit 1.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// meshlifeImage is the meshlife binary with the shared libraries ldd lists for it.
const meshlifeImage = "meshlife.local/meshlife:dev"

// meshlifeImageFiles is the meshlife image's layer: /meshlife and its libraries at their host
// paths (the release binary links glibc dynamically, as tests/image packs it).
func meshlifeImageFiles(binary string) ([]imageFile, error) {
	tree := newHostTree()
	tree.put(imageFile{Path: "/meshlife", Mode: 0o755, Source: binary})
	libraries, err := sharedLibraries(binary)
	if err != nil {
		return nil, err
	}
	for _, library := range libraries {
		if err := tree.addHostPath(library); err != nil {
			return nil, err
		}
	}
	return tree.list(), nil
}

func meshlifeImageConfig() imageConfig {
	return imageConfig{Entrypoint: []string{"/meshlife"}}
}

// drillTarget is one Deployment drilled: its pod template's parts and what the drill must show.
type drillTarget struct {
	name, what string
	// annotations of the pod template, grace period, the app's args, its probe and preStop.
	annotations []string
	grace       int
	args        []string
	probe       bool
	preStop     string
	// the drill's own flags beyond the common ones.
	drillArgs []string
	// port is the app's port, named as the Service's (8080 "http" unless set).
	port     int
	portName string
	// grpcPort, when set, is a second port of the app and the Service: "grpc", appProtocol grpc.
	grpcPort   int
	wantStream bool
	// rule the errors must be put down to; "" for the clean one (0 errors) or for a defect
	// whose errors no rule predicts (wantCause then names the observed cause).
	rule, wantCause string
	clean           bool
	// wantNote is a note the report must hold (what the event did).
	wantNote string
}

func drillTargets() []drillTarget {
	classic := `sidecar.istio.io/nativeSidecar: "false"`
	return []drillTarget{
		{
			name: "clean", what: "readinessProbe, app serving 4s past SIGTERM, drain 5s of grace 30s",
			annotations: []string{classic, holdAnnotation}, grace: 30,
			args:  []string{"serve", "-listen", ":8080", "-unready-on-term", "-shutdown-delay", "4s"},
			probe: true, clean: true,
		},
		{
			name: "scale-down", what: "as drill-clean, scaled down from 2 replicas to 1 (and back)",
			annotations: []string{classic, holdAnnotation}, grace: 30,
			args:  []string{"serve", "-listen", ":8080", "-unready-on-term", "-shutdown-delay", "4s"},
			probe: true, clean: true,
			drillArgs: []string{"--event", "scale-down"},
		},
		{
			name: "drain-past-grace", what: "terminationDrainDuration 20s past grace 5s, requests of 8s",
			annotations: []string{classic, `proxy.istio.io/config: '{"holdApplicationUntilProxyStarts": true, "terminationDrainDuration": "20s"}'`},
			grace:       5,
			args:        []string{"serve", "-listen", ":8080", "-unready-on-term", "-shutdown-delay", "20s", "-drain", "20s"},
			probe:       true,
			// Requests that outlast the grace period: those in flight at the deletion are still
			// carried when the kubelet kills the pod.
			drillArgs: []string{"--path", "/delay?d=8s", "--timeout", "12s", "--rate", "10"},
			rule:      "ML401",
		},
		{
			name: "no-readiness", what: "no readinessProbe, app loading 4s",
			annotations: []string{classic, holdAnnotation}, grace: 30,
			args: []string{"serve", "-listen", ":8080", "-listen-after", "4s", "-shutdown-delay", "4s"},
			rule: "ML502",
		},
		{
			name: "no-prestop", what: "readinessProbe, no preStop, app exiting at SIGTERM",
			annotations: []string{classic, holdAnnotation}, grace: 30,
			args:  []string{"serve", "-listen", ":8080", "-drain", "0s"},
			probe: true,
			// The race lasts as long as the callers' proxies take to learn of the removal (a
			// few hundred ms): a higher rate sends it more calls.
			drillArgs: []string{"--rate", "50"},
			wantCause: "stopped serving while still an endpoint",
		},
		{
			name: "streams-cut", what: "WebSocket server dropping its streams at exit, no preStop",
			annotations: []string{classic, holdAnnotation}, grace: 30,
			args:  []string{"ws-server", "-listen", ":8081", "-every", "100ms"},
			probe: true, port: 8081, portName: "ws",
			drillArgs:  []string{"--port", "ws", "--websocket", "/ws", "--streams", "4"},
			rule:       "ML404",
			wantStream: true,
		},
		{
			name: "grpc-cut", what: "gRPC server stopping hard at SIGTERM (its streams reset), no preStop",
			annotations: []string{classic, holdAnnotation}, grace: 30,
			args:  []string{"grpc-server", "-listen", ":9090", "-http-listen", ":8080", "-every", "100ms", "-drain", "0s"},
			probe: true, grpcPort: 9090,
			// The Service's gRPC port is found by its appProtocol.
			drillArgs:  []string{"--grpc", "/meshlife.Stream/Ticks", "--streams", "4"},
			rule:       "ML404",
			wantStream: true,
		},
	}
}

func (t drillTarget) manifest(namespace string) string {
	port, portName := t.port, t.portName
	if port == 0 {
		port, portName = 8080, "http"
	}
	probe := ""
	if t.probe {
		probe = fmt.Sprintf("\n        readinessProbe: {httpGet: {path: /ready, port: %d}, periodSeconds: 1}", port)
	}
	lifecycle := ""
	if t.preStop != "" {
		lifecycle = "\n        lifecycle: {preStop: " + t.preStop + "}"
	}
	containerPorts := fmt.Sprintf("{name: %s, containerPort: %d}", portName, port)
	servicePorts := fmt.Sprintf("{name: %s, port: 80, targetPort: %d}", portName, port)
	if t.grpcPort != 0 {
		containerPorts += fmt.Sprintf(", {name: grpc, containerPort: %d}", t.grpcPort)
		servicePorts += fmt.Sprintf(", {name: grpc, port: %[1]d, targetPort: %[1]d, appProtocol: grpc}", t.grpcPort)
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: drill-%[1]s, namespace: %[2]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: drill-%[1]s}}
  template:
    metadata:
      labels: {app: drill-%[1]s}
      annotations: {%[3]s}
    spec:
      terminationGracePeriodSeconds: %[4]d
      containers:
      - name: app
        image: %[5]s
        imagePullPolicy: Never
        args: [%[6]s]
        ports: [%[9]s]%[7]s%[8]s
---
apiVersion: v1
kind: Service
metadata: {name: drill-%[1]s, namespace: %[2]s}
spec:
  selector: {app: drill-%[1]s}
  ports: [%[10]s]
`, t.name, namespace, strings.Join(t.annotations, ", "), t.grace, workloadImage, quoteArgs(t.args), probe, lifecycle, containerPorts, servicePorts)
}

// drillReport is what the checks read of `meshlife drill -o json`.
type drillReport struct {
	Phases []struct {
		Phase          string         `json:"phase"`
		Calls          int            `json:"calls"`
		Errors         int            `json:"errors"`
		ErrorsByReason map[string]int `json:"errorsByReason"`
	} `json:"phases"`
	Attributions []struct {
		Rule   string `json:"rule"`
		Cause  string `json:"cause"`
		Errors int    `json:"errors"`
	} `json:"attributions"`
	Streams *struct {
		Opened         int `json:"opened"`
		ClosedByServer int `json:"closedByServer"`
		Cuts           []struct {
			Rule string `json:"rule"`
		} `json:"cuts"`
	} `json:"streams"`
	Load         string   `json:"load"`
	Event        string   `json:"event"`
	Unattributed int      `json:"unattributed"`
	Predicted    []string `json:"predicted"`
	Notes        []string `json:"notes"`
}

func (d drillReport) totals() (calls, errors int) {
	for _, phase := range d.Phases {
		// The load pod's own start and end do not count (as the drill's exit code does not).
		if phase.Phase == "warmUp" || phase.Phase == "coolDown" {
			continue
		}
		calls += phase.Calls
		errors += phase.Errors
	}
	return calls, errors
}

// drills restarts each target under load and checks what the drill reports.
func (r *reality) drills(ctx context.Context) error {
	namespace := "reality-drill"
	if err := r.apply(ctx, meshedNamespace(namespace)); err != nil {
		return err
	}
	defer r.removeNamespace(ctx, namespace)
	targets := drillTargets()
	for _, target := range targets {
		if err := r.apply(ctx, target.manifest(namespace)); err != nil {
			return err
		}
	}
	for _, target := range targets {
		name := "drill-" + target.name
		if err := waitUntil(ctx, 180*time.Second, "deployment/"+name+" available", func() (bool, error) {
			deployment, err := r.h.k.core.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return deployment.Status.AvailableReplicas == 2 && deployment.Status.UpdatedReplicas == 2, nil
		}); err != nil {
			return err
		}
	}
	fmt.Println("\n  drills: each Deployment restarted under meshlife drill's load")
	for _, target := range targets {
		r.drill(ctx, namespace, target)
	}
	return nil
}

func (r *reality) drill(ctx context.Context, namespace string, target drillTarget) {
	name := "drill-" + target.name
	args := []string{"drill", "deployment/" + name, "-n", namespace, "--kubeconfig", r.h.cp.adminKC,
		"--yes", "--image", meshlifeImage, "--image-pull-policy", "Never",
		"--before", "5s", "--after", "5s", "--settle-timeout", "3m", "-o", "json"}
	args = append(args, target.drillArgs...)
	started := time.Now()
	run, err := r.h.runMeshlife(args...)
	took := time.Since(started)
	evidence := filepath.Join(r.dir, "evidence", "drill-"+target.name+".json")
	_ = os.MkdirAll(filepath.Dir(evidence), 0o755)
	_ = os.WriteFile(evidence, []byte(run.stdout+"\n--- stderr\n"+run.stderr), 0o644)
	if err != nil {
		r.h.fail("drill %s: %v", name, err)
		return
	}
	var report drillReport
	if jsonErr := json.Unmarshal([]byte(run.stdout), &report); jsonErr != nil {
		r.h.fail("drill %s: exit %d, no JSON report (%v): %s", name, run.code, jsonErr, firstLine(run.stderr))
		return
	}
	calls, errors := report.totals()
	cut, cutByRule := 0, 0
	if report.Streams != nil {
		cut = len(report.Streams.Cuts)
		for _, one := range report.Streams.Cuts {
			if one.Rule != "" && one.Rule == target.rule {
				cutByRule++
			}
		}
	}
	// Errors per rule (or per observed cause, where no rule predicts it), in first-seen order.
	var labels []string
	counts := map[string]int{}
	causes := 0
	for _, group := range report.Attributions {
		label := group.Rule
		if label == "" {
			label = "the endpoint's removal racing the shutdown"
		}
		if _, seen := counts[label]; !seen {
			labels = append(labels, label)
		}
		counts[label] += group.Errors
		if (target.rule != "" && group.Rule == target.rule) || (target.wantCause != "" && strings.Contains(group.Cause, target.wantCause)) {
			causes += group.Errors
		}
	}
	parts := make([]string, 0, len(labels)+1)
	for _, label := range labels {
		parts = append(parts, fmt.Sprintf("%s (%d)", label, counts[label]))
	}
	if cutByRule > 0 {
		parts = append(parts, fmt.Sprintf("%s (%d streams)", target.rule, cutByRule))
	}
	attributed := "no rule"
	if len(parts) > 0 {
		attributed = strings.Join(parts, ", ")
	}
	predictedText := strings.Join(report.Predicted, ", ")
	if predictedText == "" {
		predictedText = "nothing"
	}
	fmt.Printf("  drill deployment/%s (%s): %d requests, %d errors, %d streams cut, attributed to %s; exit %d in %.0fs\n",
		name, target.what, calls, errors, cut, attributed, run.code, took.Seconds())
	if calls == 0 {
		r.h.fail("drill %s: no calls were read from the load pod: %s", name, strings.Join(report.Notes, "; "))
		return
	}
	notes := strings.Join(report.Notes, "; ")
	if target.wantNote != "" && !strings.Contains(notes, target.wantNote) {
		r.h.fail("drill %s: the report does not say %q: %s", name, target.wantNote, notes)
	}
	if target.clean {
		r.h.check(errors == 0 && run.code == 0,
			"drill %s: a well-configured Deployment loses nothing to %s (errors %d, exit %d; check predicted %s)", name, report.Event, errors, run.code, predictedText)
		return
	}
	predicted := target.rule == "" || containsPrefix(report.Predicted, target.rule)
	if target.wantStream {
		r.h.check(cut > 0 && cutByRule > 0 && run.code == 1 && predicted,
			"drill %s: the streams are cut (%d cut, %d put down to %s, exit %d; check predicted %s)",
			name, cut, cutByRule, target.rule, run.code, predictedText)
		return
	}
	r.h.check(errors > 0 && run.code == 1 && causes > 0 && predicted,
		"drill %s: the defect shows (errors %d, exit %d, %d put down to %s; check predicted %s)",
		name, errors, run.code, causes, firstNonEmpty(target.rule, target.wantCause), predictedText)
}

func containsPrefix(items []string, prefix string) bool {
	for _, item := range items {
		if strings.HasPrefix(item, prefix) {
			return true
		}
	}
	return false
}

func firstNonEmpty(values ...string) string {
	for _, value := range values {
		if value != "" {
			return value
		}
	}
	return ""
}
