package api

import (
	"container/list"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/quarantine-dev/quarantine"
)

// ActionAuthRefused is the audit action of refused logins: one event per
// client (remote IP) and clock minute in which it was refused, with the
// counts of 401 and 429 answers.
const ActionAuthRefused = "auth.refused"

// The budgets of refused logins. One client (address) may be refused
// refusedBurst times at once, then once more every refusedEvery; all
// clients together refusedGlobal times a minute (the same at once). Past
// either budget a refused attempt is answered 429 with Retry-After
// instead of 401, until the budget refills, so that guessing, from one
// address or spread over many, cannot go on at request speed. A request
// whose token is valid is never refused by them: the budgets count
// failures, and someone else's failures (behind the same NAT or proxy,
// or anywhere) must not lock out a valid token.
const (
	refusedBurst   = 20
	refusedEvery   = 3 * time.Second
	refusedGlobal  = 600   // refusals a minute over every client
	refusedClients = 10000 // clients tracked at once (least recently refused forgotten first)
)

// refusals tracks failed logins per client: a token bucket each and one
// for all clients (the throttle), and the counts of the current minute
// (the audit event). It is bounded: at most refusedClients entries, the
// least recently refused evicted first, its pending counts written out.
type refusals struct {
	mu     sync.Mutex
	byIP   map[string]*list.Element
	lru    *list.List // of *refusalEntry, most recent first
	cap    int
	now    func() time.Time
	record func(ctx context.Context, ev quarantine.AuditEvent) error
	log    *slog.Logger
	limit  rate.Limit
	burst  int
	global *rate.Limiter // refusals of every client
	closed bool          // flushAll ran: counts are written at once
}

type refusalEntry struct {
	ip      string
	limiter *rate.Limiter
	window  time.Time // the minute counted, zero when nothing is pending
	first   time.Time
	last    time.Time
	refused int // 401s in window
	slowed  int // 429s in window
	timer   *time.Timer
}

func newRefusals(now func() time.Time, record func(context.Context, quarantine.AuditEvent) error, log *slog.Logger) *refusals {
	return &refusals{byIP: map[string]*list.Element{}, lru: list.New(), cap: refusedClients, now: now, record: record, log: log,
		limit: rate.Every(refusedEvery), burst: refusedBurst,
		global: rate.NewLimiter(rate.Every(time.Minute/refusedGlobal), refusedGlobal)}
}

// entry returns the entry of ip, created (and the oldest evicted) if
// needed, as the most recent. The caller holds mu.
func (f *refusals) entry(ip string) (e *refusalEntry, evicted *refusalEntry) {
	if el, ok := f.byIP[ip]; ok {
		f.lru.MoveToFront(el)
		return el.Value.(*refusalEntry), nil
	}
	if f.lru.Len() >= f.cap {
		old := f.lru.Back()
		f.lru.Remove(old)
		evicted = old.Value.(*refusalEntry)
		delete(f.byIP, evicted.ip)
	}
	e = &refusalEntry{ip: ip, limiter: rate.NewLimiter(f.limit, f.burst)}
	f.byIP[ip] = f.lru.PushFront(e)
	return e, evicted
}

// waitFor is how long until l has one token at now (0 when it has one).
func waitFor(l *rate.Limiter, now time.Time) time.Duration {
	tokens := l.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(l.Limit()) * float64(time.Second))
}

// refuse counts a refused login of ip. Within its budget and the global
// one it spends one unit of each and returns (0, false): answer 401.
// Past either it spends nothing and returns how long until both allow
// one more, and true: answer 429 with Retry-After.
func (f *refusals) refuse(ip string) (time.Duration, bool) {
	now := f.now()
	f.mu.Lock()
	e, evicted := f.entry(ip)
	wait := max(waitFor(e.limiter, now), waitFor(f.global, now))
	slowed := wait > 0
	if !slowed {
		e.limiter.AllowN(now, 1)
		f.global.AllowN(now, 1)
	}
	done := f.countLocked(e, now, !slowed)
	var old *refusalEntry
	if evicted != nil && evicted.window != (time.Time{}) {
		old = evicted.take()
	}
	late := f.lateLocked(e)
	f.mu.Unlock()
	f.flush(done)
	f.flush(old)
	f.flush(late)
	return wait, slowed
}

// lateLocked returns e's counts to write at once when flushAll already
// ran (a request that slipped past the shutdown), else nil; the caller
// holds mu.
func (f *refusals) lateLocked(e *refusalEntry) *refusalEntry {
	if !f.closed {
		return nil
	}
	return e.take()
}

// flushAll writes the counts of every client's current minute now, so
// that a process that stops before the minute ends loses none; refusals
// counted afterwards are written at once. Server.Close calls it.
func (f *refusals) flushAll() {
	f.mu.Lock()
	f.closed = true
	var out []*refusalEntry
	for el := f.lru.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*refusalEntry); e.window != (time.Time{}) {
			out = append(out, e.take())
		}
	}
	f.mu.Unlock()
	for _, c := range out {
		f.flush(c)
	}
}

// countLocked counts one refusal in e's current minute. When it starts a
// new minute it returns the finished one (to be written) and arms a timer
// that writes this one when it ends.
func (f *refusals) countLocked(e *refusalEntry, now time.Time, refused bool) *refusalEntry {
	var done *refusalEntry
	minute := now.Truncate(time.Minute)
	if e.window != minute {
		if e.window != (time.Time{}) {
			done = e.take()
		}
		e.window, e.first = minute, now
		d := min(max(minute.Add(time.Minute).Sub(now), 0), time.Minute)
		e.timer = time.AfterFunc(d, func() {
			f.mu.Lock()
			var out *refusalEntry
			if e.window == minute {
				out = e.take()
			}
			f.mu.Unlock()
			f.flush(out)
		})
	}
	e.last = now
	if refused {
		e.refused++
	} else {
		e.slowed++
	}
	return done
}

// take returns a copy of e's counts and clears them, stopping the timer
// of the minute; the caller holds mu.
func (e *refusalEntry) take() *refusalEntry {
	c := &refusalEntry{ip: e.ip, window: e.window, first: e.first, last: e.last, refused: e.refused, slowed: e.slowed}
	e.window, e.refused, e.slowed = time.Time{}, 0, 0
	if e.timer != nil {
		e.timer.Stop() // this is its flush; if it already fired, it finds the window gone
		e.timer = nil
	}
	return c
}

// flush writes the event of a finished minute (nil: nothing).
func (f *refusals) flush(c *refusalEntry) {
	if c == nil || c.refused+c.slowed == 0 {
		return
	}
	details, err := json.Marshal(map[string]any{
		"client": c.ip, "minute": c.window.UTC().Format(time.RFC3339),
		"first_at": c.first.UTC().Format(time.RFC3339Nano), "last_at": c.last.UTC().Format(time.RFC3339Nano),
		"refused": c.refused, "throttled": c.slowed,
	})
	if err != nil {
		f.log.Error("encode an auth.refused event", "err", err)
		return
	}
	ev := quarantine.AuditEvent{Actor: "anonymous", Action: ActionAuthRefused, Subject: c.ip, Details: details}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.record(ctx, ev); err != nil {
		f.log.Warn("record refused logins", "client", c.ip, "refused", c.refused, "throttled", c.slowed, "err", err)
	}
}

// retryAfter is the Retry-After value of a wait: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(math.Max(1, math.Ceil(d.Seconds()))))
}

// tooManyRefusals answers 429 to a refused login past a budget: the
// client's, or the global one.
func tooManyRefusals(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", retryAfter(wait))
	writeProblem(w, r, http.StatusTooManyRequests, "too_many_requests",
		"the token is unknown or revoked, and too many logins were refused: retry after "+retryAfter(wait)+" s", "")
}
