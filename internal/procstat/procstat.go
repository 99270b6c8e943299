// Package procstat reads the CPU time of local processes from Linux's
// /proc, for benchmarks that compare a program with the broker and the
// database it drives on the same machine: where each message's CPU goes
// tells what bounds the rate. On a system without /proc, or for processes
// of other users that /proc hides, the readings are not available.
package procstat

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// tick is the kernel's USER_HZ, 100 on every Linux architecture Go builds for.
const tick = 10 * time.Millisecond

// CPU is the CPU time (user and system) of every process whose command
// name (/proc/PID/comm) is comm, plus the time of their children that
// have exited and been waited for (a PostgreSQL backend that closed, for
// instance, is counted in its postmaster). ok is false when no such
// process could be read.
func CPU(comm string) (total time.Duration, ok bool) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		name, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || string(bytes.TrimSpace(name)) != comm {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		if t, good := parseStat(stat); good {
			total += t
			ok = true
		}
	}
	return total, ok
}

// parseStat sums utime, stime, cutime and cstime (fields 14 to 17 of
// proc(5)) of one /proc/PID/stat line. The command name, field 2, may
// hold spaces and parentheses, so fields are counted after its last ')'.
func parseStat(stat []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(stat[i+1:]) // fields[0] is field 3
	if len(fields) < 15 {
		return 0, false
	}
	var sum int64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return 0, false
		}
		sum += n
	}
	return time.Duration(sum) * tick, true
}

// Quiet waits until the processes named comm use less than share of one
// core over a window, or until max has passed, and reports whether they
// went quiet. A broker that is still writing what a benchmark just
// published to disk would otherwise take CPU from the run that follows.
func Quiet(comm string, share float64, window, max time.Duration) bool {
	deadline := time.Now().Add(max)
	last, ok := CPU(comm)
	if !ok {
		time.Sleep(min(window, max))
		return false
	}
	for time.Now().Before(deadline) {
		time.Sleep(window)
		now, _ := CPU(comm)
		if float64(now-last) < share*float64(window) {
			return true
		}
		last = now
	}
	return false
}

// Usage is the CPU used so far by a broker's processes, by PostgreSQL's
// (every process named postgres, the WAL writer and checkpointer
// included) and by this process. A reading that is not available is 0.
type Usage struct{ Broker, DB, Self time.Duration }

// Read reads the Usage, the broker's processes being those named broker
// (beam.smp, nats-server, goaws).
func Read(broker string) Usage {
	var u Usage
	u.Broker, _ = CPU(broker)
	u.DB, _ = CPU("postgres")
	u.Self = selfCPU()
	return u
}

// Sub returns u - v: the CPU used between two readings.
func (u Usage) Sub(v Usage) Usage { return Usage{u.Broker - v.Broker, u.DB - v.DB, u.Self - v.Self} }

// Add returns u + v.
func (u Usage) Add(v Usage) Usage { return Usage{u.Broker + v.Broker, u.DB + v.DB, u.Self + v.Self} }

// Reporter is testing.B's ReportMetric.
type Reporter interface{ ReportMetric(n float64, unit string) }

// Report reports the CPU each of msgs messages cost, in microseconds, as
// <name>_broker_cpu_µs/msg, <name>_db_cpu_µs/msg and <name>_self_cpu_µs/msg,
// leaving out readings that were not available.
func (u Usage) Report(r Reporter, name string, msgs int) {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(msgs) }
	for _, m := range []struct {
		what string
		d    time.Duration
	}{{"broker", u.Broker}, {"db", u.DB}, {"self", u.Self}} {
		if m.d > 0 {
			r.ReportMetric(per(m.d), name+"_"+m.what+"_cpu_µs/msg")
		}
	}
}
