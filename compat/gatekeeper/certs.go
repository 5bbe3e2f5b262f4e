package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is every file the run needs, all made fresh so that no key outlives the run.
type pki struct {
	dir string
	// caCert signs the server certificate and the client certificate Gatekeeper presents.
	caCert string
	// serverCert/serverKey serve meshlife on localhost and 127.0.0.1.
	serverCert, serverKey string
	// clientCert/clientKey stand in for Gatekeeper's webhook certificate (/certs/tls.crt).
	clientCert, clientKey string
	// otherCA and its client certificate must be refused by the server.
	otherCACert, otherClientCert, otherClientKey string
}

type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newPKI(dir string) (*pki, error) {
	p := &pki{
		dir:             dir,
		caCert:          filepath.Join(dir, "ca.crt"),
		serverCert:      filepath.Join(dir, "server.crt"),
		serverKey:       filepath.Join(dir, "server.key"),
		clientCert:      filepath.Join(dir, "client.crt"),
		clientKey:       filepath.Join(dir, "client.key"),
		otherCACert:     filepath.Join(dir, "other-ca.crt"),
		otherClientCert: filepath.Join(dir, "other-client.crt"),
		otherClientKey:  filepath.Join(dir, "other-client.key"),
	}

	// The subjects follow what cert-controller issues for Gatekeeper (serving.md §1.3), so a
	// server that pins names would see the names it sees in a cluster.
	ca, err := makeCA("gatekeeper-ca", p.caCert)
	if err != nil {
		return nil, err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := makeLeaf(ca, server, p.serverCert, p.serverKey); err != nil {
		return nil, err
	}
	// Gatekeeper's webhook certificate carries ServerAuth and, with external data on,
	// ClientAuth: the same pair here, so a server that checks extended key usage sees both.
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "gatekeeper-webhook-service.gatekeeper-system.svc", Organization: []string{"gatekeeper"}},
		DNSNames:    []string{"gatekeeper-webhook-service.gatekeeper-system.svc"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if err := makeLeaf(ca, client, p.clientCert, p.clientKey); err != nil {
		return nil, err
	}

	// Same subject names as the real CA and client: only the signature may make the
	// difference, not a name the server happens to check.
	other, err := makeCA("gatekeeper-ca", p.otherCACert)
	if err != nil {
		return nil, err
	}
	otherClient := &x509.Certificate{
		Subject:     client.Subject,
		DNSNames:    client.DNSNames,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: client.ExtKeyUsage,
	}
	if err := makeLeaf(other, otherClient, p.otherClientCert, p.otherClientKey); err != nil {
		return nil, err
	}
	return p, nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func makeCA(name, certPath string) (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	number, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          number,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"gatekeeper"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return &issuer{cert: cert, key: key}, nil
}

func makeLeaf(ca *issuer, template *x509.Certificate, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	number, err := serial()
	if err != nil {
		return err
	}
	now := time.Now()
	template.SerialNumber = number
	template.NotBefore = now.Add(-time.Hour)
	template.NotAfter = now.Add(24 * time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return fmt.Errorf("creating certificate %s: %w", certPath, err)
	}
	// PKCS#8: the one key encoding every TLS stack reads (rustls, OpenSSL, Go).
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(keyPath, "PRIVATE KEY", keyDER, 0o600)
}

func writePEM(path, blockType string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), mode)
}
