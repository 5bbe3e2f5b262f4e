package main

import (
	"context"
	"fmt"
	"io/fs"
	"sort"

	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/verify"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"
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

// webhookNamespaces gives gator's client what Gatekeeper's webhook (and its audit) add to every
// review and gator verify (v3.23.0) does not: the object's Namespace, both as the matcher's
// namespace and as input.review.namespaceObject (policy.go createReviewForRequest and review).
// It is the one thing the harness adds to gator's runner, and it is genuinely needed: meshlife
// predicts a workload template's sidecar from its Namespace (istio-injection label,
// linkerd.io/inject annotation), as the injector does, so without namespaceObject a template
// in an injected namespace is judged unmeshed. The Namespaces are those of the case's
// inventory, which is where a cluster's would come from; the suites files are not changed.
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

// runGatorSuites runs every Suite under examples/suites, as written, through gator's own
// runner, with gator's own client plus external data. webhook adds the Namespace as the
// webhook does (webhookNamespaces); without it the run is plain `gator verify`.
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
