package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	apiclient "github.com/quarantine-dev/quarantine/client"
)

// errNotConfirmed is returned by replay create when the count typed is
// not the count previewed; the draft is cancelled.
var errNotConfirmed = errors.New("not confirmed")

// replayCreate previews a replay (a dry run: the server pins the messages
// in a draft), shows the count, asks to type it (unless --yes), then
// starts the draft.
func (c *cliRun) replayCreate(ctx context.Context) error {
	res, err := c.api.CreateReplayWithResponse(ctx, c.o.replayRequest())
	if err != nil {
		return err
	}
	draft := res.JSON201.Replay
	// The preview is for the operator: on stdout as the table, on stderr
	// when stdout is JSON.
	info := c.out
	if c.json() {
		info = c.m.Stderr
	}
	if err := c.preview(ctx, info, res.Body, res.JSON201); err != nil {
		return err
	}
	if c.o.replay.dryRun {
		if c.json() {
			return c.printJSON(res.Body)
		}
		_, err := fmt.Fprintf(info, "start it with: quarantine replay start %s --reason %q\n", draft.Id, c.o.reason)
		return err
	}
	n := draft.Counts.Pending
	if n == 0 {
		c.cancelDraft(ctx, draft.Id, "nothing to replay")
		return fmt.Errorf("nothing to replay: none of the %d messages would be published (the draft %s is cancelled)", draft.Total, draft.Id)
	}
	if !c.o.yes {
		if err := c.confirm(n); err != nil {
			c.cancelDraft(ctx, draft.Id, "not confirmed at the command line")
			return fmt.Errorf("%w (the draft %s is cancelled)", err, draft.Id)
		}
	}
	return c.start(ctx, draft.Id)
}

// preview writes what the dry run found: how many messages would be
// published, skipped (with why) and undeliverable, and at what pace.
func (c *cliRun) preview(ctx context.Context, w io.Writer, body []byte, created *apiclient.ReplayCreated) error {
	b := created.Replay
	skipped := fmt.Sprint(b.Counts.Skipped)
	if b.Counts.Skipped > 0 {
		reasons, err := c.skippedReasons(ctx, b.Id, b.Counts.Skipped)
		if err != nil {
			return err
		}
		skipped += " (" + reasons + ")"
	}
	undeliverable := ""
	if n, reasons, ok := undeliverableOf(body); ok {
		undeliverable = fmt.Sprint(n)
		if len(reasons) > 0 {
			undeliverable += " (" + tally(reasons) + ")"
		}
		if n > 0 {
			undeliverable += ": they would fail"
		}
	}
	to := safe(strings.Join(b.Queues, ", "))
	if q := b.Destination.Queue; q != nil && *q != "" {
		to = "queue " + safe(*q) + " (instead of " + to + ")"
	}
	if col := b.Destination.Collector; col != nil && *col != "" {
		to += " through collector " + safe(*col)
	}
	pace := fmt.Sprintf("%s msg/s", strconv.FormatFloat(float64(b.Rate), 'f', -1, 32))
	if b.Canary > 0 {
		pace += fmt.Sprintf(", a canary of %d observed for %s", b.Canary, b.Observe)
	}
	pace += ", about " + seconds(float64(created.EstimatedSeconds))
	expires := ""
	if b.ExpiresAt != nil {
		expires = ", expires in " + shortDuration(time.Until(*b.ExpiresAt))
	}
	if _, err := fmt.Fprintf(w, "dry run: replay %s (%s%s)\n", b.Id, b.State, expires); err != nil {
		return err
	}
	return writeFields(w, [][2]string{
		{"  to publish", fmt.Sprintf("%d of %d messages, to %s", b.Counts.Pending, b.Total, to)},
		{"  skipped", skipped},
		{"  undeliverable", undeliverable},
		{"  pace", pace},
	})
}

// skippedReasons tallies why the draft's items were skipped, reading at
// most 10 pages of them.
func (c *cliRun) skippedReasons(ctx context.Context, id string, count int) (string, error) {
	reasons := map[string]int{}
	p := &apiclient.ListReplayItemsParams{Outcome: &[]apiclient.ItemOutcome{"skipped"}, Limit: ptrTo(1000)}
	seen := 0
	for range 10 {
		res, err := c.api.ListReplayItemsWithResponse(ctx, id, p)
		if err != nil {
			return "", err
		}
		for _, it := range res.JSON200.Items {
			reasons[it.Reason]++
			seen++
		}
		if res.JSON200.NextCursor == nil || seen >= count {
			break
		}
		p.Cursor = res.JSON200.NextCursor
	}
	s := tally(reasons)
	if seen < count {
		s += fmt.Sprintf(", %d more", count-seen)
	}
	return s, nil
}

// tally renders counts by reason, largest first: "no key: 3, gone: 1".
func tally(reasons map[string]int) string {
	keys := slices.Collect(maps.Keys(reasons))
	slices.SortFunc(keys, func(a, b string) int {
		if reasons[a] != reasons[b] {
			return reasons[b] - reasons[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		r := k
		if r == "" {
			r = "no reason given"
		}
		parts[i] = fmt.Sprintf("%s: %d", clip(safe(r), 60), reasons[k])
	}
	return strings.Join(parts, ", ")
}

// undeliverableOf reads the dry run's undeliverable messages from its
// answer, at the top or in the batch, in the shapes a server may give: a
// count, a list of messages with their reasons, or an object with a count
// and reasons (by reason, or as a list). ok is false when the answer has
// none (servers before it).
func undeliverableOf(body []byte) (n int, reasons map[string]int, ok bool) {
	var top struct {
		Undeliverable json.RawMessage `json:"undeliverable"`
		Replay        struct {
			Undeliverable json.RawMessage `json:"undeliverable"`
		} `json:"replay"`
	}
	if json.Unmarshal(body, &top) != nil {
		return 0, nil, false
	}
	raw := top.Undeliverable
	if raw == nil {
		raw = top.Replay.Undeliverable
	}
	if raw == nil {
		return 0, nil, false
	}
	reasons = map[string]int{}
	var count int
	var list []struct {
		Reason string `json:"reason"`
	}
	var obj struct {
		Count    *int            `json:"count"`
		Reasons  json.RawMessage `json:"reasons"`
		ByReason map[string]int  `json:"by_reason"`
		Items    json.RawMessage `json:"items"`
		Messages json.RawMessage `json:"messages"`
	}
	switch {
	case json.Unmarshal(raw, &count) == nil:
		return count, nil, true
	case json.Unmarshal(raw, &list) == nil:
		for _, it := range list {
			reasons[it.Reason]++
		}
		return len(list), reasons, true
	case json.Unmarshal(raw, &obj) == nil:
		maps.Copy(reasons, obj.ByReason)
		var byReason map[string]int
		if json.Unmarshal(obj.Reasons, &byReason) == nil {
			maps.Copy(reasons, byReason)
		}
		for _, items := range []json.RawMessage{obj.Reasons, obj.Items, obj.Messages} {
			if json.Unmarshal(items, &list) == nil {
				for _, it := range list {
					reasons[it.Reason]++
				}
				count = max(count, len(list))
			}
		}
		if obj.Count != nil {
			count = *obj.Count
		}
		return count, reasons, true
	}
	return 0, nil, false
}

// confirm asks to type the count n, on stderr, and reads the answer.
func (c *cliRun) confirm(n int) error {
	fmt.Fprintf(c.m.Stderr, "Type %d to replay %d messages (anything else cancels): ", n, n)
	if c.in == nil {
		fmt.Fprintln(c.m.Stderr)
		return fmt.Errorf("%w: no answer on stdin (use --yes to start without asking)", errNotConfirmed)
	}
	line, err := c.in.ReadString('\n')
	if f, ok := c.m.Stdin.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		fmt.Fprintln(c.m.Stderr) // a terminal echoed the answer and its newline
	}
	answer := strings.TrimSpace(line)
	if answer == "" && err != nil {
		fmt.Fprintln(c.m.Stderr)
		return fmt.Errorf("%w: no answer on stdin (use --yes to start without asking)", errNotConfirmed)
	}
	if answer != strconv.Itoa(n) {
		return fmt.Errorf("%w: typed %q, the count is %d", errNotConfirmed, answer, n)
	}
	return nil
}

// cancelDraft cancels a draft the operator did not start; a failure is
// only told (drafts expire anyway).
func (c *cliRun) cancelDraft(ctx context.Context, id, reason string) {
	if _, err := c.api.CancelReplayWithResponse(ctx, id, apiclient.ReplayChange{Reason: reason}); err != nil {
		fmt.Fprintf(c.m.Stderr, "quarantine: cancelling the draft %s: %v (it expires by itself)\n", id, err)
	}
}

func (c *cliRun) replayStart(ctx context.Context) error {
	return c.start(ctx, c.o.args[0])
}

// start starts a draft, then shows it or (--watch) follows it.
func (c *cliRun) start(ctx context.Context, id string) error {
	body := apiclient.ReplayStart{Reason: c.o.reason}
	if c.o.replay.force {
		body.Force = ptrTo(true)
	}
	if c.o.replay.acceptKeyRuleChange {
		body.AcceptKeyRuleChange = ptrTo(true)
	}
	res, err := c.api.StartReplayWithResponse(ctx, id, body)
	if err != nil {
		return err
	}
	return c.changed(ctx, res.Body, res.JSON200)
}

// changed shows a batch after a change, or follows it with --watch.
func (c *cliRun) changed(ctx context.Context, body []byte, b *apiclient.ReplayBatch) error {
	if c.o.watch {
		return c.watch(ctx, b.Id)
	}
	if c.json() {
		return c.printJSON(body)
	}
	_, err := fmt.Fprintf(c.out, "replay %s: %s%s\n", b.Id, b.State, reasonSuffix(b.StateReason))
	if err == nil && b.State == "running" {
		_, err = fmt.Fprintf(c.out, "follow it with: quarantine replay watch %s\n", b.Id)
	}
	return err
}

// replayChange pauses, resumes or cancels a batch.
func (c *cliRun) replayChange(ctx context.Context) error {
	id, body := c.o.args[0], apiclient.ReplayChange{Reason: c.o.reason}
	var (
		raw []byte
		b   *apiclient.ReplayBatch
	)
	switch c.o.command.name {
	case cmdReplayPause:
		res, err := c.api.PauseReplayWithResponse(ctx, id, body)
		if err != nil {
			return err
		}
		raw, b = res.Body, res.JSON200
	case cmdReplayResume:
		res, err := c.api.ResumeReplayWithResponse(ctx, id, body)
		if err != nil {
			return err
		}
		raw, b = res.Body, res.JSON200
	default:
		res, err := c.api.CancelReplayWithResponse(ctx, id, body)
		if err != nil {
			return err
		}
		raw, b = res.Body, res.JSON200
	}
	return c.changed(ctx, raw, b)
}

func (c *cliRun) replayList(ctx context.Context) error {
	p := &apiclient.ListReplaysParams{Limit: &c.o.limit}
	if len(c.o.states) > 0 {
		states := make([]apiclient.ReplayState, len(c.o.states))
		for i, s := range c.o.states {
			states[i] = apiclient.ReplayState(s)
		}
		p.State = &states
	}
	if c.o.queue != "" {
		p.Queue = &c.o.queue
	}
	if c.o.actor != "" {
		p.Actor = &c.o.actor
	}
	if c.o.cursor != "" {
		p.Cursor = &c.o.cursor
	}
	res, err := c.api.ListReplaysWithResponse(ctx, p)
	if err != nil {
		return err
	}
	return list(c, res.Body, res.JSON200.Items, res.JSON200.NextCursor,
		[]string{"ID", "STATE", "TOTAL", "PUBLISHED", "FAILED", "QUEUES", "ACTOR", "AGE", "REASON"},
		func(b apiclient.ReplayBatch) []string {
			return []string{b.Id, string(b.State), strconv.Itoa(b.Total), strconv.Itoa(b.Counts.Published),
				strconv.Itoa(b.Counts.Failed + b.Counts.Refailed), clip(safe(strings.Join(b.Queues, ",")), 30), clip(safe(b.Actor), 24),
				ago(b.CreatedAt), clip(safe(b.Reason), 50)}
		})
}

func (c *cliRun) replayShow(ctx context.Context) error {
	res, err := c.api.GetReplayWithResponse(ctx, c.o.args[0])
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(res.Body)
	}
	b := res.JSON200
	n := b.Counts
	dest := "each message's own queue"
	if b.Destination.Queue != nil {
		dest = "queue " + safe(*b.Destination.Queue)
	}
	if b.Destination.Collector != nil {
		dest += " through collector " + safe(*b.Destination.Collector)
	}
	canary := ""
	if b.Canary > 0 {
		canary = fmt.Sprintf("%d observed for %s: %s", b.Canary, b.Observe, orDash(string(b.CanaryVerdict)))
	}
	return c.fields([][2]string{
		{"id", b.Id},
		{"state", string(b.State) + reasonSuffix(b.StateReason)},
		{"progress", progress(b)},
		{"outcomes", fmt.Sprintf("%d pending, %d published, %d deduplicated, %d skipped, %d failed, %d refailed",
			n.Pending, n.Published, n.Deduplicated, n.Skipped, n.Failed, n.Refailed)},
		{"queues", safe(strings.Join(b.Queues, ", "))},
		{"destination", dest},
		{"canary", canary},
		{"reason", safe(b.Reason)},
		{"actor", safe(b.Actor)},
		{"created", timeAgo(&b.CreatedAt)},
		{"started", timeAgo(b.StartedAt)},
		{"finished", timeAgo(b.FinishedAt)},
		{"expires", timeAgo(b.ExpiresAt)},
	})
}

// reasonSuffix is ": reason" when there is one.
func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ": " + safe(r)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
