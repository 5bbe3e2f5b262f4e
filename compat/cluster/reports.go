package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var policyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}

// startReports runs Kyverno's reports controller as its Deployment does: it turns the
// admission controller's ephemeral reports into each Namespace's PolicyReports.
func (ky *kyvernoEngine) startReports() error {
	// Each Kyverno controller binds its metrics port even with --disableMetrics; in a cluster
	// each has a pod of its own, here they share loopback.
	metricsPort, err := freePort()
	if err != nil {
		return err
	}
	ky.reports, err = ky.h.procs.start("kyverno-reports-controller", filepath.Join(ky.h.bin, "kyverno-reports-controller"), []string{
		"--kubeconfig", ky.h.cp.adminKC, "--disableMetrics", "--metricsPort", fmt.Sprint(metricsPort), "--v=1",
		// The installs' policies judge at admission only (background off); a scan of existing
		// objects would call meshlife serve for each.
		"--backgroundScan=false",
	}, []string{
		"KYVERNO_NAMESPACE=" + kyvernoNamespace, "KYVERNO_SERVICEACCOUNT_NAME=kyverno-reports-controller",
		"KYVERNO_DEPLOYMENT=kyverno-reports-controller", "KYVERNO_POD_NAME=kyverno-reports-controller-0",
		"INIT_CONFIG=kyverno", "METRICS_CONFIG=kyverno-metrics",
	})
	if err != nil {
		return err
	}
	// It serves no health endpoint: a controller that could not start has exited by now.
	select {
	case <-ky.reports.done:
		return fmt.Errorf("Kyverno's reports controller exited at start: %v\n%s", ky.reports.err, ky.reports.tail(5))
	case <-time.After(5 * time.Second):
		return nil
	}
}

// reportsCheck: objects created through the installed pair are in their Namespace's
// PolicyReport with the warnings policy's verdict, `fail` naming exactly the warn rules check
// gives for a warned object, `pass` for a clean one.
func (ky *kyvernoEngine) reportsCheck(ctx context.Context, engine, cluster, warningsPolicy string) error {
	h := ky.h
	findings, err := meshlifeCheck(h.meshlife, h.repo, cluster, exampleDirs)
	if err != nil {
		return err
	}
	want := expectations(findings)
	type created struct {
		obj      *unstructured.Unstructured
		key      string
		uid      string
		warnings []string
	}
	var objects []created
	warned, clean := 0, 0
	for _, file := range h.files {
		prepared := false
		for _, obj := range file.objects {
			key := exampleKey(file.path, obj)
			e := want[key]
			switch {
			// PolicyReports are per Namespace.
			case obj.GetNamespace() == "":
				continue
			case e.word() == "warned" && warned < 4:
			case e.word() == "clean" && clean < 2:
			default:
				continue
			}
			if !prepared {
				if err := prepareNamespaces(ctx, h.k, file); err != nil {
					return err
				}
				prepared = true
			}
			v := verdictOf(h.k.create(ctx, obj, false))
			if v.word() != e.word() {
				// judge has reported it already; an object that is not there has no report.
				if !v.refused && v.err == nil && !v.invalid {
					_ = h.k.remove(ctx, obj)
				}
				continue
			}
			live, err := h.k.get(ctx, obj)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			objects = append(objects, created{obj: obj, key: key, uid: string(live.GetUID()), warnings: rulesIn(msgs(e.warn)...)})
			if e.word() == "warned" {
				warned++
			} else {
				clean++
			}
		}
	}
	defer func() {
		for _, c := range objects {
			_ = h.k.remove(ctx, c.obj)
		}
	}()
	if warned == 0 || clean == 0 {
		h.fail("%s: PolicyReports: %d warned and %d clean examples were created; the check needs both", engine, warned, clean)
		return nil
	}
	started := time.Now()
	var missing []string
	err = waitUntil(ctx, 120*time.Second, "PolicyReports with the "+warningsPolicy+" verdicts", func() (bool, error) {
		missing = nil
		for _, c := range objects {
			result, found, err := reportResult(ctx, h.k, c.obj.GetNamespace(), c.uid, warningsPolicy)
			if err != nil {
				return false, err
			}
			wantResult := "pass"
			if len(c.warnings) > 0 {
				wantResult = "fail"
			}
			switch {
			case !found:
				missing = append(missing, c.key+": no result yet")
			case result["result"] != wantResult:
				missing = append(missing, fmt.Sprintf("%s: result %v, want %s (%v)", c.key, result["result"], wantResult, result["message"]))
			case wantResult == "fail":
				named := rulesIn(fmt.Sprint(result["message"]))
				sort.Strings(named)
				if strings.Join(named, ",") != strings.Join(c.warnings, ",") {
					missing = append(missing, fmt.Sprintf("%s: the report names %v, check %v", c.key, named, c.warnings))
				}
			}
		}
		return len(missing) == 0, fmt.Errorf("%s", strings.Join(missing, "; "))
	})
	if err != nil {
		h.fail("%s: PolicyReports under %s: %v (reports controller log: %s)", engine, filepath.Base(cluster), err, truncate(ky.reports.tail(5), 600))
		return nil
	}
	h.pass("%s: PolicyReports under %s: %d warned objects `fail` %s with exactly check's warn rules, %d clean ones `pass`, in %.1fs",
		engine, filepath.Base(cluster), warned, warningsPolicy, clean, time.Since(started).Seconds())
	return nil
}

// reportResult is the warnings policy's result for the object of that UID in its Namespace's
// PolicyReports.
func reportResult(ctx context.Context, k *kube, namespace, uid, policy string) (map[string]interface{}, bool, error) {
	list, err := k.dyn.Resource(policyReports).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, false, err
	}
	for _, report := range list.Items {
		scopeUID, _, _ := unstructured.NestedString(report.Object, "scope", "uid")
		results, _, _ := unstructured.NestedSlice(report.Object, "results")
		for _, r := range results {
			result, _ := r.(map[string]interface{})
			if result["policy"] != policy {
				continue
			}
			if scopeUID == uid || resultNamesUID(result, uid) {
				return result, true, nil
			}
		}
	}
	return nil, false, nil
}

// resultNamesUID: a result that names its resource itself (reports scoped to none).
func resultNamesUID(result map[string]interface{}, uid string) bool {
	resources, _ := result["resources"].([]interface{})
	for _, r := range resources {
		if ref, ok := r.(map[string]interface{}); ok && ref["uid"] == uid {
			return true
		}
	}
	return false
}
