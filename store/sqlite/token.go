package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

const tokenColumns = `id, name, role, owners, secret_hash, created_at, created_by, revoked_at`

func scanToken(r scanner) (*quarantine.Token, error) {
	var t quarantine.Token
	var role, owners string
	var created int64
	var revoked sql.NullInt64
	if err := r.Scan(&t.ID, &t.Name, &role, &owners, &t.SecretHash, &created, &t.CreatedBy, &revoked); err != nil {
		return nil, err
	}
	t.Role = quarantine.Role(role)
	t.CreatedAt = fromMicros(created)
	t.RevokedAt = fromMicrosPtr(revoked)
	if err := json.Unmarshal([]byte(owners), &t.Owners); err != nil {
		return nil, err
	}
	return &t, nil
}

// CreateToken stores t, filling ID, CreatedAt and (when empty) CreatedBy,
// and appends token.create by actor in the same transaction. EINVALID for
// an invalid token or a missing secret hash, ECONFLICT when an active token
// has the same name.
func (s *Store) CreateToken(ctx context.Context, t *quarantine.Token, actor string) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if len(t.SecretHash) != 64 {
		return quarantine.FieldErrorf(quarantine.EINVALID, "secret_hash", "a token needs the SHA-256 of its secret")
	}
	owners := t.Owners
	if owners == nil {
		owners = []string{}
	}
	ob, err := json.Marshal(owners)
	if err != nil {
		return quarantine.Internal(err, "cannot encode token owners")
	}
	now := s.clock()
	id := quarantine.NewID(now)
	createdBy := t.CreatedBy
	if createdBy == "" {
		createdBy = quarantine.SanitizeText(actor)
	}
	err = s.write(ctx, "create a token", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)`,
			id, t.Name, string(t.Role), string(ob), t.SecretHash, micros(now), createdBy)
		if isConstraint(err) {
			return quarantine.Errorf(quarantine.ECONFLICT, "an active token named %q exists", t.Name)
		}
		if err != nil {
			return err
		}
		_, err = s.appendAudit(ctx, tx, quarantine.NewAuditEvent(actor, quarantine.ActionTokenCreate, id,
			map[string]any{"name": t.Name, "role": t.Role, "owners": owners}))
		return err
	})
	if err != nil {
		return err
	}
	t.ID, t.CreatedAt, t.CreatedBy, t.RevokedAt = id, now, createdBy, nil
	return nil
}

// TokenBySecretHash returns the token with that secret hash, revoked or
// not, or ENOTFOUND.
func (s *Store) TokenBySecretHash(ctx context.Context, hash string) (*quarantine.Token, error) {
	var t *quarantine.Token
	err := s.read(ctx, "read a token", func(tx *sql.Tx) error {
		var err error
		t, err = scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE secret_hash = ?`, hash))
		return orNotFound(err, notfound.Token())
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ListTokens returns every token, revoked ones included, by creation.
func (s *Store) ListTokens(ctx context.Context) ([]*quarantine.Token, error) {
	return txn.Get(ctx, s.read, "list tokens", func(tx *sql.Tx) ([]*quarantine.Token, error) {
		return queryAll(ctx, tx, scanToken, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, id`)
	})
}

// RevokeToken revokes the token and appends token.revoke by actor in the
// same transaction. ENOTFOUND for no such token, ECONFLICT when it is
// already revoked.
func (s *Store) RevokeToken(ctx context.Context, id, actor string) error {
	if !quarantine.ValidID(id) {
		return notfound.TokenID(id)
	}
	return s.write(ctx, "revoke a token", func(tx *sql.Tx) error {
		var name string
		var revoked sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT name, revoked_at FROM tokens WHERE id = ?`, id).Scan(&name, &revoked)
		if err != nil {
			return orNotFound(err, notfound.TokenID(id))
		}
		if revoked.Valid {
			return quarantine.Errorf(quarantine.ECONFLICT, "token %q is already revoked", name)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = ? WHERE id = ?`, micros(s.clock()), id); err != nil {
			return err
		}
		_, err = s.appendAudit(ctx, tx, quarantine.NewAuditEvent(actor, quarantine.ActionTokenRevoke, id, map[string]any{"name": name}))
		return err
	})
}

// CountActiveTokens returns how many tokens are not revoked.
func (s *Store) CountActiveTokens(ctx context.Context) (int, error) {
	var n int
	err := s.read(ctx, "count tokens", func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE revoked_at IS NULL`).Scan(&n)
	})
	return n, err
}
