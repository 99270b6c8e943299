package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// auditRoutes registers the audit log and its chain verification.
func (h *Handler) auditRoutes(m *http.ServeMux) {
	a := &auditView{h: h}
	m.HandleFunc("GET /audit", h.authed(a.list))
}

// auditView serves the audit log; it keeps the last verification of the
// chain, so that the walk over the whole log runs again only when the
// log has grown since.
type auditView struct {
	h  *Handler
	mu sync.Mutex
	// last is the last verification, nil before the first.
	last *chainStatus
}

// chainStatus is a verification as the page shows it.
type chainStatus struct {
	quarantine.AuditVerification
	At   time.Time     // when it ran
	Took time.Duration // how long the walk took
	// of is the head the store kept when it ran.
	of quarantine.AuditHead
}

// auditFilterForm is the filter as the form shows it.
type auditFilterForm struct {
	Action, Actor, Subject, After, Before string
}

type auditContent struct {
	Filter  auditFilterForm
	Actions []string
	Events  []auditRow
	Next    string // URL of the next page, "" on the last
	Newest  string // URL of the newest page, "" when filtered or on it
	Chain   *chainStatus
}

type auditRow struct {
	quarantine.AuditEvent
	SubjectURL string // the message's page, when the subject is one
	Details    string
}

// auditActions are the actions the form proposes (the filter takes any).
var auditActions = []string{quarantine.ActionEdit, quarantine.ActionDiscard, quarantine.ActionDiscardRefused,
	quarantine.ActionDiscardResume, "replay.create", "replay.start", "replay.pause", "replay.resume", "replay.cancel", "replay.halt", "replay.complete",
	quarantine.ActionPurge, quarantine.ActionTokenCreate, quarantine.ActionTokenRevoke, quarantine.ActionAccessDenied}

// mayReadAudit is the API's rule for the audit routes: any role, but a
// token scoped to owners only when it is an admin's (the log names every
// owner's messages).
func mayReadAudit(t *quarantine.Token) bool {
	return t.Role.AtLeast(quarantine.RoleViewer) && (len(t.Owners) == 0 || t.Role == quarantine.RoleAdmin)
}

// list is GET /audit: one page of events matching the filters (as GET
// /api/v1/audit takes them), oldest first, and the chain's status.
func (a *auditView) list(w http.ResponseWriter, r *http.Request, s *session) {
	h := a.h
	if !mayReadAudit(s.token) {
		h.forbidden(w, r, s, "The audit log is for admins and for tokens without owners.")
		return
	}
	q := r.URL.Query()
	ff := auditFilterForm{Action: q.Get("action"), Actor: q.Get("actor"), Subject: q.Get("subject"),
		After: q.Get("after"), Before: q.Get("before")}
	c := auditContent{Filter: ff, Actions: auditActions}
	p := page{Title: "Audit", Token: s.token, CSRF: s.csrf, Content: &c}
	f, err := auditFilterOf(q, ff)
	if err != nil {
		p.Error = quarantine.ErrorMessage(err)
		h.render(w, r, http.StatusBadRequest, "audit", p)
		return
	}
	ctx := r.Context()
	events, err := h.cfg.Store.ListAudit(ctx, f)
	if err == nil {
		c.Chain, err = a.verify(ctx)
	}
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	for _, e := range events {
		row := auditRow{AuditEvent: e, Details: indentJSON(shortLists(e.Details))}
		if row.Details == "{}" || row.Details == "null" {
			row.Details = ""
		}
		_, chunk := quarantine.ParseDiscardChunk(e)
		if quarantine.ValidID(e.Subject) {
			switch {
			case chunk || e.Action == quarantine.ActionDiscardResume:
				row.SubjectURL = "/discards/" + e.Subject
			case strings.HasPrefix(e.Action, "replay."):
				row.SubjectURL = "/replays/" + e.Subject
			case !strings.HasPrefix(e.Action, "token."): // a token's id has no page
				row.SubjectURL = "/messages/" + e.Subject
			}
		}
		c.Events = append(c.Events, row)
	}
	keep := url.Values{}
	for k, v := range map[string]string{"action": ff.Action, "actor": ff.Actor, "subject": ff.Subject, "after": ff.After, "before": ff.Before} {
		if v != "" {
			keep.Set(k, v)
		}
	}
	if len(events) == f.Limit {
		next := url.Values{}
		for k, v := range keep {
			next[k] = v
		}
		next.Set("cursor", strconv.FormatInt(events[len(events)-1].Seq, 10))
		c.Next = "/audit?" + next.Encode()
	}
	if len(keep) == 0 {
		// Unfiltered, the newest page starts pageSize events before the
		// head.
		if from := c.Chain.of.Seq - pageSize; from > 0 && from != f.Seq {
			c.Newest = "/audit?cursor=" + strconv.FormatInt(from, 10)
		}
	}
	h.render(w, r, http.StatusOK, "audit", p)
}

// auditFilterOf reads the filter from the query, as the API does: times
// are RFC 3339, or the form's datetime-local (taken as UTC).
func auditFilterOf(q url.Values, ff auditFilterForm) (quarantine.AuditFilter, error) {
	f := quarantine.AuditFilter{Subject: ff.Subject, Actor: ff.Actor, Action: ff.Action, Limit: pageSize}
	var err error
	if f.After, err = formTime("after", ff.After); err != nil {
		return f, err
	}
	if f.Before, err = formTime("before", ff.Before); err != nil {
		return f, err
	}
	if !f.After.IsZero() && !f.Before.IsZero() && !f.After.Before(f.Before) {
		return f, quarantine.FieldErrorf(quarantine.EINVALID, "after", "From must be before To.")
	}
	if c := q.Get("cursor"); c != "" {
		if f.Seq, err = strconv.ParseInt(c, 10, 64); err != nil || f.Seq < 0 {
			return f, quarantine.FieldErrorf(quarantine.EINVALID, "cursor", "The page cursor is not valid.")
		}
	}
	return f, f.Validate()
}

// formTime parses an RFC 3339 time or a datetime-local value (UTC).
func formTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, quarantine.FieldErrorf(quarantine.EINVALID, field, "%q is not a time (YYYY-MM-DDTHH:MM, UTC).", truncate(40, v))
}

// verify returns the chain's status at its current head: the last
// verification when the head has not moved since, otherwise a new walk
// (that must pass through the head verified before).
func (a *auditView) verify(ctx context.Context) (*chainStatus, error) {
	head, err := a.h.cfg.Store.AuditHead(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last != nil && a.last.of == head {
		return a.last, nil
	}
	var expect []quarantine.AuditHead
	if a.last != nil && a.last.OK {
		expect = append(expect, a.last.Head)
	}
	start := time.Now()
	res, err := a.h.cfg.Store.VerifyAudit(ctx, expect...)
	if err != nil {
		return nil, err
	}
	a.last = &chainStatus{AuditVerification: res, At: a.h.cfg.Now(), Took: time.Since(start).Round(time.Millisecond), of: head}
	return a.last, nil
}

// listShown is how many entries of a long list the audit page shows.
const listShown = 5

// shortLists returns details with every list longer than listShown cut
// to its first listShown entries and a last one saying how many more
// there are (a chunk's discard event names up to thousands of
// messages: GET /api/v1/audit has them all); details as they are when
// nothing is cut or they are not JSON.
func shortLists(details []byte) []byte {
	var v any
	if json.Unmarshal(details, &v) != nil {
		return details
	}
	cut := false
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			if len(x) > listShown+1 {
				cut = true
				x = append(x[:listShown:listShown], fmt.Sprintf("… %d more (the API lists them all)", len(x)-listShown))
			}
			for i, e := range x {
				x[i] = walk(e)
			}
			return x
		}
		return v
	}
	v = walk(v)
	if !cut {
		return details
	}
	b, err := json.Marshal(v)
	if err != nil {
		return details
	}
	return b
}

// indentJSON is raw JSON indented for its scrollable cell (as it is when
// it is not JSON).
func indentJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}
