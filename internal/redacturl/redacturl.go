// Package redacturl shows URLs in logs and errors without their secrets:
// the one place that decides what of a URL is secret. Broker and endpoint
// URLs (URL, List) follow one policy every adapter uses:
//
//   - a password becomes <secret>; the user name stays;
//   - a user name without a password is a token (NATS, some HTTP
//     endpoints) and becomes <secret>;
//   - a query, where tokens hide, becomes <secret> as a whole;
//   - a URL that does not parse is not shown at all (<unparsable url>),
//     since a secret may sit where no parser can find it.
//
// Database URLs (Database) keep their user name and settings: only the
// password is hidden.
package redacturl

import (
	"net/url"
	"strings"
)

// Secret replaces what is hidden.
const Secret = "<secret>"

// Unparsable stands for a URL that does not parse.
const Unparsable = "<unparsable url>"

// URL returns raw fit for logs and errors, under the package's policy.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return Unparsable
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Secret)
		} else {
			u.User = url.User(Secret)
		}
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = Secret, false
	}
	// url.URL escapes the marker in the user info; show it as written.
	return strings.ReplaceAll(u.String(), url.PathEscape(Secret), Secret)
}

// List returns a comma-separated list of URLs (a NATS server list) with
// each URL as URL shows it.
func List(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		parts[i] = URL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}
