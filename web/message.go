package web

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redact"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

type header struct{ Name, Value string }

// messageContent is the message page.
type messageContent struct {
	M           *quarantine.Message
	Headers     []header
	Payload     string
	PayloadKind string // "json", "text" or "hex"
	Masked      bool   // values at the redaction pointers are masked
	Timeline    []event
	// The actions the token may take on this message (none for viewers).
	CanDiscard, CanEdit, CanReplay bool
	Reason                         string // the discard form's reason, after a refusal
	Curl                           string
}

// event is one entry of a message's timeline.
type event struct {
	At     time.Time
	Kind   string // collected, refail_of, edit, replay, discard
	Title  string
	Actor  string
	Reason string
	// An edit's payload hashes.
	OldSHA, NewSHA string
	Version        int
	// A replay's batch, outcome and re-failure.
	Batch       string
	BatchState  string
	Outcome     string
	Destination string
	Detail      string // why an item was skipped or failed
	Link        string // a message this event links to (re-failure)
	// The discard operation whose chunk discarded the message.
	Operation string
}

// maxHexBytes bounds the bytes shown as a hex dump.
const maxHexBytes = 64 << 10

// maxTimelineReplays bounds the replays a timeline shows (the latest).
const maxTimelineReplays = 20

// loadVisible returns the route's message, or answers 404 when it does
// not exist or the token may not see it (audited on a POST, as the API
// audits write attempts on another team's messages).
func (h *Handler) loadVisible(w http.ResponseWriter, r *http.Request, s *session) (*quarantine.Message, bool) {
	id := r.PathValue("id")
	if !quarantine.ValidID(id) {
		h.notFound(w, r)
		return nil, false
	}
	m, err := h.cfg.Store.GetMessage(r.Context(), id)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		h.notFound(w, r)
	case err != nil:
		h.fail(w, r, s, err)
	case !s.token.Sees(m.Owner):
		if r.Method == http.MethodPost && !h.auditDenied(w, r, s, id, "the message is outside the token's owners") {
			return nil, false
		}
		h.notFound(w, r)
	default:
		return m, true
	}
	return nil, false
}

// showMessage is GET /messages/{id}; a message the token may not see is
// "not found", like one that does not exist.
func (h *Handler) showMessage(w http.ResponseWriter, r *http.Request, s *session) {
	m, ok := h.loadVisible(w, r, s)
	if !ok {
		return
	}
	c, err := h.messagePage(r, s, m)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	p := page{Title: "Message " + m.ID, Token: s.token, CSRF: s.csrf, Content: c}
	if v := r.URL.Query().Get("saved"); v != "" && v == strconv.Itoa(m.PayloadVersion) {
		// The editor's redirect after a save (the version it saved is
		// still the current one).
		p.Flash = "Saved: the payload is now version " + v + ", recorded in the timeline below with your reason."
	}
	h.render(w, r, http.StatusOK, "message", p)
}

// messagePage builds the page of m for the session's token.
func (h *Handler) messagePage(r *http.Request, s *session, m *quarantine.Message) (*messageContent, error) {
	c := &messageContent{M: m, Curl: curlGet(r, "/api/v1/messages/"+m.ID, nil)}
	for k, v := range m.Headers {
		// Headers named by redact.headers were masked at ingest, for
		// every role (the stored value is "<redacted>").
		c.Headers = append(c.Headers, header{k, v})
	}
	sort.Slice(c.Headers, func(i, j int) bool { return c.Headers[i].Name < c.Headers[j].Name })
	shown, masked := redact.For(s.token, h.cfg.RedactPointers, m.Payload)
	c.Masked = masked
	c.PayloadKind, c.Payload = showPayload(shown)
	if canOperate(s.token) {
		c.CanDiscard = m.Status.CanBecome(quarantine.StatusDiscarded)
		c.CanEdit = m.Status.Editable() == nil
		c.CanReplay = m.Status == quarantine.StatusQuarantined // a replay skips the others
	}
	tl, err := h.timeline(r.Context(), m)
	c.Timeline = tl
	return c, err
}

// timeline is what happened to m, oldest first: collected (and what it
// re-failed from), each edit with its old and new SHA-256, actor and
// reason, each replay with its outcome (and the entry it re-failed as),
// each discard.
func (h *Handler) timeline(ctx context.Context, m *quarantine.Message) ([]event, error) {
	from := "Collected from " + m.Source
	if m.SourceKind != "" {
		from += " (" + string(m.SourceKind) + ")"
	}
	evs := []event{{At: m.CollectedAt, Kind: "collected", Title: from, Reason: m.Reason, Outcome: string(m.FailureClass)}}
	if m.RefailOf != "" {
		evs = append(evs, event{At: m.CollectedAt, Kind: "refail_of", Title: "Re-failure of an earlier replayed entry", Link: m.RefailOf})
	}
	vs, err := h.cfg.Store.PayloadVersions(ctx, m.ID)
	if err != nil && quarantine.ErrorCode(err) != quarantine.ENOTFOUND {
		return evs, err
	}
	for _, v := range vs {
		if v.Version == 1 {
			continue
		}
		evs = append(evs, event{At: v.CreatedAt, Kind: "edit", Title: "Payload edited", Actor: v.Actor, Reason: v.Reason,
			OldSHA: v.PrevSHA256, NewSHA: v.SHA256, Version: v.Version})
	}
	items, err := h.cfg.Store.MessageReplayItems(ctx, m.ID, maxTimelineReplays)
	if err != nil {
		return evs, err
	}
	batches := map[string]*quarantine.ReplayBatch{}
	for _, it := range items {
		b, ok := batches[it.BatchID]
		if !ok {
			b, err = h.cfg.Store.GetReplay(ctx, it.BatchID)
			if err != nil {
				return evs, err
			}
			batches[it.BatchID] = b
		}
		at := it.UpdatedAt
		if it.PublishedAt != nil {
			at = *it.PublishedAt
		}
		evs = append(evs, event{At: at, Kind: "replay", Title: "Replay", Actor: b.Actor, Reason: b.Reason,
			Batch: b.ID, BatchState: string(b.State), Outcome: string(it.Outcome), Destination: it.Destination,
			Link: it.RefailID, Version: it.PayloadVersion, NewSHA: it.PayloadSHA256, Detail: it.Reason})
	}
	audit, err := h.cfg.Store.ListAudit(ctx, quarantine.AuditFilter{Subject: m.ID, Action: quarantine.ActionDiscard, Limit: 20})
	if err != nil {
		return evs, err
	}
	for _, a := range audit {
		var d struct {
			Reason string `json:"reason"`
		}
		_ = json.Unmarshal(a.Details, &d)
		ev := event{At: a.Time, Kind: "discard", Title: "Discarded", Actor: a.Actor, Reason: d.Reason}
		if c, ok := quarantine.ParseDiscardChunk(a); ok {
			ev.Operation = c.Operation
		}
		evs = append(evs, ev)
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At.Before(evs[j].At) })
	return evs, nil
}

// showPayload is how a payload is shown: indented JSON, text, or a hex
// dump.
func showPayload(b []byte) (kind, text string) {
	if json.Valid(b) {
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "", "  "); err == nil {
			return "json", buf.String()
		}
	}
	if utf8.Valid(b) {
		return "text", string(b)
	}
	if len(b) > maxHexBytes {
		return "hex", hex.Dump(b[:maxHexBytes]) + "…\n"
	}
	return "hex", hex.Dump(b)
}

// discardOne is POST /messages/{id}/discard: the message discarded with
// the form's reason, through the rules the API uses too (rules.DiscardAs); a refusal
// (its status, a replay holding it) is 409 on the message page.
func (h *Handler) discardOne(w http.ResponseWriter, r *http.Request, s *session) {
	m, ok := h.loadVisible(w, r, s)
	if !ok {
		return
	}
	if !canOperate(s.token) {
		h.refuse(w, r, s, m.ID, "ui: discarding needs an operator", "Your token may not discard messages: it needs the operator role.")
		return
	}
	d := quarantine.Discard{IDs: []string{m.ID}, Reason: r.PostFormValue("reason")}
	err := d.Validate()
	if err == nil {
		var res quarantine.BulkResult
		res, err = rules.DiscardAs(r.Context(), h.cfg.Store, s.token, d, r.Method, r.URL.Path)
		if err == nil && !slices.Contains(res.Changed, m.ID) {
			why := "its status does not allow it"
			if len(res.Skipped) > 0 {
				why = res.Skipped[0].Reason
			}
			err = quarantine.Errorf(quarantine.ECONFLICT, "The message was not discarded: %s.", why)
		}
	}
	if err == nil {
		http.Redirect(w, r, "/messages/"+url.PathEscape(m.ID), http.StatusSeeOther)
		return
	}
	status := statusOf(err)
	if status >= http.StatusInternalServerError {
		h.fail(w, r, s, err)
		return
	}
	if m, err2 := h.cfg.Store.GetMessage(r.Context(), m.ID); err2 == nil {
		c, err2 := h.messagePage(r, s, m)
		if err2 == nil {
			c.Reason = d.Reason
			h.render(w, r, status, "message", page{Title: "Message " + m.ID, Token: s.token, CSRF: s.csrf,
				Error: quarantine.ErrorMessage(err), Content: c})
			return
		}
	}
	h.fail(w, r, s, err)
}
