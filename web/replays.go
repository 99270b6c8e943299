package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// replayRoutes registers the replay form, the replays list and a replay's progress.
func (h *Handler) replayRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /replays/new", h.authed(h.replayNew))
	m.HandleFunc("POST /replays", h.authed(h.createReplay))
	m.HandleFunc("GET /replays", h.authed(h.listReplays))
	m.HandleFunc("GET /replays/{id}", h.authed(h.showReplay))
	m.HandleFunc("GET /replays/{id}/progress", h.authed(h.replayProgress))
	m.HandleFunc("GET /replays/{id}/report", h.authed(h.replayReport))
	m.HandleFunc("POST /replays/{id}/{action}", h.authed(h.changeReplay))
}

// replayActions are the actions the replay page offers, in its order.
var replayActions = []string{quarantine.ReplayActStart, quarantine.ReplayActPause, quarantine.ReplayActResume, quarantine.ReplayActCancel}

// replayItemsPage is the number of items a replay page shows.
const replayItemsPage = 50

type replaysContent struct {
	State, Queue string
	States       []quarantine.ReplayState
	Replays      []replayRow
	Next         string
}

type replayRow struct {
	B         *quarantine.ReplayBatch
	Done      int
	Rate, ETA string // achieved rate and ETA as shown ("" when there is none)
}

// listReplays is GET /replays: batches within the token's owners, newest
// first, by state and queue.
func (h *Handler) listReplays(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	c := &replaysContent{State: q.Get("state"), Queue: q.Get("queue"), States: quarantine.ReplayStates}
	f := quarantine.ReplayFilter{Queue: c.Queue, After: q.Get("cursor"), Limit: pageSize}
	if len(s.token.Owners) > 0 {
		f.Owners = slices.Clone(s.token.Owners)
	}
	if c.State != "" {
		f.State = []quarantine.ReplayState{quarantine.ReplayState(c.State)}
	}
	p := page{Title: "Replays", Token: s.token, CSRF: s.csrf, Content: c}
	if err := f.Validate(); err != nil {
		p.Error = quarantine.ErrorMessage(err)
		h.render(w, r, http.StatusBadRequest, "replays", p)
		return
	}
	batches, next, err := h.cfg.Store.ListReplays(r.Context(), f)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	now := h.cfg.Now()
	for _, b := range batches {
		_, eta := rules.ReplayProgress(b, now)
		// The achieved rate as the replay's page shows it: pauses and the
		// canary's observation excluded (read from its state changes).
		rate, err := rules.ReplayRate(r.Context(), h.cfg.Store, b, now)
		if err != nil {
			h.fail(w, r, s, err)
			return
		}
		c.Replays = append(c.Replays, replayRow{B: b, Done: b.Done(), Rate: showRate(rate), ETA: showSeconds(eta)})
	}
	if next != "" {
		nq := url.Values{}
		for k, v := range map[string]string{"state": c.State, "queue": c.Queue} {
			if v != "" {
				nq.Set(k, v)
			}
		}
		nq.Set("cursor", next)
		c.Next = "/replays?" + nq.Encode()
	}
	h.render(w, r, http.StatusOK, "replays", p)
}

// loadReplay returns the route's batch when the token may see it, and
// answers "not found" otherwise (a POST on a batch it may not see is
// audited, as on the API).
func (h *Handler) loadReplay(w http.ResponseWriter, r *http.Request, s *session) (*quarantine.ReplayBatch, bool) {
	id := r.PathValue("id")
	if !quarantine.ValidID(id) {
		h.notFound(w, r)
		return nil, false
	}
	b, err := h.cfg.Store.GetReplay(r.Context(), id)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		h.notFound(w, r)
	case err != nil:
		h.fail(w, r, s, err)
	case !rules.SeesReplay(s.token, b):
		if r.Method != http.MethodPost || h.auditDenied(w, r, s, id, "the replay is outside the token's owners") {
			h.notFound(w, r)
		}
	default:
		return b, true
	}
	return nil, false
}

type outcomeCount struct {
	Outcome quarantine.ItemOutcome
	N       int
}

type replayContent struct {
	B         *quarantine.ReplayBatch
	Counts    []outcomeCount
	Done      int
	Rate, ETA string // achieved rate and ETA as shown ("" when there is none)
	Estimate  string // a draft's estimated duration
	PinETA    string // while pinning, the rest of the pin as shown
	Actions   []string
	Items     []quarantine.ReplayItem
	Messages  map[string]*quarantine.Message // of Items, by id (those the token sees)
	Next      string
	First     bool // the first page of items
	// Action and Reason are the action form that failed, shown again.
	Action, Reason string
	// Undeliverable is what Start would not publish (drafts only).
	Undeliverable *quarantine.Undeliverable
}

// Terminal reports whether the batch can change no more.
func (c *replayContent) Terminal() bool { return c.B.State.Terminal() }

// showReplay is GET /replays/{id}: a batch's state and counts, its
// achieved rate and ETA, the canary's verdict, the actions the token may
// take, and a page of its items (a draft's first page is the preview of
// exactly what Start replays).
func (h *Handler) showReplay(w http.ResponseWriter, r *http.Request, s *session) {
	b, ok := h.loadReplay(w, r, s)
	if !ok {
		return
	}
	c, err := h.replayContent(r, s, b)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	h.render(w, r, http.StatusOK, "replay", page{Title: "Replay " + b.ID, Token: s.token, CSRF: s.csrf, Content: c})
}

func (h *Handler) replayContent(r *http.Request, s *session, b *quarantine.ReplayBatch) (*replayContent, error) {
	est := rules.EstimateSeconds(b)
	c := &replayContent{B: b, Done: b.Done(), Estimate: showSeconds(&est)}
	for _, o := range quarantine.ItemOutcomes {
		c.Counts = append(c.Counts, outcomeCount{o, b.Counts[o]})
	}
	_, eta := rules.ReplayProgress(b, h.cfg.Now())
	rate, err := rules.ReplayRate(r.Context(), h.cfg.Store, b, h.cfg.Now())
	if err != nil {
		return nil, err
	}
	c.Rate, c.ETA = showRate(rate), showSeconds(eta)
	c.PinETA = showSeconds(pinETA(b, h.cfg.Now()))
	if b.State == quarantine.ReplayDraft {
		u, err := rules.Undeliverable(r.Context(), h.cfg.Store, h.cfg.Replay.Route, b)
		if err != nil {
			return nil, err
		}
		c.Undeliverable = &u
	}
	if canOperate(s.token) && rules.ActsOnReplay(s.token, b) {
		publishes := h.cfg.Replay.DestinationAllowed(s.token, b.Destination) == nil
		for _, a := range replayActions {
			if (a == quarantine.ReplayActStart || a == quarantine.ReplayActResume) && !publishes {
				continue
			}
			if _, _, err := quarantine.ReplayTransition(b.State, a); err == nil {
				c.Actions = append(c.Actions, a)
			}
		}
	}
	f := quarantine.ReplayItemFilter{BatchID: b.ID, After: -1, Limit: replayItemsPage}
	if cur := r.URL.Query().Get("after"); cur != "" {
		n, err := strconv.Atoi(cur)
		if err != nil || n < 0 {
			return nil, quarantine.Errorf(quarantine.EINVALID, "The page of items is not one this server links to.")
		}
		f.After = n
	}
	c.First = f.After < 0
	if err := f.Validate(); err != nil {
		return nil, err
	}
	items, more, err := h.cfg.Store.ListReplayItems(r.Context(), f)
	if err != nil {
		return nil, err
	}
	c.Items = items
	// The job and reason of each message: what the preview pins, and
	// what each outcome is about.
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.MessageID
	}
	ms, err := h.messagesByID(r.Context(), ids)
	if err != nil {
		return nil, err
	}
	c.Messages = make(map[string]*quarantine.Message, len(ms))
	for id, m := range ms {
		if s.token.Sees(m.Owner) {
			c.Messages[id] = m
		}
	}
	if more && len(items) > 0 {
		c.Next = fmt.Sprintf("/replays/%s?after=%d", b.ID, items[len(items)-1].Seq)
	}
	return c, nil
}

// replayProgressJSON is the answer of GET /replays/{id}/progress, which
// the replay page's script polls.
type replayProgressJSON struct {
	State         quarantine.ReplayState         `json:"state"`
	StateReason   string                         `json:"state_reason"`
	Terminal      bool                           `json:"terminal"`
	Total         int                            `json:"total"`
	Done          int                            `json:"done"`
	Counts        map[quarantine.ItemOutcome]int `json:"counts"`
	AchievedRate  *float64                       `json:"achieved_rate"`
	ETASeconds    *float64                       `json:"eta_seconds"`
	CanaryVerdict string                         `json:"canary_verdict"`
	// PinTotal and PinETASeconds follow a pin: total of pin_total written.
	PinTotal      int      `json:"pin_total"`
	PinETASeconds *float64 `json:"pin_eta_seconds"`
}

// pinETA is the rest of b's pin in seconds while it is pinning, else nil.
func pinETA(b *quarantine.ReplayBatch, now time.Time) *float64 {
	left, ok := b.PinETA(now)
	if !ok {
		return nil
	}
	v := left.Seconds()
	return &v
}

// replayProgress is GET /replays/{id}/progress: the batch's state and
// counts as JSON, for the page's live progress.
func (h *Handler) replayProgress(w http.ResponseWriter, r *http.Request, s *session) {
	b, ok := h.loadReplay(w, r, s)
	if !ok {
		return
	}
	p := replayProgressJSON{State: b.State, StateReason: b.StateReason, Terminal: b.State.Terminal(), Total: b.Total,
		Done: b.Done(), Counts: map[quarantine.ItemOutcome]int{}, CanaryVerdict: b.CanaryVerdict,
		PinTotal: b.PinTotal, PinETASeconds: pinETA(b, h.cfg.Now())}
	for _, o := range quarantine.ItemOutcomes {
		p.Counts[o] = b.Counts[o]
	}
	_, p.ETASeconds = rules.ReplayProgress(b, h.cfg.Now())
	var err error
	if p.AchievedRate, err = rules.ReplayRate(r.Context(), h.cfg.Store, b, h.cfg.Now()); err != nil {
		h.fail(w, r, s, err)
		return
	}
	body, err := json.Marshal(p)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// replayReport is GET /replays/{id}/report: the batch's JSON Lines
// report, as the API's GET /api/v1/replays/{id}/report writes it.
func (h *Handler) replayReport(w http.ResponseWriter, r *http.Request, s *session) {
	b, ok := h.loadReplay(w, r, s)
	if !ok {
		return
	}
	started, err := rules.WriteReplayReport(r.Context(), w, h.cfg.Store, b, h.cfg.Now())
	switch {
	case err == nil:
	case !started:
		h.fail(w, r, s, err)
	default:
		h.log.Error("replay report cut short", "replay", b.ID, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// changeReplay is POST /replays/{id}/{action}: start, pause, resume or
// cancel with a reason, as the API's POST /api/v1/replays/{id}/{action}
// (an operator whose owners cover every owner of the batch's messages,
// and for start and resume its destination queue; refusals audited),
// then a redirect to the batch.
func (h *Handler) changeReplay(w http.ResponseWriter, r *http.Request, s *session) {
	action := r.PathValue("action")
	if !slices.Contains(replayActions, action) {
		h.notFound(w, r)
		return
	}
	b, ok := h.loadReplay(w, r, s)
	if !ok {
		return
	}
	if !canOperate(s.token) || !rules.ActsOnReplay(s.token, b) {
		if h.auditDenied(w, r, s, b.ID, "ui: this token may not "+action+" this replay") {
			h.forbidden(w, r, s, "Your token may not "+action+" this replay: it needs the operator role and every owner of its messages.")
		}
		return
	}
	if action == quarantine.ReplayActStart || action == quarantine.ReplayActResume {
		// Starting or resuming publishes: this token must be allowed the
		// destination, whoever created the batch.
		if err := h.cfg.Replay.DestinationAllowed(s.token, b.Destination); err != nil {
			if h.auditDestination(w, r, s, b.ID, b.Destination) {
				h.forbidden(w, r, s, "Your token may not "+action+" this replay: "+quarantine.ErrorMessage(err)+".")
			}
			return
		}
	}
	c := quarantine.ReplayChange{BatchID: b.ID, Action: action, Actor: s.token.Actor(), Reason: r.PostFormValue("reason")}
	if action == quarantine.ReplayActStart && strings.TrimSpace(c.Reason) == "" {
		// The reason is asked once, on the replay form: Start records it.
		c.Reason = b.Reason
	}
	if action == quarantine.ReplayActStart {
		c.Force, c.AcceptKeyRuleChange = r.PostFormValue("force") != "", r.PostFormValue("accept_key_rule_change") != ""
		c.Guard = h.cfg.Replay.Guard()
	}
	err := c.Validate()
	if err == nil {
		_, err = h.cfg.Store.ChangeReplay(r.Context(), c)
	}
	switch code := quarantine.ErrorCode(err); {
	case err == nil:
		http.Redirect(w, r, "/replays/"+b.ID, http.StatusSeeOther)
		return
	case code == quarantine.EINVALID || code == quarantine.EUNPROCESSABLE || code == quarantine.ECONFLICT:
		b, gerr := h.cfg.Store.GetReplay(r.Context(), b.ID) // the state may have moved on
		if gerr != nil {
			h.fail(w, r, s, gerr)
			return
		}
		rc, cerr := h.replayContent(r, s, b)
		if cerr != nil {
			h.fail(w, r, s, cerr)
			return
		}
		rc.Action, rc.Reason = action, c.Reason
		h.render(w, r, rules.ErrorStatus(code), "replay", page{Title: "Replay " + b.ID, Token: s.token, CSRF: s.csrf,
			Error: "Not done: " + quarantine.ErrorMessage(err), Content: rc})
	default:
		h.fail(w, r, s, err)
	}
}

// showRate shows an achieved rate, "" for none.
func showRate(r *float64) string {
	if r == nil {
		return ""
	}
	return strconv.FormatFloat(*r, 'f', 1, 64) + " msg/s"
}

// showSeconds shows a duration in seconds, like "1 min 30 s"; "" for none.
func showSeconds(v *float64) string {
	if v == nil {
		return ""
	}
	d := time.Duration(*v * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d/time.Minute), int(d%time.Minute/time.Second))
	default:
		return fmt.Sprintf("%d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
}
