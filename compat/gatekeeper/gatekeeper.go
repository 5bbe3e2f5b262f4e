package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"time"

	"github.com/open-policy-agent/frameworks/constraint/pkg/apis/externaldata/unversioned"
	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// providerName is the name the template's Rego calls external_data with.
const providerName = "meshlife"

// gatekeeperCacheTTL is Gatekeeper's default --external-data-provider-response-cache-ttl.
const gatekeeperCacheTTL = 3 * time.Minute

// providerCache registers the meshlife Provider exactly as Gatekeeper's provider controller
// does from a Provider object: Upsert validates the URL scheme and the caBundle the same way.
func providerCache(url, caFile string) (*externaldata.ProviderCache, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pc := externaldata.NewCache()
	// Gatekeeper wires the client cache in so that a changed Provider drops its pooled
	// connections; the negative checks rely on that to force a fresh handshake.
	pc.SetClientCache(externaldata.DefaultClientCache())
	err = pc.Upsert(&unversioned.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: providerName},
		Spec: unversioned.ProviderSpec{
			URL:      url,
			Timeout:  2, // constraints/gatekeeper/provider.yaml
			CABundle: base64.StdEncoding.EncodeToString(ca),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("Gatekeeper refuses the Provider: %w", err)
	}
	return pc, nil
}

// clientCert starts a controller-runtime certwatcher on a certificate pair, as Gatekeeper
// does for its /certs/tls.crt.
func clientCert(ctx context.Context, certFile, keyFile string) (*certwatcher.CertWatcher, error) {
	cw, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	go func() { _ = cw.Start(ctx) }()
	return cw, nil
}

// driverArgs are the rego.Args Gatekeeper's setupControllers builds with external data on
// (main.go): http.send disabled as in its Helm chart, the provider and response caches, and
// its webhook certificate as the client certificate. cw == nil leaves client auth off, so
// Gatekeeper's client presents an empty certificate.
func driverArgs(pc *externaldata.ProviderCache, responses *externaldata.ProviderResponseCache, cw *certwatcher.CertWatcher) []rego.Arg {
	args := []rego.Arg{
		rego.Tracing(false),
		rego.DisableBuiltins("http.send"),
		rego.AddExternalDataProviderCache(pc),
	}
	if responses != nil {
		args = append(args, rego.AddExternalDataProviderResponseCache(responses))
	}
	if cw != nil {
		args = append(args, rego.EnableExternalDataClientAuth(), rego.AddExternalDataClientCertWatcher(cw))
	}
	return append(args, rego.Externs("inventory"))
}

// newWebhookClient is the constraint client of Gatekeeper's controller-manager pod: the
// validation target, the Rego driver, and the audit and webhook enforcement points.
//
// rego.New registers external_data process-wide, bound to the driver made last, so every
// driver in one phase must be built from the same args.
func newWebhookClient(args []rego.Arg) (*constraintclient.Client, error) {
	driver, err := rego.New(args...)
	if err != nil {
		return nil, err
	}
	return constraintclient.NewClient(
		constraintclient.Targets(&target.K8sValidationTarget{}),
		constraintclient.Driver(driver),
		constraintclient.EnforcementPoints(util.AuditEnforcementPoint, util.WebhookEnforcementPoint),
	)
}
