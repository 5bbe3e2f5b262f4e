package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/gatekeeper/v3/apis"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	mutationtypes "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const templatePath = "constraints/gatekeeper/template.yaml"

// exampleDirs are the folders whose manifests are reviewed, as `meshlife check` is given them.
var exampleDirs = []string{"examples/istio", "examples/linkerd"}

// example is one object of one example file, with the file it came from.
type example struct {
	file string
	obj  *unstructured.Unstructured
}

func (e example) identity() string {
	name := e.obj.GetName()
	if ns := e.obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s %s %s", e.file, e.obj.GetKind(), name)
}

// finding is what both sides are compared on. Besides the brief's (object, constraint,
// action, msg) it carries the details the template passes through, so a right message
// under a wrong rule id would show too.
type finding struct {
	object, constraint, action, msg, rule, severity, path string
}

func (f finding) String() string {
	return fmt.Sprintf("%s | %s | %s | %s %s at %q | %s", f.object, f.constraint, f.action, f.rule, f.severity, f.path, f.msg)
}

func readTemplate(repo string) (*templates.ConstraintTemplate, error) {
	scheme := runtime.NewScheme()
	if err := apis.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return reader.ReadTemplate(scheme, os.DirFS(repo), templatePath)
}

func readObjects(repo, file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		return nil, err
	}
	objs, err := reader.ReadUnstructureds(data)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	return objs, nil
}

func readExamples(repo string) ([]example, error) {
	var all []example
	for _, dir := range exampleDirs {
		err := fs.WalkDir(os.DirFS(repo), dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			switch path.Ext(p) {
			case ".yaml", ".yml", ".json":
			default:
				return nil
			}
			objs, err := readObjects(repo, p)
			if err != nil {
				return err
			}
			for _, o := range objs {
				all = append(all, example{file: p, obj: o})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

// namespaces are the Namespace objects of the input by name, as a cluster would hold them
// (meshlife check does the same: a Namespace anywhere in the input is the namespaceObject
// of the objects in it).
func namespaces(objs []example) (map[string]*corev1.Namespace, error) {
	out := map[string]*corev1.Namespace{}
	for _, e := range objs {
		if e.obj.GetKind() != "Namespace" || e.obj.GroupVersionKind().Group != "" {
			continue
		}
		ns, err := toNamespace(e.obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.identity(), err)
		}
		out[ns.Name] = ns
	}
	return out, nil
}

func toNamespace(u *unstructured.Unstructured) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ns); err != nil {
		return nil, err
	}
	return ns, nil
}

func newUID() types.UID {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))
}

// admissionReview builds what Gatekeeper's validating webhook hands the constraint client
// for a CREATE of obj (pkg/webhook/policy.go createReviewForRequest): the whole
// AdmissionRequest, uid and userInfo included, so the provider gets the key a cluster sends,
// and the object's Namespace as fetched from the cluster.
func admissionReview(obj *unstructured.Unstructured, ns *corev1.Namespace) (*target.AugmentedReview, error) {
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	gvk := obj.GroupVersionKind()
	req := &admissionv1.AdmissionRequest{
		UID:      newUID(),
		Kind:     metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
		Resource: metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"},
		Name:     obj.GetName(),
		// The webhook clears the namespace of Namespace objects (server-side apply sets it).
		Namespace: obj.GetNamespace(),
		Operation: admissionv1.Create,
		UserInfo: authenticationv1.UserInfo{
			Username: "kubernetes-admin",
			Groups:   []string{"kubeadm:cluster-admins", "system:authenticated"},
		},
		Object:  runtime.RawExtension{Raw: raw},
		DryRun:  new(false),
		Options: runtime.RawExtension{Raw: []byte(`{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}`)},
	}
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		req.Namespace = ""
	}
	review := &target.AugmentedReview{
		AdmissionRequest: req,
		Source:           mutationtypes.SourceTypeOriginal,
		IsAdmission:      true,
	}
	if req.Namespace != "" {
		review.Namespace = ns
	}
	return review, nil
}

// reviewAsWebhook reviews one object with the options the webhook passes (policy.go review).
func reviewAsWebhook(ctx context.Context, c *constraintclient.Client, obj *unstructured.Unstructured, nss map[string]*corev1.Namespace) ([]finding, error) {
	ns := nss[obj.GetNamespace()]
	review, err := admissionReview(obj, ns)
	if err != nil {
		return nil, err
	}
	opts := []reviews.ReviewOpt{reviews.EnforcementPoint(util.WebhookEnforcementPoint)}
	if review.Namespace != nil {
		if opt := util.NamespaceReviewOpt(review.Namespace, log.Log); opt != nil {
			opts = append(opts, opt)
		}
	}
	resp, err := c.Review(ctx, review, opts...)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, r := range resp.Results() {
		f := finding{constraint: r.Constraint.GetName(), action: r.EnforcementAction, msg: r.Msg}
		if details, ok := r.Metadata["details"].(map[string]interface{}); ok {
			f.rule, _ = details["rule"].(string)
			f.severity, _ = details["severity"].(string)
			f.path, _ = details["path"].(string)
		}
		out = append(out, f)
	}
	return out, nil
}

// meshlifeCheck runs `meshlife check --constraint <cluster> -o json` on the example folders
// from the repository root, so its `file` fields are the same relative paths.
func meshlifeCheck(binary, repo, cluster string) ([]finding, error) {
	args := append([]string{"check", "--constraint", cluster, "-o", "json"}, exampleDirs...)
	cmd := exec.Command(binary, args...)
	cmd.Dir = repo
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	// Exit 1 means deny findings, which the examples have on purpose.
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return nil, fmt.Errorf("meshlife %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	// -o json is an envelope; its findings are the list.
	var envelope struct {
		Findings []struct {
			File              string `json:"file"`
			Kind              string `json:"kind"`
			Namespace         string `json:"namespace"`
			Name              string `json:"name"`
			Rule              string `json:"rule"`
			Severity          string `json:"severity"`
			Msg               string `json:"msg"`
			Path              string `json:"path"`
			EnforcementAction string `json:"enforcementAction"`
			Constraint        string `json:"constraint"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &envelope); err != nil {
		return nil, fmt.Errorf("meshlife check -o json printed no JSON envelope: %w", err)
	}
	raw := envelope.Findings
	out := make([]finding, 0, len(raw))
	for _, r := range raw {
		name := r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + name
		}
		out = append(out, finding{
			object:     fmt.Sprintf("%s %s %s", r.File, r.Kind, name),
			constraint: r.Constraint, action: r.EnforcementAction, msg: r.Msg,
			rule: r.Rule, severity: r.Severity, path: r.Path,
		})
	}
	return out, nil
}

// diffFindings compares two multisets; each side's surplus is returned sorted.
func diffFindings(gatekeeper, meshlife []finding) (onlyGatekeeper, onlyMeshlife []finding) {
	count := map[finding]int{}
	for _, f := range gatekeeper {
		count[f]++
	}
	for _, f := range meshlife {
		count[f]--
	}
	for f, n := range count {
		for ; n > 0; n-- {
			onlyGatekeeper = append(onlyGatekeeper, f)
		}
		for ; n < 0; n++ {
			onlyMeshlife = append(onlyMeshlife, f)
		}
	}
	byText := func(s []finding) {
		sort.Slice(s, func(i, j int) bool { return s[i].String() < s[j].String() })
	}
	byText(onlyGatekeeper)
	byText(onlyMeshlife)
	return onlyGatekeeper, onlyMeshlife
}

type clusterResult struct {
	cluster     string
	constraints int
	violations  int
	differences int
}

// checkCluster loads the template and one cluster file's constraints into a fresh client
// (every cluster file uses the same constraint names) and reviews every example object.
func checkCluster(ctx context.Context, newClient func() (*constraintclient.Client, error), tmpl *templates.ConstraintTemplate, repo, binary, cluster string, examples []example, nss map[string]*corev1.Namespace) (clusterResult, error) {
	res := clusterResult{cluster: cluster}
	c, err := newClient()
	if err != nil {
		return res, err
	}
	if _, err := c.AddTemplate(ctx, tmpl.DeepCopy()); err != nil {
		return res, fmt.Errorf("Gatekeeper refuses %s: %w", templatePath, err)
	}
	objs, err := readObjects(repo, cluster)
	if err != nil {
		return res, err
	}
	for _, o := range objs {
		if !reader.IsConstraint(o) {
			return res, fmt.Errorf("%s holds a %s, not a constraint", cluster, o.GetKind())
		}
		if _, err := c.AddConstraint(ctx, o); err != nil {
			return res, fmt.Errorf("Gatekeeper refuses constraint %s of %s: %w", o.GetName(), cluster, err)
		}
		res.constraints++
	}

	var got []finding
	for _, e := range examples {
		fs, err := reviewAsWebhook(ctx, c, e.obj, nss)
		if err != nil {
			return res, fmt.Errorf("reviewing %s: %w", e.identity(), err)
		}
		for i := range fs {
			fs[i].object = e.identity()
		}
		got = append(got, fs...)
	}
	res.violations = len(got)

	want, err := meshlifeCheck(binary, repo, cluster)
	if err != nil {
		return res, err
	}
	onlyGK, onlyML := diffFindings(got, want)
	res.differences = len(onlyGK) + len(onlyML)
	for _, f := range onlyGK {
		fmt.Printf("  DIFF %s: only Gatekeeper reports: %s\n", cluster, f)
	}
	for _, f := range onlyML {
		fmt.Printf("  DIFF %s: only meshlife check reports: %s\n", cluster, f)
	}
	if len(want) != len(got) && res.differences == 0 {
		return res, fmt.Errorf("internal: counts differ without a difference")
	}
	return res, nil
}
