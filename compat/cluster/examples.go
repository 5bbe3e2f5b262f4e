package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// exampleDirs are applied as a user applies them, file by file, Namespaces first in each; the
// last holds workloads whose text meets the engines' own templating.
var exampleDirs = []string{"examples/istio", "examples/linkerd", "compat/cluster/testdata/hostile-text.yaml"}

type exampleFile struct {
	path       string
	namespaces []*unstructured.Unstructured
	objects    []*unstructured.Unstructured
}

func readExamples(repo string) ([]exampleFile, error) {
	var out []exampleFile
	for _, dir := range exampleDirs {
		err := fs.WalkDir(os.DirFS(repo), dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if ext := path.Ext(p); ext != ".yaml" && ext != ".yml" && ext != ".json" {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(repo, p))
			if err != nil {
				return err
			}
			objs, err := decodeObjects(data)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			file := exampleFile{path: p}
			for _, obj := range objs {
				if obj.GetKind() == "Namespace" && obj.GetAPIVersion() == "v1" {
					file.namespaces = append(file.namespaces, obj)
				} else {
					file.objects = append(file.objects, obj)
				}
			}
			out = append(out, file)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// prepareNamespaces applies a file's Namespaces and gives each the ServiceAccounts its pods
// name (kube-controller-manager, not run here, makes `default`; the API server's
// ServiceAccount admission refuses a Pod whose account is missing).
func prepareNamespaces(ctx context.Context, k *kube, file exampleFile) error {
	for _, ns := range file.namespaces {
		if _, err := k.apply(ctx, ns); err != nil {
			return fmt.Errorf("%s: %w", file.path, err)
		}
	}
	accounts := map[[2]string]bool{}
	for _, obj := range file.objects {
		namespace := obj.GetNamespace()
		if namespace == "" {
			namespace = "default"
		}
		accounts[[2]string{namespace, "default"}] = true
		for _, account := range serviceAccountsNamed(obj.Object) {
			accounts[[2]string{namespace, account}] = true
		}
	}
	for key := range accounts {
		if err := ensureNamespace(ctx, k, key[0]); err != nil {
			return err
		}
		account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: key[0], Name: key[1]}}
		_, err := k.core.CoreV1().ServiceAccounts(key[0]).Create(ctx, account, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("ServiceAccount %s/%s: %w", key[0], key[1], err)
		}
	}
	return nil
}

func ensureNamespace(ctx context.Context, k *kube, name string) error {
	_, err := k.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("Namespace %s: %w", name, err)
	}
	return nil
}

// serviceAccountsNamed finds every serviceAccountName in an object (pod specs at any depth).
func serviceAccountsNamed(value interface{}) []string {
	var out []string
	switch v := value.(type) {
	case map[string]interface{}:
		for key, child := range v {
			if name, ok := child.(string); ok && (key == "serviceAccountName" || key == "serviceAccount") && name != "" {
				out = append(out, name)
			}
			out = append(out, serviceAccountsNamed(child)...)
		}
	case []interface{}:
		for _, child := range v {
			out = append(out, serviceAccountsNamed(child)...)
		}
	}
	return out
}

// verdict is what the API server answered one create.
type verdict struct {
	refused  bool
	message  string
	warnings []string
	// invalid: the API server's own validation refused the object, before any webhook.
	invalid bool
	// err is an answer that is neither an admission nor a refusal by a webhook.
	err error
}

func verdictOf(warnings []string, err error) verdict {
	v := verdict{warnings: warnings}
	if err == nil {
		return v
	}
	if status, ok := err.(apierrors.APIStatus); ok && strings.Contains(status.Status().Message, "denied the request") {
		v.refused, v.message = true, status.Status().Message
		return v
	}
	if apierrors.IsInvalid(err) {
		v.invalid, v.message = true, err.Error()
		return v
	}
	v.err = err
	return v
}

func (v verdict) word() string {
	switch {
	case v.invalid:
		return "invalid"
	case v.err != nil:
		return "error"
	case v.refused:
		return "refused"
	case len(v.warnings) > 0:
		return "warned"
	}
	return "clean"
}

// wordWithRules is word with the meshlife rules the answer names, so that a figure shows
// which admissions meshlife judged: the API server's own warnings (the typical Deployment's
// duplicate ports) make an answer "warned", judged or not.
func (v verdict) wordWithRules() string {
	if rules := rulesIn(strings.Join(v.warnings, "\n"), v.message); len(rules) > 0 {
		return v.word() + " " + strings.Join(rules, ",")
	}
	return v.word()
}

// expectation is what `meshlife check --constraint` says of one object.
type expectation struct {
	deny, warn []finding
}

func (e expectation) word() string {
	switch {
	case len(e.deny) > 0:
		return "refused"
	case len(e.warn) > 0:
		return "warned"
	}
	return "clean"
}

func expectations(findings []finding) map[string]expectation {
	out := map[string]expectation{}
	for _, f := range findings {
		key := f.File + " " + f.object()
		e := out[key]
		switch f.EnforcementAction {
		case "deny":
			e.deny = append(e.deny, f)
		case "warn":
			e.warn = append(e.warn, f)
		}
		out[key] = e
	}
	return out
}

func exampleKey(file string, obj *unstructured.Unstructured) string {
	return file + " " + obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

func msgs(findings []finding) []string {
	out := make([]string, len(findings))
	for i, f := range findings {
		out[i] = f.Msg
	}
	return out
}

// compare says how an engine's verdict differs from check's expectation (nothing when they
// agree): refused exactly when check has a deny finding, the refusal naming every deny rule
// and its fix, the warnings naming exactly the warn rules (those of a refused object, at most
// those), within the API server's limits (4096 bytes in all, or it cuts them).
func compare(e expectation, v verdict, fixInMessage bool) []string {
	var problems []string
	if v.err != nil {
		return []string{fmt.Sprintf("the API server answered neither admitted nor refused: %v", v.err)}
	}
	denyRules, warnRules := rulesIn(msgs(e.deny)...), rulesIn(msgs(e.warn)...)
	if v.refused != (len(e.deny) > 0) {
		problems = append(problems, fmt.Sprintf("%s, but meshlife check says %s (deny %v, warn %v); message: %q", v.word(), e.word(), denyRules, warnRules, v.message))
		return problems
	}
	if v.refused {
		named := rulesIn(v.message)
		if missing := minus(denyRules, named); len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("the refusal does not name %v: %q", missing, v.message))
		}
		if extra := minus(named, append(append([]string{}, denyRules...), warnRules...)); len(extra) > 0 {
			problems = append(problems, fmt.Sprintf("the refusal names %v, which check does not report: %q", extra, v.message))
		}
		if fixInMessage {
			for _, f := range e.deny {
				if f.Fix != "" && !strings.Contains(oneLine(v.message), oneLine(f.Fix)) {
					problems = append(problems, fmt.Sprintf("the refusal does not give %s's fix %q: %q", f.Rule, f.Fix, v.message))
				}
			}
		}
	}
	warned := rulesIn(v.warnings...)
	cut := false
	total := 0
	for _, w := range v.warnings {
		total += len(w)
		if strings.Contains(w, "not shown") {
			cut = true
		}
	}
	if v.refused || cut {
		if extra := minus(warned, append(append([]string{}, warnRules...), denyRules...)); len(extra) > 0 {
			problems = append(problems, fmt.Sprintf("warnings name %v, which check does not report: %q", extra, v.warnings))
		}
	} else if strings.Join(warned, ",") != strings.Join(warnRules, ",") {
		problems = append(problems, fmt.Sprintf("warnings name %v, check reports %v: %q", warned, warnRules, v.warnings))
	}
	if total > 4096 {
		problems = append(problems, fmt.Sprintf("warnings of %d bytes, past the API server's 4096", total))
	}
	for _, w := range v.warnings {
		if !utf8.ValidString(w) {
			problems = append(problems, fmt.Sprintf("a warning that is not UTF-8: %q", w))
		}
	}
	return problems
}

func oneLine(text string) string {
	return strings.Join(strings.Fields(text), " ")
}

func minus(a, b []string) []string {
	set := map[string]bool{}
	for _, x := range b {
		set[x] = true
	}
	var out []string
	for _, x := range a {
		if !set[x] {
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// tally is one engine's counts under one cluster file.
type tally struct {
	objects, refused, warned, clean, invalid, differences int
}

// judgeExamples applies every example as a user applies the folder: each object through a
// server-side dry run and a real create, both compared with check; each object is deleted
// again once judged, so that the next cluster file starts from the same cluster.
func judgeExamples(ctx context.Context, k *kube, files []exampleFile, want map[string]expectation, fixInMessage bool, report func(string)) (tally, error) {
	var t tally
	for _, file := range files {
		if err := prepareNamespaces(ctx, k, file); err != nil {
			return t, err
		}
		for _, obj := range file.objects {
			key := exampleKey(file.path, obj)
			e := want[key]
			dry := verdictOf(k.create(ctx, obj, true))
			real := verdictOf(k.create(ctx, obj, false))
			t.objects++
			switch real.word() {
			case "refused":
				t.refused++
			case "warned":
				t.warned++
			case "clean":
				t.clean++
			case "invalid":
				// Never reaches a webhook: the API server refuses it by its own rules.
				t.invalid++
				if dry.invalid {
					report(fmt.Sprintf("INVALID %s: refused by the API server's own validation, before admission webhooks: %s", key, real.message))
					continue
				}
			}
			problems := compare(e, dry, fixInMessage)
			for i := range problems {
				problems[i] = "dry run: " + problems[i]
			}
			for _, p := range compare(e, real, fixInMessage) {
				problems = append(problems, "create: "+p)
			}
			if len(problems) > 0 {
				t.differences++
				for _, p := range problems {
					report(fmt.Sprintf("DIFF %s: %s", key, p))
				}
			}
			if !real.refused && real.err == nil {
				if err := k.remove(ctx, obj); err != nil {
					return t, fmt.Errorf("deleting %s: %w", key, err)
				}
			}
		}
	}
	return t, nil
}

// workloadCRDs are the custom kinds meshlife reviews (the installs' policies name them),
// served as a cluster with their operators installed serves them; the schemas are open, as the
// operators' own are in no module this harness builds from. The examples hold Rollouts.
func workloadCRDs() []*unstructured.Unstructured {
	kinds := []struct {
		group, version, kind, plural, scope string
	}{
		{"argoproj.io", "v1alpha1", "Rollout", "rollouts", "Namespaced"},
		{"argoproj.io", "v1alpha1", "AnalysisTemplate", "analysistemplates", "Namespaced"},
		{"argoproj.io", "v1alpha1", "ClusterAnalysisTemplate", "clusteranalysistemplates", "Cluster"},
		{"kubeflow.org", "v1beta1", "Experiment", "experiments", "Namespaced"},
		{"kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", "Namespaced"},
		{"kubeflow.org", "v1", "TFJob", "tfjobs", "Namespaced"},
		{"kubeflow.org", "v1", "MPIJob", "mpijobs", "Namespaced"},
		{"kubeflow.org", "v1", "XGBoostJob", "xgboostjobs", "Namespaced"},
		{"kubeflow.org", "v1", "PaddleJob", "paddlejobs", "Namespaced"},
		{"kubeflow.org", "v1", "JAXJob", "jaxjobs", "Namespaced"},
		{"jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", "Namespaced"},
		{"batch.volcano.sh", "v1alpha1", "Job", "jobs", "Namespaced"},
	}
	var out []*unstructured.Unstructured
	for _, k := range kinds {
		crd := objectFor("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", k.plural+"."+k.group)
		crd.Object["spec"] = map[string]interface{}{
			"group": k.group,
			"scope": k.scope,
			"names": map[string]interface{}{"kind": k.kind, "listKind": k.kind + "List", "plural": k.plural, "singular": strings.ToLower(k.kind)},
			"versions": []interface{}{map[string]interface{}{
				"name": k.version, "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		}
		out = append(out, crd)
	}
	return out
}
