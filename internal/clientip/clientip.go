// Package clientip tells who sent a request, and whether it came over
// HTTPS, when reverse proxies stand in front of the service. Forwarding
// headers (X-Forwarded-For, X-Forwarded-Proto) are believed only from the
// configured trusted proxies (config trusted_proxies): anyone else could
// name any address in them.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies is the set of trusted proxies. The zero value trusts none: the
// client is the TCP peer, and a request is HTTPS only over TLS.
type Proxies struct {
	nets []netip.Prefix
}

// Parse returns the proxies of cidrs, each a CIDR (10.0.0.0/8, fd00::/8)
// or a single address. An error names the bad element.
func Parse(cidrs []string) (Proxies, error) {
	var p Proxies
	for i, c := range cidrs {
		c = strings.TrimSpace(c)
		var pre netip.Prefix
		var err error
		if strings.Contains(c, "/") {
			pre, err = netip.ParsePrefix(c)
		} else {
			var a netip.Addr
			if a, err = netip.ParseAddr(c); err == nil {
				pre = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if err != nil {
			return Proxies{}, fmt.Errorf("element %d: %q is not a CIDR or an IP address", i, c)
		}
		p.nets = append(p.nets, pre.Masked())
	}
	return p, nil
}

// trusted reports whether a is one of the proxies.
func (p Proxies) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// peer is the TCP peer of r.
func peer(r *http.Request) (netip.Addr, string) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, host
	}
	return a.Unmap(), a.Unmap().String()
}

// ClientIP is the address of the client that sent r. From a trusted proxy
// it is the right-most address of X-Forwarded-For that is not a trusted
// proxy (each proxy appends the address it received from; the ones to
// its left could be forged by the client). Otherwise, and when the header
// is missing or malformed, it is the TCP peer (or the nearest trusted
// hop).
func (p Proxies) ClientIP(r *http.Request) string {
	a, s := peer(r)
	if !a.IsValid() || !p.trusted(a) {
		return s
	}
	hops := forwardedFor(r)
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := netip.ParseAddr(hops[i])
		if err != nil {
			return s // a malformed hop: stop at the last trusted one
		}
		s = h.Unmap().String()
		if !p.trusted(h) {
			return s
		}
	}
	return s
}

// FromProxy reports whether r's TCP peer is one of the trusted proxies,
// whose headers (an identity-aware proxy's user and groups) are believed.
func (p Proxies) FromProxy(r *http.Request) bool {
	a, _ := peer(r)
	return a.IsValid() && p.trusted(a)
}

// HTTPS reports whether the client's request was made over HTTPS: r came
// over TLS, or a trusted proxy says X-Forwarded-Proto: https.
func (p Proxies) HTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	a, _ := peer(r)
	if !a.IsValid() || !p.trusted(a) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",") // the first proxy's, the client's scheme
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// forwardedFor lists the X-Forwarded-For addresses of r, left to right,
// over every header line.
func forwardedFor(r *http.Request) []string {
	var out []string
	for _, line := range r.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(line, ",") {
			out = append(out, strings.TrimSpace(h))
		}
	}
	return out
}
