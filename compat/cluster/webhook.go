package main

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// webhookEngine is `meshlife install webhook`: the API server calls meshlife serve's
// /admission itself, and meshlife serve watches Namespaces with the install's account.
type webhookEngine struct {
	h      *harness
	server *server
}

func (w *webhookEngine) name() string { return "webhook" }

// install applies `meshlife install webhook --constraint CLUSTER --url ...` and runs its
// server as its Deployment would, with a token of the install's ServiceAccount.
func (w *webhookEngine) install(ctx context.Context, cluster string) error {
	h := w.h
	if w.server != nil {
		w.server.stop()
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	objs, _, err := install(h.meshlife, h.repo, "webhook", "--constraint", cluster, "--url", url)
	if err != nil {
		return err
	}
	if err := h.applyInstall(ctx, "meshlife install webhook --constraint "+filepath.Base(cluster), objs); err != nil {
		return err
	}
	w.server, err = serverOf(ctx, h.k, h.cp, h.procs, h.meshlife, filepath.Join(h.dir, "webhook-"+filepath.Base(cluster)), "meshlife-webhook", port, objs)
	if err != nil {
		return err
	}
	if err := w.server.start(ctx); err != nil {
		return err
	}
	return h.waitCalled(ctx, w.server, "admission", 30*time.Second)
}

// securityChecks: the server's credentials are exactly the install's ClusterRole.
func (w *webhookEngine) securityChecks(ctx context.Context) error {
	h := w.h
	token, err := accountToken(ctx, h.k, "meshlife-system", "meshlife")
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(h.cp.tokenConfig(token))
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	h.check(err == nil, "webhook: the server's ServiceAccount lists Namespaces (%v)", err)
	_, err = client.CoreV1().Secrets("meshlife-system").List(ctx, metav1.ListOptions{})
	h.check(apierrors.IsForbidden(err), "webhook: the server's ServiceAccount is refused reading Secrets (%v)", err)
	_, err = client.CoreV1().Secrets("meshlife-system").Get(ctx, "meshlife-tls", metav1.GetOptions{})
	h.check(apierrors.IsForbidden(err), "webhook: the server's ServiceAccount is refused its own TLS Secret (%v)", err)
	_, err = client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	h.check(apierrors.IsForbidden(err), "webhook: the server's ServiceAccount is refused listing Pods (%v)", err)
	return nil
}

// apiServerRestartCheck restarts the API server; the server's Namespace watch must recover,
// so that a relabelling after the restart changes the verdict as before.
func (w *webhookEngine) apiServerRestartCheck(ctx context.Context, s *scenario) error {
	h := w.h
	if err := s.label(ctx, "enabled"); err != nil {
		return err
	}
	if _, err := s.converge(ctx, "enabled", 30*time.Second); err != nil {
		h.fail("webhook: before the API server restart: %v", err)
		return nil
	}
	if err := h.cp.restartAPIServer(ctx, 2*time.Second); err != nil {
		return fmt.Errorf("restarting the API server: %w", err)
	}
	ready := waitUntil(ctx, 30*time.Second, "meshlife serve ready after the API server restart", func() (bool, error) {
		_, err := httpGet(w.server.health() + "/readyz")
		return err == nil && w.server.metric(`meshlife_namespace_watch{state="synced"}`) == 1, nil
	})
	if err := s.label(ctx, "disabled"); err != nil {
		return err
	}
	took, err := s.converge(ctx, "disabled", 60*time.Second)
	h.check(ready == nil && err == nil, "webhook: after an API server restart the Namespace watch recovers: relabelled, the verdict follows in %.1fs (%v %v)", took.Seconds(), ready, err)
	return nil
}

// rotate swaps the server's certificate for one from a new CA, as a CA rollover does: the
// webhook's caBundle first trusts both CAs, then the files change under the running server.
func (w *webhookEngine) rotate() error {
	ctx := context.Background()
	h := w.h
	config, err := h.k.core.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "meshlife", metav1.GetOptions{})
	if err != nil {
		return err
	}
	next, err := newAuthority("meshlife-rotated-ca")
	if err != nil {
		return err
	}
	for i := range config.Webhooks {
		config.Webhooks[i].ClientConfig.CABundle = append(append([]byte{}, config.Webhooks[i].ClientConfig.CABundle...), next.certPEM...)
	}
	if _, err := h.k.core.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, config, metav1.UpdateOptions{}); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	return rotateFiles(w.server, next)
}

// rotateFiles writes a new serving certificate from ca into the server's mounted TLS files.
func rotateFiles(s *server, ca *authority) error {
	leaf, err := ca.issue(pkix.Name{CommonName: "meshlife"}, loopback, []string{"meshlife"}, true, false)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.dir, "mounts", "tls")
	for name, data := range map[string][]byte{"tls.key": leaf.keyPEM, "tls.crt": leaf.certPEM} {
		temporary := filepath.Join(dir, "."+name)
		if err := os.WriteFile(temporary, data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(temporary, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
