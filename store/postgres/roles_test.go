package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// dbRoles are an owner role, which migrates, and a runtime role, which
// serves, each a plain login role of the test's own.
type dbRoles struct{ owner, app string }

// newRoles creates the two roles; they are dropped when t ends, after
// the schemas of its subtests.
func newRoles(t *testing.T) dbRoles {
	return dbRoles{owner: pgtest.Role(t, "q_owner"), app: pgtest.Role(t, "q_app")}
}

// open creates a fresh schema owned by the owner role, migrates it as
// the owner, grants the runtime role, and returns a store connected as
// each role (both closed when t ends).
func (r dbRoles) open(t *testing.T, opts ...postgres.Option) (owner, app *postgres.Store) {
	t.Helper()
	u := pgtest.URL(t)
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, u, "ALTER SCHEMA "+p.Query().Get("search_path")+" OWNER TO "+r.owner)
	owner = openURL(t, pgtest.WithUser(t, u, r.owner), postgres.WithoutSearchIndexer())
	if err := owner.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate as the owner: %v", err)
	}
	if err := owner.GrantRuntime(t.Context(), r.app); err != nil {
		t.Fatalf("GrantRuntime: %v", err)
	}
	return owner, openURL(t, pgtest.WithUser(t, u, r.app), opts...)
}

// TestConformanceAsRuntimeRole runs the whole store suite through a
// store connected as the runtime role: everything serve asks of the
// store (ingest, edits, replays, leases, tokens, alarms, audit appends
// and verification) works with the rights GrantRuntime gives. Tamper
// cases write behind the store's back as the owner.
func TestConformanceAsRuntimeRole(t *testing.T) {
	t.Parallel()
	r := newRoles(t)
	var owners sync.Map // runtime store -> owner store of its schema
	open := func(t *testing.T, opts ...postgres.Option) store.Store {
		owner, app := r.open(t, opts...)
		owners.Store(app, owner)
		return app
	}
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store { return open(t) },
		OpenClock: func(t *testing.T, now func() time.Time) store.Store {
			return open(t, postgres.WithClock(now))
		},
		Exec: func(t *testing.T, s store.Store, sql string) {
			owner, _ := owners.Load(s)
			execRaw(t, owner.(*postgres.Store), sql)
		},
		OpenUnindexed: func(t *testing.T) store.Store { return open(t, postgres.WithoutSearchIndexer()) },
		SetSampleExact: func(s store.Store, exact, smallGroup int) {
			postgres.SetSampleExact(s.(*postgres.Store), exact, smallGroup)
		},
	})
}

// TestRuntimeRoleCannotRewriteTheAudit connects as the runtime role and
// tries every way of changing, removing or unguarding the audit log and
// its head: each is refused by PostgreSQL (insufficient privilege), and
// the chain still verifies, ending at the same head.
func TestRuntimeRoleCannotRewriteTheAudit(t *testing.T) {
	t.Parallel()
	r := newRoles(t)
	owner, app := r.open(t)
	ctx := t.Context()
	for range 3 {
		if _, err := app.AppendAudit(ctx, quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
			t.Fatalf("AppendAudit as the runtime role: %v", err)
		}
	}
	head, err := app.AuditHead(ctx)
	if err != nil || head.Seq != 3 {
		t.Fatalf("AuditHead = %+v, %v; want seq 3", head, err)
	}
	var first string
	if err := app.Pool().QueryRow(ctx, "SELECT hash FROM audit_log WHERE seq = 1").Scan(&first); err != nil {
		t.Fatal(err)
	}
	forbidden := []string{
		// The rows.
		"UPDATE audit_log SET actor = 'mallory' WHERE seq = 2",
		"UPDATE audit_log SET actor = 'mallory' WHERE false",
		"DELETE FROM audit_log WHERE seq = 3",
		"TRUNCATE audit_log",
		// The table and its guards.
		"ALTER TABLE audit_log DISABLE TRIGGER USER",
		"ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only_change",
		"ALTER TABLE audit_log ADD COLUMN note text",
		"ALTER TABLE audit_log RENAME TO audit_log_old",
		"DROP TRIGGER audit_log_append_only_change ON audit_log",
		"DROP TABLE audit_log",
		"CREATE TRIGGER pass BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()",
		"CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
		"DROP FUNCTION audit_log_append_only() CASCADE",
		"SET session_replication_role = replica",
		// The head: no rewind, no forged hash, no removal, no second row.
		"UPDATE audit_head SET seq = 1, hash = '" + first + "' WHERE id = 1",
		"UPDATE audit_head SET seq = 4, hash = '" + strings.Repeat("ab", 32) + "' WHERE id = 1",
		"DELETE FROM audit_head",
		"TRUNCATE audit_head",
		"INSERT INTO audit_head (id, seq, hash) VALUES (2, 0, '')",
		"ALTER TABLE audit_head DISABLE TRIGGER USER",
		"DROP TABLE audit_head",
		// Nothing else that could shadow or unguard the tables.
		"CREATE TABLE audit_log_shadow (seq bigint)",
		"ALTER TABLE messages DISABLE TRIGGER USER",
		"TRUNCATE messages",
		"DELETE FROM schema_migrations",
	}
	for _, sql := range forbidden {
		err := execAs(ctx, app, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("as the runtime role, %s: err = %v, want insufficient_privilege (42501)", sql, err)
		}
	}
	v, err := app.VerifyAudit(ctx, head)
	if err != nil || !v.OK || v.Checked != 3 || v.Head != head {
		t.Fatalf("VerifyAudit = %+v, %v; want the 3 events, ending at %+v", v, err, head)
	}
	// The owner can still unguard the log: that is why serve does not
	// run as the owner.
	if err := execAs(ctx, owner, "ALTER TABLE audit_log DISABLE TRIGGER USER"); err != nil {
		t.Fatalf("the owner could not alter its table: %v", err)
	}
}

// execAs runs sql in a transaction of s that is rolled back.
func execAs(ctx context.Context, s *postgres.Store, sql string) error {
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	_, err = tx.Exec(ctx, sql)
	return err
}

// TestAuditHeadOnlyMovesForward: whoever writes it, owner included, the
// head can only move to the last event of the log.
func TestAuditHeadOnlyMovesForward(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	var evs []quarantine.AuditEvent
	for range 3 {
		e, err := s.AppendAudit(ctx, quarantine.NewAuditEvent("alice", "x", "y", nil))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	for _, sql := range []string{
		"UPDATE audit_head SET seq = 2, hash = '" + evs[1].Hash + "' WHERE id = 1",
		"UPDATE audit_head SET seq = 3, hash = '" + evs[1].Hash + "' WHERE id = 1",
		"UPDATE audit_head SET seq = 4, hash = '" + evs[2].Hash + "' WHERE id = 1",
		"UPDATE audit_head SET seq = seq WHERE id = 1",
		"DELETE FROM audit_head",
		"TRUNCATE audit_head",
	} {
		err := execAs(ctx, s, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s: err = %v, want the head's refusal (42501)", sql, err)
		}
	}
	if _, err := s.AppendAudit(ctx, quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
		t.Fatalf("an append after the refusals: %v", err)
	}
	if v, err := s.VerifyAudit(ctx); err != nil || !v.OK || v.Checked != 4 {
		t.Fatalf("VerifyAudit = %+v, %v; want 4 events, OK", v, err)
	}
}

// TestGrantRuntimeRefusesPowerfulRoles: a role that would get back what
// the grants withhold (a superuser, the owner or a member of it) or that
// does not exist is EINVALID naming database_runtime_role; granting twice
// gives the same rights.
func TestGrantRuntimeRefusesPowerfulRoles(t *testing.T) {
	t.Parallel()
	r := newRoles(t)
	owner, app := r.open(t)
	ctx := t.Context()
	member := pgtest.Role(t, "q_member")
	pgtest.Exec(t, pgtest.BaseURL(t), "GRANT "+r.owner+" TO "+member)
	for _, role := range []string{"postgres", r.owner, member, "q_nobody_at_all", ""} {
		err := owner.GrantRuntime(ctx, role)
		if quarantine.ErrorCode(err) != quarantine.EINVALID || quarantine.ErrorField(err) != "database_runtime_role" {
			t.Errorf("GrantRuntime(%q) = %v, want EINVALID naming database_runtime_role", role, err)
		}
	}
	if err := owner.GrantRuntime(ctx, r.app); err != nil {
		t.Fatalf("GrantRuntime again: %v", err)
	}
	var privs string
	if err := owner.Pool().QueryRow(ctx, `SELECT string_agg(table_name || ':' || privilege_type, ',' ORDER BY table_name, privilege_type)
		FROM information_schema.role_table_grants
		WHERE grantee = $1 AND table_schema = current_schema() AND table_name IN ('audit_log', 'audit_head', 'schema_migrations')`,
		r.app).Scan(&privs); err != nil {
		t.Fatal(err)
	}
	if want := "audit_head:SELECT,audit_log:INSERT,audit_log:SELECT,schema_migrations:SELECT"; privs != want {
		t.Fatalf("table privileges of the runtime role = %s, want %s", privs, want)
	}
	if _, err := app.AppendAudit(ctx, quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
		t.Fatalf("AppendAudit after granting twice: %v", err)
	}
}

// TestMigrateExistingDatabaseToForwardHead: a database migrated before
// migration 0014, holding events, takes it and keeps its chain.
func TestMigrateExistingDatabaseToForwardHead(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx := t.Context()
	if _, err := s.AppendAudit(ctx, quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
		t.Fatal(err)
	}
	// Back to the schema of the previous release (and without the
	// migrations after 0014).
	for _, q := range []string{"DROP TRIGGER audit_head_keep ON audit_head", "DROP TRIGGER audit_head_forward_only ON audit_head",
		"DROP FUNCTION audit_head_forward_only()", "DROP TABLE sessions", "DROP TABLE inflow_minutes",
		"DROP TRIGGER messages_waiting_update ON messages", "DROP FUNCTION messages_waiting_update()", "DROP TABLE waiting_minutes",
		"ALTER TABLE replay_batches DROP COLUMN pin_total",
		"DROP TABLE discard_operations", "ALTER TABLE messages DROP COLUMN insert_xid", "ALTER TABLE messages DROP COLUMN discard_seq",
		"ALTER TABLE replay_batches DROP COLUMN start_at, DROP COLUMN start_force",
		"ALTER TABLE messages DROP CONSTRAINT messages_source_dedupe_key_key, ADD CONSTRAINT messages_source_dedupe_key_key UNIQUE (source, dedupe_key)",
		"ALTER TABLE replay_items ADD CONSTRAINT replay_items_batch_id_fkey FOREIGN KEY (batch_id) REFERENCES replay_batches (id)",
		"DELETE FROM schema_migrations WHERE version >= 14"} {
		if _, err := s.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if cur, _, err := s.SchemaVersion(ctx); err != nil || cur != 13 {
		t.Fatalf("SchemaVersion = %d, %v; want 13", cur, err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if _, err := s.AppendAudit(ctx, quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
		t.Fatal(err)
	}
	if err := execAs(ctx, s, "UPDATE audit_head SET seq = 1 WHERE id = 1"); err == nil {
		t.Fatal("the migrated head could be rewound")
	}
	if v, err := s.VerifyAudit(ctx); err != nil || !v.OK || v.Checked != 2 {
		t.Fatalf("VerifyAudit = %+v, %v; want 2 events, OK", v, err)
	}
}
