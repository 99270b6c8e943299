package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/sessions"
)

// The web UI's sessions (migration 0015); see store.Sessions.

const sessionColumns = `id_hash, token_hash, person, role, owners, created_at, idle_until, expires_at`

func scanSession(r scanner) (*quarantine.Session, error) {
	var s quarantine.Session
	var role, owners string
	var created, idle, expires int64
	if err := r.Scan(&s.IDHash, &s.TokenHash, &s.Person, &role, &owners, &created, &idle, &expires); err != nil {
		return nil, err
	}
	s.Role = quarantine.Role(role)
	s.CreatedAt, s.IdleUntil, s.ExpiresAt = fromMicros(created), fromMicros(idle), fromMicros(expires)
	var err error
	if s.Owners, err = sessions.Owners(owners); err != nil {
		return nil, err
	}
	return &s, nil
}

// CreateSession stores s with its times from the store's clock; see
// store.Sessions. Errors: EINVALID, ECONFLICT, EUNAVAILABLE, EINTERNAL.
func (s *Store) CreateSession(ctx context.Context, sess *quarantine.Session, idle, max time.Duration) error {
	c, owners, err := sessions.Start(sess, s.clock, idle, max)
	if err != nil {
		return err
	}
	err = s.write(ctx, "create a session", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			c.IDHash, c.TokenHash, c.Person, string(c.Role), owners,
			micros(c.CreatedAt), micros(c.IdleUntil), micros(c.ExpiresAt))
		if isConstraint(err) {
			return quarantine.Errorf(quarantine.ECONFLICT, "a session with this id exists")
		}
		return err
	})
	if err != nil {
		return err
	}
	sessions.Started(sess, c)
	return nil
}

// UseSession returns the live session of idHash and records its use; see
// store.Sessions. It reads first, and writes only to end the session or
// to move its idle deadline. Errors: ENOTFOUND, EUNAVAILABLE, EINTERNAL.
func (s *Store) UseSession(ctx context.Context, idHash string, idle time.Duration) (*quarantine.Session, error) {
	var sess *quarantine.Session
	err := s.read(ctx, "read a session", func(tx *sql.Tx) error {
		var err error
		sess, err = scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id_hash = ?`, idHash))
		return orNotFound(err, notfound.Session())
	})
	if err != nil {
		return nil, err
	}
	touch, err := sessions.Use(ctx, s, sess, idHash, s.clock(), idle)
	if err != nil {
		return nil, err
	}
	if !touch {
		return sess, nil
	}
	err = s.write(ctx, "use a session", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET idle_until = ? WHERE id_hash = ?`, micros(sess.IdleUntil), idHash)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return notfound.Session() // ended meanwhile (a logout)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// DeleteSession ends the session of idHash; see store.Sessions. Errors:
// EUNAVAILABLE, EINTERNAL.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	return s.write(ctx, "delete a session", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id_hash = ?`, idHash)
		return err
	})
}

// PurgeSessions deletes the sessions that have ended; see store.Sessions.
// Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) PurgeSessions(ctx context.Context) (int64, error) {
	var n int64
	err := s.write(ctx, "purge sessions", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE idle_until <= ?`, micros(s.clock()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
