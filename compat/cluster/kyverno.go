package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const kyvernoNamespace = "kyverno"

// kyvernoEngine is Kyverno v1.19.0's own admission controller, run out of the cluster with
// its `--serverIP` (it registers its webhooks by URL itself), with `meshlife install kyverno`
// (the ValidatingPolicy pair, or with --cluster-policy the ClusterPolicy pair) applied as a user applies it.
type kyvernoEngine struct {
	h          *harness
	module     string
	controller *process
	reports    *process
	server     *server
	policies   []*unstructured.Unstructured
	// pprofURL is the admission controller's profiling endpoint (-profile only).
	pprofURL string
	// trustDir is the admission controller's SSL_CERT_DIR beside the system's, where the
	// ValidatingPolicy install's ConfigMap meshlife-ca goes, as the documented mount puts it.
	trustDir string
	// nextCA is the CA the ValidatingPolicy pair's rollover moves to, trusted ahead of it as an operator would.
	nextCA *authority
}

const kyvernoPort = 443

func (ky *kyvernoEngine) start(ctx context.Context) error {
	h := ky.h
	for _, dir := range []string{"kyverno", "policies.kyverno.io", "policyreport", "reports"} {
		files, _ := filepath.Glob(filepath.Join(ky.module, "config/crds", dir, "*.yaml"))
		if len(files) == 0 {
			return fmt.Errorf("no CRDs in %s/config/crds/%s (-kyverno-module)", ky.module, dir)
		}
		for _, file := range files {
			if err := h.applyFile(ctx, file); err != nil {
				return err
			}
		}
	}
	if err := ensureNamespace(ctx, h.k, kyvernoNamespace); err != nil {
		return err
	}
	for _, account := range []string{"default", "kyverno", "kyverno-reports-controller"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: kyvernoNamespace, Name: account}}
		if _, err := h.k.core.CoreV1().ServiceAccounts(kyvernoNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, name := range []string{"kyverno", "kyverno-metrics"} {
		configMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kyvernoNamespace, Name: name}}
		if _, err := h.k.core.CoreV1().ConfigMaps(kyvernoNamespace).Create(ctx, configMap, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// Kyverno registers its policy webhooks at https://SERVERIP/ (port 443 whatever
	// --servicePort says), so it listens on 443 (the harness runs as root, as CI does).
	probe, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", kyvernoPort))
	if err != nil {
		return fmt.Errorf("Kyverno must listen on 127.0.0.1:443 (its policy webhooks name no port): %w", err)
	}
	probe.Close()
	ky.trustDir = filepath.Join(h.dir, "kyverno-meshlife-ca")
	if err := os.MkdirAll(ky.trustDir, 0o755); err != nil {
		return err
	}
	if err := ky.startController(ctx); err != nil {
		return err
	}
	if err := ky.startReports(); err != nil {
		return err
	}
	return waitUntil(ctx, 120*time.Second, "Kyverno registering its resource webhooks", func() (bool, error) {
		list, err := h.k.core.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, config := range list.Items {
			if strings.HasPrefix(config.Name, "kyverno-resource-validating-webhook-cfg") {
				return true, nil
			}
		}
		return false, nil
	})
}

// startController runs the admission controller as its Deployment does, with the
// SSL_CERT_DIR that `meshlife install kyverno` asks for, and the bound on its service
// calls that the install asks for with the ClusterPolicy pair (1.19's CEL http.Post has none).
func (ky *kyvernoEngine) startController(ctx context.Context) error {
	h := ky.h
	env := []string{
		"KYVERNO_NAMESPACE=" + kyvernoNamespace, "KYVERNO_SERVICEACCOUNT_NAME=kyverno",
		"KYVERNO_DEPLOYMENT=kyverno", "KYVERNO_POD_NAME=kyverno-0", "KYVERNO_SVC=kyverno-svc",
		"INIT_CONFIG=kyverno", "METRICS_CONFIG=kyverno-metrics",
		"SSL_CERT_DIR=/etc/ssl/certs:" + ky.trustDir,
	}
	args := []string{
		"--kubeconfig", h.cp.adminKC, "--serverIP", "127.0.0.1",
		"--webhookServerPort", fmt.Sprint(kyvernoPort), "--servicePort", fmt.Sprint(kyvernoPort),
		"--caSecretName", "kyverno-svc.kyverno.svc.kyverno-tls-ca",
		"--tlsSecretName", "kyverno-svc.kyverno.svc.kyverno-tls-pair",
		// Since 1.18 the default blocklist holds loopback, where meshlife serve runs here;
		// this keeps cloud metadata blocked and lets 127.0.0.1 through.
		"--httpBlocklist", "169.254.169.254",
		// The bound `meshlife install kyverno` recommends: a call to a hung server ends
		// inside the webhook's timeout, in the policies' answer that it was not checked.
		"--apiCallTimeout=2s",
		"--disableMetrics", "--admissionReports=true", "--v=1",
	}
	if h.profileDir != "" {
		pprofPort, err := freePort()
		if err != nil {
			return err
		}
		ky.pprofURL = fmt.Sprintf("http://127.0.0.1:%d", pprofPort)
		args = append(args, "--profile", "--profileAddress", "127.0.0.1", "--profilePort", fmt.Sprint(pprofPort))
	}
	var err error
	ky.controller, err = h.procs.start("kyverno", filepath.Join(h.bin, "kyverno"), args, env)
	if err != nil {
		return err
	}
	return waitHTTP(ctx, ky.controller, fmt.Sprintf("https://127.0.0.1:%d/health/liveness", kyvernoPort), 120*time.Second)
}

// trustCEL is the step `meshlife install kyverno` prints: the install's ConfigMap
// meshlife-ca where the admission controller's SSL_CERT_DIR reads it (with the CA of the
// rollover ahead), then the admission controller restarted, since Go reads its roots once.
func (ky *kyvernoEngine) trustCEL(ctx context.Context, objs []*unstructured.Unstructured) error {
	var caPEM string
	for _, obj := range objs {
		if obj.GetKind() == "ConfigMap" && obj.GetName() == "meshlife-ca" && obj.GetNamespace() == kyvernoNamespace {
			caPEM, _, _ = unstructured.NestedString(obj.Object, "data", "meshlife-ca.crt")
		}
	}
	if !strings.Contains(caPEM, "BEGIN CERTIFICATE") {
		return fmt.Errorf("meshlife install kyverno printed no ConfigMap %s/meshlife-ca with a CA", kyvernoNamespace)
	}
	next, err := newAuthority("meshlife-rotated-ca")
	if err != nil {
		return err
	}
	ky.nextCA = next
	for name, data := range map[string][]byte{"meshlife-ca.crt": []byte(caPEM), "meshlife-next-ca.crt": next.certPEM} {
		if err := os.WriteFile(filepath.Join(ky.trustDir, name), data, 0o644); err != nil {
			return err
		}
	}
	ky.controller.stop(20 * time.Second)
	ky.h.procs.forget(ky.controller)
	return ky.startController(ctx)
}

// install applies `meshlife install kyverno --constraint CLUSTER [--cluster-policy] --url ...`, runs its
// server as its Deployment would, and waits until Kyverno calls it.
func (ky *kyvernoEngine) install(ctx context.Context, cluster string, cel bool) error {
	h := ky.h
	if ky.server != nil {
		ky.server.stop()
	}
	for _, policy := range ky.policies {
		if err := h.k.remove(ctx, policy); err != nil {
			return err
		}
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	args := []string{"kyverno", "--constraint", cluster, "--url", fmt.Sprintf("https://127.0.0.1:%d", port)}
	what := "meshlife install kyverno --constraint " + filepath.Base(cluster)
	if !cel {
		args = append(args, "--cluster-policy")
		what += " --cluster-policy"
	}
	objs, _, err := install(h.meshlife, h.repo, args...)
	if err != nil {
		return err
	}
	if err := h.applyInstall(ctx, what, objs); err != nil {
		return err
	}
	if cel {
		if err := ky.trustCEL(ctx, objs); err != nil {
			return err
		}
	}
	ky.policies = nil
	for _, obj := range objs {
		if obj.GetKind() == "ClusterPolicy" || obj.GetKind() == "ValidatingPolicy" {
			ky.policies = append(ky.policies, obj)
		}
	}
	ky.server, err = serverOf(ctx, h.k, h.cp, h.procs, h.meshlife, filepath.Join(h.dir, "kyverno-"+filepath.Base(cluster)), "meshlife-kyverno", port, objs)
	if err != nil {
		return err
	}
	if err := ky.server.start(ctx); err != nil {
		return err
	}
	if err := ky.waitReady(ctx, ky.policies); err != nil {
		return err
	}
	return h.waitCalled(ctx, ky.server, "kyverno", 120*time.Second)
}

// waitReady waits until Kyverno reports each policy ready.
func (ky *kyvernoEngine) waitReady(ctx context.Context, policies []*unstructured.Unstructured) error {
	for _, policy := range policies {
		if err := waitUntil(ctx, 120*time.Second, "Kyverno reporting "+policy.GetKind()+" "+policy.GetName()+" ready", func() (bool, error) {
			live, err := ky.h.k.get(ctx, policy)
			if err != nil {
				return false, err
			}
			return policyReady(live), fmt.Errorf("status: %v", live.Object["status"])
		}); err != nil {
			return err
		}
	}
	return nil
}

// policyReady reads a ClusterPolicy's Ready condition or a ValidatingPolicy's
// conditionStatus.ready.
func policyReady(policy *unstructured.Unstructured) bool {
	if ready, found, _ := unstructured.NestedBool(policy.Object, "status", "conditionStatus", "ready"); found {
		return ready
	}
	conditions, _, _ := unstructured.NestedSlice(policy.Object, "status", "conditions")
	for _, c := range conditions {
		condition := c.(map[string]interface{})
		if condition["type"] == "Ready" && condition["status"] == "True" {
			return true
		}
	}
	return false
}

// rotateCEL: the server's certificate files change to the CA trustCEL staged.
func (ky *kyvernoEngine) rotateCEL() error {
	return rotateFiles(ky.server, ky.nextCA)
}

// rotate: each policy's service caBundle first trusts a new CA beside the install's, then the
// server's certificate files change under it.
func (ky *kyvernoEngine) rotate() error {
	ctx := context.Background()
	h := ky.h
	next, err := newAuthority("meshlife-rotated-ca")
	if err != nil {
		return err
	}
	for _, policy := range ky.policies {
		live, err := h.k.get(ctx, policy)
		if err != nil {
			return err
		}
		rules, _, _ := unstructured.NestedSlice(live.Object, "spec", "rules")
		for _, r := range rules {
			contexts, _ := r.(map[string]interface{})["context"].([]interface{})
			for _, c := range contexts {
				service, ok, _ := unstructured.NestedMap(c.(map[string]interface{}), "apiCall", "service")
				if !ok {
					continue
				}
				service["caBundle"] = strings.TrimRight(service["caBundle"].(string), "\n") + "\n" + string(next.certPEM)
				_ = unstructured.SetNestedMap(c.(map[string]interface{}), service, "apiCall", "service")
			}
		}
		_ = unstructured.SetNestedSlice(live.Object, rules, "spec", "rules")
		live.SetManagedFields(nil)
		live.SetResourceVersion("")
		delete(live.Object, "status")
		if _, err := h.k.apply(ctx, live); err != nil {
			return err
		}
	}
	time.Sleep(3 * time.Second)
	return rotateFiles(ky.server, next)
}

// securityChecks: a call without the install's token gets no verdict.
func (ky *kyvernoEngine) securityChecks(ctx context.Context, s *scenario) error {
	h := ky.h
	caPEM, err := os.ReadFile(filepath.Join(ky.server.dir, "mounts", "tls", "ca.crt"))
	if err != nil {
		return err
	}
	jobJSON, _ := s.job.MarshalJSON()
	body := fmt.Sprintf(`{"review":{"uid":"x","kind":{"group":"batch","version":"v1","kind":"Job"},"operation":"CREATE","namespace":%q,"object":%s,"namespaceObject":{"metadata":{"name":%q,"labels":{"istio-injection":"enabled"}}}},"parameters":{}}`,
		s.namespace, jobJSON, s.namespace)
	status, answer, err := postTLS(ky.server.url()+"/kyverno", caPEM, nil, body)
	var reply struct {
		Deny       bool          `json:"deny"`
		Violations []interface{} `json:"violations"`
		Error      string        `json:"error"`
	}
	_ = json.Unmarshal([]byte(answer), &reply)
	h.check(err == nil && !reply.Deny && len(reply.Violations) == 0 && reply.Error != "",
		"kyverno: a call without the token gets no verdict, only the reason (%d %q %v)", status, truncate(answer, 160), err)
	return nil
}
