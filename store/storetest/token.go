package storetest

import (
	"slices"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

func newToken(name string, role quarantine.Role, owners ...string) (*quarantine.Token, string) {
	secret, hash := quarantine.NewTokenSecret()
	return &quarantine.Token{Name: name, Role: role, Owners: owners, SecretHash: hash}, secret
}

func sameToken(want, got *quarantine.Token) bool {
	if want.ID != got.ID || want.Name != got.Name || want.Role != got.Role || want.SecretHash != got.SecretHash ||
		!want.CreatedAt.Equal(got.CreatedAt) || want.CreatedBy != got.CreatedBy {
		return false
	}
	if !slices.Equal(want.Owners, got.Owners) && !(len(want.Owners) == 0 && len(got.Owners) == 0) {
		return false
	}
	if (want.RevokedAt == nil) != (got.RevokedAt == nil) {
		return false
	}
	return want.RevokedAt == nil || want.RevokedAt.Equal(*got.RevokedAt)
}

func activeCount(t *testing.T, s store.Store) int {
	t.Helper()
	n, err := s.CountActiveTokens(t.Context())
	wantOK(t, err, "CountActiveTokens")
	return n
}

func testTokens(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	if n := activeCount(t, s); n != 0 {
		t.Fatalf("fresh store has %d active tokens", n)
	}
	admin, secret := newToken("ci-admin", quarantine.RoleAdmin)
	wantOK(t, s.CreateToken(ctx, admin, "bootstrap"), "CreateToken")
	if !quarantine.ValidID(admin.ID) || admin.CreatedAt.IsZero() {
		t.Fatalf("CreateToken did not fill ID and CreatedAt: %+v", admin)
	}
	viewer, _ := newToken("payments-viewer", quarantine.RoleViewer, "payments", "billing")
	wantOK(t, s.CreateToken(ctx, viewer, "token:ci-admin"), "CreateToken")

	got, err := s.TokenBySecretHash(ctx, quarantine.HashTokenSecret(secret))
	wantOK(t, err, "TokenBySecretHash")
	if !sameToken(admin, got) {
		t.Fatalf("TokenBySecretHash = %+v, want %+v", got, admin)
	}
	_, err = s.TokenBySecretHash(ctx, quarantine.HashTokenSecret("qt_unknown"))
	wantCode(t, err, quarantine.ENOTFOUND)
	_, err = s.TokenBySecretHash(ctx, "' OR 1=1 --")
	wantCode(t, err, quarantine.ENOTFOUND)

	dup, _ := newToken("ci-admin", quarantine.RoleViewer)
	wantCode(t, s.CreateToken(ctx, dup, "bootstrap"), quarantine.ECONFLICT)
	noHash := &quarantine.Token{Name: "no-hash", Role: quarantine.RoleViewer}
	wantCode(t, s.CreateToken(ctx, noHash, "bootstrap"), quarantine.EINVALID)
	badRole, _ := newToken("bad-role", "root")
	wantCode(t, s.CreateToken(ctx, badRole, "bootstrap"), quarantine.EINVALID)
	if n := activeCount(t, s); n != 2 {
		t.Fatalf("%d active tokens after two creates and three refusals, want 2", n)
	}

	wantOK(t, s.RevokeToken(ctx, admin.ID, "token:ci-admin"), "RevokeToken")
	wantCode(t, s.RevokeToken(ctx, admin.ID, "token:ci-admin"), quarantine.ECONFLICT)
	wantCode(t, s.RevokeToken(ctx, quarantine.NewID(baseTime), "x"), quarantine.ENOTFOUND)
	wantCode(t, s.RevokeToken(ctx, "'; DELETE FROM tokens; --", "x"), quarantine.ENOTFOUND)
	if n := activeCount(t, s); n != 1 {
		t.Fatalf("%d active tokens after a revoke, want 1", n)
	}
	got, err = s.TokenBySecretHash(ctx, admin.SecretHash)
	wantOK(t, err, "TokenBySecretHash of a revoked token")
	if got.RevokedAt == nil || got.Active() {
		t.Fatalf("revoked token reads back active: %+v", got)
	}
	admin.RevokedAt = got.RevokedAt

	again, _ := newToken("ci-admin", quarantine.RoleOperator, "team-a")
	wantOK(t, s.CreateToken(ctx, again, "bootstrap"), "CreateToken reusing a revoked token's name")

	list, err := s.ListTokens(ctx)
	wantOK(t, err, "ListTokens")
	want := []*quarantine.Token{admin, viewer, again}
	if len(list) != len(want) {
		t.Fatalf("ListTokens = %d tokens, want %d", len(list), len(want))
	}
	for i := range want {
		if !sameToken(want[i], list[i]) {
			t.Fatalf("ListTokens[%d] = %+v, want %+v", i, list[i], want[i])
		}
	}

	evs, err := s.ListAudit(ctx, quarantine.AuditFilter{})
	wantOK(t, err, "ListAudit")
	var actions, actors []string
	for _, e := range evs {
		actions = append(actions, e.Action)
		actors = append(actors, e.Actor)
	}
	wantActions := []string{quarantine.ActionTokenCreate, quarantine.ActionTokenCreate, quarantine.ActionTokenRevoke, quarantine.ActionTokenCreate}
	wantActors := []string{"bootstrap", "token:ci-admin", "token:ci-admin", "bootstrap"}
	if !slices.Equal(actions, wantActions) || !slices.Equal(actors, wantActors) {
		t.Fatalf("audit trail %v by %v, want %v by %v (refused changes leave no event)", actions, actors, wantActions, wantActors)
	}
	v, err := s.VerifyAudit(ctx)
	wantOK(t, err, "VerifyAudit")
	if !v.OK || v.Checked != 4 {
		t.Fatalf("VerifyAudit after token changes = %+v", v)
	}
}
