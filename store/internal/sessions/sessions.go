// Package sessions holds what both stores do around their SQL for the
// web UI's sessions (store.Sessions): the row a new session is stored as,
// and the reading of its owners.
package sessions

import (
	"context"
	"encoding/json"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// Start checks sess (Session.Validate) and returns the row to insert: a
// copy of it started at clock() (Session.Start with idle and max), and
// its owners as a JSON array ([] for none). The store inserts it, then
// calls Started.
func Start(sess *quarantine.Session, clock func() time.Time, idle, max time.Duration) (quarantine.Session, string, error) {
	if err := sess.Validate(); err != nil {
		return quarantine.Session{}, "", err
	}
	c := *sess
	if c.Owners == nil {
		c.Owners = []string{}
	}
	owners, _ := json.Marshal(c.Owners) // a slice of strings always marshals
	c.Start(clock(), idle, max)
	return c, string(owners), nil
}

// Started gives sess the owners and times of the row c it was stored as.
func Started(sess *quarantine.Session, c quarantine.Session) {
	sess.Owners, sess.CreatedAt, sess.IdleUntil, sess.ExpiresAt = c.Owners, c.CreatedAt, c.IdleUntil, c.ExpiresAt
}

// Owners decodes the owners column (a JSON array) of a session's row.
func Owners(column string) ([]string, error) {
	var owners []string
	if err := json.Unmarshal([]byte(column), &owners); err != nil {
		return nil, quarantine.Internal(err, "a session's owners are not a JSON array")
	}
	return owners, nil
}

// Deleter is what Use needs of a store: the end of a session.
type Deleter interface {
	DeleteSession(ctx context.Context, idHash string) error
}

// Use applies a use at now to sess, the session of idHash as read: one
// that has ended is deleted (ENOTFOUND); touch reports whether its idle
// deadline moved (Session.Use with idle), for the store to write.
func Use(ctx context.Context, st Deleter, sess *quarantine.Session, idHash string, now time.Time, idle time.Duration) (touch bool, err error) {
	if sess.Ended(now) {
		if err := st.DeleteSession(ctx, idHash); err != nil {
			return false, err
		}
		return false, notfound.Session()
	}
	return sess.Use(now, idle), nil
}
