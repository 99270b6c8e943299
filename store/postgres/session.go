package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/sessions"
)

// The web UI's sessions (migration 0015); see store.Sessions. Each call is
// one statement or two, outside an explicit transaction: a session is one
// row, and a logout on another instance between the read and the write
// of a use makes the write find no row (ENOTFOUND).

const sessionColumns = `id_hash, token_hash, person, role, owners, created_at, idle_until, expires_at`

func scanSession(row pgx.CollectableRow) (*quarantine.Session, error) {
	var s quarantine.Session
	var owners string
	if err := row.Scan(&s.IDHash, &s.TokenHash, &s.Person, &s.Role, &owners, &s.CreatedAt, &s.IdleUntil, &s.ExpiresAt); err != nil {
		return nil, err
	}
	var err error
	if s.Owners, err = sessions.Owners(owners); err != nil {
		return nil, err
	}
	s.CreatedAt, s.IdleUntil, s.ExpiresAt = s.CreatedAt.UTC(), s.IdleUntil.UTC(), s.ExpiresAt.UTC()
	return &s, nil
}

// CreateSession stores s with its times from the store's clock; see
// store.Sessions. Errors: EINVALID, ECONFLICT, EUNAVAILABLE, EINTERNAL.
func (s *Store) CreateSession(ctx context.Context, sess *quarantine.Session, idle, max time.Duration) error {
	c, owners, err := sessions.Start(sess, s.clock, idle, max)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		c.IDHash, c.TokenHash, c.Person, string(c.Role), owners, c.CreatedAt, c.IdleUntil, c.ExpiresAt)
	if err != nil {
		return translate(err, "create a session")
	}
	sessions.Started(sess, c)
	return nil
}

// UseSession returns the live session of idHash and records its use; see
// store.Sessions. It reads first, and writes only to end the session or
// to move its idle deadline. Errors: ENOTFOUND, EUNAVAILABLE, EINTERNAL.
func (s *Store) UseSession(ctx context.Context, idHash string, idle time.Duration) (*quarantine.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id_hash = $1`, quarantine.SanitizeText(idHash))
	if err != nil {
		return nil, translate(err, "read a session")
	}
	sess, err := pgx.CollectExactlyOneRow(rows, scanSession)
	if err != nil {
		return nil, translate(orNotFound(err, notfound.Session()), "read a session")
	}
	touch, err := sessions.Use(ctx, s, sess, idHash, s.clock(), idle)
	if err != nil {
		return nil, err
	}
	if !touch {
		return sess, nil
	}
	tag, err := s.pool.Exec(ctx, `UPDATE sessions SET idle_until = $1 WHERE id_hash = $2`, sess.IdleUntil, sess.IDHash)
	if err != nil {
		return nil, translate(err, "use a session")
	}
	if tag.RowsAffected() == 0 {
		return nil, notfound.Session() // ended meanwhile (a logout)
	}
	return sess, nil
}

// DeleteSession ends the session of idHash; see store.Sessions. Errors:
// EUNAVAILABLE, EINTERNAL.
func (s *Store) DeleteSession(ctx context.Context, idHash string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id_hash = $1`, quarantine.SanitizeText(idHash))
	return translate(err, "delete a session")
}

// PurgeSessions deletes the sessions that have ended; see store.Sessions.
// Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) PurgeSessions(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE idle_until <= $1`, s.clock())
	if err != nil {
		return 0, translate(err, "purge sessions")
	}
	return tag.RowsAffected(), nil
}
