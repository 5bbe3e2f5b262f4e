package main

// charts/meshlife in the real API server: `helm install` creates every object (each validated
// by the API server, the CRD-backed ones after their CRDs, and by the engine's own webhooks),
// `helm upgrade` with other values changes them and keeps the certificates, and `helm
// uninstall` leaves nothing of the release behind. No pod runs here (no kubelet), so Helm is
// never asked to wait for one; the engine's judging is the rest of this harness's business.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const chartRelease = "meshlife"

func (h *harness) helmCommand(args ...string) (string, error) {
	cmd := exec.Command(h.helm, args...)
	cmd.Dir = h.repo
	home := filepath.Join(h.dir, "helm")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+h.cp.adminKC,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var kept []string
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.Contains(line, "found symbolic link in path") {
			kept = append(kept, line)
		}
	}
	text := strings.Join(kept, "\n")
	if err != nil {
		return text, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, indentLines(text))
	}
	return text, nil
}

// The objects of the release as Helm last applied them.
func (h *harness) releaseObjects(namespace string) ([]*unstructured.Unstructured, error) {
	manifest, err := h.helmCommand("get", "manifest", chartRelease, "-n", namespace)
	if err != nil {
		return nil, err
	}
	return decodeObjects([]byte(manifest))
}

func (h *harness) chartCheck(ctx context.Context, engine string) error {
	if h.helm == "" {
		return nil
	}
	fmt.Printf("  the chart: helm install, upgrade and uninstall, engine=%s\n", engine)
	// Not meshlife-system: this harness's own installs leave their server's objects there.
	namespace := "meshlife-chart"
	if engine == "gatekeeper" {
		namespace = gatekeeperNamespace
	}
	cluster := strings.TrimSuffix(benchCluster, ".yaml")
	installArgs := []string{"install", chartRelease, "charts/meshlife", "-n", namespace,
		"--set", "engine=" + engine, "--set", "cluster=" + cluster}
	if namespace != gatekeeperNamespace {
		installArgs = append(installArgs, "--create-namespace")
	}
	out, err := h.helmCommand(installArgs...)
	if !h.check(err == nil, "chart %s: helm install %v", engine, err) {
		return nil
	}
	if engine == "gatekeeper" {
		// The constraints' kind exists once Gatekeeper has made it from the template: the
		// chart leaves them out until then, and says so.
		h.check(strings.Contains(out, "constraints are NOT installed yet"), "chart gatekeeper: the install's notes say to upgrade once the MeshLifecycle kind exists")
		crd := objectFor("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "meshlifecycle.constraints.gatekeeper.sh")
		if err := waitUntil(ctx, 90*time.Second, "Gatekeeper making the MeshLifecycle CRD", func() (bool, error) {
			_, err := h.k.get(ctx, crd)
			return err == nil, err
		}); err != nil {
			h.fail("chart gatekeeper: %v", err)
			return nil
		}
		if _, err := h.helmCommand("upgrade", chartRelease, "charts/meshlife", "-n", namespace, "--reuse-values"); err != nil {
			h.fail("chart gatekeeper: the upgrade that adds the constraints: %v", err)
			return nil
		}
	}
	installed, err := h.releaseObjects(namespace)
	if err != nil {
		return err
	}
	kinds := map[string]int{}
	missing := h.missingObjects(ctx, installed)
	for _, obj := range installed {
		kinds[obj.GetKind()]++
	}
	h.check(len(missing) == 0, "chart %s: helm install created every object of the release (%d: %s) %v", engine, len(installed), kindList(kinds), missing)
	if engine == "gatekeeper" {
		h.check(kinds["MeshLifecycle"] == 2, "chart gatekeeper: both MeshLifecycle constraints are in the release (%d)", kinds["MeshLifecycle"])
	}
	name := "meshlife"
	if engine == "gatekeeper" {
		name = "meshlife-provider"
	}
	tlsBefore, _ := h.k.core.CoreV1().Secrets(namespace).Get(ctx, name+"-tls", metav1.GetOptions{})

	// Another value or two: the objects change, the certificates stay.
	upgradeCluster := "linkerd-2.20-native"
	if _, err := h.helmCommand("upgrade", chartRelease, "charts/meshlife", "-n", namespace, "--reuse-values",
		"--set", "replicas=3", "--set", "cluster="+upgradeCluster); err != nil {
		h.fail("chart %s: helm upgrade: %v", engine, err)
	} else {
		upgraded, err := h.releaseObjects(namespace)
		if err != nil {
			return err
		}
		missing := h.missingObjects(ctx, upgraded)
		deployment, err := h.k.core.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		replicas := int32(0)
		if err == nil && deployment.Spec.Replicas != nil {
			replicas = *deployment.Spec.Replicas
		}
		h.check(len(missing) == 0 && replicas == 3, "chart %s: helm upgrade --set replicas=3 --set cluster=%s applied (replicas %d) %v", engine, upgradeCluster, replicas, missing)
		tlsAfter, err := h.k.core.CoreV1().Secrets(namespace).Get(ctx, name+"-tls", metav1.GetOptions{})
		h.check(err == nil && tlsBefore != nil && reflect.DeepEqual(tlsBefore.Data, tlsAfter.Data),
			"chart %s: helm upgrade kept the TLS Secret %s-tls (read back by lookup)", engine, name)
		h.check(h.releaseHolds(ctx, engine, upgraded, upgradeCluster), "chart %s: the upgraded release carries %s's facts", engine, upgradeCluster)
		installed = append(installed, upgraded...)
	}

	if _, err := h.helmCommand("uninstall", chartRelease, "-n", namespace); err != nil {
		h.fail("chart %s: helm uninstall: %v", engine, err)
		return nil
	}
	if engine == "gatekeeper" {
		// Helm keeps the constraints (the chart says why): they go with their kind, whose
		// CRD Gatekeeper made with the template as its controlling owner, so that
		// kube-controller-manager's garbage collector deletes it once the template is gone.
		// No controller-manager runs here: once the template is gone, the harness checks that
		// owner and deletes the CRD as the collector would; the API server then deletes the
		// constraints with it.
		crd := objectFor("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "meshlifecycle.constraints.gatekeeper.sh")
		template := objectFor("templates.gatekeeper.sh/v1", "ConstraintTemplate", "", "meshlifecycle")
		err := waitUntil(ctx, 60*time.Second, "helm uninstall deleting the ConstraintTemplate", func() (bool, error) {
			_, err := h.k.get(ctx, template)
			return apierrors.IsNotFound(err), err
		})
		live, getErr := h.k.get(ctx, crd)
		owned := false
		if getErr == nil {
			for _, owner := range live.GetOwnerReferences() {
				owned = owned || owner.Kind == "ConstraintTemplate" && owner.Name == "meshlifecycle" && owner.Controller != nil && *owner.Controller
			}
		}
		h.check(err == nil && owned, "chart gatekeeper: after helm uninstall the MeshLifecycle CRD is left to the garbage collector, its template (its controlling owner) gone %v %v", err, getErr)
		if err := h.k.remove(ctx, crd); err != nil {
			return err
		}
		installed = append(installed, crd)
	}
	var left []string
	err = waitUntil(ctx, 90*time.Second, "helm uninstall removing every object", func() (bool, error) {
		left = nil
		for _, obj := range installed {
			if _, err := h.k.get(ctx, obj); err == nil || !apierrors.IsNotFound(err) && !strings.Contains(fmt.Sprint(err), "no matches for kind") {
				left = append(left, describe(obj))
			}
		}
		secrets, err := h.k.core.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + chartRelease})
		if err != nil {
			return false, err
		}
		for _, secret := range secrets.Items {
			left = append(left, "Secret "+namespace+"/"+secret.Name+" (Helm's record of the release)")
		}
		return len(left) == 0, fmt.Errorf("left: %s", strings.Join(dedupe(left), ", "))
	})
	h.check(err == nil, "chart %s: helm uninstall left nothing of the release behind %v", engine, err)
	return nil
}

// The objects of objs the API server does not hold.
func (h *harness) missingObjects(ctx context.Context, objs []*unstructured.Unstructured) []string {
	var missing []string
	for _, obj := range objs {
		if _, err := h.k.get(ctx, obj); err != nil {
			missing = append(missing, describe(obj)+": "+err.Error())
		}
	}
	return missing
}

// Whether the live objects carry the cluster file's facts: Linkerd 2.20's native sidecars in
// the constraints (gatekeeper), the ConfigMap (webhook) or the policies (kyverno).
func (h *harness) releaseHolds(ctx context.Context, engine string, objs []*unstructured.Unstructured, cluster string) bool {
	for _, obj := range objs {
		switch obj.GetKind() {
		case "MeshLifecycle", "ConfigMap", "ClusterPolicy", "ValidatingPolicy":
		default:
			continue
		}
		live, err := h.k.get(ctx, obj)
		if err != nil {
			continue
		}
		text := fmt.Sprint(live.Object)
		if strings.Contains(text, "linkerd") && strings.Contains(text, "nativeSidecars") &&
			(strings.Contains(text, "nativeSidecars:true") || strings.Contains(text, `"nativeSidecars": dyn(true)`) || strings.Contains(text, "nativeSidecars: true")) {
			return true
		}
	}
	return false
}

func kindList(kinds map[string]int) string {
	var parts []string
	for kind, n := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", kind, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, item := range list {
		if !seen[item] {
			seen[item] = true
			out = append(out, item)
		}
	}
	return out
}
