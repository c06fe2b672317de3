package transport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// leaf issues a certificate naming site, for both server and client use.
func (ca *testCA) leaf(t *testing.T, site string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: site},
		DNSNames:     []string{site},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mtls sets mutual TLS credentials presenting a certificate for certName.
func (ca *testCA) mtls(t *testing.T, c *Config, certName string) {
	cert := ca.leaf(t, certName)
	c.Insecure = false
	c.ServerCredentials = credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    ca.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	})
	c.ClientCredentials = credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      ca.pool,
		MinVersion:   tls.VersionTLS13,
	})
}

func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	t.Run("sites with their own certificates", func(t *testing.T) {
		c := &cluster{tb: t, names: []string{"a", "b"}}
		c.mutate = func(name string, cfg *Config) { ca.mtls(t, cfg, name) }
		a, b := c.start("a"), c.start("b")
		waitUp(t, a, "b")
		waitUp(t, b, "a")
		if err := a.t.Send(context.Background(), "b", Data, []byte("over tls")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "frame over TLS", func() bool { return b.rec.count("a", Data) == 1 })
	})
	t.Run("client claims another site", func(t *testing.T) {
		c := &cluster{tb: t, names: []string{"a", "b", "c"}}
		c.mutate = func(name string, cfg *Config) {
			if name == "a" {
				ca.mtls(t, cfg, "c") // a holds c's certificate but says it is a
			} else {
				ca.mtls(t, cfg, name)
			}
		}
		a := c.start("a")
		b := c.start("b")
		eventually(t, "rejection", func() bool {
			return errors.Is(a.t.Status("b", Data).LastError, ErrUnauthenticated)
		})
		if b.rec.countEvents("in-up", "a", Data) != 0 {
			t.Error("b accepted a session from an impostor")
		}
	})
	t.Run("server is not the site dialed", func(t *testing.T) {
		c := &cluster{tb: t, names: []string{"a", "b"}}
		c.mutate = func(name string, cfg *Config) {
			if name == "b" {
				ca.mtls(t, cfg, "evil")
			} else {
				ca.mtls(t, cfg, name)
			}
		}
		c.start("b")
		a := c.start("a")
		eventually(t, "TLS failure", func() bool {
			err := a.t.Status("b", Data).LastError
			return err != nil && strings.Contains(err.Error(), "certificate")
		})
		t.Logf("surfaced: %v", a.t.Status("b", Data).LastError)
		if a.t.Status("b", Data).Sessions != 0 {
			t.Error("session with a server whose certificate names another site")
		}
	})
}
