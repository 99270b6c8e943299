package clientip

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
)

func request(remote string, xff []string, proto string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://example/", nil)
	r.RemoteAddr = remote
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	if proto != "" {
		r.Header.Set("X-Forwarded-Proto", proto)
	}
	return r
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	p, err := Parse([]string{"10.0.0.0/8", "192.0.2.7", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"direct client, no header", "203.0.113.5:4000", nil, "203.0.113.5"},
		{"direct client naming another address", "203.0.113.5:4000", []string{"198.51.100.1"}, "203.0.113.5"},
		{"through a trusted proxy", "10.1.2.3:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"a forged hop left of the real one", "10.1.2.3:80", []string{"1.1.1.1, 198.51.100.1"}, "198.51.100.1"},
		{"two trusted proxies", "192.0.2.7:80", []string{"198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"several header lines", "10.1.2.3:80", []string{"1.1.1.1", "198.51.100.2"}, "198.51.100.2"},
		{"a trusted proxy without the header", "10.1.2.3:80", nil, "10.1.2.3"},
		{"only trusted hops", "10.1.2.3:80", []string{"10.0.0.9"}, "10.0.0.9"},
		{"a malformed hop", "10.1.2.3:80", []string{"198.51.100.1, nonsense"}, "10.1.2.3"},
		{"IPv6 proxy", "[fd00::1]:80", []string{"2001:db8::5"}, "2001:db8::5"},
		{"IPv4-mapped peer", "[::ffff:10.1.2.3]:80", []string{"198.51.100.1"}, "198.51.100.1"},
	}
	for _, c := range cases {
		if got := p.ClientIP(request(c.remote, c.xff, "")); got != c.want {
			t.Errorf("%s: ClientIP = %q, want %q", c.name, got, c.want)
		}
	}
	var none Proxies
	if got := none.ClientIP(request("10.1.2.3:80", []string{"198.51.100.1"}, "")); got != "10.1.2.3" {
		t.Errorf("no trusted proxies: ClientIP = %q, want the peer", got)
	}
}

func TestHTTPS(t *testing.T) {
	t.Parallel()
	p, _ := Parse([]string{"10.0.0.0/8"})
	cases := []struct {
		name   string
		remote string
		proto  string
		want   bool
	}{
		{"trusted proxy says https", "10.1.2.3:80", "https", true},
		{"trusted proxy says HTTPS, then http", "10.1.2.3:80", "HTTPS, http", true},
		{"trusted proxy says http", "10.1.2.3:80", "http", false},
		{"untrusted client says https", "203.0.113.5:4000", "https", false},
		{"no header", "10.1.2.3:80", "", false},
	}
	for _, c := range cases {
		if got := p.HTTPS(request(c.remote, nil, c.proto)); got != c.want {
			t.Errorf("%s: HTTPS = %v, want %v", c.name, got, c.want)
		}
	}
	r := request("203.0.113.5:4000", nil, "")
	r.TLS = &tls.ConnectionState{}
	if !p.HTTPS(r) {
		t.Error("a TLS request is HTTPS")
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10.0.0.0/33", "nope", "10.0.0", ""} {
		if _, err := Parse([]string{"127.0.0.1", bad}); err == nil || !strings.Contains(err.Error(), "element 1") {
			t.Errorf("Parse(%q): %v, want an error naming element 1", bad, err)
		}
	}
}
