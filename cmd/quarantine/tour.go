package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/worker"
)

// tourAPI calls the demo's own API as an operator's script would.
type tourAPI struct {
	base, token string
}

// call sends body (nil for none) and decodes the answer into out; a
// status other than want is an error quoting the problem.
func (a tourAPI) call(ctx context.Context, method, path string, header map[string]string, body, out any, want int) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s answered %d, not %d: %s", method, path, resp.StatusCode, want, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

type tourMessage struct {
	ID             string          `json:"id"`
	IdempotencyKey string          `json:"idempotency_key"`
	FailureClass   string          `json:"failure_class"`
	Reason         string          `json:"reason"`
	Status         string          `json:"status"`
	PayloadSHA256  string          `json:"payload_sha256"`
	Payload        json.RawMessage `json:"payload"`
}

type tourBatch struct {
	ID            string         `json:"id"`
	State         string         `json:"state"`
	Total         int            `json:"total"`
	Counts        map[string]int `json:"counts"`
	CanaryVerdict string         `json:"canary_verdict"`
}

// tour walks the whole loop through the API, printing each step and what
// it proves; any step whose invariant does not hold ends it with an error.
func (m *Main) tour(ctx context.Context, d *demo) error {
	secret, hash := quarantine.NewTokenSecret()
	tok := &quarantine.Token{Name: "tour", Role: quarantine.RoleAdmin, Owners: []string{}, CreatedBy: systemActor, SecretHash: hash}
	if err := m.store.CreateToken(ctx, tok, systemActor); err != nil {
		return err
	}
	api := tourAPI{base: "http://" + m.publicAddr(), token: secret}
	say := func(format string, args ...any) { fmt.Fprintf(m.Stdout, format+"\n", args...) }
	say("quarantine demo --tour: the whole loop on the embedded store (%s), one process.\n", m.Config.Database)

	// 1. Jobs run; the bad ones die.
	if err := d.produce(ctx); err != nil {
		return err
	}
	outs, err := d.waitOutcomes(ctx, 30*time.Second, func(os []worker.Outcome) bool {
		return count(os, worker.Completed) == 6 && count(os, worker.DeadLettered) == 2
	})
	if err != nil {
		return fmt.Errorf("step 1: the worker settled %v: %w", summary(outs), err)
	}
	say("1. A producer sent %d build-report jobs to the work queue %q. The worker (package worker, with", len(demoJobs), demoQueue)
	say("   durable claims) completed 6, retried the flaky one after its renderer's 429 (Retry-After: 1s),")
	say("   and dead-lettered 2 whose format does not exist: %s.", summary(outs))

	// 2. The collector quarantined them.
	var page struct {
		Items []tourMessage `json:"items"`
	}
	for deadline := time.Now().Add(20 * time.Second); len(page.Items) < 2; time.Sleep(50 * time.Millisecond) {
		if err := api.call(ctx, "GET", "/api/v1/messages?queue="+demoQueue, nil, nil, &page, 200); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("step 2: the quarantine holds %d messages of %s, not 2", len(page.Items), demoQueue)
		}
	}
	byKey := map[string]tourMessage{}
	say("2. The collector stored each dead letter (canonical failure envelope) before acknowledging it:")
	for _, msg := range page.Items {
		byKey[msg.IdempotencyKey] = msg
		say("     %s  key %-12s %s: %s", msg.ID, msg.IdempotencyKey, msg.FailureClass, msg.Reason)
	}
	poison, junk := byKey["report:r-5"], byKey["report:r-8"]
	if poison.ID == "" || junk.ID == "" {
		return fmt.Errorf("step 2: the quarantine lacks report:r-5 or report:r-8: %v", byKey)
	}

	// 3. Fix one payload, discard the other.
	var full tourMessage
	if err := api.call(ctx, "GET", "/api/v1/messages/"+poison.ID, nil, nil, &full, 200); err != nil {
		return err
	}
	fixed := strings.Replace(string(full.Payload), `"pdff"`, `"pdf"`, 1)
	var edited tourMessage
	if err := api.call(ctx, "PUT", "/api/v1/messages/"+poison.ID+"/payload", map[string]string{"If-Match": `"` + full.PayloadSHA256 + `"`},
		map[string]any{"payload": json.RawMessage(fixed), "reason": "typo in the format: pdff is pdf"}, &edited, 200); err != nil {
		return err
	}
	say("3. Fixed report:r-5's payload (%s -> %s), with If-Match, a reason and the actor recorded;", short(full.PayloadSHA256), short(edited.PayloadSHA256))
	if err := api.call(ctx, "POST", "/api/v1/messages/"+junk.ID+"/discard", nil,
		map[string]any{"reason": "the customer asked for a format we do not make"}, nil, 200); err != nil {
		return err
	}
	say("   discarded report:r-8 (kept, with the reason, not deleted).")

	// 4. Replay: a dry run pins the set, then it starts, with a canary.
	var draft struct {
		Replay    tourBatch `json:"replay"`
		Estimated float64   `json:"estimated_seconds"`
	}
	if err := api.call(ctx, "POST", "/api/v1/replays", nil, map[string]any{
		"filter": map[string]any{"queue": []string{demoQueue}, "status": []string{"quarantined"}}, "expect_count": 1,
		"rate": 5, "dry_run": true, "reason": "format fixed",
	}, &draft, 201); err != nil {
		return err
	}
	var started tourBatch
	if err := api.call(ctx, "POST", "/api/v1/replays/"+draft.Replay.ID+"/start", nil, map[string]any{"reason": "the preview is right"}, &started, 200); err != nil {
		return err
	}
	say("4. A dry run pinned exactly %d message in draft %s (estimated %.1fs at 5 msg/s); started it.", draft.Replay.Total, draft.Replay.ID, draft.Estimated)
	var done tourBatch
	for deadline := time.Now().Add(30 * time.Second); done.State != "completed"; time.Sleep(100 * time.Millisecond) {
		if err := api.call(ctx, "GET", "/api/v1/replays/"+draft.Replay.ID, nil, nil, &done, 200); err != nil {
			return err
		}
		if time.Now().After(deadline) || done.State == "halted" || done.State == "paused" {
			return fmt.Errorf("step 4: the replay is %s %v", done.State, done.Counts)
		}
	}
	if _, err := d.waitOutcomes(ctx, 10*time.Second, func(os []worker.Outcome) bool {
		return countKey(os, worker.Completed, "report:r-5") == 1
	}); err != nil {
		return fmt.Errorf("step 4: the worker did not complete the replayed job: %w", err)
	}
	say("   It completed, %d published; the worker ran the fixed job once, with its original key.", done.Counts["published"])

	// 5. A repeat is absorbed.
	if err := worker.Dispatch(ctx, d.queue, &d.job, "report:r-5", report{Report: "r-5", Format: "pdf"}, nil); err != nil {
		return err
	}
	if _, err := d.waitOutcomes(ctx, 10*time.Second, func(os []worker.Outcome) bool {
		return countKey(os, worker.Duplicate, "report:r-5") == 1
	}); err != nil {
		return fmt.Errorf("step 5: the repeat of report:r-5 was not absorbed: %w", err)
	}
	say("5. The same job delivered again (a replay published twice would be) was acknowledged as a duplicate:")
	say("   its key was already completed, so the handler did not run.")

	// 6. One effect per key.
	effects := d.effectsOf()
	var keys []string
	for _, r := range demoJobs {
		keys = append(keys, "report:"+r.Report)
	}
	for _, k := range keys {
		want := 1
		if k == "report:r-8" {
			want = 0
		}
		if effects[k] != want {
			return fmt.Errorf("step 6: %s has %d business effects, want %d", k, effects[k], want)
		}
	}
	say("6. Business effects per idempotency key (r-8 was discarded):\n%s", effectsTable(effects, keys))

	// 7. Every action is audited; the chain verifies.
	var v quarantine.AuditVerification
	if err := api.call(ctx, "GET", "/api/v1/audit/verify", nil, nil, &v, 200); err != nil {
		return err
	}
	if !v.OK {
		return fmt.Errorf("step 7: the audit chain does not verify: %s", v.Problem)
	}
	var audit struct {
		Items []struct {
			Actor, Action string
		} `json:"items"`
	}
	if err := api.call(ctx, "GET", "/api/v1/audit?limit=100", nil, nil, &audit, 200); err != nil {
		return err
	}
	var actions []string
	for _, e := range audit.Items {
		actions = append(actions, e.Action)
	}
	say("7. The audit log holds %d hash-chained events (%s) and verifies.", v.Checked, strings.Join(actions, ", "))
	say("\nThe tour is over and its server stopped. 'quarantine demo' runs the same loop and keeps serving, for you to try by hand:\nit prints the URL to log in with.")
	return nil
}

func count(os []worker.Outcome, r worker.Result) int {
	n := 0
	for _, o := range os {
		if o.Result == r {
			n++
		}
	}
	return n
}

func countKey(os []worker.Outcome, r worker.Result, key string) int {
	n := 0
	for _, o := range os {
		if o.Result == r && o.Key == key {
			n++
		}
	}
	return n
}

// summary counts outcomes by result, like "completed 6, retried 1".
func summary(os []worker.Outcome) string {
	var parts []string
	for _, r := range []worker.Result{worker.Completed, worker.Retried, worker.DeadLettered, worker.Duplicate, worker.Rejected} {
		if n := count(os, r); n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
	}
	return strings.Join(parts, ", ")
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}
