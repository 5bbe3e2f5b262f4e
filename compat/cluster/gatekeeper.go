package main

import (
	"context"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const gatekeeperNamespace = "gatekeeper-system"

// gatekeeperEngine is Gatekeeper's own manager (webhook, audit, status and template
// controllers in one process, as the chart runs them in two), registered by URL as its chart
// registers it by Service, with `meshlife install gatekeeper` applied as a user applies it.
type gatekeeperEngine struct {
	h         *harness
	module    string
	manager   *process
	port      int
	ca        *authority
	certDir   string
	server    *server
	installed []*unstructured.Unstructured
	// pprofURL is the manager's profiling endpoint (-profile only).
	pprofURL string
}

func (g *gatekeeperEngine) start(ctx context.Context) error {
	h := g.h
	crds, err := filepath.Glob(filepath.Join(g.module, "charts/gatekeeper/crds/*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no CRDs in %s/charts/gatekeeper/crds (-gatekeeper-module)", g.module)
	}
	for _, file := range crds {
		if err := h.applyFile(ctx, file); err != nil {
			return err
		}
	}
	// The namespace as the chart makes it: exempt from Gatekeeper's own webhook.
	ns := objectFor("v1", "Namespace", "", gatekeeperNamespace)
	ns.SetLabels(map[string]string{"admission.gatekeeper.sh/ignore": "no-self-managing"})
	if _, err := h.k.apply(ctx, ns); err != nil {
		return err
	}
	for _, account := range []string{"default", "gatekeeper-admin"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: gatekeeperNamespace, Name: account}}
		if _, err := h.k.core.CoreV1().ServiceAccounts(gatekeeperNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// Gatekeeper reads its own Pod (POD_NAME); nodeName keeps any scheduler away from it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: gatekeeperNamespace, Name: "gatekeeper-0", Labels: map[string]string{"control-plane": "controller-manager", "gatekeeper.sh/system": "yes"}},
		Spec: corev1.PodSpec{NodeName: "cluster-compat", ServiceAccountName: "gatekeeper-admin",
			Containers: []corev1.Container{{Name: "manager", Image: "registry.invalid/gatekeeper:v3.23.0"}}},
	}
	if _, err := h.k.core.CoreV1().Pods(gatekeeperNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Its webhook certificate, as its cert-controller would make it: also the client
	// certificate it presents to External Data providers, whose CA meshlife serve trusts.
	if g.ca, err = newAuthority("gatekeeper-ca"); err != nil {
		return err
	}
	leaf, err := g.ca.issue(pkix.Name{CommonName: "gatekeeper-webhook-service.gatekeeper-system.svc"}, loopback,
		[]string{"gatekeeper-webhook-service.gatekeeper-system.svc"}, true, true)
	if err != nil {
		return err
	}
	g.certDir = filepath.Join(h.dir, "gatekeeper-certs")
	for name, data := range map[string][]byte{"tls.crt": leaf.certPEM, "tls.key": leaf.keyPEM, "ca.crt": g.ca.certPEM} {
		if err := writeFile(filepath.Join(g.certDir, name), data); err != nil {
			return err
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: gatekeeperNamespace, Name: "gatekeeper-webhook-server-cert"},
		Data:       map[string][]byte{"tls.crt": leaf.certPEM, "tls.key": leaf.keyPEM, "ca.crt": g.ca.certPEM},
	}
	if _, err := h.k.core.CoreV1().Secrets(gatekeeperNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The audit writes its reports under /tmp/audit.
	if err := os.MkdirAll("/tmp/audit", 0o755); err != nil {
		return err
	}
	if g.port, err = freePort(); err != nil {
		return err
	}
	healthPort, err := freePort()
	if err != nil {
		return err
	}
	args := []string{
		"--port", fmt.Sprint(g.port), "--host", "127.0.0.1", "--cert-dir", g.certDir,
		"--disable-cert-rotation", "--health-addr", fmt.Sprintf("127.0.0.1:%d", healthPort),
		"--metrics-addr", "0", "--audit-interval", "5", "--shutdown-delay", "0",
		"--exempt-namespace", gatekeeperNamespace, "--constraint-violations-limit", "500",
		"--audit-chunk-size", "500", "--log-level", "INFO",
	}
	if h.profileDir != "" {
		pprofPort, err := freePort()
		if err != nil {
			return err
		}
		g.pprofURL = fmt.Sprintf("http://localhost:%d", pprofPort)
		args = append(args, "--enable-pprof", "--pprof-port", fmt.Sprint(pprofPort))
	}
	g.manager, err = h.procs.start("gatekeeper", filepath.Join(h.bin, "gatekeeper"), args, []string{"KUBECONFIG=" + h.cp.adminKC, "POD_NAMESPACE=" + gatekeeperNamespace, "POD_NAME=gatekeeper-0", "CONTAINER_NAME=manager"})
	if err != nil {
		return err
	}
	if err := waitHTTP(ctx, g.manager, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort), 120*time.Second); err != nil {
		return err
	}
	return h.applyObject(ctx, g.webhookConfiguration())
}

// webhookConfiguration is the chart's validation.gatekeeper.sh webhook, by URL.
func (g *gatekeeperEngine) webhookConfiguration() *unstructured.Unstructured {
	obj := objectFor("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "gatekeeper-validating-webhook-configuration")
	obj.Object["webhooks"] = []interface{}{map[string]interface{}{
		"name":                    "validation.gatekeeper.sh",
		"admissionReviewVersions": []interface{}{"v1", "v1beta1"},
		"clientConfig": map[string]interface{}{
			"url":      fmt.Sprintf("https://127.0.0.1:%d/v1/admit", g.port),
			"caBundle": base64.StdEncoding.EncodeToString(g.ca.certPEM),
		},
		"failurePolicy": "Ignore",
		"matchPolicy":   "Exact",
		"namespaceSelector": map[string]interface{}{"matchExpressions": []interface{}{
			map[string]interface{}{"key": "admission.gatekeeper.sh/ignore", "operator": "DoesNotExist"},
			map[string]interface{}{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []interface{}{gatekeeperNamespace}},
		}},
		"rules": []interface{}{map[string]interface{}{
			"apiGroups": []interface{}{"*"}, "apiVersions": []interface{}{"*"},
			"operations": []interface{}{"CREATE", "UPDATE", "DELETE", "CONNECT"},
			"resources":  []interface{}{"*", "pods/ephemeralcontainers", "pods/exec", "pods/log", "pods/eviction", "pods/portforward", "pods/proxy", "pods/attach", "pods/binding", "deployments/scale", "replicasets/scale", "statefulsets/scale", "replicationcontrollers/scale", "services/proxy", "nodes/proxy", "services/status"},
			"scope":      "*",
		}},
		"sideEffects":    "None",
		"timeoutSeconds": int64(3),
	}}
	return obj
}

// install applies `meshlife install gatekeeper --constraint CLUSTER --url ...`, runs its
// provider as its Deployment would, and waits until Gatekeeper enforces the constraints.
func (g *gatekeeperEngine) install(ctx context.Context, cluster string) error {
	h := g.h
	if g.server != nil {
		g.server.stop()
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	objs, _, err := install(h.meshlife, h.repo, "gatekeeper", "--constraint", cluster, "--url", fmt.Sprintf("https://127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	if err := h.applyInstall(ctx, "meshlife install gatekeeper --constraint "+filepath.Base(cluster), objs); err != nil {
		return err
	}
	g.installed = objs
	g.server, err = serverOf(ctx, h.k, h.cp, h.procs, h.meshlife, filepath.Join(h.dir, "gatekeeper-"+filepath.Base(cluster)), "meshlife-provider", port, objs)
	if err != nil {
		return err
	}
	if err := g.server.start(ctx); err != nil {
		return err
	}
	for _, obj := range objs {
		if obj.GetKind() != "MeshLifecycle" {
			continue
		}
		if err := g.waitEnforced(ctx, obj); err != nil {
			return err
		}
	}
	return h.waitCalled(ctx, g.server, "validate", 60*time.Second)
}

// waitEnforced waits for the constraint's status to say Gatekeeper's webhook enforces the
// generation just applied.
func (g *gatekeeperEngine) waitEnforced(ctx context.Context, constraint *unstructured.Unstructured) error {
	return waitUntil(ctx, 90*time.Second, "Gatekeeper enforcing constraint "+constraint.GetName(), func() (bool, error) {
		live, err := g.h.k.get(ctx, constraint)
		if err != nil {
			return false, err
		}
		byPod, _, _ := unstructured.NestedSlice(live.Object, "status", "byPod")
		for _, entry := range byPod {
			status := entry.(map[string]interface{})
			enforced, _ := status["enforced"].(bool)
			observed, _ := status["observedGeneration"].(int64)
			if enforced && observed == live.GetGeneration() {
				return true, nil
			}
		}
		return false, fmt.Errorf("status.byPod: %v", byPod)
	})
}

// createExamples creates every example object without judging it (before the constraints);
// it returns the objects that exist (the API server's own validation refuses some).
func (h *harness) createExamples(ctx context.Context) (map[string]bool, error) {
	created := map[string]bool{}
	for _, file := range h.files {
		if err := prepareNamespaces(ctx, h.k, file); err != nil {
			return nil, err
		}
		for _, obj := range file.objects {
			_, err := h.k.create(ctx, obj, false)
			if apierrors.IsInvalid(err) {
				continue
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, fmt.Errorf("%s %s: %w", file.path, describe(obj), err)
			}
			created[obj.GetKind()+" "+obj.GetNamespace()+"/"+obj.GetName()] = true
		}
	}
	return created, nil
}

func (h *harness) deleteExamples(ctx context.Context) error {
	for _, file := range h.files {
		for _, obj := range file.objects {
			if err := h.k.remove(ctx, obj); err != nil {
				return fmt.Errorf("%s %s: %w", file.path, describe(obj), err)
			}
		}
	}
	return nil
}

// auditCheck waits for an audit that started after the constraints were applied and
// compares each constraint's status violations with check's findings for it.
func (g *gatekeeperEngine) auditCheck(ctx context.Context, cluster string, applied time.Time, existing map[string]bool) error {
	h := g.h
	findings, err := meshlifeCheck(h.meshlife, h.repo, cluster, exampleDirs)
	if err != nil {
		return err
	}
	for _, constraint := range g.installed {
		if constraint.GetKind() != "MeshLifecycle" {
			continue
		}
		var live *unstructured.Unstructured
		err := waitUntil(ctx, 120*time.Second, "an audit of "+constraint.GetName()+" after the install", func() (bool, error) {
			var err error
			live, err = h.k.get(ctx, constraint)
			if err != nil {
				return false, err
			}
			stamp, _, _ := unstructured.NestedString(live.Object, "status", "auditTimestamp")
			at, err := time.Parse(time.RFC3339, stamp)
			// An audit that began after the apply (the timestamp is its start, to the second).
			return err == nil && at.After(applied.Add(time.Second)), nil
		})
		if err != nil {
			return err
		}
		want := map[string]int{}
		seen := map[string]bool{}
		for _, f := range findings {
			if f.Constraint != constraint.GetName() || !existing[f.object()] {
				continue
			}
			// An object defined in two example files is one object in the cluster.
			key := f.object() + " " + f.Rule
			if seen[f.File+key] {
				continue
			}
			seen[f.File+key] = true
			want[key] = 1
		}
		got := map[string]int{}
		violations, _, _ := unstructured.NestedSlice(live.Object, "status", "violations")
		for _, v := range violations {
			entry := v.(map[string]interface{})
			kind, _ := entry["kind"].(string)
			namespace, _ := entry["namespace"].(string)
			name, _ := entry["name"].(string)
			message, _ := entry["message"].(string)
			for _, rule := range rulesIn(message) {
				got[kind+" "+namespace+"/"+name+" "+rule] = 1
			}
		}
		total, _, _ := unstructured.NestedInt64(live.Object, "status", "totalViolations")
		var differences []string
		for key := range want {
			if got[key] == 0 {
				differences = append(differences, "only check reports "+key)
			}
		}
		for key := range got {
			if want[key] == 0 {
				differences = append(differences, "only the audit reports "+key)
			}
		}
		for _, d := range differences {
			fmt.Printf("  DIFF audit %s %s: %s\n", filepath.Base(cluster), constraint.GetName(), d)
		}
		h.check(len(differences) == 0, "gatekeeper audit %s %s: %d violations (%d findings), as meshlife check", filepath.Base(cluster), constraint.GetName(), total, len(want))
	}
	return nil
}

// rotate: the Provider's caBundle first trusts a new CA beside the install's, then the
// provider's certificate files change under the running server.
func (g *gatekeeperEngine) rotate() error {
	ctx := context.Background()
	h := g.h
	provider, err := h.k.get(ctx, objectFor("externaldata.gatekeeper.sh/v1beta1", "Provider", "", "meshlife"))
	if err != nil {
		return err
	}
	next, err := newAuthority("meshlife-rotated-ca")
	if err != nil {
		return err
	}
	old, _, _ := unstructured.NestedString(provider.Object, "spec", "caBundle")
	oldPEM, err := base64.StdEncoding.DecodeString(old)
	if err != nil {
		return err
	}
	both := base64.StdEncoding.EncodeToString(append(oldPEM, next.certPEM...))
	if err := unstructured.SetNestedField(provider.Object, both, "spec", "caBundle"); err != nil {
		return err
	}
	provider.SetManagedFields(nil)
	provider.SetResourceVersion("")
	if _, err := h.k.apply(ctx, provider); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	return rotateFiles(g.server, next)
}

// securityChecks: only Gatekeeper's client certificate gets a verdict.
func (g *gatekeeperEngine) securityChecks(ctx context.Context) error {
	h := g.h
	caPEM, err := os.ReadFile(filepath.Join(g.server.dir, "mounts", "tls", "ca.crt"))
	if err != nil {
		return err
	}
	stranger, err := newAuthority("stranger-ca")
	if err != nil {
		return err
	}
	strangerLeaf, err := stranger.issue(pkix.Name{CommonName: "gatekeeper-webhook-service.gatekeeper-system.svc"}, nil, nil, false, true)
	if err != nil {
		return err
	}
	body := `{"apiVersion":"externaldata.gatekeeper.sh/v1beta1","kind":"ProviderRequest","request":{"keys":["{}"]}}`
	for _, client := range []struct {
		what string
		leaf *issued
	}{{"no client certificate", nil}, {"a client certificate of another CA", &strangerLeaf}} {
		status, answer, err := postTLS(g.server.url()+"/validate", caPEM, client.leaf, body)
		var reply struct {
			Response struct {
				Items []interface{} `json:"items"`
			} `json:"response"`
		}
		verdict := err == nil && json.Unmarshal([]byte(answer), &reply) == nil && len(reply.Response.Items) > 0
		h.check(!verdict, "gatekeeper: a caller with %s gets no verdict (%d %q %v)", client.what, status, truncate(answer, 120), err)
	}
	return nil
}

// installElsewhere runs the provider in another namespace than Gatekeeper's, as `meshlife
// install gatekeeper --namespace` tells a user to: the install refuses until it is given a
// copy of Gatekeeper's CA Secret there, made with the commands it prints; then every example
// is judged through that provider, whose pod mounts the copy.
func (g *gatekeeperEngine) installElsewhere(ctx context.Context, cluster, namespace string) error {
	h := g.h
	if g.server != nil {
		g.server.stop()
		g.server = nil
	}
	_, _, err := install(h.meshlife, h.repo, "gatekeeper", "--namespace", namespace, "--constraint", cluster)
	h.check(err != nil && strings.Contains(err.Error(), "--gatekeeper-cert-secret"),
		"install gatekeeper --namespace %s without a copy of Gatekeeper's CA is refused, naming --gatekeeper-cert-secret", namespace)
	// What the refusal tells the user to do: the namespace, and ca.crt copied into it.
	if _, err := h.k.apply(ctx, objectFor("v1", "Namespace", "", namespace)); err != nil {
		return err
	}
	original, err := h.k.core.CoreV1().Secrets(gatekeeperNamespace).Get(ctx, "gatekeeper-webhook-server-cert", metav1.GetOptions{})
	if err != nil {
		return err
	}
	copied := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "gatekeeper-ca"},
		Data:       map[string][]byte{"ca.crt": original.Data["ca.crt"]},
	}
	if _, err := h.k.core.CoreV1().Secrets(namespace).Create(ctx, copied, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	objs, _, err := install(h.meshlife, h.repo, "gatekeeper", "--namespace", namespace, "--gatekeeper-cert-secret", "gatekeeper-ca",
		"--constraint", cluster, "--url", fmt.Sprintf("https://127.0.0.1:%d", port))
	if err != nil {
		return err
	}
	// The constraints of the last install call a provider that is stopped now, and they do not
	// exclude this namespace (the install says so): they go first, so that this install's
	// own Deployment is not reviewed through a provider that is down.
	for _, obj := range g.installed {
		if obj.GetKind() == "MeshLifecycle" {
			if err := h.k.remove(ctx, obj); err != nil {
				return err
			}
		}
	}
	what := fmt.Sprintf("meshlife install gatekeeper --namespace %s --gatekeeper-cert-secret gatekeeper-ca", namespace)
	if err := h.applyInstall(ctx, what, objs); err != nil {
		return err
	}
	server, err := serverOf(ctx, h.k, h.cp, h.procs, h.meshlife, filepath.Join(h.dir, "gatekeeper-in-"+namespace), "meshlife-provider", port, objs)
	if err != nil {
		return err
	}
	if err := server.start(ctx); err != nil {
		return err
	}
	for _, obj := range objs {
		if obj.GetKind() == "MeshLifecycle" {
			if err := g.waitEnforced(ctx, obj); err != nil {
				return err
			}
		}
	}
	if err := h.waitCalled(ctx, server, "validate", 60*time.Second); err != nil {
		return err
	}
	if err := h.judge(ctx, "gatekeeper/"+namespace, cluster, false); err != nil {
		return err
	}
	server.stop()
	// The namespace stays (no kube-controller-manager finalizes a deleted one); its objects go.
	for _, obj := range objs {
		if obj.GetNamespace() == namespace {
			if err := h.k.remove(ctx, obj); err != nil {
				return err
			}
		}
	}
	return h.k.remove(ctx, objectFor("v1", "Secret", namespace, "gatekeeper-ca"))
}
