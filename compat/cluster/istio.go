package main

// istiod for the reality stage: pilot-discovery of the pinned istio.io/istio module (built by
// install.sh into bin/), run as a local process outside the cluster, with the objects of
// Istio's own istio-discovery chart in the API server, so that pods of a namespace labelled
// istio-injection=enabled are injected by Istio's own templates (classic and native) and get
// their workload certificates from istiod's CA. What differs from an in-cluster install, and
// why (each setting's source in the istio.io/istio module is named where it is set):
//   - istiod listens on loopback on free ports, except secure xDS and the CA (15012), which
//     the pods dial on the bridge's address: 0.0.0.0:15012, a fixed port pods can find.
//   - There is no cluster DNS: the proxies dial istiod at 10.244.0.1:15012 (discoveryAddress
//     and CA_ADDR) and check its certificate for the name istiod.istio-system.svc (ISTIOD_SAN).
//   - istiod serves with a certificate of the harness's CA (IP 127.0.0.1 and 10.244.0.1, the
//     names of the istiod Service) given by --tlsCertFile/--tlsKeyFile/--caCertFile; the same
//     CA is the caBundle of both webhooks, registered by URL through the chart's own values
//     (istiodRemote.injectionURL, base.validationURL), and istiod publishes it as
//     istio-ca-root-cert, which the injected agents trust for xDS and the CA. Workload
//     certificates still come from istiod's own self-signed CA (Secret istio-ca-secret).
//   - Envoy is upstream Envoy (no Istio contrib extensions): no metadata exchange, no ALPN
//     filter, no stats filter (telemetry off), no ambient/HBONE.
//   - The injected containers use meshlife.local/proxyv2:dev, never pulled.

import (
	"bufio"
	"context"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	istioNamespace = "istio-system"
	// istiodSecurePort is secure xDS and the CA: fixed, as the injected proxies must find it.
	istiodSecurePort = 15012
	// istiodSAN is the name on istiod's serving certificate the agents check (ISTIOD_SAN).
	istiodSAN = "istiod.istio-system.svc"
)

// istioControlPlane is one running istiod and what a test needs to know about it.
type istioControlPlane struct {
	h    *harness
	proc *process
	dir  string
	// native is the mesh's default (ENABLE_NATIVE_SIDECARS); a pod's
	// sidecar.istio.io/nativeSidecar annotation still overrides it.
	native bool
	// The URLs the API server calls, and the CA (PEM) both webhooks trust.
	injectorURL, validatorURL string
	caBundle                  []byte
	// debugURL is istiod's HTTP port (/ready, /debug/...), monitoringURL its /metrics.
	debugURL, monitoringURL string
	// xdsAddress is what the injected proxies dial for xDS and certificates.
	xdsAddress string
	// env and args are istiod's, as started (the env on top of the harness's environment).
	env, args []string
	// applied are the chart's objects in the API server; webhooks are the two of them that
	// stop removes (with istiod gone they would refuse every injected pod); skipped are the
	// chart's objects of istiod's own Deployment, Service, PodDisruptionBudget and HPA.
	applied, webhooks, skipped []*unstructured.Unstructured
	// logOffset is where this istiod's lines start in istiod.log (a restart appends).
	logOffset int64
	stopped   bool
}

// istiodEnv is istiod's environment beyond the harness's: what the chart's Deployment sets
// (manifests/charts/istio-control/istio-discovery/templates/deployment.yaml) for a pod, and
// what this machine needs.
func istiodEnv(native bool) [][2]string {
	return [][2]string{
		// The chart's Deployment: identity of the pod istiod would be, and its revision.
		{"POD_NAME", "istiod-local"},
		{"POD_NAMESPACE", istioNamespace},
		{"SERVICE_ACCOUNT", "istiod"},
		{"REVISION", "default"},
		{"PILOT_CERT_PROVIDER", "istiod"},
		{"CLUSTER_ID", "Kubernetes"},
		{"CA_TRUSTED_NODE_ACCOUNTS", istioNamespace + "/ztunnel"},
		{"PILOT_ENABLE_ANALYSIS", "false"},
		// pilot/pkg/features/pilot.go ENABLE_NATIVE_SIDECARS: true or false, not "auto" (which
		// asks the Nodes' kubelet versions); the pod annotation overrides it
		// (pkg/kube/inject/inject.go, files/injection-template.yaml $nativeSidecar).
		{"ENABLE_NATIVE_SIDECARS", strconv.FormatBool(native)},
		// Upstream Envoy has none of Istio's contrib filters (node.md): istio.metadata_exchange
		// (pilot/pkg/features/telemetry.go, used by core/listener_builder.go appendMxFilter,
		// networkfilter.go, cluster_builder.go applyMetadataExchange) and istio.alpn
		// (pilot/pkg/features/pilot.go PILOT_ENABLE_ALPN_FILTER, core/listener_builder.go).
		{"PILOT_ENABLE_METADATA_EXCHANGE", "false"},
		{"PILOT_ENABLE_ALPN_FILTER", "false"},
		// No ambient: HBONE, waypoints and the istio.hashable_string / peer_metadata filters
		// are all behind it (pilot/pkg/features/ambient.go registerAmbient). Its default is
		// false; set so that no environment of the harness turns it on.
		{"PILOT_ENABLE_AMBIENT", "false"},
		// The webhooks' caBundle is the harness's CA, written by the chart's values; istiod's
		// patchers would write the same bundle (its --caCertFile), but they are not needed:
		// "" turns off the injector's patcher (pilot/pkg/bootstrap/sidecarinjector.go) and the
		// validation controller, which would also flip failurePolicy
		// (pilot/pkg/bootstrap/validation.go, pkg/webhooks/validation/controller).
		{"INJECTION_WEBHOOK_CONFIG_NAME", ""},
		{"VALIDATION_WEBHOOK_CONFIG_NAME", ""},
	}
}

// startIstiod renders the istio-discovery chart for this machine, applies its objects (not
// istiod's own Deployment, Service, PodDisruptionBudget or HPA), starts pilot-discovery (bin
// is the binary or the folder holding it) as a local process, waits for /ready, registers the
// injector and validator by URL and waits until a pod created through the API server comes
// back injected. native is the mesh's default for native sidecars.
func startIstiod(ctx context.Context, h *harness, bin string, native bool) (*istioControlPlane, error) {
	program := bin
	if info, err := os.Stat(bin); err == nil && info.IsDir() {
		program = filepath.Join(bin, "pilot-discovery")
	}
	if _, err := os.Stat(program); err != nil {
		return nil, fmt.Errorf("pilot-discovery: %w (compat/cluster/install.sh builds it)", err)
	}
	if h.helm == "" || h.istioCharts == "" {
		return nil, errors.New("istiod needs the helm binary and Istio's charts (compat/cluster/run.sh passes both)")
	}
	// Secure xDS is fixed: fail clearly if something else holds it (another istiod, say).
	if listener, err := net.Listen("tcp", fmt.Sprintf(":%d", istiodSecurePort)); err != nil {
		return nil, fmt.Errorf("port %d (istiod's secure xDS and CA, which the pods dial) is taken: %w", istiodSecurePort, err)
	} else {
		listener.Close()
	}
	ports := make([]int, 4)
	for i := range ports {
		var err error
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	httpPort, grpcPort, httpsPort, monitoringPort := ports[0], ports[1], ports[2], ports[3]
	i := &istioControlPlane{
		h: h, dir: filepath.Join(h.dir, "istiod"), native: native,
		injectorURL:   fmt.Sprintf("https://127.0.0.1:%d/inject", httpsPort),
		validatorURL:  fmt.Sprintf("https://127.0.0.1:%d/validate", httpsPort),
		debugURL:      fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		monitoringURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", monitoringPort),
		xdsAddress:    net.JoinHostPort(bridgeGateway, strconv.Itoa(istiodSecurePort)),
		caBundle:      h.cp.ca.certPEM,
	}
	if err := os.MkdirAll(i.dir, 0o755); err != nil {
		return nil, err
	}

	// istiod's serving certificate (webhooks, secure xDS, CA): the harness's CA, for every
	// address it is reached at and the names of the istiod Service (getDNSNames in
	// pilot/pkg/bootstrap/server.go).
	serving, err := h.cp.ca.issue(pkix.Name{CommonName: istiodSAN},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(bridgeGateway)},
		[]string{istiodSAN, "istiod.istio-system.svc.cluster.local", "istiod-remote.istio-system.svc",
			"istio-pilot.istio-system.svc", "istiod.istio-system", "istiod", "localhost"}, true, false)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := serving.write(i.dir, "tls")
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(i.dir, "ca.crt")
	if err := os.WriteFile(caFile, i.caBundle, 0o600); err != nil {
		return nil, err
	}

	// Istio's CRDs (the base chart), then the istio-discovery chart's objects.
	crds, err := i.render("istio-base", "base", nil)
	if err != nil {
		return nil, err
	}
	var crdObjects []*unstructured.Unstructured
	for _, obj := range crds {
		if obj.GetKind() == "CustomResourceDefinition" {
			crdObjects = append(crdObjects, obj)
		}
	}
	values := i.chartValues()
	rendered, err := i.render("istiod", filepath.Join("istio-control", "istio-discovery"), values)
	if err != nil {
		return nil, err
	}
	var objects []*unstructured.Unstructured
	for _, obj := range rendered {
		switch obj.GetKind() {
		case "Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "NetworkPolicy":
			i.skipped = append(i.skipped, obj)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			i.webhooks = append(i.webhooks, obj)
		default:
			objects = append(objects, obj)
		}
	}
	if err := ensureNamespace(ctx, h.k, istioNamespace); err != nil {
		return nil, err
	}
	if _, err := h.k.applyAll(ctx, crdObjects, 30*time.Second); err != nil {
		return nil, fmt.Errorf("Istio's CRDs: %w", err)
	}
	if _, err := h.k.applyAll(ctx, objects, 30*time.Second); err != nil {
		return nil, fmt.Errorf("the istio-discovery chart: %w", err)
	}
	i.applied = objects

	i.args = []string{"discovery",
		"--kubeconfig", h.cp.adminKC,
		"--httpAddr", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--grpcAddr", fmt.Sprintf("127.0.0.1:%d", grpcPort),
		"--httpsAddr", fmt.Sprintf("127.0.0.1:%d", httpsPort),
		"--monitoringAddr", fmt.Sprintf("127.0.0.1:%d", monitoringPort),
		"--secureGRPCAddr", fmt.Sprintf(":%d", istiodSecurePort),
		"--tlsCertFile", certFile, "--tlsKeyFile", keyFile, "--caCertFile", caFile,
		"--ctrlz_address", "127.0.0.1", "--ctrlz_port", "0",
		"--domain", "cluster.local",
		"--keepaliveMaxServerConnectionAge", "30m",
		"--log_output_level", "default:info",
	}
	for _, pair := range istiodEnv(native) {
		i.env = append(i.env, pair[0]+"="+pair[1])
	}
	// istiod reads and writes paths relative to its working directory (./etc/cacerts,
	// ./var/lib/istio/inject, ./etc/istio/config/mesh, ./var/run/secrets/istiod/tls); none
	// exists in its own folder, so the mesh config and the injector's templates come from the
	// ConfigMaps and the CA is istiod's self-signed one. processes.start runs in the
	// harness's folder, so a shell changes directory and execs istiod (same process).
	if info, err := os.Stat(filepath.Join(h.procs.logDir, "istiod.log")); err == nil {
		i.logOffset = info.Size()
	}
	shellArgs := append([]string{"-c", `cd "$1" && shift && exec "$@"`, "istiod", i.dir, program}, i.args...)
	if i.proc, err = h.procs.start("istiod", "/bin/sh", shellArgs, i.env); err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, i.proc, i.debugURL+"/ready", 120*time.Second); err != nil {
		i.stop()
		return nil, err
	}
	if _, err := h.k.applyAll(ctx, i.webhooks, 30*time.Second); err != nil {
		i.stop()
		return nil, fmt.Errorf("istiod's webhooks: %w", err)
	}
	if err := i.waitInjecting(ctx, 60*time.Second); err != nil {
		i.stop()
		return nil, err
	}
	return i, nil
}

// chartValues are the istio-discovery chart's values for this machine
// (manifests/charts/istio-control/istio-discovery/values.yaml).
func (i *istioControlPlane) chartValues() map[string]interface{} {
	caBundle := base64.StdEncoding.EncodeToString(i.caBundle)
	env := map[string]interface{}{}
	for _, pair := range istiodEnv(i.native) {
		switch pair[0] {
		case "POD_NAME", "POD_NAMESPACE", "SERVICE_ACCOUNT", "REVISION", "PILOT_CERT_PROVIDER",
			"CLUSTER_ID", "CA_TRUSTED_NODE_ACCOUNTS", "PILOT_ENABLE_ANALYSIS":
			// The chart's Deployment sets these itself.
		default:
			env[pair[0]] = pair[1]
		}
	}
	return map[string]interface{}{
		"global": map[string]interface{}{
			// Images: files/injection-template.yaml uses global.proxy.image and
			// global.proxy_init.image as they are when they hold a "/", else hub/image:tag;
			// both set, and hub/tag to the same for anything computed from them.
			"hub": "meshlife.local",
			"tag": "dev",
			"proxy": map[string]interface{}{
				"image": proxyImage,
				// Small requests, so that many meshed pods fit on a 2-core node; the limits set
				// the agent's GOMAXPROCS and GOMEMLIMIT (the template's resourceFieldRefs).
				"resources": map[string]interface{}{
					"requests": map[string]interface{}{"cpu": "10m", "memory": "40Mi"},
					"limits":   map[string]interface{}{"cpu": "1", "memory": "512Mi"},
				},
			},
			"proxy_init":      map[string]interface{}{"image": proxyImage},
			"imagePullPolicy": "Never",
			// The agent's CA_ADDR (the template's default is istiod.istio-system.svc:15012,
			// which nothing resolves here).
			"caAddress": i.xdsAddress,
		},
		// Registered by URL with the harness's CA: the chart's own switches for an istiod
		// outside the cluster (templates/mutatingwebhook.yaml "core",
		// templates/validatingwebhookconfiguration.yaml), keeping its selectors.
		"istiodRemote": map[string]interface{}{
			"injectionURL":      i.injectorURL,
			"injectionCABundle": caBundle,
		},
		"base": map[string]interface{}{
			"validationURL":      i.validatorURL,
			"validationCABundle": caBundle,
		},
		// No prometheus (nor stackdriver) default metrics provider: the stats filter
		// (istio.stats) is an Istio contrib extension (templates/_helpers.tpl default-prometheus,
		// templates/configmap.yaml defaultProviders).
		"telemetry": map[string]interface{}{"enabled": false},
		"meshConfig": map[string]interface{}{
			"defaultConfig": map[string]interface{}{
				// The proxies dial istiod by IP (no cluster DNS) ...
				"discoveryAddress": i.xdsAddress,
				// ... and check its certificate for this name: proxyMetadata becomes env of
				// istio-proxy (files/injection-template.yaml) and the agent's ISTIOD_SAN
				// (pilot/cmd/pilot-agent/options/options.go) checks both xDS and the CA.
				"proxyMetadata": map[string]interface{}{"ISTIOD_SAN": istiodSAN},
			},
		},
		// Recorded in the injector's values (pilot.env) and in the skipped Deployment, so that
		// the objects say how istiod runs.
		"env": env,
		// istiod's own HPA is skipped anyway; without it the Deployment names one replica.
		"autoscaleEnabled": false,
	}
}

// render is `helm template` of one of Istio's charts with values (written as a JSON values
// file, which Helm reads as YAML).
func (i *istioControlPlane) render(release, chart string, values map[string]interface{}) ([]*unstructured.Unstructured, error) {
	args := []string{"template", release, filepath.Join(i.h.istioCharts, chart), "-n", istioNamespace}
	if values != nil {
		data, err := json.MarshalIndent(values, "", "  ")
		if err != nil {
			return nil, err
		}
		file := filepath.Join(i.dir, release+"-values.json")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			return nil, err
		}
		args = append(args, "-f", file)
	}
	text, err := i.h.helmCommand(args...)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(i.dir, release+"-rendered.yaml"), []byte(text), 0o600); err != nil {
		return nil, err
	}
	objects, err := decodeObjects([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w", chart, err)
	}
	return objects, nil
}

// waitInjecting waits until a pod created through the API server (a dry run) comes back with
// istio-proxy: the webhook is registered, the API server trusts istiod, and the injector has
// its templates. The pod opts in by its label, in istio-system (the chart's object selector).
func (i *istioControlPlane) waitInjecting(ctx context.Context, timeout time.Duration) error {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "istiod-injection-probe", Namespace: istioNamespace,
			Labels: map[string]string{"sidecar.istio.io/inject": "true"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "istiod",
			Containers:         []corev1.Container{{Name: "app", Image: "meshlife.local/workload:dev"}},
		},
	}
	return waitUntil(ctx, timeout, "istiod's injector answering the API server", func() (bool, error) {
		if i.proc.exited() {
			return false, fmt.Errorf("istiod exited (%v); its log ends:\n%s", i.proc.err, i.proc.tail(20))
		}
		got, err := i.h.k.core.CoreV1().Pods(istioNamespace).Create(ctx, probe.DeepCopy(),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		for _, container := range append(got.Spec.InitContainers, got.Spec.Containers...) {
			if container.Name == "istio-proxy" {
				return true, nil
			}
		}
		return false, errors.New("the probe pod came back without istio-proxy")
	})
}

// stop removes the webhooks (with istiod gone they would refuse every pod of a meshed
// namespace) and stops istiod. The chart's other objects stay: a later startIstiod applies
// them again, and istiod keeps its CA in the Secret istio-ca-secret.
func (i *istioControlPlane) stop() {
	if i == nil || i.stopped {
		return
	}
	i.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, webhook := range i.webhooks {
		if err := i.h.k.remove(ctx, webhook); err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "cluster-compat: removing %s: %v\n", describe(webhook), err)
		}
	}
	if i.proc != nil {
		i.proc.stop(15 * time.Second)
		i.h.procs.forget(i.proc)
	}
}

// logProblems are the lines of this istiod's log at level error or fatal.
func (i *istioControlPlane) logProblems() []string {
	file, err := os.Open(i.proc.logFile)
	if err != nil {
		return []string{err.Error()}
	}
	defer file.Close()
	if _, err := file.Seek(i.logOffset, 0); err != nil {
		return []string{err.Error()}
	}
	var problems []string
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.Contains(line, "\terror\t") || strings.Contains(line, "\tfatal\t") {
			problems = append(problems, line)
		}
	}
	return problems
}
