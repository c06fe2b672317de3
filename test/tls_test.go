package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestTLSClusterThroughKvctl runs three sites with mutual TLS between them
// and on the client API: kvctl with the cluster's CA and a client
// certificate writes at one site and reads by quorum at another (which asks
// its peers over TLS); kvctl without a certificate, or with one from
// another CA, is refused and says why.
func TestTLSClusterThroughKvctl(t *testing.T) {
	c := genCluster(t, three...)
	pki := filepath.Join(c.dir, "pki")
	ca := newCA(t, pki, "ca")
	for _, s := range c.sites {
		ca.issue(t, pki, s.Site) // a site's certificate names the site
		enableTLS(t, s.Config, pki, s.Site)
	}
	ca.issue(t, pki, "client")
	other := newCA(t, pki, "other-ca")
	other.issue(t, pki, "stranger")
	for _, s := range c.sites {
		c.start(s.Site)
	}
	creds := []string{"--cacert", filepath.Join(pki, "ca.pem"),
		"--cert", filepath.Join(pki, "client.pem"), "--key", filepath.Join(pki, "client-key.pem")}

	out, errOut, code := c.kvctl("us-east-1", append([]string{"put", "ckpt/run-7/step-1200", `{"shards":16}`, "--wait", "all", "-o", "json"}, creds...)...)
	if code != 0 {
		t.Fatalf("put over TLS: exit %d: %s", code, errOut)
	}
	var w struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Seq == 0 {
		t.Fatalf("put output %q: %v", out, err)
	}
	out, errOut, code = c.kvctl("ap-south-1", append([]string{"get", "ckpt/run-7/step-1200", "--quorum", "majority", "-o", "json"}, creds...)...)
	if code != 0 || !strings.Contains(out, "shards") {
		t.Fatalf("quorum get over TLS: exit %d: %s %s", code, out, errOut)
	}

	// Plaintext against a TLS site fails, and so does a certificate from
	// another CA; neither hangs.
	_, errOut, code = c.kvctl("eu-west-1", "get", "ckpt/run-7/step-1200", "--timeout", "3s")
	if code == 0 || !strings.Contains(errOut, "may require TLS") {
		t.Errorf("plaintext get against a TLS site: exit %d: %s", code, errOut)
	}
	_, errOut2, code2 := c.kvctl("eu-west-1", "get", "ckpt/run-7/step-1200", "--timeout", "3s",
		"--cacert", filepath.Join(pki, "ca.pem"),
		"--cert", filepath.Join(pki, "stranger.pem"), "--key", filepath.Join(pki, "stranger-key.pem"))
	if code2 == 0 || !strings.Contains(errOut2, "TLS") {
		t.Errorf("a certificate from another CA: exit %d: %s", code2, errOut2)
	}
	t.Logf("plaintext: %s\nstranger: %s", strings.TrimSpace(errOut), strings.TrimSpace(errOut2))
}

// enableTLS turns a genconfig config from plaintext to mutual TLS with
// site's certificate.
func enableTLS(t *testing.T, path, pki, site string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "insecure")
	cfg["tls"] = map[string]string{
		"cert": filepath.Join(pki, site+".pem"),
		"key":  filepath.Join(pki, site+"-key.pem"),
		"ca":   filepath.Join(pki, "ca.pem"),
	}
	if b, err = yaml.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newCA writes a self-signed CA certificate to dir/name.pem.
func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	return &testCA{cert: cert, key: key}
}

// issue writes a certificate for name (peers check a site's certificate
// against its site name) and for 127.0.0.1 (the address clients dial),
// good for servers and clients, and its key, to dir/name.pem and
// dir/name-key.pem.
func (ca *testCA) issue(t *testing.T, dir, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{name},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, name+"-key.pem"), "EC PRIVATE KEY", kder)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
