package main

// The drill of meshlife serve itself, behind the API server: charts/meshlife installed with
// engine=webhook and failurePolicy=fail on the real node (the meshlife image), then `meshlife
// drill --admissions` restarts its Deployment while the drill sends the API server dry-run pod
// creations that the webhook denies (ML405). Every admission must be answered, and answered
// as before the rollout: 0 lost.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	serveDrillNamespace      = "meshlife-drill"
	serveAdmissionsNamespace = "reality-admissions"
)

// serveAdmissionPod is what each admission creates (dry run): a meshed pod whose preStop
// outlasts its grace period, which meshlife's webhook denies (ML405). An exec hook: the API
// server itself refuses a sleep action longer than the grace period.
const serveAdmissionPod = `apiVersion: v1
kind: Pod
metadata: {name: admission-probe}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: ` + workloadImage + `
    lifecycle: {preStop: {exec: {command: [sleep, "60"]}}}
`

func (r *reality) drillServe(ctx context.Context) error {
	if r.h.helm == "" {
		r.h.fail("drill of meshlife serve: no helm binary (-helm) to install charts/meshlife")
		return nil
	}
	// The namespace first, so the server's namespace watch knows it is injected from its start.
	if err := r.apply(ctx, meshedNamespace(serveAdmissionsNamespace)); err != nil {
		r.h.fail("drill of meshlife serve: %v", err)
		return nil
	}
	defer r.removeNamespace(ctx, serveAdmissionsNamespace)
	// `meshlife install webhook` of the earlier stages leaves its ClusterRole unowned by Helm.
	rbac := r.h.k.core.RbacV1()
	for _, err := range []error{
		rbac.ClusterRoleBindings().Delete(ctx, "meshlife-namespace-reader", metav1.DeleteOptions{}),
		rbac.ClusterRoles().Delete(ctx, "meshlife-namespace-reader", metav1.DeleteOptions{}),
	} {
		if err != nil && !apierrors.IsNotFound(err) {
			r.h.fail("drill of meshlife serve: %v", err)
			return nil
		}
	}
	if _, err := r.h.helmCommand("install", chartRelease, "charts/meshlife", "-n", serveDrillNamespace,
		"--create-namespace", "--set", "engine=webhook", "--set", "image="+meshlifeImage,
		"--set", "failurePolicy=fail"); err != nil {
		r.h.fail("drill of meshlife serve: %v", err)
		return nil
	}
	defer func() {
		if _, err := r.h.helmCommand("uninstall", chartRelease, "-n", serveDrillNamespace); err != nil {
			fmt.Printf("  note: %v\n", err)
		}
		r.removeNamespace(ctx, serveDrillNamespace)
	}()
	// Pods here cannot reach the API server (it listens on 127.0.0.1 only), so the server
	// cannot watch Namespaces; it judges without it, and the pods it judges are already
	// injected (Istio's injector runs first), so the verdict does not need the namespace's
	// labels. The rollout this patch starts is over before the drill begins.
	noWatch := []byte(`[{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--no-namespace-watch"}]`)
	if _, err := r.h.k.core.AppsV1().Deployments(serveDrillNamespace).Patch(ctx, "meshlife", types.JSONPatchType, noWatch, metav1.PatchOptions{}); err != nil {
		r.h.fail("drill of meshlife serve: %v", err)
		return nil
	}
	if err := waitUntil(ctx, 180*time.Second, "deployment/meshlife available", func() (bool, error) {
		deployment, err := r.h.k.core.AppsV1().Deployments(serveDrillNamespace).Get(ctx, "meshlife", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status := deployment.Status
		if status.ObservedGeneration < deployment.Generation || status.AvailableReplicas != 2 ||
			status.UpdatedReplicas != 2 || status.Replicas != 2 {
			return false, nil
		}
		// The pods of the unpatched template gone too: the drill starts from two.
		pods, err := r.h.k.core.CoreV1().Pods(serveDrillNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=meshlife"})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 2, nil
	}); err != nil {
		r.h.fail("drill of meshlife serve: %v", err)
		return nil
	}
	podFile := filepath.Join(r.dir, "admission-probe.yaml")
	if err := os.WriteFile(podFile, []byte(serveAdmissionPod), 0o644); err != nil {
		r.h.fail("drill of meshlife serve: %v", err)
		return nil
	}
	args := []string{"drill", "deployment/meshlife", "-n", serveDrillNamespace, "--kubeconfig", r.h.cp.adminKC,
		"--yes", "--admissions", serveAdmissionsNamespace, "--admission-pod", podFile, "--rate", "20",
		"--timeout", "15s", "--before", "5s", "--after", "5s", "--settle-timeout", "3m", "-o", "json"}
	started := time.Now()
	run, err := r.h.runMeshlife(args...)
	took := time.Since(started)
	evidence := filepath.Join(r.dir, "evidence", "drill-meshlife-serve.json")
	_ = os.MkdirAll(filepath.Dir(evidence), 0o755)
	_ = os.WriteFile(evidence, []byte(run.stdout+"\n--- stderr\n"+run.stderr), 0o644)
	if err != nil {
		r.h.fail("drill of meshlife serve: %v", err)
		return nil
	}
	var report drillReport
	if jsonErr := json.Unmarshal([]byte(run.stdout), &report); jsonErr != nil {
		r.h.fail("drill of meshlife serve: exit %d, no JSON report (%v): %s", run.code, jsonErr, firstLine(run.stderr))
		return nil
	}
	calls, errors := report.totals()
	var reasons []string
	for _, phase := range report.Phases {
		for reason, count := range phase.ErrorsByReason {
			reasons = append(reasons, fmt.Sprintf("%s %d (%s)", reason, count, phase.Phase))
		}
	}
	fmt.Printf("  drill deployment/meshlife (meshlife serve behind the API server, failurePolicy Fail, its own rollout): %d admissions, %d lost%s; exit %d in %.0fs\n",
		calls, errors, parenthesised(strings.Join(reasons, ", ")), run.code, took.Seconds())
	denied := strings.Contains(report.Load, "they were denied")
	r.h.check(calls > 0 && errors == 0 && run.code == 0 && denied,
		"drill of meshlife serve: every admission answered through its rollout, each denied as before it (%d admissions, %d lost, exit %d; load: %s)",
		calls, errors, run.code, report.Load)
	return nil
}

func parenthesised(text string) string {
	if text == "" {
		return ""
	}
	return " (" + text + ")"
}
