package redacturl

import (
	"net/url"
	"regexp"
	"strings"
)

var (
	reKVPassword    = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
	reQueryPassword = regexp.MustCompile(`(?i)([?&]password=)[^&#]*`)
	reUserInfo      = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://[^/?#@]*?:)[^/?#]*@`)
)

// Database returns a database URL (postgres://…, a key=value
// connection string, sqlite:PATH) fit for logs and errors. Its policy
// differs from URL's where a database URL is not a broker's: the user
// name is a role, not a token, and the query holds settings (sslmode),
// so only the password is replaced by <secret>, wherever it is: in the
// user info, in a password query parameter or in a password= setting.
// A URL that does not parse still has anything shaped like
// user:password@ hidden.
func Database(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			c := *u
			c.User = nil
			prefix := c.Scheme + "://"
			raw = prefix + url.User(u.User.Username()).String() + ":" + Secret + "@" + strings.TrimPrefix(c.String(), prefix)
		}
	} else if err != nil {
		// Unparseable: still hide anything shaped like user:password@.
		raw = reUserInfo.ReplaceAllString(raw, "${1}"+Secret+"@")
	}
	raw = reQueryPassword.ReplaceAllString(raw, "${1}"+Secret)
	if !strings.Contains(raw, "://") {
		raw = reKVPassword.ReplaceAllString(raw, "${1}"+Secret)
	}
	return raw
}
