package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
)

// runtimeGrants is what the runtime role may do in the store's schema
// ({{schema}}), granted to {{role}} after everything it had there is
// revoked, so that running it again gives exactly this set:
//
//   - SELECT, INSERT, UPDATE and DELETE on every table (and the identity
//     sequences behind them), but never TRUNCATE, REFERENCES or TRIGGER;
//   - schema_migrations (and schema_contracts, once a contract
//     migration made it) is read-only;
//   - audit_log: SELECT and INSERT only;
//   - audit_head: SELECT and UPDATE of seq and hash, which its trigger
//     (migration 0014) lets move only forward, to the log's last event.
//
// The role owns nothing and cannot create in the schema, so it can
// neither ALTER nor DROP a table, nor disable a trigger; turning triggers
// off with session_replication_role takes a superuser.
var runtimeGrants = []string{
	`REVOKE ALL ON ALL TABLES IN SCHEMA {{schema}} FROM {{role}}`,
	`REVOKE ALL ON ALL SEQUENCES IN SCHEMA {{schema}} FROM {{role}}`,
	`GRANT USAGE ON SCHEMA {{schema}} TO {{role}}`,
	`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {{schema}} TO {{role}}`,
	`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {{schema}} TO {{role}}`,
	`REVOKE INSERT, UPDATE, DELETE ON {{schema}}.schema_migrations FROM {{role}}`,
	`DO $$ BEGIN IF to_regclass('{{schema}}.schema_contracts') IS NOT NULL THEN
		EXECUTE 'REVOKE INSERT, UPDATE, DELETE ON {{schema}}.schema_contracts FROM {{role}}'; END IF; END $$`,
	`REVOKE UPDATE, DELETE ON {{schema}}.audit_log FROM {{role}}`,
	`REVOKE INSERT, UPDATE, DELETE ON {{schema}}.audit_head FROM {{role}}`,
	`GRANT UPDATE (seq, hash) ON {{schema}}.audit_head TO {{role}}`,
}

// GrantRuntime gives role, an existing role, exactly the rights serve
// needs on the store's tables (the first schema of the search path) and
// no more: it may append to the audit log but never change, delete or
// truncate its rows, and it owns nothing (see runtimeGrants). Migrate must
// have run; call GrantRuntime again after every Migrate that adds tables
// (quarantine migrate does, when database_runtime_role is configured). It
// runs as the owner of the tables (or a superuser), under the migrations'
// lock.
//
// Errors: EINVALID when role is empty, does not exist, is a superuser,
// bypasses row security or is a member of the tables' owner (any of which
// would give it back what is withheld); ECONFLICT when the schema is not
// migrated; EUNAVAILABLE; EINTERNAL (for example when the connected role
// may not grant).
func (s *Store) GrantRuntime(ctx context.Context, role string) error {
	if strings.TrimSpace(role) == "" {
		return quarantine.FieldErrorf(quarantine.EINVALID, "database_runtime_role", "no runtime role named")
	}
	return s.inTx(ctx, "grant the runtime role", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
			return err
		}
		var schema, owner string
		err := tx.QueryRow(ctx, `SELECT coalesce(max(n.nspname), ''), coalesce(max(pg_get_userbyid(c.relowner)), '')
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.oid = to_regclass('audit_log')`).Scan(&schema, &owner)
		if err != nil {
			return err
		}
		if schema == "" {
			return quarantine.Errorf(quarantine.ECONFLICT, "the database is not migrated: run quarantine migrate")
		}
		var exists, super, member bool
		err = tx.QueryRow(ctx, `SELECT count(*) > 0, coalesce(bool_or(rolsuper OR rolbypassrls), false),
				coalesce(bool_or(pg_has_role(rolname, $2, 'MEMBER')), false)
			FROM pg_roles WHERE rolname = $1`, role, owner).Scan(&exists, &super, &member)
		switch {
		case err != nil:
			return err
		case !exists:
			return quarantine.FieldErrorf(quarantine.EINVALID, "database_runtime_role",
				"role %q does not exist: create it first (CREATE ROLE %s LOGIN PASSWORD …)", role, pgx.Identifier{role}.Sanitize())
		case super:
			return quarantine.FieldErrorf(quarantine.EINVALID, "database_runtime_role",
				"role %q is a superuser (or bypasses row security): no grant can restrict it", role)
		case member:
			return quarantine.FieldErrorf(quarantine.EINVALID, "database_runtime_role",
				"role %q is the owner of the tables (%s) or a member of it: it could rewrite the audit log", role, owner)
		}
		r := strings.NewReplacer("{{schema}}", pgx.Identifier{schema}.Sanitize(), "{{role}}", pgx.Identifier{role}.Sanitize())
		for _, q := range runtimeGrants {
			if _, err := tx.Exec(ctx, r.Replace(q)); err != nil {
				return err
			}
		}
		return nil
	})
}

// SessionUser returns the role the store's connections run as
// (current_user). Errors: EUNAVAILABLE, EINTERNAL.
func (s *Store) SessionUser(ctx context.Context) (string, error) {
	var u string
	err := s.pool.QueryRow(ctx, `SELECT current_user`).Scan(&u)
	return u, translate(err, "read the session's role")
}
