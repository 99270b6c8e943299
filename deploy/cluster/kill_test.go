package cluster

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/quarantine-dev/quarantine/internal/browsertest"
	"github.com/quarantine-dev/quarantine/internal/pgtest"
	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// browserAgent marks the browser's requests in the balancer's log.
const browserAgent = "quarantine-cluster-browser"

// The replay of the test: n messages at rate per second with burst.
const (
	replayN     = 160
	replayRate  = 20
	replayBurst = 4
	collectedN  = 400 // dead letters the collectors compete for
)

// Three instances on one PostgreSQL behind a round-robin HAProxy. While
// pushers ingest through the balancer, the three collectors drain a
// failure queue, a replay publishes to a RabbitMQ queue at its rate and a
// person browses the UI, the instance holding the alarm lock (and
// publishing items of the replay) is killed with SIGKILL. Then:
//   - every acknowledged ingest is stored exactly once, under the id its
//     acknowledgement named (an unacknowledged request is sent again by
//     the pusher and deduplicated);
//   - every dead letter of the failure queue is stored exactly once and
//     the queue is empty;
//   - the replay completes with one terminal result per item, each
//     message's result recorded once, every message reached the queue
//     (a repeat, at most one, carries the same idempotency key), and no
//     second held more than rate + burst arrivals;
//   - another instance takes the alarm lock: one evaluator again;
//   - the person keeps navigating, served by both survivors, and stays
//     logged in; logging out on one ends the session on all;
//   - the audit chain verifies.
func TestSIGKILLOneOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs three quarantine binaries")
	}
	db := pgtest.URL(t)
	mq := newRabbit(t)
	b := browsertest.New(t, chromedp.UserAgent(browserAgent), chromedp.WindowSize(1280, 900))
	dlq, work := mq.queue("cluster-dlq"), mq.queue("cluster-work")
	c := startCluster(t, 3, db, mq.URL, dlq, work)
	api := c.api()

	// One alarm evaluator among the three.
	victim := c.waitAlarmHolder(30 * time.Second)

	// The replay's messages, ingested before it starts.
	for i := range replayN {
		api.MustDo(t, 200, "POST", "/api/v1/ingest", rawJSON(envelope(work, fmt.Sprintf("replay-%03d", i))), nil)
	}
	api.WaitMessages(t, work, replayN, 30*time.Second)

	// The person logs in through the balancer with the token login URL
	// (the session is a cookie, its state in the database) and browses
	// until every instance has served them.
	b.Do(chromedp.Navigate(c.lb.URL+"/?token="+c.token), chromedp.WaitReady(chromedp.CSS("main")))
	browse := func(path string) {
		t.Helper()
		b.Do(chromedp.Navigate(c.lb.URL+path), chromedp.WaitReady(chromedp.CSS("main")))
		if got := b.Eval(`location.pathname`); got != path {
			t.Fatalf("navigating to %s landed on %s: the person was logged out", path, got)
		}
	}
	pages := []string{"/overview", "/messages", "/replays", "/audit", "/groups"}
	byBrowser := func(from int) func(request) bool {
		return func(r request) bool { return r.agent == browserAgent && r.status < 400 && r.seq >= from }
	}
	for i := 0; len(c.lb.servers(byBrowser(0))) < 3; i++ {
		if i == 30 {
			t.Fatalf("30 pages were served by %v only", c.lb.servers(byBrowser(0)))
		}
		browse(pages[i%len(pages)])
	}

	// Work under way on every instance: pushers ingesting, collectors
	// draining, the replay publishing from the victim too.
	in := startIngest(t, api, "cluster-ingest-"+dlq[len(dlq)-12:], 4)
	in.waitAcks(50, 60*time.Second)
	consumer := mq.consume(work)
	var created struct {
		Replay testbin.Batch `json:"replay"`
	}
	start := time.Now()
	api.MustDo(t, 201, "POST", "/api/v1/replays", map[string]any{
		"filter": map[string]any{"queue": []string{work}}, "expect_count": replayN,
		"rate": replayRate, "burst": replayBurst, "reason": "cluster test",
	}, &created)
	ids, bodies := make([]string, collectedN), make([][]byte, collectedN)
	for i := range collectedN {
		ids[i] = fmt.Sprintf("dl-%04d", i)
		bodies[i] = envelope("cluster-collected-"+dlq[len(dlq)-12:], ids[i])
	}
	mq.publish(dlq, ids, bodies)
	for deadline := time.Now().Add(60 * time.Second); c.published(victim) == 0; time.Sleep(20 * time.Millisecond) {
		if got, _ := consumer.arrivals(); time.Now().After(deadline) || len(got) >= replayN-2*replayRate {
			t.Fatalf("instance q%d published nothing of the replay before %d of %d messages arrived", victim, len(got), replayN)
		}
	}

	// SIGKILL.
	before := len(c.lb.requests())
	atKill, pub := in.count.Load(), c.published(victim)
	c.kill(victim)
	t.Logf("killed q%d (the alarm evaluator, %d replay items published and recorded) after %d acknowledged ingests", victim, pub, atKill)

	// The person keeps navigating: every page, served by the two others.
	for i := 0; i < 10 || len(c.lb.servers(byBrowser(before))) < 2; i++ {
		if i == 40 {
			t.Fatalf("after the kill, 40 pages were served by %v only", c.lb.servers(byBrowser(before)))
		}
		browse(pages[i%len(pages)])
	}
	if s := c.lb.servers(byBrowser(before)); s[fmt.Sprintf("q%d", victim)] > 0 {
		t.Errorf("the dead instance served the browser after the kill: %v", s)
	}
	for _, r := range c.lb.requests()[before:] {
		if r.agent == browserAgent && r.status >= 400 {
			t.Errorf("after the kill the browser got %d for %s %s", r.status, r.method, r.uri)
		}
	}
	// One alarm evaluator again, another instance.
	if now := c.waitAlarmHolder(30 * time.Second); now == victim {
		t.Fatalf("the killed q%d still holds the alarm lock", victim)
	}

	// Ingest goes on through the survivors, then stops.
	in.waitAcks(atKill+100, 60*time.Second)
	acked, retries := in.finish()
	got, perKey := stored(t, api, in.queue)
	if len(got) != len(acked) {
		t.Errorf("%d acknowledged ingests, %d distinct keys stored", len(acked), len(got))
	}
	for k, id := range acked {
		switch {
		case perKey[k] != 1:
			t.Errorf("acknowledged ingest %s stored %d times", k, perKey[k])
		case got[k] != id:
			t.Errorf("acknowledged ingest %s stored as %s, acknowledged as %s", k, got[k], id)
		}
	}
	for k := range got {
		if _, ok := acked[k]; !ok {
			t.Errorf("stored %s was never acknowledged", k)
		}
	}

	// The replay completes on the survivors, one result per item.
	done := api.WaitReplay(t, created.Replay.ID, 120*time.Second, "completed")
	took := time.Since(start)
	if done.Counts["published"] != replayN || done.Total != replayN {
		t.Errorf("replay counts %v of %d, want every item published", done.Counts, done.Total)
	}
	items := api.Items(t, created.Replay.ID, "")
	outcomes := map[string]int{}
	for _, it := range items {
		outcomes[it.MessageID]++
		if it.Outcome != "published" {
			t.Errorf("item %s: %s %s", it.MessageID, it.Outcome, it.Reason)
		}
	}
	if len(items) != replayN || len(outcomes) != replayN {
		t.Errorf("%d items for %d messages (%d distinct)", len(items), replayN, len(outcomes))
	}
	for _, m := range api.WaitMessages(t, work, replayN, 10*time.Second) {
		if m.ReplayCount != 1 || m.Status != "replayed" {
			t.Errorf("message %s: %s, replay_count %d: want one recorded result", m.ID, m.Status, m.ReplayCount)
		}
	}
	var arrivals []arrival
	var stall time.Duration
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		arrivals, stall = consumer.arrivals()
		if len(keys(arrivals)) == replayN {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d keys reached %s", len(keys(arrivals)), replayN, work)
		}
	}
	for k, n := range keys(arrivals) {
		if n > 2 || !strings.HasPrefix(k, "replay-") {
			t.Errorf("key %q arrived %d times", k, n)
		}
	}
	// Arrivals are stamped by this process, which the loaded machine may
	// leave unscheduled (stall) and then hand a bunch at once: the rate's
	// worth of the longest stall is allowed on top, as in
	// broker/rabbitmq's TestReplayTwoProcessesShareTheRate, and of 50 ms
	// of delivery variance (three publishers, a browser and the balancer
	// share the machine's two cores here; measured peaks were 1 to 4
	// above rate + burst, within the stall's allowance each time). The
	// engine's own bound is checked where it publishes, in-process
	// (replay/TestReplayNeverAboveItsRate).
	slack := stall + 50*time.Millisecond
	top, bound := peak(arrivals, time.Second), replayRate+replayBurst+int(math.Ceil(replayRate*slack.Seconds()))
	if top > bound {
		t.Errorf("%d messages arrived within one second: the rate is %d/s, burst %d (%d allowing %s of lateness)", top, replayRate, replayBurst, bound, slack)
	}
	if least := time.Duration(replayN-replayBurst) * time.Second / replayRate; took < least {
		t.Errorf("the replay took %s, less than its rate allows (%s)", took, least)
	}

	// The collectors drained the failure queue, each dead letter once.
	collected := "cluster-collected-" + dlq[len(dlq)-12:]
	for deadline := time.Now().Add(60 * time.Second); mq.depth(dlq) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters still in %s", mq.depth(dlq), dlq)
		}
	}
	api.WaitMessages(t, collected, collectedN, 30*time.Second)
	if _, per := stored(t, api, collected); len(per) != collectedN {
		t.Errorf("%d distinct dead letters stored, want %d", len(per), collectedN)
	} else {
		for k, n := range per {
			if n != 1 {
				t.Errorf("dead letter %s stored %d times", k, n)
			}
		}
	}

	// The person watches the finished replay, then logs out on whichever
	// instance: the session ends on all.
	b.Do(chromedp.Navigate(c.lb.URL+"/replays/"+created.Replay.ID), chromedp.WaitReady(chromedp.CSS("#replay")))
	b.WaitFor(`document.getElementById("replay").dataset.state === "completed"`)
	b.Do(chromedp.Click(chromedp.ID("logout")))
	b.WaitFor(`location.pathname === "/login"`)
	for _, p := range pages[:2] {
		b.Do(chromedp.Navigate(c.lb.URL+p), chromedp.WaitReady(chromedp.CSS("main")))
		if got := b.Eval(`location.pathname`); got != "/login" {
			t.Errorf("after logging out, %s showed %s", p, got)
		}
	}

	api.AuditVerifies(t)
	arr, _ := consumer.arrivals()
	t.Logf("ingest: %d acknowledged, %d requests sent again; replay: %d arrivals for %d messages in %s, peak %d/s (bound %d, allowing %s of lateness); browser: %v after the kill",
		len(acked), retries, len(arr), replayN, took.Round(time.Millisecond), top, bound, slack, c.lb.servers(byBrowser(before)))
}

// rawJSON lets API.MustDo send bytes that are already JSON.
type rawJSON []byte

// MarshalJSON returns the bytes as they are.
func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
