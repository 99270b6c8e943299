package testbin

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// StoredCounter returns a function counting the quarantined messages of a
// queue in database (postgres://… or sqlite:PATH, as the binary is given
// it), from the failure-group counters the stores keep in the insert's
// transaction: a few rows, so that a benchmark polling them while the
// binary drains costs the database next to nothing (the binary's
// /metrics, which reads the queues' ages, costs far more a scrape).
// Before the binary created and migrated the database it counts 0.
func StoredCounter(tb testing.TB, database string) func(queue string) int {
	tb.Helper()
	const q = `SELECT coalesce(sum(n), 0) FROM failure_groups WHERE queue = $1 AND status = 'quarantined'`
	if path, ok := strings.CutPrefix(database, "sqlite:"); ok {
		var db *sql.DB
		tb.Cleanup(func() {
			if db != nil {
				_ = db.Close()
			}
		})
		return func(queue string) int {
			if db == nil {
				if _, err := os.Stat(path); err != nil {
					return 0
				}
				var err error
				if db, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=query_only(1)"); err != nil {
					tb.Fatal(err)
				}
			}
			var n int
			if err := db.QueryRow(q, queue).Scan(&n); err != nil {
				return 0 // not migrated yet
			}
			return n
		}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, database)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close(ctx) })
	return func(queue string) int {
		var n int
		if err := conn.QueryRow(ctx, q, queue).Scan(&n); err != nil {
			return 0 // not migrated yet
		}
		return n
	}
}

// CPU is the user and system time process pid used so far (0 when /proc
// cannot say).
func CPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(string(f[11]), 10, 64)
	s, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// PeakRSS is the peak resident set of process pid in KiB (VmHWM of
// /proc/PID/status).
func PeakRSS(tb testing.TB, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// Drain starts `quarantine serve` with config (and args), waits until
// its log holds started (the collector consumes: start-up is not timed),
// then until count() reaches n, and returns how long that took and the
// CPU the process used meanwhile. The process is killed before it
// returns. With EnvCPUProfile set, it writes a CPU profile of the drain
// (see EnvCPUProfile).
func Drain(tb testing.TB, bin, config, started string, n int, count func() int, args ...string) (took, cpu time.Duration) {
	tb.Helper()
	prof, env := newProfiler(tb, bin)
	p := serve(tb, bin, config, env, args...)
	defer p.Kill()
	var start time.Time
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if strings.Contains(p.Output(), started) {
			start = time.Now()
			break
		}
		if time.Now().After(deadline) || p.Exited(0) {
			tb.Fatalf("the collector did not start (no %q in its log):\n%s", started, p.Output())
		}
	}
	prof.toggle(tb, p)
	cpu0 := CPU(p.Cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if count() >= n {
			break
		}
		if time.Now().After(deadline) || p.Exited(0) {
			tb.Fatalf("the binary stored %d of %d:\n%s", count(), n, p.Output())
		}
	}
	took, cpu = time.Since(start), CPU(p.Cmd.Process.Pid)-cpu0
	prof.toggle(tb, p)
	prof.wait(tb)
	return took, cpu
}
