package quarantine

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"
)

// Session is a browser signed in to the web UI, as the store keeps it. The
// browser holds a random session id (NewSessionID); the store keeps only
// its SHA-256 (IDHash), so that a copy of the database opens no session.
// Every instance on the database shares the sessions.
//
// A session is opened either with a token (TokenHash: the token's secret
// hash; the token is read again on every request, so that revoking it ends
// its sessions) or by a person signed in through single sign-on (Person,
// with the Role and Owners their groups gave them at sign-in).
type Session struct {
	IDHash    string
	TokenHash string
	// Person is how the person appears in the audit log ("oidc:" and
	// their email or subject).
	Person string
	Role   Role
	Owners []string
	// CreatedAt is when the session began. It ends at IdleUntil unless it
	// is used before (each use moves IdleUntil; see SessionRefresh), and
	// at ExpiresAt at the latest, used or not. IdleUntil is never after
	// ExpiresAt.
	CreatedAt time.Time
	IdleUntil time.Time
	ExpiresAt time.Time
}

// SessionRefresh is how far a use must move a session's idle deadline
// before the store writes it: a browser's many requests in one minute
// cost one write, and the idle timeout is exact to within a minute.
const SessionRefresh = time.Minute

// Ended reports whether s has ended at now (idle too long, or past its
// absolute expiry).
func (s *Session) Ended(now time.Time) bool {
	return !now.Before(s.IdleUntil) || !now.Before(s.ExpiresAt)
}

// Start sets the times of a session that begins at now: it ends after
// idle without use, and after max at the latest.
func (s *Session) Start(now time.Time, idle, max time.Duration) {
	s.CreatedAt, s.ExpiresAt = now, now.Add(max)
	s.IdleUntil = minTime(now.Add(idle), s.ExpiresAt)
}

// Use records a use of s at now: its idle deadline becomes now+idle (at
// most ExpiresAt). It reports whether the deadline moved by
// SessionRefresh or more, i.e. whether the store must write it; when not,
// s is unchanged.
func (s *Session) Use(now time.Time, idle time.Duration) bool {
	next := minTime(now.Add(idle), s.ExpiresAt)
	if next.Sub(s.IdleUntil) < SessionRefresh {
		return false
	}
	s.IdleUntil = next
	return true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Validate checks a session before it is stored: a 64-hex IDHash, and
// exactly one of a token's secret hash or a person with a valid role.
func (s *Session) Validate() error {
	if !isHexSHA256(s.IDHash) {
		return FieldErrorf(EINVALID, "id_hash", "a session needs the SHA-256 of its id")
	}
	switch {
	case s.TokenHash != "" && s.Person != "":
		return FieldErrorf(EINVALID, "person", "a session is a token's or a person's, not both")
	case s.TokenHash != "":
		if s.Role != "" || len(s.Owners) > 0 {
			return FieldErrorf(EINVALID, "role", "a token's session takes its role and owners from the token")
		}
		return nil
	case s.Person == "":
		return FieldErrorf(EINVALID, "person", "a session needs a token or a person")
	}
	if len(s.Person) > 400 || !utf8.ValidString(s.Person) || strings.ContainsAny(s.Person, "\x00\r\n") {
		return FieldErrorf(EINVALID, "person", "a person must be one line of valid UTF-8, at most 400 bytes")
	}
	return validateGrant(s.Role, s.Owners)
}

// NewSessionID returns a new random session id (256 bits, URL-safe) and
// the hash the store keeps of it.
func NewSessionID() (id, hash string) {
	id = random256()
	return id, HashSessionID(id)
}

// HashSessionID returns the stored form of a session id: its SHA-256 in
// hex. Ids carry 256 random bits, so one hash is enough.
func HashSessionID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
