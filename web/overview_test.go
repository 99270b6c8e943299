package web_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/alert"
	"github.com/quarantine-dev/quarantine/web"
)

// overviewNow is the overview tests' clock.
var overviewNow = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// overviewEnv is a UI whose clock is overviewNow, with owner rules and
// an alarm of max_age 1h on the orders queues and 10h on billing.
func overviewEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, func(c *web.Config) {
		c.Now = func() time.Time { return overviewNow }
		c.Owners = []quarantine.OwnerRule{{Team: "team-a", Queues: []string{"orders*"}}, {Team: "team-b", Queues: []string{"billing"}}}
		c.Alarms = []alert.Rule{
			{Name: "orders-age", Queues: []string{"orders*"}, MaxAge: time.Hour, Receivers: []string{"x"}},
			{Name: "slow", Queues: []string{"*"}, MaxAge: 10 * time.Hour, Receivers: []string{"x"}},
		}
	})
}

// at stores a message of queue and owner failed age before overviewNow,
// collected a minute later.
func (e *env) at(queue, owner string, age time.Duration) *quarantine.Message {
	e.t.Helper()
	failed := overviewNow.Add(-age)
	return e.message(quarantine.Message{Queue: queue, Owner: owner, FailedAt: failed, CollectedAt: failed.Add(time.Minute),
		Payload: []byte(`{}`), Reason: "r"})
}

// rowOf returns the <tr> of queue in the overview's queue table.
func rowOf(t *testing.T, body, queue string) string {
	t.Helper()
	i := strings.Index(body, `<tr data-queue="`+queue+`" data-row>`)
	if i < 0 {
		t.Fatalf("no row for queue %q in\n%s", queue, body)
	}
	j := strings.Index(body[i:], "</tr>")
	return body[i : i+j]
}

func TestOverviewCountsAgesAndInflow(t *testing.T) {
	e := overviewEnv(t)
	c := e.client()
	e.login(c, e.token("admin", quarantine.RoleAdmin))
	// orders: oldest 2 h old, past its 1 h max_age; billing: 30 h old,
	// past its 10 h; reports: 30 min old, within 10 h; mail: 6 h old,
	// over half of its 10 h.
	old := e.at("orders", "team-a", 2*time.Hour)
	e.at("orders", "team-a", 90*time.Minute)
	e.at("orders", "team-a", 10*time.Minute)
	gone := e.at("orders", "team-a", 3*time.Hour)
	e.at("billing", "team-b", 6*time.Hour)
	e.at("billing", "team-b", 11*time.Hour)
	e.at("billing", "team-b", 30*time.Hour) // outside the 24 h inflow
	gone2 := e.at("billing", "team-b", 50*time.Hour)
	e.at("reports", "team-c", 30*time.Minute)
	e.at("mail", "team-c", 6*time.Hour)
	if _, err := e.store.Discard(context.Background(), quarantine.Discard{IDs: []string{gone.ID, gone2.ID}, Reason: "dup", Actor: "test"}); err != nil {
		t.Fatal(err)
	}

	res, body := get(t, c, e.srv.URL+"/overview")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/overview: %d %s", res.StatusCode, body)
	}
	orders := rowOf(t, body, "orders")
	for _, want := range []string{`>team-a<`, `aria-label="3 quarantined"`, `aria-label="1 discarded"`,
		`class="age age-over"`, `past max_age 1h0m0s`, `href="/messages/` + old.ID + `"`, `title="2026-03-02 10:00:00 UTC">2 h ago<`,
		`<span class="total">4</span>`} {
		if !strings.Contains(orders, want) {
			t.Fatalf("orders row lacks %q:\n%s", want, orders)
		}
	}
	billing := rowOf(t, body, "billing")
	for _, want := range []string{`>team-b<`, `class="age age-over"`, `past max_age 10h0m0s`, `<span class="total">2</span>`,
		`aria-label="3 quarantined"`, `aria-label="1 discarded"`} {
		if !strings.Contains(billing, want) {
			t.Fatalf("billing row lacks %q:\n%s", want, billing)
		}
	}
	if mail := rowOf(t, body, "mail"); !strings.Contains(mail, `class="age age-warn"`) || !strings.Contains(mail, "over half of max_age 10h0m0s") {
		t.Fatalf("mail row:\n%s", mail)
	}
	// reports has no owner rule: the message's owner is not the queue's.
	reports := rowOf(t, body, "reports")
	if !strings.Contains(reports, `class="age age-ok"`) || !strings.Contains(reports, "within max_age 10h0m0s") {
		t.Fatalf("reports row:\n%s", reports)
	}
	// The sparkline has one bar per non-empty hour, titled by the hour.
	bars := regexp.MustCompile(`<title>([0-9:–]+) UTC: (\d+) collected</title>`).FindAllStringSubmatch(orders, -1)
	got := map[string]string{}
	for _, b := range bars {
		got[b[1]] = b[2]
	}
	want := map[string]string{"09:00–10:00": "1", "10:00–11:00": "2", "11:00–12:00": "1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("orders sparkline bars %v, want %v", got, want)
	}
	// The age table: 8 waiting, by age; past max_age counts the orders
	// ones older than 1 h (the 1–3 h bucket), billing's 30 h one, and
	// in the 6–12 h bucket that the 10 h max_age splits, billing's 11 h
	// one but not the 6 h ones.
	table := body[strings.Index(body, `id="age-table"`):]
	for bucket, counts := range map[string]string{"&gt; 1 d": "1</td><td class=\"num\">1", "6–12 h": "3</td><td class=\"num\">1",
		"1–3 h": "2</td><td class=\"num\">2", "30–60 min": "1</td><td class=\"num\">0", "5–15 min": "1</td><td class=\"num\">0",
		"&lt; 5 min": "0</td><td class=\"num\">0"} {
		if !strings.Contains(table, `<th scope="row">`+bucket+`</th><td class="num">`+counts+`</td>`) {
			t.Fatalf("age table lacks %s = %s:\n%s", bucket, counts, table[:min(len(table), 2000)])
		}
	}
	if !strings.Contains(body, "Age of the 8 dead letters waiting") {
		t.Fatal("the age chart's label does not count 8 waiting")
	}
	if !strings.Contains(body, `id="no-alarms"`) {
		t.Fatal("no alarm state is stored: the page must say none fires")
	}
	// Most urgent first: past max_age (the oldest first), over half of
	// it, within it.
	var order []string
	for _, m := range regexp.MustCompile(`<tr data-queue="([^"]+)" data-row>`).FindAllStringSubmatch(body, -1) {
		order = append(order, m[1])
	}
	if want := []string{"billing", "orders", "mail", "reports"}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("queues in the order %v, want %v", order, want)
	}
}

// The charts are numbers only: no stored string inside an <svg> but in
// escaped form, and a hostile queue name is text everywhere.
func TestOverviewHostileQueueIsText(t *testing.T) {
	e := overviewEnv(t)
	c := e.client()
	e.login(c, e.token("admin", quarantine.RoleAdmin))
	hostile := `<svg onload=alert(1)><script>x</script>"'&`
	e.at(hostile, "team-a", time.Hour)
	_, body := get(t, c, e.srv.URL+"/overview")
	if strings.Contains(body, "<script>x") || strings.Contains(body, "<svg onload") {
		t.Fatal("the hostile queue name reached the page unescaped")
	}
	if !strings.Contains(body, "&lt;svg onload=alert(1)&gt;&lt;script&gt;x&lt;/script&gt;&#34;&#39;&amp;") {
		t.Fatalf("the hostile queue is not shown as text:\n%s", body)
	}
	for _, svg := range regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(body, -1) {
		if strings.Contains(svg, "onload") || strings.Contains(svg, "script") {
			t.Fatalf("a chart holds a stored string: %s", svg)
		}
	}
}

// A scoped token sees its owners' queues and alarms only.
func TestOverviewScopedTokenSeesOwnQueues(t *testing.T) {
	e := overviewEnv(t)
	e.at("orders", "team-a", time.Hour)
	e.at("billing", "team-b", time.Hour)
	since := overviewNow.Add(-time.Hour)
	states := []quarantine.AlarmState{
		{Alarm: "orders-age", Queue: "orders", Owner: "team-a", State: quarantine.AlarmFiring, Since: since, AlarmReading: quarantine.AlarmReading{Reason: "the oldest dead letter is 1h0m0s old (max_age 1h0m0s)"}},
		{Alarm: "slow", Queue: "billing", Owner: "team-b", State: quarantine.AlarmFiring, Since: since, AlarmReading: quarantine.AlarmReading{Reason: "billing is slow"}},
		{Alarm: "slow", Queue: "orders", Owner: "team-a", State: quarantine.AlarmInactive, Since: since},
	}
	if err := e.store.SaveAlarms(context.Background(), states, nil); err != nil {
		t.Fatal(err)
	}
	c := e.client()
	e.login(c, e.token("viewer-b", quarantine.RoleViewer, "team-b"))
	_, body := get(t, c, e.srv.URL+"/overview")
	if strings.Contains(body, `data-queue="orders"`) || strings.Contains(body, "orders-age") {
		t.Fatalf("team-b's token sees team-a's queue or alarm:\n%s", body)
	}
	billing := rowOf(t, body, "billing")
	if !strings.Contains(billing, "slow (firing)") || !strings.Contains(body, "billing is slow") {
		t.Fatalf("team-b's firing alarm is not shown:\n%s", body)
	}

	admin := e.client()
	e.login(admin, e.token("admin", quarantine.RoleAdmin))
	_, body = get(t, admin, e.srv.URL+"/overview")
	if !strings.Contains(rowOf(t, body, "orders"), "orders-age (firing)") || strings.Contains(rowOf(t, body, "orders"), "inactive") {
		t.Fatalf("the admin's orders row:\n%s", rowOf(t, body, "orders"))
	}
	if n := strings.Count(body, `class="alarm alarm-firing"`); n != 2 {
		t.Fatalf("%d firing alarms listed, want 2", n)
	}
}

func TestOverviewNeedsLogin(t *testing.T) {
	e := overviewEnv(t)
	res, _ := get(t, e.client(), e.srv.URL+"/overview")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("anonymous /overview: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
}

// The age history charts the samples of the last day: one point per
// quarter of an hour with a sample, red past the queue's max_age, and a
// table by hour naming the queue that held the oldest; a scoped token
// charts its owners' queues only.
func TestOverviewAgeHistory(t *testing.T) {
	e := overviewEnv(t)
	admin := e.client()
	e.login(admin, e.token("admin", quarantine.RoleAdmin))
	_, body := get(t, admin, e.srv.URL+"/overview")
	if !strings.Contains(body, `id="history-empty"`) || strings.Contains(body, `<svg class="agehistory"`) {
		t.Fatal("without a sample the page must say so and draw no chart")
	}

	e.at("orders", "team-a", 3*time.Hour)     // failed 09:00, past its 1 h max_age at every sample
	e.at("billing", "team-b", 30*time.Minute) // failed 11:30, within its 10 h: 20 min old at 11:50
	e.at("billing", "team-b", 20*time.Minute)
	ctx := context.Background()
	for _, at := range []time.Duration{-20 * time.Minute, -10 * time.Minute} { // 11:40, 11:50
		if res, err := e.store.SampleAges(ctx, overviewNow.Add(at)); err != nil || !res.Taken {
			t.Fatalf("SampleAges: %+v %v", res, err)
		}
	}
	_, body = get(t, admin, e.srv.URL+"/overview")
	svg := regexp.MustCompile(`(?s)<svg class="agehistory".*?</svg>`).FindString(body)
	if svg == "" {
		t.Fatalf("no age history chart:\n%s", body)
	}
	for _, want := range []string{`<title>11:30–11:45 UTC: oldest waiting 2 h 40 min, past its alarm&#39;s max_age</title>`,
		`<title>11:45–12:00 UTC: oldest waiting 2 h 50 min, past its alarm&#39;s max_age</title>`, `class="pt over"`, `<polyline class="age-line"`} {
		if !strings.Contains(svg, want) {
			t.Fatalf("the age history lacks %q:\n%s", want, svg)
		}
	}
	if n := strings.Count(svg, "<circle"); n != 2 {
		t.Fatalf("%d points, want one per sampled quarter of an hour (2)", n)
	}
	if strings.Contains(svg, "orders") || strings.Contains(svg, "billing") {
		t.Fatal("the chart names a queue: queue names belong to the table, as text")
	}
	table := body[strings.Index(body, `id="history-table"`):]
	for _, want := range []string{`<th scope="row">11:00–12:00</th><td>2 h 50 min</td><td>orders</td><td class="num">3</td><td>yes</td>`,
		`<th scope="row">10:00–11:00</th><td colspan="4">no sample</td>`} {
		if !strings.Contains(table, want) {
			t.Fatalf("the history table lacks %q:\n%s", want, table[:min(len(table), 3000)])
		}
	}

	viewer := e.client()
	e.login(viewer, e.token("viewer-b", quarantine.RoleViewer, "team-b"))
	_, body = get(t, viewer, e.srv.URL+"/overview")
	table = body[strings.Index(body, `id="history-table"`):]
	if !strings.Contains(table, `<th scope="row">11:00–12:00</th><td>20 min</td><td>billing</td><td class="num">2</td><td>no</td>`) ||
		strings.Contains(table, "orders") || strings.Contains(body, `class="pt over"`) {
		t.Fatalf("team-b's history must chart billing only:\n%s", table[:min(len(table), 3000)])
	}
}
