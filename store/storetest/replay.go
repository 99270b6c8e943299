package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/testclock"
	"github.com/quarantine-dev/quarantine/store"
)

func testReplay(t *testing.T, h Harness) {
	runParallel(t, h, []subtest{
		{"CreateByIDs", testReplayCreateIDs},
		{"CreateByFilter", testReplayCreateFilter},
		{"ExpectCount", testReplayExpectCount},
		{"DraftPinned", testReplayDraftPinned},
		{"DraftExpiry", testReplayDraftExpiry},
		{"Owners", testReplayOwners},
		{"Skips", testReplaySkips},
		{"Transitions", testReplayTransitions},
		{"Cancel", testReplayCancel},
		{"List", testReplayList},
		{"ConfirmAbove", testReplayConfirmAbove},
		{"CancelPinning", testReplayCancelPinning},
	})
}

// testClock is a clock a test moves by hand.
type testClock = testclock.Clock

func newTestClock() *testClock { return testclock.New(baseTime.Add(24 * time.Hour)) }

// openClock opens a store on a test clock, skipping t when the harness
// cannot set one.
func openClock(t *testing.T, h Harness) (store.Store, *testClock) {
	t.Helper()
	if h.OpenClock == nil {
		t.Skip("the harness cannot set the store's clock")
	}
	c := newTestClock()
	return h.OpenClock(t, c.Now), c
}

// replayReq returns a valid request by alice for ids.
func replayReq(ids ...string) quarantine.ReplayRequest {
	return quarantine.ReplayRequest{IDs: ids, Rate: 10, Reason: "fix deployed", Actor: "alice"}
}

func createReplay(t *testing.T, s store.Store, r quarantine.ReplayRequest, keyRule quarantine.KeyRuleFunc) *quarantine.ReplayBatch {
	t.Helper()
	b, err := s.CreateReplay(t.Context(), r, keyRule)
	wantOK(t, err, "CreateReplay")
	wantCounts(t, b)
	return b
}

// wantCounts fails t unless b has every outcome in Counts and they sum to
// Total.
func wantCounts(t *testing.T, b *quarantine.ReplayBatch) {
	t.Helper()
	sum := 0
	for _, o := range quarantine.ItemOutcomes {
		n, ok := b.Counts[o]
		if !ok {
			t.Fatalf("batch %s counts %v lack %s", b.ID, b.Counts, o)
		}
		sum += n
	}
	if sum != b.Total || len(b.Counts) != len(quarantine.ItemOutcomes) {
		t.Fatalf("batch %s counts %v do not sum to its total %d", b.ID, b.Counts, b.Total)
	}
}

// items returns every item of a batch, in seq order, two at a time.
func items(t *testing.T, s store.Store, batchID string) []quarantine.ReplayItem {
	t.Helper()
	return itemsPaged(t, s, batchID, 2)
}

// itemsPaged returns every item of a batch, page pages of them at a time.
func itemsPaged(t *testing.T, s store.Store, batchID string, page int) []quarantine.ReplayItem {
	t.Helper()
	var out []quarantine.ReplayItem
	f := quarantine.ReplayItemFilter{BatchID: batchID, After: -1, Limit: page}
	for {
		got, more, err := s.ListReplayItems(t.Context(), f)
		wantOK(t, err, "ListReplayItems")
		out = append(out, got...)
		if !more {
			return out
		}
		f.After = got[len(got)-1].Seq
	}
}

func itemIDs(its []quarantine.ReplayItem) []string {
	out := make([]string, len(its))
	for i, it := range its {
		out[i] = it.MessageID
	}
	return out
}

// wantItem fails t unless the item of message id has the outcome (and,
// when reason is set, the reason).
func wantItem(t *testing.T, its []quarantine.ReplayItem, id string, o quarantine.ItemOutcome, reason string) quarantine.ReplayItem {
	t.Helper()
	for _, it := range its {
		if it.MessageID == id {
			if it.Outcome != o || (reason != "" && it.Reason != reason) {
				t.Fatalf("item of %s is %s (%q), want %s (%q)", id, it.Outcome, it.Reason, o, reason)
			}
			return it
		}
	}
	t.Fatalf("no item for message %s", id)
	return quarantine.ReplayItem{}
}

// auditOf returns the events of subject with action, oldest first.
func auditOf(t *testing.T, s store.Store, subject, action string) []quarantine.AuditEvent {
	t.Helper()
	evs, err := s.ListAudit(t.Context(), quarantine.AuditFilter{Subject: subject, Action: action, Limit: quarantine.MaxLimit})
	wantOK(t, err, "ListAudit")
	return evs
}

// wantChain fails t unless the audit chain verifies.
func wantChain(t *testing.T, s store.Store) {
	t.Helper()
	v, err := s.VerifyAudit(t.Context())
	if err != nil || !v.OK {
		t.Fatalf("VerifyAudit = %+v, %v", v, err)
	}
}

func change(t *testing.T, s store.Store, id, action string) (*quarantine.ReplayBatch, error) {
	t.Helper()
	return s.ChangeReplay(t.Context(), quarantine.ReplayChange{BatchID: id, Action: action, Actor: "bob", Reason: "because " + action})
}

func testReplayCreateIDs(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b, c := newMsg(), newMsg(), newMsg()
	insert(t, s, a, b, c)
	unknown := quarantine.NewID(baseTime)
	r := replayReq(c.ID, a.ID, unknown, c.ID, b.ID)
	r.Canary = 1
	batch := createReplay(t, s, r, nil)
	if batch.State != quarantine.ReplayRunning || batch.StartedAt == nil || batch.ExpiresAt != nil || batch.Total != 4 ||
		batch.Counts[quarantine.ItemPending] != 3 || batch.Counts[quarantine.ItemSkipped] != 1 ||
		batch.CanaryVerdict != quarantine.CanaryPending || batch.Actor != "alice" || batch.Reason != "fix deployed" {
		t.Fatalf("batch = %+v", batch)
	}
	if !slices.Equal(batch.Queues, []string{"orders"}) || !slices.Equal(batch.Owners, []string{"team-a"}) {
		t.Fatalf("queues %v owners %v", batch.Queues, batch.Owners)
	}
	its := items(t, s, batch.ID)
	if got := itemIDs(its); !slices.Equal(got, []string{c.ID, a.ID, unknown, b.ID}) {
		t.Fatalf("items %v, want the order given without the repeat", got)
	}
	for i, it := range its {
		if it.Seq != i || it.BatchID != batch.ID {
			t.Fatalf("item %d = %+v", i, it)
		}
	}
	wantItem(t, its, unknown, quarantine.ItemSkipped, "not found")
	if it := wantItem(t, its, a.ID, quarantine.ItemPending, ""); it.IdempotencyKey != a.IdempotencyKey || it.Queue != a.Queue {
		t.Fatalf("item %+v does not carry its message's key and queue", it)
	}
	// A pin moves no message: a lease does.
	wantStatuses(t, s, []*quarantine.Message{a, b, c})

	got, err := s.GetReplay(t.Context(), batch.ID)
	wantOK(t, err, "GetReplay")
	wantCounts(t, got)
	if got.State != batch.State || got.Total != batch.Total || got.Counts[quarantine.ItemPending] != 3 ||
		!got.CreatedAt.Equal(batch.CreatedAt) || got.Rate != 10 || got.Burst != 1 || got.Canary != 1 {
		t.Fatalf("GetReplay = %+v, want %+v", got, batch)
	}
	_, err = s.GetReplay(t.Context(), unknown)
	wantCode(t, err, quarantine.ENOTFOUND)
	_, _, err = s.ListReplayItems(t.Context(), quarantine.ReplayItemFilter{BatchID: unknown, After: -1})
	wantCode(t, err, quarantine.ENOTFOUND)

	create := auditOf(t, s, batch.ID, quarantine.ActionReplayCreate)
	start := auditOf(t, s, batch.ID, quarantine.ActionReplayStart)
	if len(create) != 1 || len(start) != 1 || create[0].Actor != "alice" || create[0].Seq > start[0].Seq {
		t.Fatalf("create events %v, start events %v", create, start)
	}
	var d struct {
		Reason  string `json:"reason"`
		DryRun  bool   `json:"dry_run"`
		Total   int    `json:"total"`
		Skipped int    `json:"skipped"`
	}
	if err := json.Unmarshal(create[0].Details, &d); err != nil || d.Reason != "fix deployed" || d.DryRun || d.Total != 4 || d.Skipped != 1 {
		t.Fatalf("create details %s (%v)", create[0].Details, err)
	}
	var sd struct {
		Reason string                 `json:"reason"`
		From   quarantine.ReplayState `json:"from"`
		To     quarantine.ReplayState `json:"to"`
	}
	// A batch created without a dry run is the draft of its pinned set,
	// started in the same transaction: the start is from draft, as it is
	// for a dry run's draft.
	if err := json.Unmarshal(start[0].Details, &sd); err != nil || sd.Reason != "fix deployed" || sd.From != quarantine.ReplayDraft ||
		sd.To != quarantine.ReplayRunning {
		t.Fatalf("start details %s (%v)", start[0].Details, err)
	}
	if n := len(auditOf(t, s, batch.ID, quarantine.ActionReplayForce)); n != 0 {
		t.Fatalf("%d force events without a force flag", n)
	}
	wantChain(t, s)
}

func testReplayCreateFilter(t *testing.T, h Harness) {
	s := h.Open(t)
	var fpA, fpB []*quarantine.Message
	for range 3 {
		fpA = append(fpA, newMsg(withReason("connection refused")))
		fpB = append(fpB, newMsg(withReason("schema mismatch in field total")))
	}
	other := newMsg(withReason("disk full"))
	insert(t, s, append(append(slices.Clone(fpA), fpB...), other)...)
	fa, fb := fpA[0].Fingerprint, fpB[0].Fingerprint
	if fa == fb || fa == other.Fingerprint {
		t.Fatal("the fixtures need distinct fingerprints")
	}

	// Every filtered read honours the fingerprint (OR of the values).
	f := quarantine.Filter{Fingerprint: []string{fa, other.Fingerprint}}
	want := expected(f, append(append(slices.Clone(fpA), fpB...), other))
	if got := ids(listAll(t, s, f)); !slices.Equal(got, want) || len(got) != 4 {
		t.Fatalf("list by fingerprint %v, want %v", got, want)
	}
	counts, err := s.CountByQueue(t.Context(), f)
	wantOK(t, err, "CountByQueue")
	if len(counts) != 1 || counts[0].Count != 4 {
		t.Fatalf("CountByQueue by fingerprint = %+v, want 4", counts)
	}
	groups, err := s.Groups(t.Context(), quarantine.Filter{Fingerprint: []string{fb}, Limit: 10})
	wantOK(t, err, "Groups")
	if len(groups) != 1 || groups[0].Fingerprint != fb || groups[0].Count != 3 {
		t.Fatalf("Groups by fingerprint = %+v", groups)
	}
	stats, err := s.QueueStats(t.Context(), quarantine.Filter{Fingerprint: []string{fb}}, baseTime)
	wantOK(t, err, "QueueStats")
	if len(stats) != 1 || stats[0].Counts[quarantine.StatusQuarantined] != 3 {
		t.Fatalf("QueueStats by fingerprint = %+v", stats)
	}
	sample, err := s.Sample(t.Context(), quarantine.SampleRequest{Filter: quarantine.Filter{Fingerprint: []string{fb}}, Size: 10, Seed: 1})
	wantOK(t, err, "Sample")
	if got := ids(sample); len(got) != 3 || !slices.Contains(got, fpB[1].ID) {
		t.Fatalf("Sample by fingerprint = %v", got)
	}

	r := replayReq()
	r.IDs, r.Filter = nil, &quarantine.Filter{Fingerprint: []string{fb}}
	batch := createReplay(t, s, r, nil)
	wantIDs := ids(fpB)
	slices.Sort(wantIDs)
	if got := itemIDs(items(t, s, batch.ID)); !slices.Equal(got, wantIDs) {
		t.Fatalf("items %v, want the fingerprint's messages in id order %v", got, wantIDs)
	}
	wantStatuses(t, s, append(append(slices.Clone(fpA), fpB...), other))

	// Discarding by fingerprint takes the filter too.
	res, err := s.Discard(t.Context(), quarantine.Discard{Filter: &quarantine.Filter{Fingerprint: []string{fa}}, Reason: "junk", Actor: "bob"})
	wantOK(t, err, "Discard")
	if len(res.Changed) != 3 {
		t.Fatalf("discard by fingerprint changed %v, want the 3 of %s", res.Changed, fa)
	}
	wantChain(t, s)
}

func testReplayExpectCount(t *testing.T, h Harness) {
	s := h.Open(t)
	a, b := newMsg(), newMsg()
	insert(t, s, a, b)
	three := 3
	r := replayReq(a.ID, b.ID, quarantine.NewID(baseTime))
	r.ExpectCount = &three
	_, err := s.CreateReplay(t.Context(), r, nil)
	wantCode(t, err, quarantine.ECONFLICT)
	list, _, err := s.ListReplays(t.Context(), quarantine.ReplayFilter{})
	wantOK(t, err, "ListReplays")
	if len(list) != 0 {
		t.Fatalf("a refused replay left %d batches", len(list))
	}
	wantStatuses(t, s, []*quarantine.Message{a, b})
	if evs := auditOf(t, s, "", quarantine.ActionReplayCreate); len(evs) != 0 {
		t.Fatalf("a refused replay was audited: %v", evs)
	}
	two := 2
	r.ExpectCount = &two
	batch := createReplay(t, s, r, nil)
	if batch.Total != 3 || batch.Counts[quarantine.ItemPending] != 2 {
		t.Fatalf("batch %+v", batch)
	}
	wantChain(t, s)
}

func testReplayDraftPinned(t *testing.T, h Harness) {
	s, clock := openClock(t, h)
	msgs := []*quarantine.Message{newMsg(withQueue("pin")), newMsg(withQueue("pin")), newMsg(withQueue("pin"))}
	insert(t, s, msgs...)
	r := replayReq()
	r.IDs, r.Filter, r.DryRun, r.DraftTTL = nil, &quarantine.Filter{Queue: []string{"pin"}}, true, 10*time.Minute
	draft := createReplay(t, s, r, nil)
	now := clock.Now().UTC().Truncate(time.Microsecond)
	if draft.State != quarantine.ReplayDraft || draft.ExpiresAt == nil || !draft.ExpiresAt.Equal(now.Add(10*time.Minute)) ||
		draft.StartedAt != nil || draft.Total != 3 {
		t.Fatalf("draft = %+v", draft)
	}
	wantStatuses(t, s, msgs) // a preview changes no message
	if n := len(auditOf(t, s, draft.ID, quarantine.ActionReplayStart)); n != 0 {
		t.Fatal("a draft was audited as started")
	}
	// Leasing a draft gives nothing.
	ls, err := s.LeaseReplayItems(t.Context(), draft.ID, "engine", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != 0 {
		t.Fatalf("a draft leased %d items", len(ls))
	}

	// Meanwhile one message is discarded and another arrives.
	_, err = s.Discard(t.Context(), quarantine.Discard{IDs: []string{msgs[1].ID}, Reason: "junk", Actor: "bob"})
	wantOK(t, err, "Discard")
	late := newMsg(withQueue("pin"))
	insert(t, s, late)
	clock.Advance(5 * time.Minute)

	started, err := change(t, s, draft.ID, quarantine.ReplayActStart)
	wantOK(t, err, "start")
	wantCounts(t, started)
	if started.State != quarantine.ReplayRunning || started.StartedAt == nil || started.ExpiresAt != nil ||
		started.Total != 3 || started.Counts[quarantine.ItemPending] != 3 {
		t.Fatalf("started = %+v", started)
	}
	// The lease skips the discarded message, with its reason, and holds
	// the others (their status stays until their outcome is recorded).
	ls, err = s.LeaseReplayItems(t.Context(), draft.ID, "engine", 10, time.Minute, 0)
	wantOK(t, err, "LeaseReplayItems")
	if len(ls) != 2 {
		t.Fatalf("leased %d items, want the 2 still quarantined", len(ls))
	}
	its := items(t, s, draft.ID)
	if slices.Contains(itemIDs(its), late.ID) {
		t.Fatal("a message that arrived after the preview joined the pinned set")
	}
	wantItem(t, its, msgs[1].ID, quarantine.ItemSkipped, "discarded")
	msgs[1].Status = quarantine.StatusDiscarded
	wantStatuses(t, s, append(msgs, late))
	evs := auditOf(t, s, draft.ID, quarantine.ActionReplayStart)
	if len(evs) != 1 || evs[0].Actor != "bob" {
		t.Fatalf("start events %v", evs)
	}
	var d struct {
		Reason   string `json:"reason"`
		From, To quarantine.ReplayState
	}
	if err := json.Unmarshal(evs[0].Details, &d); err != nil || d.Reason != "because start" || d.From != quarantine.ReplayDraft || d.To != quarantine.ReplayRunning {
		t.Fatalf("start details %s", evs[0].Details)
	}
	wantChain(t, s)
}

func testReplayOwners(t *testing.T, h Harness) {
	s := h.Open(t)
	a1, a2 := newMsg(withQueue("own")), newMsg(withQueue("own"))
	b1 := newMsg(withQueue("own"), withOwner("team-b"))
	insert(t, s, a1, a2, b1)

	r := replayReq()
	r.IDs, r.Filter, r.Owners, r.DryRun = nil, &quarantine.Filter{Queue: []string{"own"}}, []string{"team-b"}, true
	batch := createReplay(t, s, r, nil)
	if got := itemIDs(items(t, s, batch.ID)); !slices.Equal(got, []string{b1.ID}) || !slices.Equal(batch.Owners, []string{"team-b"}) {
		t.Fatalf("a team-b replay holds %v (owners %v)", got, batch.Owners)
	}
	// A filter naming another owner matches nothing.
	r.Filter = &quarantine.Filter{Owner: []string{"team-a"}}
	batch = createReplay(t, s, r, nil)
	if batch.Total != 0 {
		t.Fatalf("a team-b replay of team-a's messages holds %d items", batch.Total)
	}
	// An id of another owner is "not found".
	r = replayReq(a1.ID, b1.ID)
	r.Owners, r.DryRun = []string{"team-b"}, true
	batch = createReplay(t, s, r, nil)
	its := items(t, s, batch.ID)
	wantItem(t, its, a1.ID, quarantine.ItemSkipped, "not found")
	wantItem(t, its, b1.ID, quarantine.ItemPending, "")

	list, _, err := s.ListReplays(t.Context(), quarantine.ReplayFilter{Owners: []string{"team-b"}})
	wantOK(t, err, "ListReplays")
	if len(list) != 2 {
		t.Fatalf("%d batches hold team-b messages, want 2", len(list))
	}
	list, _, err = s.ListReplays(t.Context(), quarantine.ReplayFilter{Owners: []string{"team-a"}})
	wantOK(t, err, "ListReplays")
	if len(list) != 0 {
		t.Fatalf("%d batches listed for team-a, which has none", len(list))
	}
	wantChain(t, s)
}

func testReplaySkips(t *testing.T, h Harness) {
	s := h.Open(t)
	noKey := newMsg(withIdem(""))
	header := newMsg(func(m *quarantine.Message) { m.KeyRule = "header:x-id" })
	fine := newMsg()
	replayed := newMsg()
	insert(t, s, noKey, header, fine, replayed)
	setStatus(t, h, s, quarantine.StatusReplayed, replayed)
	rules := func(string) string { return quarantine.KeyRuleEnvelope }

	r := replayReq(noKey.ID, header.ID, fine.ID, replayed.ID)
	r.DryRun = true
	batch := createReplay(t, s, r, rules)
	its := items(t, s, batch.ID)
	if it := wantItem(t, its, noKey.ID, quarantine.ItemSkipped, ""); !contains(it.Reason, "force_without_key") {
		t.Fatalf("no-key reason %q", it.Reason)
	}
	if it := wantItem(t, its, header.ID, quarantine.ItemSkipped, ""); !contains(it.Reason, "accept_key_rule_change") {
		t.Fatalf("key-rule reason %q", it.Reason)
	}
	wantItem(t, its, fine.ID, quarantine.ItemPending, "")
	wantItem(t, its, replayed.ID, quarantine.ItemSkipped, "the message is replayed, not quarantined")

	r.DryRun, r.ForceWithoutKey, r.AcceptKeyRuleChange = false, true, true
	batch = createReplay(t, s, r, rules)
	its = items(t, s, batch.ID)
	wantItem(t, its, noKey.ID, quarantine.ItemPending, "")
	wantItem(t, its, header.ID, quarantine.ItemPending, "")
	if !batch.ForceWithoutKey {
		t.Fatal("ForceWithoutKey is not kept")
	}
	evs := auditOf(t, s, batch.ID, quarantine.ActionReplayForce)
	if len(evs) != 1 || !contains(string(evs[0].Details), "force_without_key") ||
		!contains(string(evs[0].Details), "accept_key_rule_change") || !contains(string(evs[0].Details), "fix deployed") {
		t.Fatalf("force events %v", evs)
	}
	got, err := s.GetMessage(t.Context(), header.ID)
	wantOK(t, err, "GetMessage")
	if got.KeyRule != "header:x-id" || got.Status != quarantine.StatusQuarantined {
		t.Fatalf("message %s: key rule %q status %s", got.ID, got.KeyRule, got.Status)
	}
	wantChain(t, s)
}
