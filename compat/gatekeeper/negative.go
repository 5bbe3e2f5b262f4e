package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/gator/reader"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// probeCluster and probeObject are a constraint and an object known to be denied, so that
// "no violation" cannot pass for "not evaluated".
const (
	probeCluster = "constraints/gatekeeper/clusters/istio-1.26-classic.yaml"
	probeFile    = "examples/istio/job-classic-no-exit.yaml"
	probeRule    = "ML301"
)

// providerErrorPrefix starts every message the template makes of a provider failure.
const providerErrorPrefix = "[ML000 provider-error] "

type negativeResult struct {
	name    string
	outcome string // "handshake refused", "systemError", "per-key error", "EVALUATED"
	detail  string
	ok      bool
}

// probeKey is the module input the template would send for the probe object under the deny
// constraint: only the shape matters here (a real review that the module would deny).
func probeKey(repo string) (string, error) {
	objs, err := readObjects(repo, probeFile)
	if err != nil {
		return "", err
	}
	var nss []example
	var job *example
	for _, o := range objs {
		nss = append(nss, example{file: probeFile, obj: o})
		if o.GetKind() == "Job" {
			job = &example{file: probeFile, obj: o}
		}
	}
	if job == nil {
		return "", fmt.Errorf("%s holds no Job", probeFile)
	}
	byName, err := namespaces(nss)
	if err != nil {
		return "", err
	}
	review, err := admissionReview(job.obj, byName[job.obj.GetNamespace()])
	if err != nil {
		return "", err
	}
	reviewJSON, err := json.Marshal(review.AdmissionRequest)
	if err != nil {
		return "", err
	}
	var reviewMap map[string]interface{}
	if err := json.Unmarshal(reviewJSON, &reviewMap); err != nil {
		return "", err
	}
	if ns := byName[job.obj.GetNamespace()]; ns != nil {
		reviewMap["namespaceObject"] = ns
	}
	key, err := json.Marshal(map[string]interface{}{
		"review":     reviewMap,
		"parameters": map[string]interface{}{"minSeverity": "error"},
	})
	return string(key), err
}

// rawProbe speaks Gatekeeper's wire protocol over a fresh connection with the given client
// certificate (nil: none) and says what became of the request.
func rawProbe(name, url, caFile string, cert *tls.Certificate, key string) negativeResult {
	res := negativeResult{name: name}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		res.outcome, res.detail = "harness error", err.Error()
		return res
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	body, _ := json.Marshal(externaldata.NewProviderRequest([]string{key}))
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		res.outcome, res.detail = "handshake refused", err.Error()
		return res
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		res.outcome, res.detail = "handshake refused", "reading the answer: "+err.Error()
		return res
	}
	var pr externaldata.ProviderResponse
	if err := json.Unmarshal(data, &pr); err != nil {
		res.outcome, res.detail = "not a ProviderResponse", fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, data)
		return res
	}
	switch {
	case pr.Response.SystemError != "":
		res.outcome, res.detail = "systemError", fmt.Sprintf("HTTP %d: %s", resp.StatusCode, pr.Response.SystemError)
	case len(pr.Response.Items) == 1 && pr.Response.Items[0].Error != "" && pr.Response.Items[0].Value == nil:
		res.outcome, res.detail = "per-key error", pr.Response.Items[0].Error
	default:
		res.outcome = "EVALUATED"
		var msgs []string
		for _, item := range pr.Response.Items {
			list, _ := item.Value.([]interface{})
			for _, v := range list {
				if m, ok := v.(map[string]interface{}); ok {
					msgs = append(msgs, fmt.Sprint(m["msg"]))
				}
			}
		}
		res.detail = fmt.Sprintf("HTTP %d, %d violations: %s", resp.StatusCode, len(msgs), strings.Join(msgs, "; "))
	}
	return res
}

// gatekeeperProbe reviews the probe object through Gatekeeper's own client with a driver
// built from args, and says whether the module's verdict came back.
func gatekeeperProbe(ctx context.Context, name string, args []rego.Arg, tmpl *templates.ConstraintTemplate, repo string) negativeResult {
	res := negativeResult{name: name}
	// Drop the pooled connections that the trusted certificate opened: Gatekeeper's client
	// updates its certificate per call but reuses live connections, and the point is a fresh
	// handshake with this certificate.
	externaldata.DefaultClientCache().Invalidate(providerName)
	c, err := newWebhookClient(args)
	if err == nil {
		_, err = c.AddTemplate(ctx, tmpl.DeepCopy())
	}
	if err != nil {
		res.outcome, res.detail = "harness error", err.Error()
		return res
	}
	objs, err := readObjects(repo, probeCluster)
	if err != nil {
		res.outcome, res.detail = "harness error", err.Error()
		return res
	}
	for _, o := range objs {
		if reader.IsConstraint(o) {
			if _, err := c.AddConstraint(ctx, o); err != nil {
				res.outcome, res.detail = "harness error", err.Error()
				return res
			}
		}
	}
	probe, err := readObjects(repo, probeFile)
	if err != nil {
		res.outcome, res.detail = "harness error", err.Error()
		return res
	}
	var exs []example
	for _, o := range probe {
		exs = append(exs, example{file: probeFile, obj: o})
	}
	nss, err := namespaces(exs)
	if err != nil {
		res.outcome, res.detail = "harness error", err.Error()
		return res
	}
	var found []finding
	for _, e := range exs {
		fs, err := reviewAsWebhook(ctx, c, e.obj, nss)
		if err != nil {
			res.outcome, res.detail = "harness error", err.Error()
			return res
		}
		found = append(found, fs...)
	}
	var providerErrors, verdicts []string
	for _, f := range found {
		if strings.HasPrefix(f.msg, providerErrorPrefix) {
			providerErrors = append(providerErrors, strings.TrimPrefix(f.msg, providerErrorPrefix))
		} else {
			verdicts = append(verdicts, f.msg)
		}
	}
	switch {
	case len(verdicts) > 0:
		res.outcome, res.detail = "EVALUATED", strings.Join(verdicts, "; ")
	case len(providerErrors) > 0:
		res.outcome, res.detail = "provider error", strings.Join(providerErrors, "; ")
	default:
		res.outcome, res.detail = "unexpected", fmt.Sprintf("%d results: %v", len(found), found)
	}
	return res
}

func loadCert(certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	return &cert, err
}

// negativeChecks: a client certificate from another CA, and none at all, must not get a
// verdict, over the real socket, both through Gatekeeper's client and on the wire. The
// trusted certificate is probed on the wire too, so that the probe is known to be able to
// see an evaluation.
func negativeChecks(ctx context.Context, s *server, p *pki, pc *externaldata.ProviderCache, tmpl *templates.ConstraintTemplate, repo string) ([]negativeResult, error) {
	key, err := probeKey(repo)
	if err != nil {
		return nil, err
	}
	trusted, err := loadCert(p.clientCert, p.clientKey)
	if err != nil {
		return nil, err
	}
	other, err := loadCert(p.otherClientCert, p.otherClientKey)
	if err != nil {
		return nil, err
	}

	var out []negativeResult
	control := rawProbe("wire, trusted client certificate (control)", s.url(), p.caCert, trusted, key)
	control.ok = control.outcome == "EVALUATED" && strings.Contains(control.detail, "["+probeRule+" ")
	out = append(out, control)

	for _, r := range []negativeResult{
		rawProbe("wire, certificate from another CA", s.url(), p.caCert, other, key),
		rawProbe("wire, no client certificate", s.url(), p.caCert, nil, key),
	} {
		r.ok = r.outcome == "handshake refused" || r.outcome == "systemError"
		out = append(out, r)
	}

	otherWatcher, err := clientCert(ctx, p.otherClientCert, p.otherClientKey)
	if err != nil {
		return nil, err
	}
	// No response cache, so that nothing but this handshake can produce a verdict.
	for _, r := range []negativeResult{
		gatekeeperProbe(ctx, "Gatekeeper client, certificate from another CA", driverArgs(pc, nil, otherWatcher), tmpl, repo),
		gatekeeperProbe(ctx, "Gatekeeper client, client auth off (empty certificate)", driverArgs(pc, nil, (*certwatcher.CertWatcher)(nil)), tmpl, repo),
	} {
		r.ok = r.outcome == "provider error"
		out = append(out, r)
	}
	return out, nil
}
