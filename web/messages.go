package web

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/redact"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// messageRoutes registers the messages list, its bulk actions, the
// sample, the failure groups and the message page.
func (h *Handler) messageRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /messages", h.authed(h.listMessages))
	m.HandleFunc("GET /messages/sample", h.authed(h.sampleMessages))
	m.HandleFunc("GET /messages/bulk", h.authed(h.bulkForm))
	m.HandleFunc("POST /messages/discard", h.authed(h.bulkDiscard))
	m.HandleFunc("GET /discards/{id}", h.authed(h.discardProgress))
	m.HandleFunc("POST /discards/{id}/resume", h.authed(h.discardResume))
	m.HandleFunc("GET /messages/rekey", h.authed(h.rekeyForm))
	m.HandleFunc("POST /messages/rekey", h.authed(h.rekeyApply))
	m.HandleFunc("GET /messages/{id}", h.authed(h.showMessage))
	m.HandleFunc("POST /messages/{id}/discard", h.authed(h.discardOne))
	m.HandleFunc("GET /groups", h.authed(h.listGroups))
}

// pageSize is the number of rows of a messages page.
const pageSize = 50

// The filter bar's fields, as the API names its query parameters (see
// rules.FilterParams): list fields may repeat, the others are single.
var (
	listParams   = []string{"queue", "job_name", "owner", "source", "idempotency_key", "fingerprint"}
	choiceParams = []string{"status", "failure_class"}
	timeParams   = []string{"failed_after", "failed_before"}
)

// localTime is the format of an <input type="datetime-local"> (read as
// UTC), with or without seconds.
const localTime = "2006-01-02T15:04:05"

// option is one <option> or checkbox of the filter bar.
type option struct {
	Value    string
	Selected bool
}

// hidden is one hidden field carrying the filter into a form.
type hidden struct{ Name, Value string }

// filterView is the filter as the page shows it: the bar's inputs, the
// filter as query parameters (Values, Query) and as hidden fields.
type filterView struct {
	Action string // the page the filter bar submits to
	Values url.Values
	Query  string // Values encoded, "" for no filter
	List   string // the messages list of the filter
	Hidden []hidden
	// Lists holds the inputs of each list field: one per value given, and
	// one empty input when none is.
	Lists                     map[string][]string
	Statuses, Classes         []option
	Owners                    []option // a scoped token's owners ("owner where allowed"); nil: a free text field
	FailedAfter, FailedBefore string   // as the datetime-local inputs show them
	OlderThan, Q              string
	Empty                     bool // selects every message (the token's)
	// Active is the filter as the page summarises it (one entry per
	// parameter, its values joined); DefaultStatus: the status is the
	// list's default (every status but replayed), not one asked for.
	Active        []hidden
	ActiveCount   int
	DefaultStatus bool
	Open          bool // the "more filters" box starts open
}

// defaultStatuses are the statuses the messages list, the sample and the
// groups show when none is asked for: every one but replayed (a replayed
// message is done with; the API's list is the same with these statuses,
// and the page's curl says so).
func defaultStatuses() []string {
	var out []string
	for _, st := range quarantine.Statuses {
		if st != quarantine.StatusReplayed {
			out = append(out, string(st))
		}
	}
	return out
}

// parseListFilter is parseFilter for the messages list, the sample and
// the groups: without a status they show defaultStatuses, as an explicit
// filter (the bulk and replay links and the curl carry it).
func (h *Handler) parseListFilter(t *quarantine.Token, q url.Values) (filterView, quarantine.Filter, error) {
	defaulted := !slices.ContainsFunc(q["status"], func(s string) bool { return strings.TrimSpace(s) != "" })
	if defaulted {
		q = cloneValues(q)
		q["status"] = defaultStatuses()
	}
	fv, f, err := h.parseFilter(t, q)
	fv.DefaultStatus = defaulted
	return fv, f, err
}

// cloneValues is a deep copy of v.
func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// parseFilter reads the filter parameters of q as the API does
// (rules.FilterFromValues): empty values are dropped (a form's untouched
// input), a datetime-local time is UTC. Errors are EINVALID naming the
// parameter.
func (h *Handler) parseFilter(t *quarantine.Token, q url.Values) (filterView, quarantine.Filter, error) {
	v := url.Values{}
	for _, name := range rules.FilterParams() {
		for _, s := range q[name] {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			if slices.Contains(timeParams, name) {
				if lt, err := time.Parse(localTime, s); err == nil {
					s = lt.Format(time.RFC3339)
				} else if lt, err := time.Parse("2006-01-02T15:04", s); err == nil {
					s = lt.Format(time.RFC3339)
				}
			}
			v.Add(name, s)
		}
	}
	fv := filterView{Action: "/messages", Values: v, Query: v.Encode(), Lists: map[string][]string{}, OlderThan: v.Get("older_than"), Q: v.Get("q")}
	fv.List = "/messages"
	if fv.Query != "" {
		fv.List += "?" + fv.Query
	}
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, s := range v[k] {
			fv.Hidden = append(fv.Hidden, hidden{k, s})
		}
		fv.Active = append(fv.Active, hidden{k, strings.Join(v[k], ", ")})
		if k != "q" {
			fv.ActiveCount++
		}
	}
	for _, p := range listParams {
		fv.Lists[p] = v[p]
		if len(fv.Lists[p]) == 0 {
			fv.Lists[p] = []string{""}
		}
	}
	for _, st := range quarantine.Statuses {
		fv.Statuses = append(fv.Statuses, option{string(st), slices.Contains(v["status"], string(st))})
	}
	for _, c := range failureClasses {
		fv.Classes = append(fv.Classes, option{string(c), slices.Contains(v["failure_class"], string(c))})
	}
	if len(t.Owners) > 0 {
		for _, o := range t.Owners {
			fv.Owners = append(fv.Owners, option{o, slices.Contains(v["owner"], o)})
		}
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"failed_after", &fv.FailedAfter}, {"failed_before", &fv.FailedBefore}} {
		if s := v.Get(p.name); s != "" {
			if tt, err := time.Parse(time.RFC3339Nano, s); err == nil {
				*p.dst = tt.UTC().Format(localTime)
			} else {
				*p.dst = s
			}
		}
	}
	f, empty, err := rules.FilterFromValues(v, h.cfg.Now())
	fv.Empty = empty
	return fv, f, err
}

// with returns the filter's query with extra parameters set.
func (fv filterView) with(kv ...string) string {
	v := cloneValues(fv.Values)
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

var failureClasses = quarantine.FailureClasses

// scope limits f to the token's owners, like the API (a plain
// restriction: every owner of a scoped token). Pages with an owner field
// use rules.Scope, which intersects.
func scope(t *quarantine.Token, f *quarantine.Filter) {
	if len(t.Owners) > 0 {
		f.Owner = slices.Clone(t.Owners)
	}
}

// canSeeRedacted reports whether t sees payloads unmasked: operators and
// admins do, viewers do not (as on the API).
func canSeeRedacted(t *quarantine.Token) bool { return redact.Sees(t) }

// statusOf is the HTTP status of an error shown on a page (the one
// table, rules.ErrorStatus).
func statusOf(err error) int { return rules.ErrorStatus(quarantine.ErrorCode(err)) }

// refuse audits a refused request (access.denied, as the API records
// every refusal: auditDenied) and answers 403 with msg.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, s *session, target, reason, msg string) {
	if h.auditDenied(w, r, s, truncate(200, target), reason) {
		h.forbidden(w, r, s, msg)
	}
}

// errSearchRedacted refuses a viewer's text search while payload fields
// are redacted, as the API does: matching terms against masked values
// would reveal them one guess at a time.
var errSearchRedacted = quarantine.Errorf(quarantine.EFORBIDDEN,
	"Text search is not available to viewers while payload fields are redacted: it would reveal them.")

// searchRefused refuses (403, audited) a text search the token may not
// run, and reports whether it answered.
func (h *Handler) searchRefused(w http.ResponseWriter, r *http.Request, s *session, f quarantine.Filter) bool {
	if !redact.SearchDenied(s.token, h.cfg.RedactPointers, f.Text) {
		return false
	}
	h.refuse(w, r, s, r.URL.Path, "text search over redacted payloads", quarantine.ErrorMessage(errSearchRedacted))
	return true
}

// messagesContent is the messages page, the sample page and the bulk
// pages.
type messagesContent struct {
	Filter     filterView
	Messages   []*quarantine.Message
	Next       string // URL of the next page, "" on the last
	CanChange  bool   // the token may discard and replay: the selection is shown
	RekeyURL   string // the re-key page of the filter ("" on a sample)
	AllURL     string // the bulk page for every message matching the filter
	SampleURL  string
	GroupsURL  string
	Curl       string
	Sample     *sampleInfo
	Count      int64 // the messages matching the filter (the list, not a sample)
	SampleSize int
	Strata     []option // the sample form's stratify_by choices
}

// strata returns the stratify_by options with sel selected.
func strata(sel string) []option {
	var out []option
	for _, s := range []string{quarantine.StratifyNone, quarantine.StratifyFingerprint, quarantine.StratifyQueue} {
		out = append(out, option{s, s == sel})
	}
	return out
}

type sampleInfo struct {
	Size       int
	Seed       int64
	StratifyBy string
	Again      string // URL of the same sample (same seed)
	Fresh      string // URL of a new sample
}

// listMessages is GET /messages: the filter bar, a page of messages
// within the token's owners, and the link to the next page.
func (h *Handler) listMessages(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	fv, f, err := h.parseListFilter(s.token, q)
	c := &messagesContent{Filter: fv, CanChange: canOperate(s.token), SampleSize: 10, Strata: strata(quarantine.StratifyNone)}
	p := page{Title: "Messages", Token: s.token, CSRF: s.csrf, Content: c}
	if err == nil {
		f.Limit = pageSize
		if cur := q.Get("cursor"); cur != "" {
			f.After, err = quarantine.DecodeCursor(cur)
		}
	}
	if err != nil {
		p.Error = quarantine.ErrorMessage(err)
		h.render(w, r, statusOf(err), "messages", p)
		return
	}
	if h.searchRefused(w, r, s, f) {
		return
	}
	c.AllURL = "/messages/bulk?" + fv.with("all", "1")
	c.SampleURL = "/messages/sample"
	c.GroupsURL = "/groups?" + fv.Query
	c.RekeyURL = "/messages/rekey?" + fv.Query
	c.Curl = curlGet(r, "/api/v1/messages", fv.Values)
	if rules.Scope(s.token, &f) {
		res, err := h.cfg.Store.ListMessages(r.Context(), f)
		if err != nil {
			h.fail(w, r, s, err)
			return
		}
		c.Messages = res.Messages
		count := f
		count.Limit, count.After = 0, nil
		if c.Count, err = h.countMatching(r, count); err != nil {
			h.fail(w, r, s, err)
			return
		}
		if res.Next != nil {
			c.Next = "/messages?" + fv.with("cursor", res.Next.Encode())
		}
	}
	h.render(w, r, http.StatusOK, "messages", p)
}

// sampleMessages is GET /messages/sample: a uniformly random sample of
// the filtered messages the token may see (the store's Sample, as POST
// /api/v1/messages/sample), reproducible by its seed.
func (h *Handler) sampleMessages(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	fv, f, err := h.parseListFilter(s.token, q)
	c := &messagesContent{Filter: fv, CanChange: canOperate(s.token)}
	p := page{Title: "Sample", Token: s.token, CSRF: s.csrf, Content: c}
	req := quarantine.SampleRequest{Filter: f, StratifyBy: q.Get("stratify_by"), Seed: randomSeed()}
	if err == nil && q.Get("size") != "" {
		n, perr := strconv.Atoi(q.Get("size"))
		if perr != nil || n < 1 {
			err = quarantine.FieldErrorf(quarantine.EINVALID, "size", "size must be between 1 and %d", quarantine.MaxSample)
		}
		req.Size = n
	}
	if err == nil && q.Get("seed") != "" {
		if req.Seed, err = strconv.ParseInt(q.Get("seed"), 10, 64); err != nil {
			err = quarantine.FieldErrorf(quarantine.EINVALID, "seed", "seed must be an integer")
		}
	}
	if err == nil {
		err = req.Validate()
	}
	c.SampleSize, c.Strata = req.Size, strata(req.StratifyBy)
	if c.SampleSize == 0 {
		c.SampleSize = 10
	}
	if err != nil {
		p.Error = quarantine.ErrorMessage(err)
		h.render(w, r, statusOf(err), "messages", p)
		return
	}
	if h.searchRefused(w, r, s, req.Filter) {
		return
	}
	c.Sample = &sampleInfo{Size: req.Size, Seed: req.Seed, StratifyBy: req.StratifyBy,
		Again: "/messages/sample?" + fv.with("size", strconv.Itoa(req.Size), "seed", strconv.FormatInt(req.Seed, 10), "stratify_by", req.StratifyBy),
		Fresh: "/messages/sample?" + fv.with("size", strconv.Itoa(req.Size), "stratify_by", req.StratifyBy)}
	c.SampleURL = "/messages/sample"
	c.GroupsURL = "/groups?" + fv.Query
	c.AllURL = "/messages/bulk?" + fv.with("all", "1")
	c.Curl = curlPost(r, "/api/v1/messages/sample", map[string]any{"filter": filterJSON(fv.Values),
		"size": req.Size, "seed": req.Seed, "stratify_by": req.StratifyBy})
	if rules.Scope(s.token, &req.Filter) {
		msgs, err := h.cfg.Store.Sample(r.Context(), req)
		if err != nil {
			h.fail(w, r, s, err)
			return
		}
		c.Messages = msgs
	}
	h.render(w, r, http.StatusOK, "messages", p)
}

// countMatching is the number of messages matching f (scoped), the sum
// of the store's counts by queue, as the bulk page counts a selection.
func (h *Handler) countMatching(r *http.Request, f quarantine.Filter) (int64, error) {
	counts, err := h.cfg.Store.CountByQueue(r.Context(), f)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, qc := range counts {
		n += qc.Count
	}
	return n, nil
}

// maxRandomSeed bounds the seeds the UI picks, as the API's: 2^53.
const maxRandomSeed = 1 << 53

// randomSeed picks a seed in [0, 2^53).
func randomSeed() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) % maxRandomSeed)
}

// filterJSON is a filter's query parameters as the "filter" member of a
// request body: list parameters as arrays, the others as strings.
func filterJSON(v url.Values) map[string]any {
	out := map[string]any{}
	for k, vs := range v {
		if slices.Contains(listParams, k) || slices.Contains(choiceParams, k) {
			out[k] = vs
		} else if len(vs) > 0 {
			out[k] = vs[0]
		}
	}
	return out
}

// bulkContent is the bulk page: the selection, pinned, and its forms.
type bulkContent struct {
	Filter    filterView
	All       bool                  // the selection is every message matching the filter
	Count     int64                 // the messages selected (pinned as expect_count when All)
	IDs       []string              // the ids selected (not All)
	Messages  []*quarantine.Message // the selected messages shown (not All)
	Missing   []string              // ids given that name no message the token sees
	ReplayURL string
	Reason    string
	// Confirm: the count is above the threshold (ConfirmAbove): the
	// operator types it to discard.
	Confirm      bool
	ConfirmAbove int
	Result       *quarantine.BulkResult
	Curl         string
}

// maxBulkShown bounds the ids a bulk page loads to show them.
const maxBulkShown = 200

// bulkForm is GET /messages/bulk: the selection of the messages page
// (ids=…, or all=1 with the filter) with its count, the discard form
// (reason required; the count of a filter pinned as expect_count) and the
// link to the replay form. Operators only.
func (h *Handler) bulkForm(w http.ResponseWriter, r *http.Request, s *session) {
	if !canOperate(s.token) {
		h.refuse(w, r, s, r.URL.Path, "ui: bulk actions need an operator", "Your token may not discard or replay: it needs the operator role.")
		return
	}
	c, status, err := h.selection(r, s, r.URL.Query())
	if status >= http.StatusInternalServerError {
		h.fail(w, r, s, err)
		return
	}
	p := page{Title: "Selection", Token: s.token, CSRF: s.csrf, Content: c}
	if err != nil {
		p.Error = quarantine.ErrorMessage(err)
	}
	h.render(w, r, status, "bulk", p)
}

// selection reads a bulk selection from v (ids, or all=1 and the
// filter) and counts it within the token's owners. It returns the page,
// the status to render it with, and the error to show (a status of 500
// or more: the store failed, for h.fail).
func (h *Handler) selection(r *http.Request, s *session, v url.Values) (*bulkContent, int, error) {
	fv, f, err := h.parseFilter(s.token, v)
	c := &bulkContent{Filter: fv, All: v.Get("all") == "1", Reason: v.Get("reason")}
	if err != nil {
		return c, statusOf(err), err
	}
	if c.All {
		if redact.SearchDenied(s.token, h.cfg.RedactPointers, f.Text) {
			return c, http.StatusForbidden, errSearchRedacted
		}
		if rules.Scope(s.token, &f) {
			counts, err := h.cfg.Store.CountByQueue(r.Context(), f)
			if err != nil {
				return c, statusOf(err), err
			}
			for _, qc := range counts {
				c.Count += qc.Count
			}
		}
		c.ConfirmAbove = h.cfg.Discards.ConfirmAbove()
		c.Confirm = c.ConfirmAbove > 0 && c.Count > int64(c.ConfirmAbove)
		c.ReplayURL = "/replays/new?" + fv.with("expect_count", strconv.FormatInt(c.Count, 10))
		return c, http.StatusOK, nil
	}
	ids, err := rules.CleanIDs(v["ids"])
	if err == nil && len(ids) == 0 {
		err = quarantine.FieldErrorf(quarantine.EINVALID, "ids", "select at least one message")
	}
	if err == nil && len(ids) > maxBulkShown {
		err = quarantine.FieldErrorf(quarantine.EINVALID, "ids", "select at most %d messages here; use a filter and “all matching” for more", maxBulkShown)
	}
	if err != nil {
		return c, statusOf(err), err
	}
	for _, id := range ids {
		m, err := h.cfg.Store.GetMessage(r.Context(), id)
		switch {
		case quarantine.ErrorCode(err) == quarantine.ENOTFOUND || (err == nil && !s.token.Sees(m.Owner)):
			c.Missing = append(c.Missing, id)
		case err != nil:
			return c, statusOf(err), err
		default:
			m.Payload = nil
			c.Messages = append(c.Messages, m)
			c.IDs = append(c.IDs, id)
		}
	}
	c.Count = int64(len(c.IDs))
	rv := url.Values{"ids": c.IDs}
	c.ReplayURL = "/replays/new?" + rv.Encode()
	return c, http.StatusOK, nil
}

// bulkDiscard is POST /messages/discard: the selection of the bulk page
// discarded with a reason, through the rules the API uses too (rules.DiscardAs: the
// token's owners, an audited refusal of other teams' ids; selected ids
// get one message.discard event each, "all" (a filter) runs a discard
// operation, one event per chunk); a filter's count is pinned
// (expect_count: another count is 409 and nothing changes).
func (h *Handler) bulkDiscard(w http.ResponseWriter, r *http.Request, s *session) {
	if !canOperate(s.token) {
		h.refuse(w, r, s, r.URL.Path, "ui: discarding needs an operator", "Your token may not discard messages: it needs the operator role.")
		return
	}
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, s, quarantine.Errorf(quarantine.EINVALID, "the form is malformed"))
		return
	}
	v := r.PostForm
	fv, f, err := h.parseFilter(s.token, v)
	d := quarantine.Discard{Reason: v.Get("reason")}
	all := v.Get("all") == "1"
	if err == nil && all {
		d.Filter = &f
		n, perr := strconv.Atoi(strings.TrimSpace(strings.ReplaceAll(v.Get("expect_count"), ",", "")))
		if perr != nil || n < 0 {
			err = quarantine.FieldErrorf(quarantine.EINVALID, "expect_count", "type the number of messages to discard, as shown")
		}
		d.ExpectCount = &n
		if err == nil && redact.SearchDenied(s.token, h.cfg.RedactPointers, f.Text) {
			err = errSearchRedacted
		}
	} else if err == nil {
		d.IDs, err = rules.CleanIDs(v["ids"])
	}
	if err == nil {
		err = d.Validate()
	}
	if err == nil {
		var ans rules.DiscardAnswer
		var async bool
		ans, async, err = h.cfg.Discards.Discard(r.Context(), s.token, d, r.Method, r.URL.Path)
		if err == nil && async {
			http.Redirect(w, r, "/discards/"+ans.Operation.ID, http.StatusSeeOther)
			return
		}
		if err == nil {
			c := &bulkContent{Filter: fv, All: all, Result: &ans.BulkResult, Count: int64(len(ans.Changed))}
			h.render(w, r, http.StatusOK, "bulk", page{Title: "Discarded", Token: s.token, CSRF: s.csrf, Content: c})
			return
		}
	}
	if statusOf(err) >= http.StatusInternalServerError {
		h.fail(w, r, s, err)
		return
	}
	// Show the selection again, counted afresh, with the refusal.
	c, _, serr := h.selection(r, s, v)
	if serr != nil && statusOf(serr) >= http.StatusInternalServerError {
		h.fail(w, r, s, serr)
		return
	}
	h.render(w, r, statusOf(err), "bulk", page{Title: "Selection", Token: s.token, CSRF: s.csrf, Error: quarantine.ErrorMessage(err), Content: c})
}

// curlGet is the curl command of a GET of the API (the token as
// $QUARANTINE_TOKEN, never the real one).
func curlGet(r *http.Request, path string, q url.Values) string {
	u := baseURL(r) + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return `curl -H "Authorization: Bearer $QUARANTINE_TOKEN" ` + shellQuote(u)
}

// curlPost is the curl command of a POST of body as JSON to the API.
func curlPost(r *http.Request, path string, body any) string {
	b, _ := json.Marshal(body)
	return `curl -H "Authorization: Bearer $QUARANTINE_TOKEN" -H 'Content-Type: application/json' -d ` +
		shellQuote(string(b)) + " " + shellQuote(baseURL(r)+path)
}

// baseURL is the scheme and host the browser used.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
