package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

const tokenColumns = `id, name, role, owners, secret_hash, created_at, created_by, revoked_at`

// tokenDetails is what a token event records: never the secret or its hash.
type tokenDetails struct {
	Name   string          `json:"name"`
	Role   quarantine.Role `json:"role"`
	Owners []string        `json:"owners"`
}

// CreateToken stores t, filling ID, CreatedAt and CreatedBy (actor), and
// appends token.create in the same transaction. Errors: EINVALID for an
// invalid token or a missing secret hash, ECONFLICT when an active token
// has the name (or the secret hash is taken), EUNAVAILABLE, EINTERNAL.
func (s *Store) CreateToken(ctx context.Context, t *quarantine.Token, actor string) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if t.SecretHash == "" {
		return quarantine.FieldErrorf(quarantine.EINVALID, "secret_hash", "a token needs a secret hash")
	}
	now := s.clock()
	owners := t.Owners
	if owners == nil {
		owners = []string{}
	}
	ownersJSON, _ := json.Marshal(owners) // a slice of strings always marshals
	id := quarantine.NewID(now)
	err := s.inTx(ctx, "create a token", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO tokens (`+tokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)`,
			id, t.Name, string(t.Role), string(ownersJSON), t.SecretHash, now, actor)
		if err != nil {
			return tokenConflict(err, t.Name)
		}
		e := quarantine.NewAuditEvent(actor, quarantine.ActionTokenCreate, id, tokenDetails{t.Name, t.Role, owners})
		return s.appendAudit(ctx, tx, &e)
	})
	if err != nil {
		return err
	}
	t.ID, t.CreatedAt, t.CreatedBy, t.Owners, t.RevokedAt = id, now, actor, owners, nil
	return nil
}

// tokenConflict names the token in a unique violation.
func tokenConflict(err error, name string) error {
	if quarantine.ErrorCode(translate(err, "")) == quarantine.ECONFLICT {
		return &quarantine.Error{Code: quarantine.ECONFLICT, Field: "name",
			Message: "an active token named " + quarantine.Clip(name) + " already exists", Err: err}
	}
	return err
}

// scanToken reads one tokens row.
func scanToken(row pgx.CollectableRow) (*quarantine.Token, error) {
	var t quarantine.Token
	var owners string
	if err := row.Scan(&t.ID, &t.Name, &t.Role, &owners, &t.SecretHash, &t.CreatedAt, &t.CreatedBy, &t.RevokedAt); err != nil {
		return nil, err
	}
	t.Owners = []string{}
	if err := json.Unmarshal([]byte(owners), &t.Owners); err != nil {
		return nil, quarantine.Internal(err, "token %s: owners are not a JSON array", t.ID)
	}
	t.CreatedAt = t.CreatedAt.UTC()
	t.RevokedAt = utcPtr(t.RevokedAt)
	return &t, nil
}

// TokenBySecretHash returns the token with that secret hash, revoked or
// not. Errors: ENOTFOUND, EUNAVAILABLE, EINTERNAL.
func (s *Store) TokenBySecretHash(ctx context.Context, hash string) (*quarantine.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE secret_hash = $1`, quarantine.SanitizeText(hash))
	if err != nil {
		return nil, translate(err, "find a token")
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanToken)
	if err != nil {
		return nil, translate(orNotFound(err, notfound.Token()), "find a token")
	}
	return t, nil
}

// ListTokens returns every token, revoked ones included, in creation
// order. Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) ListTokens(ctx context.Context) ([]*quarantine.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, translate(err, "list tokens")
	}
	out, err := pgx.CollectRows(rows, scanToken)
	if err != nil {
		return nil, translate(err, "list tokens")
	}
	if out == nil {
		out = []*quarantine.Token{}
	}
	return out, nil
}

// RevokeToken revokes the token and appends token.revoke by actor in the
// same transaction. Errors: ENOTFOUND, ECONFLICT when it is already
// revoked, EUNAVAILABLE, EINTERNAL.
func (s *Store) RevokeToken(ctx context.Context, id, actor string) error {
	if !quarantine.ValidID(id) {
		return notfound.TokenID(id)
	}
	return s.inTx(ctx, "revoke a token", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE id = $1 FOR UPDATE`, id)
		if err != nil {
			return err
		}
		t, err := pgx.CollectExactlyOneRow(rows, scanToken)
		if err != nil {
			return orNotFound(err, notfound.TokenID(id))
		}
		if t.RevokedAt != nil {
			return quarantine.Errorf(quarantine.ECONFLICT, "token %q is already revoked", t.Name)
		}
		now := s.clock()
		if _, err := tx.Exec(ctx, `UPDATE tokens SET revoked_at = $1 WHERE id = $2`, now, id); err != nil {
			return err
		}
		e := quarantine.NewAuditEvent(actor, quarantine.ActionTokenRevoke, id, tokenDetails{t.Name, t.Role, t.Owners})
		return s.appendAudit(ctx, tx, &e)
	})
}

// CountActiveTokens returns how many tokens are not revoked. Errors:
// EUNAVAILABLE, EINTERNAL.
func (s *Store) CountActiveTokens(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM tokens WHERE revoked_at IS NULL`).Scan(&n)
	return n, translate(err, "count tokens")
}
