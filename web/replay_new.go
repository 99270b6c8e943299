package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/store"
)

// param is one name and value of a form or query.
type param struct{ Name, Value string }

// replaySelection is the messages a replay form selects: ids, or a filter.
type replaySelection struct {
	IDs     []string // the ids given, repeats dropped
	Foreign []string // ids the token may not see (or that do not exist)
	Filter  *quarantine.Filter
	Params  []param // what selects them, as hidden fields or a query
	Count   int     // the messages it selects now, within the token's owners
	// Pinned is the count the page that led here showed (nil: none); the
	// form pins it, so that a selection that changed since is refused.
	Pinned *int
}

// Expect is the count the form pins: Pinned, else Count.
func (s *replaySelection) Expect() int {
	if s.Pinned != nil {
		return *s.Pinned
	}
	return s.Count
}

// Changed reports whether the selection no longer has the count the page
// that led here showed.
func (s *replaySelection) Changed() bool { return s.Pinned != nil && *s.Pinned != s.Count }

// ByIDs reports whether the selection names ids.
func (s *replaySelection) ByIDs() bool { return s.Filter == nil }

// Query is the selection as a query string (without "?").
func (s *replaySelection) Query() string {
	v := url.Values{}
	for _, p := range s.Params {
		v.Add(p.Name, p.Value)
	}
	return v.Encode()
}

// replaySelectionOf reads the selection of v (the query of GET
// /replays/new, or the posted form): ids, or the messages page's filter
// (h.parseFilter: the same names and meaning; none at all selects every
// message), and counts it within t's owners. An expect_count in v (the
// count the messages page showed) is kept as Pinned.
func (h *Handler) replaySelectionOf(r *http.Request, t *quarantine.Token, v url.Values) (*replaySelection, error) {
	sel := &replaySelection{}
	if e := v.Get("expect_count"); e != "" {
		n, err := strconv.Atoi(e)
		if err != nil || n < 0 {
			return nil, quarantine.Errorf(quarantine.EINVALID, "expect_count must be a count of messages.")
		}
		sel.Pinned = &n
	}
	fv, f, err := h.parseFilter(t, v)
	if err != nil {
		return nil, quarantine.Errorf(quarantine.EINVALID, "%s", quarantine.ErrorMessage(err))
	}
	if ids := nonEmpty(v["ids"]); len(ids) > 0 {
		if !fv.Empty {
			return nil, quarantine.Errorf(quarantine.EINVALID, "Give message ids or a filter, not both.")
		}
		ids, err := rules.CleanIDs(ids)
		if err != nil {
			return nil, quarantine.Errorf(quarantine.EINVALID, "%s", quarantine.ErrorMessage(err))
		}
		sel.IDs = ids
		ms, err := h.messagesByID(r.Context(), ids)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			sel.Params = append(sel.Params, param{"ids", id})
			if m, ok := ms[id]; ok && t.Sees(m.Owner) {
				sel.Count++
			} else {
				sel.Foreign = append(sel.Foreign, id)
			}
		}
		return sel, nil
	}
	for _, hd := range fv.Hidden {
		sel.Params = append(sel.Params, param{hd.Name, hd.Value})
	}
	sel.Filter = &f
	counted := f
	if rules.Scope(t, &counted) {
		counts, err := h.cfg.Store.CountByQueue(r.Context(), counted)
		if err != nil {
			return nil, err
		}
		for _, c := range counts {
			sel.Count += int(c.Count)
		}
	}
	return sel, nil
}

func nonEmpty(vs []string) []string {
	var out []string
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// replayForm is the replay form's values, as text.
type replayForm struct {
	DestQueue, DestCollector, Rate, Burst, Canary, Observe, HaltRatio, Reason, StartAt string
	ForceWithoutKey, Force, AcceptKeyRuleChange                                        bool
}

type replayNewContent struct {
	Sel        *replaySelection
	Form       replayForm
	Errors     map[string]string // form field -> message
	Collectors []string
	MaxRate    float64
	// ConfirmAbove is bulk.confirm_above: a larger selection needs its
	// count typed (NeedsConfirm).
	ConfirmAbove int
}

// NeedsConfirm reports whether the form asks the operator to type the
// count of the selection: more than bulk.confirm_above messages.
func (c *replayNewContent) NeedsConfirm() bool {
	return c.ConfirmAbove > 0 && c.Sel.Expect() > c.ConfirmAbove
}

// replayNew is GET /replays/new: the replay form for the selection in the
// query, with the configured defaults.
func (h *Handler) replayNew(w http.ResponseWriter, r *http.Request, s *session) {
	if !canOperate(s.token) {
		if h.auditDenied(w, r, s, "/replays/new", "ui: replaying needs an operator") {
			h.forbidden(w, r, s, "Your token may not replay: it needs the operator role.")
		}
		return
	}
	sel, err := h.replaySelectionOf(r, s.token, r.URL.Query())
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	d := h.cfg.Replay
	c := &replayNewContent{Sel: sel, Collectors: d.Collectors, MaxRate: d.MaxRate, ConfirmAbove: d.ConfirmAbove, Form: replayForm{
		Rate: strconv.FormatFloat(d.Rate, 'f', -1, 64), Canary: strconv.Itoa(d.Canary), Observe: d.Observe.String(),
		HaltRatio: strconv.FormatFloat(d.HaltRefailRatio, 'f', -1, 64)}}
	if d.Burst > 0 {
		c.Form.Burst = strconv.Itoa(d.Burst)
	}
	h.render(w, r, http.StatusOK, "replay_new", page{Title: "New replay", Token: s.token, CSRF: s.csrf, Content: c})
}

// createReplay is POST /replays: a dry run of the form's replay, built
// and checked as the API builds it (rules.ReplayDefaults.Request) with the
// count the form showed pinned (expect_count; typed by the operator above
// bulk.confirm_above), then a redirect to the
// draft, which shows the exact messages and the Start button. Ids the
// token may not see are recorded as access.denied, as on the API.
func (h *Handler) createReplay(w http.ResponseWriter, r *http.Request, s *session) {
	if !canOperate(s.token) {
		if h.auditDenied(w, r, s, "/replays", "ui: replaying needs an operator") {
			h.forbidden(w, r, s, "Your token may not replay: it needs the operator role.")
		}
		return
	}
	sel, err := h.replaySelectionOf(r, s.token, r.PostForm)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	f := r.PostForm
	c := &replayNewContent{Sel: sel, Collectors: h.cfg.Replay.Collectors, MaxRate: h.cfg.Replay.MaxRate,
		ConfirmAbove: h.cfg.Replay.ConfirmAbove, Errors: map[string]string{},
		Form: replayForm{DestQueue: f.Get("dest_queue"), DestCollector: f.Get("dest_collector"), Rate: f.Get("rate"),
			Burst: f.Get("burst"), Canary: f.Get("canary"), Observe: f.Get("observe"), HaltRatio: f.Get("halt_refail_ratio"),
			Reason: f.Get("reason"), StartAt: f.Get("start_at"), ForceWithoutKey: f.Get("force_without_key") != "", Force: f.Get("force") != "",
			AcceptKeyRuleChange: f.Get("accept_key_rule_change") != ""}}
	in := rules.ReplayInput{IDs: sel.IDs, Filter: sel.Filter, Reason: c.Form.Reason, DryRun: true,
		Destination:     quarantine.ReplayDestination{Queue: c.Form.DestQueue, Collector: c.Form.DestCollector},
		ForceWithoutKey: c.Form.ForceWithoutKey, Force: c.Form.Force, AcceptKeyRuleChange: c.Form.AcceptKeyRuleChange}
	expect, err := strconv.Atoi(f.Get("expect_count"))
	if err != nil || expect < 0 {
		h.fail(w, r, s, quarantine.Errorf(quarantine.EINVALID, "The form lacks the count it showed: open it again."))
		return
	}
	in.ExpectCount = &expect
	if c.NeedsConfirm() && strings.TrimSpace(f.Get("confirm_count")) != strconv.Itoa(expect) {
		c.Errors["confirm_count"] = fmt.Sprintf("Type %d, the number of messages shown, to confirm.", expect)
	}
	in.Rate = formFloat(c, "rate", c.Form.Rate)
	in.HaltRefailRatio = formFloat(c, "halt_refail_ratio", c.Form.HaltRatio)
	in.Burst = formInt(c, "burst", c.Form.Burst)
	in.Canary = formInt(c, "canary", c.Form.Canary)
	if o := strings.TrimSpace(c.Form.Observe); o != "" {
		d, err := time.ParseDuration(o)
		if err != nil {
			c.Errors["observe"] = fmt.Sprintf("A duration like 30s, 5m or 1h, not %q.", truncate(40, o))
		}
		in.Observe = &d
	}
	if at := strings.TrimSpace(c.Form.StartAt); at != "" {
		t, err := parseStartAt(at)
		if err != nil {
			c.Errors["start_at"] = fmt.Sprintf("A time like 2026-12-03T02:00:00Z or 2026-12-03T02:00 (UTC), not %q.", truncate(40, at))
		}
		in.StartAt, in.DryRun = &t, false // scheduled: pinned now, started then
	}
	if len(c.Errors) > 0 {
		h.replayFormAgain(w, r, s, c, http.StatusBadRequest, "Not created: correct the fields marked below.")
		return
	}
	req, err := h.cfg.Replay.Request(in, s.token)
	if quarantine.ErrorCode(err) == quarantine.EFORBIDDEN {
		// A destination queue outside the token's owners: recorded, and
		// the form again with the field marked; nothing is created.
		if !h.auditDestination(w, r, s, "/replays", req.Destination) {
			return
		}
		c.Errors["dest_queue"] = quarantine.ErrorMessage(err)
		h.replayFormAgain(w, r, s, c, http.StatusForbidden, "Not created: your token may not replay to this destination.")
		return
	}
	if err != nil {
		field := strings.ReplaceAll(strings.TrimPrefix(quarantine.ErrorField(err), "/"), "/", "_")
		field = strings.Replace(field, "destination_", "dest_", 1)
		switch field {
		case "reason", "rate", "burst", "canary", "observe", "halt_refail_ratio", "dest_queue", "dest_collector", "start_at":
			c.Errors[field] = quarantine.ErrorMessage(err)
			h.replayFormAgain(w, r, s, c, rules.ErrorStatus(quarantine.ErrorCode(err)), "Not created: correct the fields marked below.")
		default:
			h.replayFormAgain(w, r, s, c, rules.ErrorStatus(quarantine.ErrorCode(err)), quarantine.ErrorMessage(err))
		}
		return
	}
	if len(sel.Foreign) > 0 && len(s.token.Owners) > 0 {
		ev := quarantine.NewAuditEvent(s.token.Actor(), quarantine.ActionAccessDenied, "/replays", map[string]any{
			"method": r.Method, "path": r.URL.Path, "ids": sel.Foreign, "reason": "the messages are outside the token's owners"})
		if _, err := h.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
			h.fail(w, r, s, err)
			return
		}
	}
	// A large selection is pinned in the background: its page shows how far.
	b, _, err := store.PinAsync(r.Context(), h.cfg.Store, req, h.cfg.Replay.KeyRule)
	switch code := quarantine.ErrorCode(err); {
	case err == nil:
		http.Redirect(w, r, "/replays/"+b.ID, http.StatusSeeOther)
	case code == quarantine.ECONFLICT:
		sel.Pinned = nil // the form now pins the count it shows
		h.replayFormAgain(w, r, s, c, http.StatusConflict, fmt.Sprintf(
			"Not created: the selection matched %d messages when the form was shown and matches %d now. Check the count below and submit again.",
			expect, sel.Count))
	case quarantine.ErrorField(err) == "start_at":
		c.Errors["start_at"] = quarantine.ErrorMessage(err)
		h.replayFormAgain(w, r, s, c, rules.ErrorStatus(code), "Not created: correct the fields marked below.")
	case code == quarantine.EINVALID || code == quarantine.EUNPROCESSABLE:
		h.replayFormAgain(w, r, s, c, rules.ErrorStatus(code), quarantine.ErrorMessage(err))
	default:
		h.fail(w, r, s, err)
	}
}

// auditDestination appends the access.denied event of a destination
// refused to the session's token (rules.ReplayDefaults.DestinationDenied),
// and reports whether it was written (if not, it answered the store's
// error).
func (h *Handler) auditDestination(w http.ResponseWriter, r *http.Request, s *session, target string, dst quarantine.ReplayDestination) bool {
	d := h.cfg.Replay.DestinationDenied(dst)
	d["method"], d["path"] = r.Method, truncate(200, r.URL.Path)
	ev := quarantine.NewAuditEvent(s.token.Actor(), quarantine.ActionAccessDenied, target, d)
	if _, err := h.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
		h.fail(w, r, s, err)
		return false
	}
	return true
}

// replayFormAgain shows the replay form with the posted values and errors.
func (h *Handler) replayFormAgain(w http.ResponseWriter, r *http.Request, s *session, c *replayNewContent, status int, msg string) {
	h.render(w, r, status, "replay_new", page{Title: "New replay", Token: s.token, CSRF: s.csrf, Error: msg, Content: c})
}

// parseStartAt reads the form's start time: RFC 3339, or a
// datetime-local value (2026-12-03T02:00, seconds optional) taken as UTC.
func parseStartAt(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04:05", v); err == nil {
		return t, nil
	}
	return time.Parse("2006-01-02T15:04", v)
}

// formFloat parses an optional number of the form; a malformed one is
// an error of its field.
func formFloat(c *replayNewContent, field, v string) *float64 {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		c.Errors[field] = fmt.Sprintf("A number, not %q.", truncate(40, v))
		return nil
	}
	return &f
}

// formInt parses an optional whole number of the form.
func formInt(c *replayNewContent, field, v string) *int {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		c.Errors[field] = fmt.Sprintf("A whole number, not %q.", truncate(40, v))
		return nil
	}
	return &n
}
