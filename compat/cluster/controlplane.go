package main

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// controlPlane is etcd and kube-apiserver on free loopback ports, with real certificates,
// RBAC on, and an admin identity (a client certificate in system:masters).
type controlPlane struct {
	bin, dir   string
	procs      *processes
	ca         *authority
	caFile     string
	apiPort    int
	etcd, api  *process
	apiArgs    []string
	admin      *rest.Config
	adminKC    string
	etcdClient int
}

func startControlPlane(ctx context.Context, procs *processes, bin, dir string) (*controlPlane, error) {
	cp := &controlPlane{bin: bin, dir: dir, procs: procs}
	var err error
	if cp.ca, err = newAuthority("cluster-compat-ca"); err != nil {
		return nil, err
	}
	cp.caFile = filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(cp.caFile, cp.ca.certPEM, 0o600); err != nil {
		return nil, err
	}
	serving, err := cp.ca.issue(pkix.Name{CommonName: "kube-apiserver"}, loopback,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, true, false)
	if err != nil {
		return nil, err
	}
	servingCert, servingKey, err := serving.write(dir, "apiserver")
	if err != nil {
		return nil, err
	}
	admin, err := cp.ca.issue(pkix.Name{CommonName: "cluster-compat-admin", Organization: []string{"system:masters"}}, nil, nil, false, true)
	if err != nil {
		return nil, err
	}
	adminCert, adminKey, err := admin.write(dir, "admin")
	if err != nil {
		return nil, err
	}
	saPublic, saPrivate, err := serviceAccountKeys(dir)
	if err != nil {
		return nil, err
	}

	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	cp.etcdClient, cp.apiPort = ports[0], ports[2]
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	cp.etcd, err = procs.start("etcd", filepath.Join(bin, "etcd"), []string{
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default=" + peerURL,
		"--log-level", "warn",
	}, nil)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, cp.etcd, etcdURL+"/health", 60*time.Second); err != nil {
		return nil, err
	}
	cp.apiArgs = []string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(cp.apiPort),
		"--tls-cert-file", servingCert, "--tls-private-key-file", servingKey,
		"--client-ca-file", cp.caFile,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", saPublic, "--service-account-signing-key-file", saPrivate,
		"--authorization-mode", "Node,RBAC",
		"--service-cluster-ip-range", "10.96.0.0/24",
		// The reality stage's kubelet registers as "localhost" and serves on 127.0.0.1: logs,
		// exec and port-forward reach it by that name with the admin's certificate.
		"--kubelet-preferred-address-types", "Hostname",
		"--kubelet-client-certificate", adminCert, "--kubelet-client-key", adminKey,
	}
	if apiServerFeatureGates != "" {
		// The alpha gates the reality stage's ML407 scenario needs (reality_restarts.go): they
		// only add an action to restartPolicyRules and the node's declared features.
		cp.apiArgs = append(cp.apiArgs, "--feature-gates", apiServerFeatureGates)
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return nil, err
	}
	cp.admin = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", cp.apiPort),
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.caFile, CertFile: adminCert, KeyFile: adminKey},
		QPS:             200,
		Burst:           400,
	}
	cp.adminKC = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.adminKC, cp.admin.Host, cp.ca.certPEM, func(auth *clientcmdapi.AuthInfo) {
		auth.ClientCertificate, auth.ClientKey = adminCert, adminKey
	}); err != nil {
		return nil, err
	}
	return cp, nil
}

func (cp *controlPlane) startAPIServer(ctx context.Context) error {
	var err error
	cp.api, err = cp.procs.start("kube-apiserver", filepath.Join(cp.bin, "kube-apiserver"), cp.apiArgs, nil)
	if err != nil {
		return err
	}
	return waitHTTP(ctx, cp.api, fmt.Sprintf("https://127.0.0.1:%d/readyz", cp.apiPort), 120*time.Second)
}

// restartAPIServer stops the API server and starts it again on the same port and storage.
func (cp *controlPlane) restartAPIServer(ctx context.Context, down time.Duration) error {
	cp.api.stop(30 * time.Second)
	cp.procs.forget(cp.api)
	time.Sleep(down)
	return cp.startAPIServer(ctx)
}

// tokenConfig is a client of the API server that authenticates with a bearer token.
func (cp *controlPlane) tokenConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.admin.Host,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.ca.certPEM},
		BearerToken:     token,
	}
}

func writeKubeconfig(path, server string, caPEM []byte, auth func(*clientcmdapi.AuthInfo)) error {
	config := clientcmdapi.NewConfig()
	config.Clusters["cluster-compat"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	user := clientcmdapi.NewAuthInfo()
	auth(user)
	config.AuthInfos["user"] = user
	config.Contexts["cluster-compat"] = &clientcmdapi.Context{Cluster: "cluster-compat", AuthInfo: "user"}
	config.CurrentContext = "cluster-compat"
	return clientcmd.WriteToFile(*config, path)
}
