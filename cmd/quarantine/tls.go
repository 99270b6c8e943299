package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// TLSConfig makes serve speak HTTPS (config tls:). Both files or neither.
type TLSConfig struct {
	CertFile string // PEM certificate chain, leaf first
	KeyFile  string // PEM private key of the leaf
}

func (c TLSConfig) enabled() bool { return c.CertFile != "" }

// certCheckEvery is how often, at most, a handshake looks at the files'
// metadata for a rotation.
const certCheckEvery = time.Second

// certReloader hands the TLS handshake the key pair of two files, loaded
// again after a certificate manager replaced either of them (another
// modification time, size or file: a rename or a swapped symbolic link,
// as Kubernetes does). The files are looked at (stat, not read) at most
// once per interval, on a handshake, so a rotation is served from the
// first handshake after it, without a restart. A pair that does not load
// (a rotation half written) keeps the previous one in service until the
// next look finds the files whole.
type certReloader struct {
	certFile, keyFile string
	every             time.Duration
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stats   [2]os.FileInfo // of certFile and keyFile at the last load
	checked time.Time
}

// newCertReloader loads the pair once. Errors: EINVALID naming the key
// (tls.cert_file or tls.key_file) when a file cannot be read or the pair
// does not load.
func newCertReloader(c TLSConfig, every time.Duration, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: c.CertFile, keyFile: c.KeyFile, every: every, log: log}
	stats, err := r.stat()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, quarantine.FieldErrorf(quarantine.EINVALID, "tls.cert_file",
			"tls.cert_file %q and tls.key_file %q do not load as a key pair: %v", c.CertFile, c.KeyFile, err)
	}
	r.cert, r.stats, r.checked = &cert, stats, time.Now()
	return r, nil
}

func (r *certReloader) stat() ([2]os.FileInfo, error) {
	var out [2]os.FileInfo
	for i, f := range []struct{ key, path string }{{"tls.cert_file", r.certFile}, {"tls.key_file", r.keyFile}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			return out, quarantine.FieldErrorf(quarantine.EINVALID, f.key, "cannot read %s %q: %v", f.key, f.path, err)
		}
		out[i] = fi
	}
	return out, nil
}

// getCertificate is tls.Config.GetCertificate.
func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= r.every {
		r.checked = now
		r.reloadIfChanged()
	}
	return r.cert, nil
}

// reloadIfChanged loads the pair again when either file changed since the
// last load. It runs under r.mu.
func (r *certReloader) reloadIfChanged() {
	stats, err := r.stat()
	if err != nil {
		r.log.Warn("the TLS certificate files cannot be read: serving the previous certificate", "err", err)
		return
	}
	if same(stats[0], r.stats[0]) && same(stats[1], r.stats[1]) {
		return
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Mid-rotation (one file replaced, not yet the other) or broken:
		// keep serving the previous pair and look again next time.
		r.log.Warn("the TLS certificate files changed but do not load: serving the previous certificate", "err", err)
		return
	}
	r.cert, r.stats = &cert, stats
	r.log.Info("TLS certificate reloaded", "cert_file", r.certFile, "serial", serialOf(&cert))
}

// same reports whether two looks at a file saw the same content, as far
// as its metadata tells: the same file, size and modification time.
func same(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func serialOf(c *tls.Certificate) string {
	if c.Leaf == nil || c.Leaf.SerialNumber == nil {
		return ""
	}
	return fmt.Sprintf("%x", c.Leaf.SerialNumber)
}

// serverTLSConfig is what serve offers: TLS 1.2 or later with Go's
// default cipher suites; net/http adds HTTP/2 (Server.ServeTLS).
func (r *certReloader) serverTLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.getCertificate}
}
