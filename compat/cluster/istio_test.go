package main

// TestIstiod runs istiod (istio.go) against a real control plane, without a kubelet: pods are
// API objects only, so what it checks is what the API server stores after Istio's injector,
// the webhooks by URL, the root certificate istiod publishes, istiod's validation and its
// secure xDS port. Opt in, as root on a machine where nothing else holds port 15012:
//
//	MESHLIFE_ISTIO_TEST=1 go test -run TestIstiod -v -timeout 15m .
//
// It needs bin/etcd, bin/kube-apiserver and bin/pilot-discovery (install.sh), Helm
// (MESHLIFE_HELM, else compat/helm/bin/helm: compat/helm/install.sh) and the istio.io/istio
// module (istio-charts.sh). The injected pods are written to MESHLIFE_ISTIO_OUT (default
// /tmp) as istio-injected-MESHDEFAULT-POD.json, Envoy's config dump of the agent check as
// istio-agent-config-dump.json; the work folder is kept on a failure or with
// MESHLIFE_ISTIO_KEEP=1.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestIstiod(t *testing.T) {
	if os.Getenv("MESHLIFE_ISTIO_TEST") != "1" {
		t.Skip("MESHLIFE_ISTIO_TEST=1 runs istiod against a real API server (bin/etcd, bin/kube-apiserver, bin/pilot-discovery, Helm)")
	}
	bin, err := filepath.Abs("bin")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "pilot-discovery"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%v (compat/cluster/install.sh builds it)", err)
		}
	}
	helm := os.Getenv("MESHLIFE_HELM")
	if helm == "" {
		helm, _ = filepath.Abs(filepath.Join("..", "helm", "bin", "helm"))
	}
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("%v (compat/helm/install.sh builds it)", err)
	}
	chartsOut, err := exec.Command("bash", "istio-charts.sh").Output()
	if err != nil {
		t.Fatalf("istio-charts.sh: %v", err)
	}
	repo, _ := filepath.Abs(filepath.Join("..", ".."))
	out := os.Getenv("MESHLIFE_ISTIO_OUT")
	if out == "" {
		out = os.TempDir()
	}
	dir, err := os.MkdirTemp("", "meshlife-istiod-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("work folder (logs, certificates, rendered charts): %s", dir)
	defer func() {
		if !t.Failed() && os.Getenv("MESHLIFE_ISTIO_KEEP") == "" {
			os.RemoveAll(dir)
		}
	}()
	procs := newProcesses(dir)
	defer procs.stopAll()
	ctx := context.Background()
	cp, err := startControlPlane(ctx, procs, bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := newKube(cp.admin)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{repo: repo, bin: bin, dir: dir, procs: procs, cp: cp, k: k, helm: helm,
		istioCharts: strings.TrimSpace(string(chartsOut))}
	for _, native := range []bool{false, true} {
		t.Run(fmt.Sprintf("ENABLE_NATIVE_SIDECARS=%v", native), func(t *testing.T) {
			istiodChecks(ctx, t, h, bin, native, out)
		})
	}
}

func istiodChecks(ctx context.Context, t *testing.T, h *harness, bin string, native bool, out string) {
	started := time.Now()
	i, err := startIstiod(ctx, h, bin, native)
	if err != nil {
		t.Fatal(err)
	}
	defer i.stop()
	t.Logf("istiod %q (istio.io/istio %s) ready and injecting in %.1fs; injector %s, debug %s",
		i.version, i.module, time.Since(started).Seconds(), i.injectorURL, i.debugURL)

	response, err := http.Get(i.debugURL + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	response.Body.Close()
	if response.StatusCode != http.StatusOK {
		t.Errorf("%s/ready: %s", i.debugURL, response.Status)
	}

	// The meshed namespace, its default ServiceAccount (no controller manager here) and the
	// root certificate istiod publishes into it: the harness's CA, which signed istiod.
	namespace := objectFor("v1", "Namespace", "", "demo")
	namespace.SetLabels(map[string]string{"istio-injection": "enabled"})
	if _, err := h.k.apply(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	_, err = h.k.core.CoreV1().ServiceAccounts("demo").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	err = waitUntil(ctx, 30*time.Second, "ConfigMap demo/istio-ca-root-cert", func() (bool, error) {
		cm, err := h.k.core.CoreV1().ConfigMaps("demo").Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cm.Data["root-cert.pem"] != string(i.caBundle) {
			return false, fmt.Errorf("root-cert.pem is not the harness's CA:\n%s", cm.Data["root-cert.pem"])
		}
		return true, nil
	})
	if err != nil {
		t.Error(err)
	}

	mode := map[bool]string{false: "classic", true: "native"}
	cases := []struct {
		name, annotation string
		wantNative       bool
	}{
		{"default", "", native},
		{"annotated-true", "true", true},
		{"annotated-false", "false", false},
	}
	for _, c := range cases {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "app-" + c.name, Namespace: "demo", Labels: map[string]string{"app": "app"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "meshlife.local/workload:dev", ImagePullPolicy: corev1.PullNever,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}}},
		}
		if c.annotation != "" {
			pod.Annotations = map[string]string{"sidecar.istio.io/nativeSidecar": c.annotation}
		}
		_ = h.k.core.CoreV1().Pods("demo").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if _, err := h.k.core.CoreV1().Pods("demo").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		stored, err := h.k.core.CoreV1().Pods("demo").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		data, _ := json.MarshalIndent(stored, "", "  ")
		file := filepath.Join(out, fmt.Sprintf("istio-injected-%s-%s.json", mode[native], c.name))
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Error(err)
		}
		for _, problem := range injectionProblems(stored, c.wantNative, i.xdsAddress) {
			t.Errorf("mesh default %s, pod %s (nativeSidecar annotation %q): %s", mode[native], c.name, c.annotation, problem)
		}
		t.Logf("pod %s: init %v, containers %v (%s)", c.name, containerNames(stored.Spec.InitContainers),
			containerNames(stored.Spec.Containers), file)
		_ = h.k.core.CoreV1().Pods("demo").Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}

	// Istio's validation by URL: the config istiod's own controller uses to see that invalid
	// config is refused (pkg/webhooks/validation/controller), and a valid DestinationRule.
	invalid := objectFor("networking.istio.io/v1", "Gateway", "demo", "invalid-gateway")
	invalid.SetLabels(map[string]string{"istio.io/rev": "default"})
	invalid.SetAnnotations(map[string]string{"internal.istio.io/webhook-always-reject": "true"})
	invalid.Object["spec"] = map[string]interface{}{}
	if _, err := h.k.create(ctx, invalid, true); err == nil || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("an invalid Gateway: want a denial by Istio's validation, got %v", err)
	} else {
		t.Logf("invalid Gateway refused: %v", err)
	}
	valid := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
		"metadata": map[string]interface{}{"name": "app", "namespace": "demo"},
		"spec": map[string]interface{}{"host": "app.demo.svc.cluster.local",
			"trafficPolicy": map[string]interface{}{"tls": map[string]interface{}{"mode": "ISTIO_MUTUAL"}}},
	}}
	if _, err := h.k.create(ctx, valid, true); err != nil {
		t.Errorf("a valid DestinationRule: %v", err)
	}

	// Secure xDS and the CA, as the agents check them: the published root, the name
	// ISTIOD_SAN gives, and the address the pods dial on the certificate.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(i.caBundle)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp",
		fmt.Sprintf("127.0.0.1:%d", istiodSecurePort),
		&tls.Config{RootCAs: pool, ServerName: istiodSAN, NextProtos: []string{"h2"}})
	if err != nil {
		t.Errorf("secure xDS on %d: %v", istiodSecurePort, err)
	} else {
		leaf := conn.ConnectionState().PeerCertificates[0]
		if err := leaf.VerifyHostname(istiodPodAddress); err != nil {
			t.Errorf("istiod's certificate for the pods' address: %v", err)
		}
		conn.Close()
	}

	if !native {
		t.Run("pilot-agent", func(t *testing.T) { agentChecks(ctx, t, h, i) })
	}

	// istiod's log: nothing at error level (webhook, certificates, CA, anything).
	for _, line := range i.logProblems() {
		t.Errorf("istiod's log: %s", line)
	}
}

// injectionProblems lists what is not as Istio's injector must leave the pod here.
func injectionProblems(pod *corev1.Pod, native bool, xds string) []string {
	var problems []string
	find := func(list []corev1.Container, name string) *corev1.Container {
		for index := range list {
			if list[index].Name == name {
				return &list[index]
			}
		}
		return nil
	}
	if pod.Annotations["sidecar.istio.io/status"] == "" {
		problems = append(problems, "no sidecar.istio.io/status annotation: not injected")
	}
	initProxy := find(pod.Spec.InitContainers, "istio-proxy")
	proxy := find(pod.Spec.Containers, "istio-proxy")
	istioInit := find(pod.Spec.InitContainers, "istio-init")
	if istioInit == nil {
		problems = append(problems, "no istio-init init container")
	}
	if native {
		if initProxy == nil || proxy != nil {
			problems = append(problems, "want istio-proxy as an init container only (native)")
		} else if initProxy.RestartPolicy == nil || *initProxy.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			problems = append(problems, "native istio-proxy without restartPolicy Always")
		}
		proxy = initProxy
	} else if proxy == nil || initProxy != nil {
		problems = append(problems, "want istio-proxy as a container only (classic)")
	}
	for _, container := range []*corev1.Container{istioInit, proxy} {
		if container == nil {
			continue
		}
		if container.Image != istiodProxyImage || container.ImagePullPolicy != corev1.PullNever {
			problems = append(problems, fmt.Sprintf("%s: image %s, pull policy %s", container.Name, container.Image, container.ImagePullPolicy))
		}
	}
	if proxy == nil {
		return problems
	}
	env := map[string]string{}
	for _, variable := range proxy.Env {
		env[variable.Name] = variable.Value
	}
	if env["CA_ADDR"] != xds {
		problems = append(problems, fmt.Sprintf("CA_ADDR %q, want %q", env["CA_ADDR"], xds))
	}
	if env["ISTIOD_SAN"] != istiodSAN {
		problems = append(problems, fmt.Sprintf("ISTIOD_SAN %q, want %q", env["ISTIOD_SAN"], istiodSAN))
	}
	var proxyConfig struct {
		DiscoveryAddress string `json:"discoveryAddress"`
	}
	if err := json.Unmarshal([]byte(env["PROXY_CONFIG"]), &proxyConfig); err != nil || proxyConfig.DiscoveryAddress != xds {
		problems = append(problems, fmt.Sprintf("PROXY_CONFIG discoveryAddress %q (%v), want %q", proxyConfig.DiscoveryAddress, err, xds))
	}
	for _, volume := range pod.Spec.Volumes {
		if volume.Name == "istiod-ca-cert" && (volume.ConfigMap == nil || volume.ConfigMap.Name != "istio-ca-root-cert") {
			problems = append(problems, "volume istiod-ca-cert is not the ConfigMap istio-ca-root-cert")
		}
		if volume.Name == "istio-token" && (volume.Projected == nil || len(volume.Projected.Sources) == 0 ||
			volume.Projected.Sources[0].ServiceAccountToken == nil || volume.Projected.Sources[0].ServiceAccountToken.Audience != "istio-ca") {
			problems = append(problems, "volume istio-token is not a projected token for istio-ca")
		}
	}
	return problems
}

func containerNames(containers []corev1.Container) []string {
	var names []string
	for _, container := range containers {
		names = append(names, container.Name)
	}
	return names
}

// agentChecks runs Istio's own agent and the real Envoy (bin/pilot-agent, bin/envoy) on this
// host as an injected pod's istio-proxy would run, with that container's environment and
// arguments, a TokenRequest token (audience istio-ca) and the published root: istiod must
// verify the token, sign a workload certificate over the secure port (checked against the
// harness's CA and ISTIOD_SAN), and send listeners and clusters the upstream Envoy accepts.
// Only the addresses differ: the agent dials 127.0.0.1:15012 (no bridge without a node) and
// the pod's IP is an unused one of the pod range, set in its status.
func agentChecks(ctx context.Context, t *testing.T, h *harness, i *istioControlPlane) {
	agent, envoy := filepath.Join(h.bin, "pilot-agent"), filepath.Join(h.bin, "envoy")
	for _, program := range []string{agent, envoy} {
		if _, err := os.Stat(program); err != nil {
			t.Skipf("%v", err)
		}
	}
	for _, port := range []int{15000, 15001, 15006, 15020, 15021, 15090} {
		listener, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			t.Skipf("port %d, which the agent and Envoy use, is taken: %v", port, err)
		}
		listener.Close()
	}
	const podIP = "10.244.0.250"
	dir := filepath.Join(h.dir, "agent")
	for _, sub := range []string{"var/run/secrets/istio", "var/run/secrets/tokens", "var/lib/istio/envoy",
		"var/lib/istio/data", "etc/istio/proxy", "etc/istio/pod", "var/run/secrets/workload-spiffe-uds",
		"var/run/secrets/credential-uds", "var/run/secrets/workload-spiffe-credentials"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	module := filepath.Dir(filepath.Dir(h.istioCharts))
	template, err := os.ReadFile(filepath.Join(module, "tools", "packaging", "common", "envoy_bootstrap.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "var/lib/istio/envoy/envoy_bootstrap_tmpl.json"), template, 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := h.k.core.CoreV1().ConfigMaps("demo").Get(ctx, "istio-ca-root-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "var/run/secrets/istio/root-cert.pem"), []byte(root.Data["root-cert.pem"]), 0o644); err != nil {
		t.Fatal(err)
	}

	// The pod (injected through the API server) with a Service in front of it, and a status
	// as a kubelet would write it.
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "demo"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "agent"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}
	_ = h.k.core.CoreV1().Services("demo").Delete(ctx, "agent", metav1.DeleteOptions{})
	if _, err := h.k.core.CoreV1().Services("demo").Create(ctx, service, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer h.k.core.CoreV1().Services("demo").Delete(ctx, "agent", metav1.DeleteOptions{})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "demo", Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "meshlife.local/workload:dev",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
	}
	_ = h.k.core.CoreV1().Pods("demo").Delete(ctx, "agent", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	stored, err := h.k.core.CoreV1().Pods("demo").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.k.core.CoreV1().Pods("demo").Delete(ctx, "agent", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	now := metav1.Now()
	stored.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
		HostIP: "127.0.0.1", StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if stored, err = h.k.core.CoreV1().Pods("demo").UpdateStatus(ctx, stored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := h.k.core.CoreV1().ServiceAccounts("demo").CreateToken(ctx, "default", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{"istio-ca"}, ExpirationSeconds: new(int64(3600)),
			BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: stored.Name, UID: stored.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "var/run/secrets/tokens/istio-token"), []byte(token.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}

	// istio-proxy's environment and arguments, as the kubelet would resolve them.
	var proxy *corev1.Container
	for index := range stored.Spec.Containers {
		if stored.Spec.Containers[index].Name == "istio-proxy" {
			proxy = &stored.Spec.Containers[index]
		}
	}
	if proxy == nil {
		t.Fatal("the pod has no istio-proxy container")
	}
	fields := map[string]string{"metadata.name": stored.Name, "metadata.namespace": "demo", "status.podIP": podIP,
		"spec.serviceAccountName": "default", "status.hostIP": "127.0.0.1", "spec.nodeName": "localhost"}
	resources := map[string]string{"limits.cpu": "1", "limits.memory": "536870912"}
	var env []string
	for _, variable := range proxy.Env {
		value := variable.Value
		if from := variable.ValueFrom; from != nil && from.FieldRef != nil {
			value = fields[from.FieldRef.FieldPath]
		} else if from != nil && from.ResourceFieldRef != nil {
			value = resources[from.ResourceFieldRef.Resource]
		}
		switch variable.Name {
		case "CA_ADDR":
			value = fmt.Sprintf("127.0.0.1:%d", istiodSecurePort)
		case "PROXY_CONFIG":
			config := map[string]interface{}{}
			if err := json.Unmarshal([]byte(value), &config); err != nil {
				t.Fatalf("PROXY_CONFIG: %v", err)
			}
			config["discoveryAddress"] = fmt.Sprintf("127.0.0.1:%d", istiodSecurePort)
			config["binaryPath"] = envoy
			config["configPath"] = filepath.Join(dir, "etc/istio/proxy")
			data, _ := json.Marshal(config)
			value = string(data)
		}
		env = append(env, variable.Name+"="+value)
	}
	var args []string
	for _, arg := range proxy.Args {
		args = append(args, strings.ReplaceAll(arg, "$(POD_NAMESPACE)", "demo"))
	}
	shellArgs := append([]string{"-c", `cd "$1" && shift && exec "$@"`, "pilot-agent", dir, agent}, args...)
	proc, err := h.procs.start("pilot-agent", "/bin/sh", shellArgs, env)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		proc.stop(10 * time.Second)
		h.procs.forget(proc)
	}()
	if err := waitHTTP(ctx, proc, "http://127.0.0.1:15021/healthz/ready", 90*time.Second); err != nil {
		t.Fatalf("the agent's Envoy never became ready: %v\n%s", err, proc.tail(30))
	}
	stats := adminGet(t, "http://127.0.0.1:15000/stats?filter=(lds|cds)%5C.update_")
	t.Logf("Envoy ready; %s", strings.Join(strings.Fields(stats), " "))
	for _, line := range strings.Split(stats, "\n") {
		if strings.Contains(line, "update_rejected") && !strings.HasSuffix(line, ": 0") {
			t.Errorf("Envoy rejected istiod's config: %s", line)
		}
		if strings.Contains(line, "update_success") && strings.HasSuffix(line, ": 0") {
			t.Errorf("Envoy took no config from istiod: %s", line)
		}
	}
	certs := adminGet(t, "http://127.0.0.1:15000/certs")
	if !strings.Contains(certs, "spiffe://cluster.local/ns/demo/sa/default") {
		t.Errorf("Envoy has no workload certificate for demo/default:\n%s", truncate(certs, 2000))
	}
	listeners := adminGet(t, "http://127.0.0.1:15000/listeners")
	t.Logf("listeners: %s", strings.Join(strings.Fields(listeners), " "))
	dump := adminGet(t, "http://127.0.0.1:15000/config_dump")
	for _, name := range []string{"istio.metadata_exchange", "istio.alpn", "istio.stats"} {
		if strings.Contains(dump, name) {
			t.Errorf("Envoy's config names %s", name)
		}
	}
	if err := os.WriteFile(filepath.Join(os.TempDir(), "istio-agent-config-dump.json"), []byte(dump), 0o644); err != nil {
		t.Error(err)
	}
}

func adminGet(t *testing.T, url string) string {
	response, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	body, err := io.ReadAll(response.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
