package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store"
)

// The timeouts of the session cases: the defaults of the web UI.
const (
	sessIdle = 30 * time.Minute
	sessMax  = 12 * time.Hour
)

func testSessions(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"RoundTrip", testSessionRoundTrip},
		{"IdleTimeout", testSessionIdle},
		{"AbsoluteTimeout", testSessionAbsolute},
		{"Delete", testSessionDelete},
		{"Purge", testSessionPurge},
		{"Refused", testSessionRefused},
	})
}

// tokenSession returns a new token session and its id.
func tokenSession() (*quarantine.Session, string) {
	id, hash := quarantine.NewSessionID()
	_, tokenHash := quarantine.NewTokenSecret()
	return &quarantine.Session{IDHash: hash, TokenHash: tokenHash}, id
}

// personSession returns a new single sign-on session and its id.
func personSession(person string, role quarantine.Role, owners ...string) (*quarantine.Session, string) {
	id, hash := quarantine.NewSessionID()
	return &quarantine.Session{IDHash: hash, Person: person, Role: role, Owners: owners}, id
}

func createSession(t *testing.T, s store.Store, sess *quarantine.Session) {
	t.Helper()
	wantOK(t, s.CreateSession(t.Context(), sess, sessIdle, sessMax), "CreateSession")
}

// useSession uses the session of id and fails t unless it is live.
func useSession(t *testing.T, s store.Store, id string) *quarantine.Session {
	t.Helper()
	got, err := s.UseSession(t.Context(), quarantine.HashSessionID(id), sessIdle)
	wantOK(t, err, "UseSession")
	return got
}

// wantSessionGone fails t unless the session of id is refused (ENOTFOUND).
func wantSessionGone(t *testing.T, s store.Store, id, why string) {
	t.Helper()
	got, err := s.UseSession(t.Context(), quarantine.HashSessionID(id), sessIdle)
	if quarantine.ErrorCode(err) != quarantine.ENOTFOUND {
		t.Fatalf("%s: UseSession = %+v, %v; want ENOTFOUND", why, got, err)
	}
}

func testSessionRoundTrip(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	start := clock.Now().UTC().Truncate(time.Microsecond)
	tok, tokID := tokenSession()
	createSession(t, s, tok)
	if !tok.CreatedAt.Equal(start) || !tok.IdleUntil.Equal(start.Add(sessIdle)) || !tok.ExpiresAt.Equal(start.Add(sessMax)) {
		t.Fatalf("CreateSession times = %v, %v, %v; want now, now+idle, now+max (now %v)", tok.CreatedAt, tok.IdleUntil, tok.ExpiresAt, start)
	}
	alice, aliceID := personSession("oidc:alice@example.com", quarantine.RoleOperator, "payments", "billing")
	createSession(t, s, alice)

	got := useSession(t, s, tokID)
	if got.IDHash != tok.IDHash || got.TokenHash != tok.TokenHash || got.Person != "" || got.Role != "" || len(got.Owners) != 0 ||
		!got.CreatedAt.Equal(tok.CreatedAt) || !got.IdleUntil.Equal(tok.IdleUntil) || !got.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Fatalf("UseSession(token) = %+v, want %+v", got, tok)
	}
	got = useSession(t, s, aliceID)
	if got.Person != alice.Person || got.Role != quarantine.RoleOperator || !slices.Equal(got.Owners, []string{"payments", "billing"}) ||
		got.TokenHash != "" || !got.ExpiresAt.Equal(alice.ExpiresAt) {
		t.Fatalf("UseSession(person) = %+v, want %+v", got, alice)
	}

	// The store keeps the hash only: the id itself opens nothing, and
	// neither does the hash used as an id.
	_, err := s.UseSession(t.Context(), tokID, sessIdle)
	wantCode(t, err, quarantine.ENOTFOUND)
	_, err = s.UseSession(t.Context(), quarantine.HashSessionID(tok.IDHash), sessIdle)
	wantCode(t, err, quarantine.ENOTFOUND)
}

func testSessionIdle(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	sess, id := tokenSession()
	createSession(t, s, sess)
	idle := sess.IdleUntil

	// A use within a refresh step writes nothing: the deadline stays.
	clock.Advance(quarantine.SessionRefresh / 2)
	if got := useSession(t, s, id); !got.IdleUntil.Equal(idle) {
		t.Fatalf("a use %v after the start moved IdleUntil %v -> %v", quarantine.SessionRefresh/2, idle, got.IdleUntil)
	}
	// Used a second before the idle timeout: it lives, for another idle
	// timeout from that use.
	clock.Advance(sessIdle - quarantine.SessionRefresh/2 - time.Second)
	used := clock.Now().UTC().Truncate(time.Microsecond)
	if got := useSession(t, s, id); !got.IdleUntil.Equal(used.Add(sessIdle)) {
		t.Fatalf("IdleUntil after a use = %v, want %v", got.IdleUntil, used.Add(sessIdle))
	}
	clock.Advance(sessIdle - time.Second)
	useSession(t, s, id) // still within the moved deadline
	// Then idle for exactly the timeout: it has ended, and stays ended.
	clock.Advance(sessIdle)
	wantSessionGone(t, s, id, "idle for the timeout")
	clock.Advance(-sessIdle / 2) // even for a clock that steps back
	wantSessionGone(t, s, id, "an ended session, later")
}

func testSessionAbsolute(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	sess, id := personSession("oidc:bob", quarantine.RoleViewer)
	createSession(t, s, sess)
	// Used every 20 minutes, it never idles out, but it ends at its
	// absolute expiry; its idle deadline never passes that expiry.
	step := 20 * time.Minute
	for clock.Now().Add(step).Before(sess.ExpiresAt) {
		clock.Advance(step)
		got := useSession(t, s, id)
		if got.IdleUntil.After(sess.ExpiresAt) {
			t.Fatalf("IdleUntil %v is past ExpiresAt %v", got.IdleUntil, sess.ExpiresAt)
		}
	}
	clock.Advance(sess.ExpiresAt.Sub(clock.Now()) - time.Microsecond)
	useSession(t, s, id)
	clock.Advance(time.Microsecond)
	wantSessionGone(t, s, id, "at its absolute expiry, used a moment before")
}

func testSessionDelete(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	sess, id := tokenSession()
	createSession(t, s, sess)
	other, otherID := tokenSession()
	createSession(t, s, other)
	useSession(t, s, id)
	wantOK(t, s.DeleteSession(ctx, sess.IDHash), "DeleteSession")
	wantSessionGone(t, s, id, "after DeleteSession")
	wantOK(t, s.DeleteSession(ctx, sess.IDHash), "DeleteSession of a deleted session")
	wantOK(t, s.DeleteSession(ctx, "' OR 1=1 --"), "DeleteSession of a hostile hash")
	useSession(t, s, otherID) // the other session is untouched
}

func testSessionPurge(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	ctx := t.Context()
	idle, idleID := tokenSession()
	createSession(t, s, idle)
	used, usedID := tokenSession()
	createSession(t, s, used)
	short, shortID := personSession("oidc:carol", quarantine.RoleAdmin)
	wantOK(t, s.CreateSession(ctx, short, sessIdle, 10*time.Minute), "CreateSession")

	n, err := s.PurgeSessions(ctx)
	wantOK(t, err, "PurgeSessions")
	if n != 0 {
		t.Fatalf("PurgeSessions of three live sessions deleted %d", n)
	}
	clock.Advance(20 * time.Minute)
	useSession(t, s, usedID)
	clock.Advance(20 * time.Minute) // idle ended at 30 min, short at 10, used lives
	n, err = s.PurgeSessions(ctx)
	wantOK(t, err, "PurgeSessions")
	if n != 2 {
		t.Fatalf("PurgeSessions deleted %d sessions, want 2 (one idle, one past its expiry)", n)
	}
	useSession(t, s, usedID)
	wantSessionGone(t, s, idleID, "purged")
	wantSessionGone(t, s, shortID, "purged")
	n, err = s.PurgeSessions(ctx)
	wantOK(t, err, "PurgeSessions again")
	if n != 0 {
		t.Fatalf("PurgeSessions again deleted %d", n)
	}
}

func testSessionRefused(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := t.Context()
	_, tokenHash := quarantine.NewTokenSecret()
	_, idHash := quarantine.NewSessionID()
	for _, c := range []struct {
		name string
		sess quarantine.Session
	}{
		{"no id hash", quarantine.Session{TokenHash: tokenHash}},
		{"an id, not its hash", quarantine.Session{IDHash: "not-a-hash", TokenHash: tokenHash}},
		{"no token or person", quarantine.Session{IDHash: idHash}},
		{"token and person", quarantine.Session{IDHash: idHash, TokenHash: tokenHash, Person: "oidc:x", Role: quarantine.RoleViewer}},
		{"person without a role", quarantine.Session{IDHash: idHash, Person: "oidc:x"}},
		{"person with an unknown role", quarantine.Session{IDHash: idHash, Person: "oidc:x", Role: "root"}},
		{"person on two lines", quarantine.Session{IDHash: idHash, Person: "oidc:x\nadmin", Role: quarantine.RoleViewer}},
		{"empty owner", quarantine.Session{IDHash: idHash, Person: "oidc:x", Role: quarantine.RoleViewer, Owners: []string{""}}},
	} {
		sess := c.sess
		if err := s.CreateSession(ctx, &sess, sessIdle, sessMax); quarantine.ErrorCode(err) != quarantine.EINVALID {
			t.Errorf("CreateSession(%s) = %v, want EINVALID", c.name, err)
		}
	}
	sess, _ := tokenSession()
	createSession(t, s, sess)
	dup := *sess
	wantCode(t, s.CreateSession(ctx, &dup, sessIdle, sessMax), quarantine.ECONFLICT)
	for _, hash := range []string{"", "' OR 1=1 --", "\xff\x00", idHash} {
		_, err := s.UseSession(ctx, hash, sessIdle)
		wantCode(t, err, quarantine.ENOTFOUND)
	}
}
