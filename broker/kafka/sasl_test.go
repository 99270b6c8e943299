package kafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// secured checks a cluster that requires credentials or certificates:
// cfg (which reaches it) collects a dead letter and replays through the
// same settings; bad (which does not) collects nothing and says the
// cluster is unavailable. admin produces the dead letter.
func secured(t *testing.T, name string, admin *kgo.Client, cfg, bad Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := admin.ProduceSync(ctx, springRecord("orders.DLT", "orders", 0, 1, []byte("k"), []byte(`{}`), time.Now(), "E", "m")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource("bad", bad, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	src.poll = 300 * time.Millisecond
	rctx, rcancel := context.WithTimeout(context.Background(), patience*5*time.Second)
	ds, err := src.Receive(rctx, 10, 0)
	rcancel()
	_ = src.Close()
	if len(ds) != 0 || quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE {
		t.Fatalf("refused settings: %d deliveries, error %v; want none and unavailable", len(ds), err)
	}

	st := openStore(t)
	r := runCollector(t, name, cfg, st, 10)
	eventually(t, 10*time.Second, "the dead letter stored", func() bool { return len(allMessages(t, st, name)) == 1 })
	r.Stop()
	pub, err := NewPublisher(cfg, name, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	res := pub.Publish(ctx, []replay.Outgoing{{Queue: "orders", Payload: []byte(`{}`)}})
	if res[0].Outcome != quarantine.ItemPublished {
		t.Fatalf("publish: %+v", res[0])
	}
}

// A cluster that requires SASL, for each mechanism: the collector
// authenticates with its password_file and drains the topic; the
// publisher replays through the same credentials; a wrong password
// collects nothing and says so.
func TestSASL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mechanism string
		admin     sasl.Mechanism
	}{
		{MechanismPlain, plain.Auth{User: "quarantine", Pass: "s3cret"}.AsMechanism()},
		{MechanismSCRAMSHA256, scram.Auth{User: "quarantine", Pass: "s3cret"}.AsSha256Mechanism()},
		{MechanismSCRAMSHA512, scram.Auth{User: "quarantine", Pass: "s3cret"}.AsSha512Mechanism()},
	} {
		t.Run(tc.mechanism, func(t *testing.T) {
			t.Parallel()
			c, err := kfake.NewCluster(kfake.Ports(0), kfake.EnableSASL(), kfake.Superuser(tc.mechanism, "quarantine", "s3cret"),
				kfake.SeedTopics(1, "orders", "orders.DLT"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(tc.admin))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(admin.Close)
			pw := filepath.Join(t.TempDir(), "pw")
			if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Brokers: c.ListenAddrs(), Topics: []string{"orders.DLT"},
				SASL: &SASLConfig{Mechanism: tc.mechanism, Username: "quarantine", PasswordFile: pw}}
			bad := cfg
			bad.SASL = &SASLConfig{Mechanism: tc.mechanism, Username: "quarantine", Password: "wrong"}
			secured(t, "sasl", admin, cfg, bad)
		})
	}
}

// A cluster that serves TLS and requires a client certificate signed by
// its CA: the collector with ca_file, cert_file and key_file drains the
// topic and the publisher replays; without the client certificate it
// collects nothing and says so.
func TestTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t)
	srvCert := ca.issue(t, "kfake", x509.ExtKeyUsageServerAuth)
	cliCert := ca.issue(t, "quarantine", x509.ExtKeyUsageClientAuth)
	c, err := kfake.NewCluster(kfake.Ports(0), kfake.SeedTopics(1, "orders", "orders.DLT"), kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{srvCert}, ClientCAs: ca.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DialTLSConfig(&tls.Config{
		RootCAs: ca.pool, Certificates: []tls.Certificate{cliCert}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePEM(t, caFile, "CERTIFICATE", ca.cert.Raw)
	writePEM(t, certFile, "CERTIFICATE", cliCert.Certificate[0])
	key, err := x509.MarshalPKCS8PrivateKey(cliCert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", key)
	cfg := Config{Brokers: c.ListenAddrs(), Topics: []string{"orders.DLT"},
		TLS: &TLSConfig{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}}
	bad := cfg
	bad.TLS = &TLSConfig{CAFile: caFile}
	secured(t, "tls", admin, cfg, bad)
}

// testCA is a certificate authority for one test.
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
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
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

// issue makes a certificate for 127.0.0.1 with the extended key usage.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
