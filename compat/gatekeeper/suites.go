package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"testing/fstest"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"
)

const suitesDir = "examples/suites"

// caseOutcome is one case (or a test's own error, with caseName empty) of one run.
type caseOutcome struct {
	suite, test, caseName string
	err                   error
}

func (o caseOutcome) id() string {
	return fmt.Sprintf("%s %s/%s", o.suite, o.test, o.caseName)
}

// externalDataOpt is the gator.Opt that gives gator's client what Gatekeeper's
// controller-manager has and gator lacks: the external_data builtin wired to the live server.
func externalDataOpt(args []rego.Arg) gator.Opt {
	return func() ([]constraintclient.Opt, []rego.Arg, error) {
		return nil, args, nil
	}
}

// webhookNamespaces gives gator's client what Gatekeeper's webhook adds to every review and
// gator verify (v3.23.0) does not: the object's Namespace, both as the matcher's namespace
// and as input.review.namespaceObject (policy.go createReviewForRequest and review). The
// Namespaces are those of the case's inventory, which is where a cluster's would come from.
type webhookNamespaces struct {
	gator.Client
	namespaces map[string]*corev1.Namespace
}

func (c *webhookNamespaces) AddData(ctx context.Context, data interface{}) (*types.Responses, error) {
	if u, ok := data.(*unstructured.Unstructured); ok && u.GetKind() == "Namespace" && u.GroupVersionKind().Group == "" {
		ns, err := toNamespace(u)
		if err != nil {
			return nil, err
		}
		c.namespaces[ns.Name] = ns
	}
	return c.Client.AddData(ctx, data)
}

func (c *webhookNamespaces) Review(ctx context.Context, obj interface{}, opts ...reviews.ReviewOpt) (*types.Responses, error) {
	var ns *corev1.Namespace
	switch o := obj.(type) {
	case target.AugmentedUnstructured:
		ns = c.namespaces[o.Object.GetNamespace()]
		o.Namespace = ns
		obj = o
	case *target.AugmentedUnstructured:
		ns = c.namespaces[o.Object.GetNamespace()]
		o.Namespace = ns
	case target.AugmentedReview:
		ns = c.namespaces[o.AdmissionRequest.Namespace]
		o.Namespace = ns
		obj = o
	case *target.AugmentedReview:
		ns = c.namespaces[o.AdmissionRequest.Namespace]
		o.Namespace = ns
	}
	if opt := util.NamespaceReviewOpt(ns, log.Log); opt != nil {
		opts = append(opts, opt)
	}
	return c.Client.Review(ctx, obj, opts...)
}

// runGatorSuites runs every Suite under examples/suites through gator's own runner, with
// gator's own client plus external data. webhook adds the Namespace as the webhook does.
func runGatorSuites(ctx context.Context, fsys fs.FS, args []rego.Arg, webhook bool) ([]caseOutcome, int, error) {
	suites, err := verify.ReadSuites(fsys, suitesDir, suitesDir, true)
	if err != nil {
		return nil, 0, err
	}
	runner, err := verify.NewRunner(fsys, func(opts ...gator.Opt) (gator.Client, error) {
		c, err := gator.NewOPAClient(false, append(opts, externalDataOpt(args))...)
		if err != nil || !webhook {
			return c, err
		}
		return &webhookNamespaces{Client: c, namespaces: map[string]*corev1.Namespace{}}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	filter, err := verify.NewFilter("")
	if err != nil {
		return nil, 0, err
	}
	var out []caseOutcome
	cases := 0
	for _, s := range suites {
		res := runner.Run(ctx, filter, s)
		if res.Error != nil {
			out = append(out, caseOutcome{suite: s.InputPath, err: res.Error})
		}
		for _, t := range res.TestResults {
			if t.Error != nil || len(t.CaseResults) == 0 {
				cases++
				if t.Error != nil {
					out = append(out, caseOutcome{suite: s.InputPath, test: t.Name, err: t.Error})
				}
			}
			for _, c := range t.CaseResults {
				cases++
				if c.Error != nil {
					out = append(out, caseOutcome{suite: s.InputPath, test: t.Name, caseName: c.Name, err: c.Error})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id() < out[j].id() })
	return out, cases, nil
}

// adaptation counts what gatorReadySuites changed, for the report.
type adaptation struct {
	splitObjects, addedAssertions int
}

// gatorReadySuites copies the repository's examples and template into memory and rewrites
// the suites in the two places where `meshlife verify` reads the gator format more
// leniently than gator verify (host-test/src/suite.rs says so): an object file holding
// Namespaces next to the object under review (gator: exactly one object) has the Namespaces
// moved into the case's inventory, and a case without assertions (gator: an invalid case)
// gets `violations: "no"`, which is what meshlife verify and gator's own Case comment read
// it as. Nothing else changes: same objects, constraints, template and expectations.
func gatorReadySuites(repo string) (fstest.MapFS, adaptation, error) {
	var ad adaptation
	mem := fstest.MapFS{}
	root := os.DirFS(repo)
	for _, dir := range []string{"examples", "constraints/gatekeeper"} {
		err := fs.WalkDir(root, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(root, p)
			if err != nil {
				return err
			}
			mem[p] = &fstest.MapFile{Data: data, Mode: 0o644}
			return nil
		})
		if err != nil {
			return nil, ad, err
		}
	}

	var suiteFiles []string
	for p := range mem {
		if strings.HasPrefix(p, suitesDir+"/") {
			suiteFiles = append(suiteFiles, p)
		}
	}
	sort.Strings(suiteFiles)
	for _, p := range suiteFiles {
		var suite map[string]interface{}
		if err := yaml.Unmarshal(mem[p].Data, &suite); err != nil {
			return nil, ad, fmt.Errorf("%s: %w", p, err)
		}
		if suite["kind"] != verify.Kind || !strings.HasPrefix(fmt.Sprint(suite["apiVersion"]), verify.Group+"/") {
			continue
		}
		dir := path.Dir(p)
		tests, _ := suite["tests"].([]interface{})
		for _, t := range tests {
			test, _ := t.(map[string]interface{})
			cases, _ := test["cases"].([]interface{})
			for _, c := range cases {
				tc, _ := c.(map[string]interface{})
				if err := adaptCase(mem, dir, tc, &ad); err != nil {
					return nil, ad, fmt.Errorf("%s: %w", p, err)
				}
			}
		}
		data, err := yaml.Marshal(suite)
		if err != nil {
			return nil, ad, err
		}
		mem[p] = &fstest.MapFile{Data: data, Mode: 0o644}
	}
	return mem, ad, nil
}

func adaptCase(mem fstest.MapFS, dir string, tc map[string]interface{}, ad *adaptation) error {
	if a, _ := tc["assertions"].([]interface{}); len(a) == 0 {
		tc["assertions"] = []interface{}{map[string]interface{}{"violations": "no"}}
		ad.addedAssertions++
	}
	object, _ := tc["object"].(string)
	file := mem[path.Join(dir, object)]
	if object == "" || file == nil {
		return nil // gator reports the missing file itself
	}
	objs, err := reader.ReadUnstructureds(file.Data)
	if err != nil || len(objs) < 2 {
		return nil
	}
	var reviewed []*unstructured.Unstructured
	var nss []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" {
			nss = append(nss, o)
		} else {
			reviewed = append(reviewed, o)
		}
	}
	if len(reviewed) != 1 || len(nss) == 0 {
		return nil // not the meshlife-verify shape; gator refuses it as it stands
	}
	objectFile, err := yamlStream(reviewed)
	if err != nil {
		return err
	}
	nsFile, err := yamlStream(nss)
	if err != nil {
		return err
	}
	mem[path.Join(dir, object+".gator-object.yaml")] = &fstest.MapFile{Data: objectFile, Mode: 0o644}
	mem[path.Join(dir, object+".gator-namespaces.yaml")] = &fstest.MapFile{Data: nsFile, Mode: 0o644}
	tc["object"] = object + ".gator-object.yaml"
	inventory, _ := tc["inventory"].([]interface{})
	tc["inventory"] = append(inventory, object+".gator-namespaces.yaml")
	ad.splitObjects++
	return nil
}

func yamlStream(objs []*unstructured.Unstructured) ([]byte, error) {
	var b bytes.Buffer
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	return b.Bytes(), nil
}
