package quarantine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"
)

// Role is what a token may do.
type Role string

// The roles, from least to most powerful.
const (
	RoleViewer   Role = "viewer"   // reads
	RoleOperator Role = "operator" // edits, discards and replays within its owners' queues
	RoleAdmin    Role = "admin"    // everything, including tokens
)

var roleRank = map[Role]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return roleRank[r] > 0 }

// AtLeast reports whether r has every right of min.
func (r Role) AtLeast(min Role) bool { return r.Valid() && roleRank[r] >= roleRank[min] }

// ParseRole returns the role named s, or an EINVALID error naming "role".
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !r.Valid() {
		return "", FieldErrorf(EINVALID, "role", "unknown role %q (one of viewer, operator, admin)", truncateForError(s))
	}
	return r, nil
}

// TokenPrefix starts every token secret, so that a leaked one is easy to
// recognise in logs and by secret scanners.
const TokenPrefix = "qt_"

// Token is an API credential. Only the SHA-256 of its secret is stored.
// A token with Owners sees and acts on only those owners' messages.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Role       Role       `json:"role"`
	Owners     []string   `json:"owners"`
	CreatedAt  time.Time  `json:"created_at"`
	CreatedBy  string     `json:"created_by"`
	RevokedAt  *time.Time `json:"revoked_at"`
	SecretHash string     `json:"-"`
	// Person is set on the credential the web UI builds for a person
	// signed in through single sign-on (never stored as a token): the
	// actor is then the person ("oidc:alice@example.com").
	Person string `json:"-"`
}

// Actor is how the token appears in the audit log: "token:" and its
// name, or the person signed in with it.
func (t *Token) Actor() string {
	if t.Person != "" {
		return t.Person
	}
	return "token:" + t.Name
}

// Active reports whether t may be used.
func (t *Token) Active() bool { return t.RevokedAt == nil }

// Sees reports whether t may see messages of owner.
func (t *Token) Sees(owner string) bool {
	if len(t.Owners) == 0 {
		return true
	}
	for _, o := range t.Owners {
		if o == owner {
			return true
		}
	}
	return false
}

// Validate checks a token before it is stored.
func (t *Token) Validate() error {
	if strings.TrimSpace(t.Name) == "" {
		return FieldErrorf(EINVALID, "name", "a token needs a name")
	}
	if len(t.Name) > 200 || !utf8.ValidString(t.Name) || strings.ContainsAny(t.Name, "\x00\r\n") {
		return FieldErrorf(EINVALID, "name", "name must be valid UTF-8, one line, at most 200 bytes")
	}
	return validateGrant(t.Role, t.Owners)
}

// validateGrant checks the role and owners a token or a person's session
// grants.
func validateGrant(role Role, owners []string) error {
	if !role.Valid() {
		return FieldErrorf(EINVALID, "role", "unknown role %q (one of viewer, operator, admin)", truncateForError(string(role)))
	}
	for _, o := range owners {
		if o == "" || len(o) > 200 || !utf8.ValidString(o) || strings.ContainsRune(o, 0) {
			return FieldErrorf(EINVALID, "owners", "owner names must be non-empty valid UTF-8, at most 200 bytes")
		}
	}
	return nil
}

// random256 returns 256 random bits, URL-safe base64 without padding.
func random256() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// NewTokenSecret returns a new random token secret and its hash.
func NewTokenSecret() (secret, hash string) {
	secret = TokenPrefix + random256()
	return secret, HashTokenSecret(secret)
}

// HashTokenSecret returns the stored form of a token secret. Secrets carry
// 256 random bits, so one SHA-256 is enough: nothing can be guessed.
func HashTokenSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
