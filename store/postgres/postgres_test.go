package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/postgres"
	"github.com/quarantine-dev/quarantine/store/storetest"
)

// serve sizes the discard chunks of the store by its own target.
var _ rules.ChunkPaced = (*postgres.Store)(nil)

// openStore opens a migrated store in a fresh schema, closed when t ends.
func openStore(t testing.TB, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s := openURL(t, pgtest.URL(t), opts...)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// openURL opens a store at u without migrating it, closed when t ends.
func openURL(t testing.TB, u string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), u, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// execRaw runs sql on s's database in one transaction with the
// append-only triggers of audit_log and audit_head disabled, as an
// attacker with the owner's password could. The triggers that keep the counters of
// messages stay on, so that a raw status change is counted as any other.
func execRaw(t *testing.T, s *postgres.Store, sql string) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{"ALTER TABLE audit_log DISABLE TRIGGER USER", "ALTER TABLE audit_head DISABLE TRIGGER USER",
		sql, "ALTER TABLE audit_log ENABLE TRIGGER USER", "ALTER TABLE audit_head ENABLE TRIGGER USER"} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store { return openStore(t) },
		OpenClock: func(t *testing.T, now func() time.Time) store.Store {
			return openStore(t, postgres.WithClock(now))
		},
		Exec:          func(t *testing.T, s store.Store, sql string) { execRaw(t, s.(*postgres.Store), sql) },
		OpenUnindexed: func(t *testing.T) store.Store { return openStore(t, postgres.WithoutSearchIndexer()) },
		SetSampleExact: func(s store.Store, exact, smallGroup int) {
			postgres.SetSampleExact(s.(*postgres.Store), exact, smallGroup)
		},
	})
}

// noSuchDatabase is the test server's URL naming a database it does not
// have.
func noSuchDatabase(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(pgtest.BaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/quarantine_no_such_db"
	return pgtest.WithSearchPath(t, u.String(), "x")
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, url, code string
	}{
		{"unparseable", "postgres://%zz", quarantine.EINVALID},
		{"nobody listening", "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", quarantine.EUNAVAILABLE},
		{"no such database", noSuchDatabase(t), quarantine.EUNAVAILABLE},
	}
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		s, err := postgres.Open(ctx, c.url)
		cancel()
		if s != nil || quarantine.ErrorCode(err) != c.code {
			t.Errorf("%s: Open = %v, %v; want nil and %s", c.name, s, err, c.code)
		}
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	t.Parallel()
	s := openURL(t, pgtest.URL(t))
	_ = s.Close()
	if err := s.Ping(t.Context()); quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE {
		t.Fatalf("Ping after Close = %v, want EUNAVAILABLE", err)
	}
}

func TestCancelledContextWraps(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.ListMessages(ctx, quarantine.Filter{})
	if quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE || !errors.Is(err, context.Canceled) {
		t.Fatalf("ListMessages with a cancelled context = %v, want EUNAVAILABLE wrapping context.Canceled", err)
	}
}

func TestMigrateConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	s := openURL(t, u)
	cur, latest, err := s.SchemaVersion(t.Context())
	if err != nil || cur != 0 || latest < 1 {
		t.Fatalf("SchemaVersion before Migrate = %d, %d, %v; want 0, >=1", cur, latest, err)
	}
	// Several stores migrate the same schema at once, twice each.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		other := openURL(t, u)
		wg.Go(func() {
			for range 2 {
				errs <- other.Migrate(t.Context())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	cur, latest2, err := s.SchemaVersion(t.Context())
	if err != nil || cur != latest || latest2 != latest {
		t.Fatalf("SchemaVersion after Migrate = %d, %d, %v; want %d, %d", cur, latest2, err, latest, latest)
	}
	var rows int
	if err := s.Pool().QueryRow(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&rows); err != nil || rows != latest {
		t.Fatalf("schema_migrations holds %d rows (%v), want %d", rows, err, latest)
	}
	head, err := s.AuditHead(t.Context())
	if err != nil || head != quarantine.EmptyHead() {
		t.Fatalf("AuditHead of a new store = %+v, %v; want the empty head", head, err)
	}
}

func TestMigrateIsolatedBySchema(t *testing.T) {
	t.Parallel()
	a, b := openStore(t), openStore(t)
	if _, err := a.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
		t.Fatal(err)
	}
	hb, err := b.AuditHead(t.Context())
	if err != nil || hb.Seq != 0 {
		t.Fatalf("the other schema's head = %+v, %v; want seq 0", hb, err)
	}
}

func TestClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 678901234, time.FixedZone("x", 3600))
	s := openStore(t, postgres.WithClock(func() time.Time { return at }))
	e, err := s.AppendAudit(t.Context(), quarantine.NewAuditEvent("alice", "x", "y", nil))
	want := at.UTC().Truncate(time.Microsecond)
	if err != nil || !e.Time.Equal(want) || e.Time.Location() != time.UTC {
		t.Fatalf("event time = %v, %v; want %v in UTC", e.Time, err, want)
	}
	m := &quarantine.Message{Source: "s", Queue: "q", Payload: []byte("p")}
	if _, err := s.InsertBatch(t.Context(), []*quarantine.Message{m}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetMessage(t.Context(), m.ID)
	if err != nil || !got.CollectedAt.Equal(want) || !got.FailedAt.Equal(want) {
		t.Fatalf("collected %v failed %v (%v), want %v", got.CollectedAt, got.FailedAt, err, want)
	}
}

// A process that stops inside a transaction (SIGSTOP, a paused VM, a
// partition) holds its locks; the server ends its session after
// IdleInTransactionTimeout, so the others go on, and the stopped one's
// transaction cannot commit when it wakes.
func TestStoppedTransactionDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	s := openURL(t, u)
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	stopped := openURL(t, u)
	var setting string
	if err := stopped.Pool().QueryRow(t.Context(), "SHOW idle_in_transaction_session_timeout").Scan(&setting); err != nil || setting != postgres.IdleInTransactionTimeout {
		t.Fatalf("idle_in_transaction_session_timeout = %q, %v; want %s", setting, err, postgres.IdleInTransactionTimeout)
	}
	tx, err := stopped.Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// The audit chain's head: every audited action of every instance
	// takes this lock.
	if _, err := tx.Exec(t.Context(), "SELECT seq FROM audit_head WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := s.AppendAudit(ctx, quarantine.NewAuditEvent("alice", "x", "y", nil)); err != nil {
		t.Fatalf("an audit append behind a stopped transaction: %v after %s", err, time.Since(start))
	}
	t.Logf("the append waited %s for the stopped transaction", time.Since(start).Round(time.Millisecond))
	if _, err := tx.Exec(t.Context(), "UPDATE audit_head SET seq = seq WHERE id = 1"); err == nil {
		t.Fatal("the stopped transaction could still write after the server ended its session")
	}
}

// The pool has room for the search indexer's workers beside pgxpool's
// default, unless the URL sizes it.
func TestPoolRoomForTheIndexer(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	want := int32(max(4, runtime.NumCPU()) + 2)
	if got := openURL(t, u).Pool().Config().MaxConns; got != want {
		t.Fatalf("MaxConns = %d, want %d", got, want)
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	if got := openURL(t, u+sep+"pool_max_conns=3").Pool().Config().MaxConns; got != 3 {
		t.Fatalf("MaxConns with pool_max_conns=3 = %d", got)
	}
}
