package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// maxSecretBytes bounds a bearer secret; ours are 46 bytes.
const maxSecretBytes = 256

// rule says who may use a route.
type rule struct {
	role      quarantine.Role // the least role
	unscoped  bool            // the token must have no owners, unless it is an admin
	requireAs string          // how the requirement reads in an access.denied event
}

var (
	ruleRead    = rule{role: quarantine.RoleViewer, requireAs: "viewer"}
	ruleIngest  = rule{role: quarantine.RoleOperator, requireAs: "operator"}
	ruleOperate = rule{role: quarantine.RoleOperator, requireAs: "operator"}
	ruleAudit   = rule{role: quarantine.RoleViewer, unscoped: true, requireAs: "admin, or a token without owners"}
	ruleAdmin   = rule{role: quarantine.RoleAdmin, requireAs: "admin"}
)

func (r rule) allows(t *quarantine.Token) bool {
	if !t.Role.AtLeast(r.role) {
		return false
	}
	return !r.unscoped || len(t.Owners) == 0 || t.Role == quarantine.RoleAdmin
}

func tokenFrom(ctx context.Context) *quarantine.Token {
	t, _ := ctx.Value(keyToken).(*quarantine.Token)
	return t
}

// bearer returns the secret of an "Authorization: Bearer <secret>" header.
func bearer(h string) (string, error) {
	if h == "" {
		return "", quarantine.Errorf(quarantine.EUNAUTHORIZED, "missing Authorization: Bearer token")
	}
	scheme, secret, ok := strings.Cut(h, " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" || len(secret) > maxSecretBytes ||
		strings.ContainsAny(secret, " \t") {
		return "", quarantine.Errorf(quarantine.EUNAUTHORIZED, "the Authorization header must be \"Bearer <token>\"")
	}
	return secret, nil
}

// authenticate finds the token of the request; without a valid, active
// one the answer is 401. Refusals are counted per client (the remote IP,
// or the X-Forwarded-For client of a trusted proxy): one auth.refused
// audit event per client and minute, and past the client's budget or
// the global one a refused attempt is 429 with Retry-After instead (see
// refusals). A valid token is never refused for others' failures.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, err := bearer(r.Header.Get("Authorization"))
		if err != nil {
			s.refuse(w, r, err)
			return
		}
		t, err := s.cfg.Store.TokenBySecretHash(r.Context(), quarantine.HashTokenSecret(secret))
		switch {
		case quarantine.ErrorCode(err) == quarantine.ENOTFOUND || (err == nil && !t.Active()):
			s.refuse(w, r, quarantine.Errorf(quarantine.EUNAUTHORIZED, "the token is unknown or revoked"))
			return
		case err != nil:
			s.fail(w, r, err)
			return
		}
		// What a token reads is its own (payloads, redaction by role):
		// no shared or private cache may keep it.
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyToken, t)))
	})
}

// refuse answers a refused login: err (401) within the budgets, 429 with
// Retry-After past them.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if wait, slowed := s.refusals.refuse(s.cfg.TrustedProxies.ClientIP(r)); slowed {
		tooManyRefusals(w, r, wait)
		return
	}
	s.fail(w, r, err)
}

// require lets the request through when its token satisfies rl, and
// answers 403 (recorded in the audit log) otherwise.
func (s *Server) require(rl rule) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t := tokenFrom(r.Context())
			if t == nil || !rl.allows(t) {
				s.deny(w, r, map[string]any{"required_role": rl.requireAs},
					"this token may not do this: it needs %s", rl.requireAs)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// canSeeRedacted reports whether t sees payloads unmasked: operators and
// admins do, viewers do not.
func canSeeRedacted(t *quarantine.Token) bool { return t.Role.AtLeast(quarantine.RoleOperator) }

// deny appends an access.denied event for the request's token and answers
// 403. No 403 goes out unrecorded: if the audit log cannot be written, the
// store's error is the answer.
func (s *Server) deny(w http.ResponseWriter, r *http.Request, details map[string]any, format string, args ...any) {
	actor := "anonymous"
	if t := tokenFrom(r.Context()); t != nil {
		actor = t.Actor()
	}
	d := map[string]any{"method": quarantine.Clip(r.Method), "path": rules.ClipPath(r.URL.Path)}
	for k, v := range details {
		d[k] = v
	}
	ev := quarantine.NewAuditEvent(actor, quarantine.ActionAccessDenied, rules.ClipPath(r.URL.Path), d)
	if _, err := s.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
		s.fail(w, r, err)
		return
	}
	s.fail(w, r, quarantine.Errorf(quarantine.EFORBIDDEN, format, args...))
}

// denyHidden answers a write on a message outside the token's owners. The
// answer is the 404 of a message that does not exist, so that a token
// cannot learn which ids other teams hold; the attempt is still recorded
// as access.denied.
func (s *Server) denyHidden(w http.ResponseWriter, r *http.Request, id string) {
	actor := tokenFrom(r.Context()).Actor()
	ev := quarantine.NewAuditEvent(actor, quarantine.ActionAccessDenied, id, map[string]any{
		"method": quarantine.Clip(r.Method), "path": rules.ClipPath(r.URL.Path), "reason": "the message is outside the token's owners"})
	if _, err := s.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
		s.fail(w, r, err)
		return
	}
	s.fail(w, r, errNoMessage)
}
