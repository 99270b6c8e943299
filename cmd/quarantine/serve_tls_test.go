package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/browsertest"
)

var reTLSLoginURL = regexp.MustCompile(`https://127\.0\.0\.1:\d+/\?token=(qt_[A-Za-z0-9_-]+)`)

// testCA is a certificate authority of the test's own, which issues the
// server's certificates into cert.pem and key.pem of a folder.
type testCA struct {
	t    *testing.T
	dir  string
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
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "quarantine test CA"},
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
	return &testCA{t: t, dir: t.TempDir(), cert: cert, key: key, pool: pool}
}

func (ca *testCA) certFile() string { return filepath.Join(ca.dir, "cert.pem") }
func (ca *testCA) keyFile() string  { return filepath.Join(ca.dir, "key.pem") }

// issue writes a server certificate for 127.0.0.1 with serial, and its
// key, as a certificate manager does: each file written aside, then
// renamed over the old one. With certOnly, the key file is left as it was
// (a rotation half done), and the key is returned for a later writeKey.
func (ca *testCA) issue(serial int64, certOnly bool) (keyPEM []byte) {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	ca.replace(ca.certFile(), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	if !certOnly {
		ca.replace(ca.keyFile(), keyPEM)
	}
	return keyPEM
}

func (ca *testCA) replace(path string, data []byte) {
	ca.t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		ca.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ca.t.Fatal(err)
	}
}

// serveTLS boots the service through Main with the CA's files, looking at
// them on every handshake, and returns it with its stderr.
func serveTLS(t *testing.T, ca *testCA, args ...string) (*Main, *syncBuffer) {
	t.Helper()
	m, _, stderr := newTestMain()
	m.certCheckEvery = time.Nanosecond
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--database", "sqlite:" + filepath.Join(t.TempDir(), "q.db"),
		"--tls-cert-file", ca.certFile(), "--tls-key-file", ca.keyFile()}, args...)
	if err := m.ParseFlags(t.Context(), args); err != nil {
		t.Fatalf("ParseFlags(%q): %v", args, err)
	}
	if err := m.Run(t.Context()); err != nil {
		_ = m.Close()
		t.Fatalf("Run: %v\nstderr:\n%s", err, stderr)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			if err := m.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	})
	return m, stderr
}

// handshake connects with TLS versions min..max, trusting the CA, and
// returns the negotiated version and the serial of the server's leaf.
func handshake(t *testing.T, ca *testCA, addr string, minV, maxV uint16) (uint16, int64, error) {
	t.Helper()
	d := tls.Dialer{Config: &tls.Config{RootCAs: ca.pool, MinVersion: minV, MaxVersion: maxV, ServerName: "127.0.0.1"}}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	st := c.(*tls.Conn).ConnectionState()
	return st.Version, st.PeerCertificates[0].SerialNumber.Int64(), nil
}

// tlsClient trusts the CA, keeps cookies and does not follow redirects.
func tlsClient(ca *testCA) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// With tls.cert_file and tls.key_file, serve speaks HTTPS only: a TLS 1.1
// client is refused at the handshake (protocol_version alert), TLS 1.2
// and 1.3 are served, and a rotated certificate is served from the next
// handshake, without a restart; a rotation half done (the certificate
// replaced, not yet its key) keeps the previous pair in service.
func TestServeTLS_VersionsAndRotation(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	ca.issue(1001, false)
	m, stderr := serveTLS(t, ca)
	addr := m.Addr()

	_, _, err := handshake(t, ca, addr, tls.VersionTLS10, tls.VersionTLS11)
	if err == nil || !strings.Contains(err.Error(), "remote error: tls: protocol version not supported") {
		t.Fatalf("a TLS 1.1 client: err = %v, want the server's protocol_version alert", err)
	}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		got, serial, err := handshake(t, ca, addr, v, v)
		if err != nil || got != v || serial != 1001 {
			t.Fatalf("TLS %s: version %s, serial %d, err %v", tls.VersionName(v), tls.VersionName(got), serial, err)
		}
	}
	res, err := tlsClient(ca).Get(m.URL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.TLS == nil || res.ProtoMajor != 2 {
		t.Fatalf("GET /healthz over https: %d %s", res.StatusCode, res.Proto)
	}
	// Plain HTTP on the TLS port is not served.
	if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP was served on the TLS port")
		}
	}

	// Half a rotation: the new certificate does not match the old key.
	key := ca.issue(1002, true)
	if _, serial, err := handshake(t, ca, addr, tls.VersionTLS12, 0); err != nil || serial != 1001 {
		t.Fatalf("mid-rotation: serial %d, err %v; want the previous certificate 1001", serial, err)
	}
	ca.replace(ca.keyFile(), key)
	if _, serial, err := handshake(t, ca, addr, tls.VersionTLS12, 0); err != nil || serial != 1002 {
		t.Fatalf("after the rotation: serial %d, err %v; want 1002", serial, err)
	}
	ca.issue(1003, false)
	if _, serial, err := handshake(t, ca, addr, tls.VersionTLS13, 0); err != nil || serial != 1003 {
		t.Fatalf("after a second rotation: serial %d, err %v; want 1003", serial, err)
	}
	if !strings.Contains(stderr.String(), "TLS certificate reloaded") {
		t.Fatalf("no reload logged:\n%s", stderr)
	}
}

// Over HTTPS the banner prints an https URL, and the web UI's cookies are
// Secure, HttpOnly, SameSite=Strict and __Host- prefixed (Path=/, no
// Domain); logging in works with the banner's URL and with the form.
func TestServeTLS_CookiesAndLogin(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	ca.issue(7, false)
	m, stderr := serveTLS(t, ca)
	banner := reTLSLoginURL.FindStringSubmatch(stderr.String())
	if banner == nil {
		t.Fatalf("no https login URL printed:\n%s", stderr)
	}
	base := m.URL()
	wantHost := func(res *http.Response, name string) *http.Cookie {
		t.Helper()
		for _, c := range res.Cookies() {
			if c.Name == "__Host-"+name {
				if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" {
					t.Fatalf("cookie %s: %+v, want Secure, HttpOnly, SameSite=Strict, Path=/, no Domain", c.Name, c)
				}
				return c
			}
			if c.Name == name {
				t.Fatalf("cookie %s set without the __Host- prefix over https", name)
			}
		}
		t.Fatalf("no __Host-%s cookie in %v", name, res.Header["Set-Cookie"])
		return nil
	}
	do := func(c *http.Client, req *http.Request) (*http.Response, string) {
		t.Helper()
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	get := func(c *http.Client, u string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		return do(c, req)
	}

	// The banner's URL.
	c := tlsClient(ca)
	res, _ := get(c, banner[0])
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/overview" {
		t.Fatalf("banner URL: %d %q, want 303 to /overview", res.StatusCode, res.Header.Get("Location"))
	}
	wantHost(res, "quarantine_session")
	if res, body := get(c, base+"/messages"); res.StatusCode != http.StatusOK || !strings.Contains(body, "Messages") {
		t.Fatalf("/messages after the banner login: %d", res.StatusCode)
	}

	// The login form: its CSRF cookie is __Host- too, and posting it
	// starts a session.
	c = tlsClient(ca)
	res, body := get(c, base+"/login")
	wantHost(res, "quarantine_login_csrf")
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || csrf == nil {
		t.Fatalf("GET /login: %d, no csrf field", res.StatusCode)
	}
	form := url.Values{"csrf": {csrf[1]}, "token": {banner[1]}}
	req, err := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	res, _ = do(c, req)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/overview" {
		t.Fatalf("POST /login: %d %q, want 303 to /overview", res.StatusCode, res.Header.Get("Location"))
	}
	wantHost(res, "quarantine_session")
	if res, _ := get(c, base+"/overview"); res.StatusCode != http.StatusOK {
		t.Fatalf("/overview after the form login: %d", res.StatusCode)
	}
	// The API is served over the same TLS.
	admin := &http.Request{Method: http.MethodGet, Header: http.Header{"Authorization": {"Bearer " + banner[1]}}}
	admin.URL, _ = url.Parse(base + "/api/v1/messages")
	if res, _ := do(tlsClient(ca), admin); res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/messages over https: %d", res.StatusCode)
	}
}

// Headless Chromium logs in over HTTPS with the banner's URL (the test's
// CA is not in its store: --ignore-certificate-errors), keeps the
// __Host- session cookie and lands on the overview.
func TestServeTLS_LoginInBrowser(t *testing.T) {
	b := browsertest.New(t, chromedp.Flag("ignore-certificate-errors", true))
	ca := newTestCA(t)
	ca.issue(9, false)
	m, stderr := serveTLS(t, ca)
	banner := reTLSLoginURL.FindStringSubmatch(stderr.String())
	if banner == nil {
		t.Fatalf("no https login URL printed:\n%s", stderr)
	}
	b.Do(chromedp.Navigate(banner[0]), chromedp.WaitReady(chromedp.CSS("main")))
	if loc := b.Eval(`location.href`); loc != m.URL()+"/overview" {
		t.Fatalf("after login the browser is at %q, want %s/overview", loc, m.URL())
	}
	b.Do(chromedp.Navigate(m.URL()+"/messages"), chromedp.WaitReady(chromedp.CSS("main")))
	if loc := b.Eval(`location.href`); loc != m.URL()+"/messages" {
		t.Fatalf("the session did not hold: the browser is at %q", loc)
	}
	// HttpOnly: the page's script cannot read the session cookie.
	if got := b.Eval(`document.cookie`); strings.Contains(got, "quarantine_session") {
		t.Fatalf("document.cookie shows the session: %q", got)
	}
}

// tls.cert_file and tls.key_file go together, from any layer; files that
// do not load stop serve with the key named.
func TestServeTLS_ConfigErrors(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	ca.issue(1, false)
	for _, c := range []struct {
		args  []string
		env   map[string]string
		field string
	}{
		{[]string{"--tls-cert-file", ca.certFile()}, nil, "tls.key_file"},
		{nil, map[string]string{EnvTLSKeyFile: ca.keyFile()}, "tls.cert_file"},
	} {
		m, _, _ := newTestMain()
		m.Getenv = func(k string) string { return c.env[k] }
		err := m.ParseFlags(t.Context(), append([]string{"serve"}, c.args...))
		if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != c.field {
			t.Errorf("%v %v: err = %v, want EINVALID naming %s", c.args, c.env, err, c.field)
		}
	}
	// The environment alone is enough.
	m, _, _ := newTestMain()
	env := map[string]string{EnvTLSCertFile: ca.certFile(), EnvTLSKeyFile: ca.keyFile()}
	m.Getenv = func(k string) string { return env[k] }
	if err := m.ParseFlags(t.Context(), []string{"serve"}); err != nil || m.Config.TLS != (TLSConfig{CertFile: ca.certFile(), KeyFile: ca.keyFile()}) {
		t.Fatalf("from the environment: %+v, %v", m.Config.TLS, err)
	}
	// A key that is not the certificate's.
	other := newTestCA(t)
	other.issue(2, false)
	m, _, _ = newTestMain()
	args := []string{"serve", "--listen", "127.0.0.1:0", "--database", "sqlite:" + filepath.Join(t.TempDir(), "q.db"),
		"--tls-cert-file", ca.certFile(), "--tls-key-file", other.keyFile()}
	if err := m.ParseFlags(t.Context(), args); err != nil {
		t.Fatal(err)
	}
	err := m.Run(t.Context())
	_ = m.Close()
	if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != "tls.cert_file" {
		t.Fatalf("a mismatched pair: err = %v, want EINVALID naming tls.cert_file", err)
	}
}
