package alert_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/store"
	"github.com/quarantine-dev/quarantine/store/postgres"
)

// openPostgres opens a migrated store on url with clock c.
func openPostgres(t *testing.T, url string, c *clock) store.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url, postgres.WithClock(c.Now))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

// Two instances on one PostgreSQL: only the lock holder evaluates; when
// it stops, the other takes over from the persisted state and pages
// nobody twice.
func TestAlarmFailoverPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	c := newClock()
	a, b := openPostgres(t, url, c), openPostgres(t, url, c)
	hook := newReceiver(t)
	rc := alert.Receiver{Name: "hook", Kind: alert.KindWebhook, URL: hook.srv.URL}
	r := ageRule()
	r.For = 0
	ea, eb := newEvaluator(t, a, c, []alert.Rule{r}, rc), newEvaluator(t, b, c, []alert.Rule{r}, rc)

	la, err := a.LockAlarms(t.Context())
	if err != nil {
		t.Fatalf("first instance: LockAlarms: %v", err)
	}
	if _, err := b.LockAlarms(t.Context()); quarantine.ErrorCode(err) != quarantine.ECONFLICT {
		t.Fatalf("second instance: LockAlarms = %v, want ECONFLICT while the first holds it", err)
	}
	id := deadLetter(t, a, c, "orders", 20*time.Minute)
	step(t, ea)
	wantKinds(t, hook, "firing")

	la.Release() // the first instance stops
	lb, err := b.LockAlarms(t.Context())
	if err != nil {
		t.Fatalf("second instance after the first released: %v", err)
	}
	defer lb.Release()
	c.Advance(15 * time.Second)
	step(t, eb)
	wantKinds(t, hook, "firing")
	if _, err := b.Discard(t.Context(), quarantine.Discard{IDs: []string{id}, Reason: "x", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	step(t, eb)
	step(t, eb)
	wantKinds(t, hook, "firing", "resolved")
}

// An instance whose database session dies (a crash, a partition) loses
// the lock: its Check says so, and another instance takes it over.
func TestAlarmLockLostPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	c := newClock()
	a, b := openPostgres(t, url, c), openPostgres(t, url, c)
	la, err := a.LockAlarms(t.Context())
	if err != nil {
		t.Fatalf("LockAlarms: %v", err)
	}
	defer la.Release()
	// Kill the holder's session, as a crash of its host would end it.
	const holders = `FROM pg_locks WHERE locktype = 'advisory'
		AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(current_schema() || '.quarantine.alarms', 0)`
	pool := b.(*postgres.Store).Pool()
	if _, err := pool.Exec(t.Context(), `SELECT pg_terminate_backend(pid) `+holders); err != nil {
		t.Fatal(err)
	}
	// pg_terminate_backend only signals the backend: its lock is gone
	// once the process has exited.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) `+holders).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminated session still holds the lock after 10 s")
		}
	}
	if err := la.Check(t.Context()); quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE {
		t.Fatalf("Check after the session died = %v, want EUNAVAILABLE", err)
	}
	lb, err := b.LockAlarms(t.Context())
	if err != nil {
		t.Fatalf("the other instance cannot take the lock over: %v", err)
	}
	lb.Release()
}
