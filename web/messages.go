package web

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
)

// messageRoutes registers the messages list and the message page.
func (h *Handler) messageRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /messages", h.authed(h.listMessages))
	m.HandleFunc("GET /messages/{id}", h.authed(h.showMessage))
}

// pageSize is the number of rows of a messages page.
const pageSize = 50

// filterBar is the filter as the form shows it.
type filterBar struct {
	Queue, JobName, Status, FailureClass, Q string
	Statuses                                []quarantine.Status
	Classes                                 []quarantine.FailureClass
}

type messagesContent struct {
	Filter   filterBar
	Messages []*quarantine.Message
	Next     string // URL of the next page, "" on the last
}

// listMessages is GET /messages: the filter bar, a page of messages
// within the token's owners, and the link to the next page.
func (h *Handler) listMessages(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	fb := filterBar{Queue: q.Get("queue"), JobName: q.Get("job_name"), Status: q.Get("status"),
		FailureClass: q.Get("failure_class"), Q: q.Get("q"), Statuses: quarantine.Statuses, Classes: failureClasses}
	f := quarantine.Filter{Text: fb.Q, Limit: pageSize}
	for _, p := range []struct {
		v   string
		dst *[]string
	}{{fb.Queue, &f.Queue}, {fb.JobName, &f.JobName}} {
		if p.v != "" {
			*p.dst = []string{p.v}
		}
	}
	if fb.Status != "" {
		f.Status = []quarantine.Status{quarantine.Status(fb.Status)}
	}
	if fb.FailureClass != "" {
		f.FailureClass = []quarantine.FailureClass{quarantine.FailureClass(fb.FailureClass)}
	}
	var err error
	if c := q.Get("cursor"); c != "" {
		f.After, err = quarantine.DecodeCursor(c)
	}
	if err == nil {
		err = f.Validate()
	}
	if err == nil && f.Text != "" && len(h.cfg.RedactPointers) > 0 && !canSeeRedacted(s.token) {
		// As on the API: matching terms against masked values would
		// reveal them one guess at a time.
		err = quarantine.Errorf(quarantine.EFORBIDDEN, "Text search is not available to viewers while payload fields are redacted.")
	}
	content := messagesContent{Filter: fb}
	p := page{Title: "Messages", Token: s.token, CSRF: s.csrf, Content: &content}
	if err != nil {
		p.Error = quarantine.ErrorMessage(err)
		status := http.StatusBadRequest
		if quarantine.ErrorCode(err) == quarantine.EFORBIDDEN {
			status = http.StatusForbidden
		}
		h.render(w, r, status, "messages", p)
		return
	}
	scope(s.token, &f)
	res, err := h.cfg.Store.ListMessages(r.Context(), f)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	content.Messages = res.Messages
	if res.Next != nil {
		nq := url.Values{}
		for k, v := range map[string]string{"queue": fb.Queue, "job_name": fb.JobName, "status": fb.Status,
			"failure_class": fb.FailureClass, "q": fb.Q} {
			if v != "" {
				nq.Set(k, v)
			}
		}
		nq.Set("cursor", res.Next.Encode())
		content.Next = "/messages?" + nq.Encode()
	}
	h.render(w, r, http.StatusOK, "messages", p)
}

var failureClasses = []quarantine.FailureClass{quarantine.ClassPermanent, quarantine.ClassExhausted,
	quarantine.ClassUnknownName, quarantine.ClassMalformed, quarantine.ClassRejected, quarantine.ClassExpired,
	quarantine.ClassDeliveryLimit, quarantine.ClassUnknown}

// scope limits f to the token's owners, like the API (the filter bar
// has no owner field, so a scoped token sees all of its owners).
func scope(t *quarantine.Token, f *quarantine.Filter) {
	if len(t.Owners) > 0 {
		f.Owner = slices.Clone(t.Owners)
	}
}

// canSeeRedacted reports whether t sees payloads unmasked: operators and
// admins do, viewers do not (as on the API).
func canSeeRedacted(t *quarantine.Token) bool { return t.Role.AtLeast(quarantine.RoleOperator) }

type header struct{ Name, Value string }

type messageContent struct {
	M           *quarantine.Message
	Headers     []header
	Payload     string
	PayloadKind string // "json", "text", "hex" or "hidden"
}

// maxHexBytes bounds the bytes shown as a hex dump.
const maxHexBytes = 64 << 10

// showMessage is GET /messages/{id}; a message the token may not see is
// "not found", like one that does not exist.
func (h *Handler) showMessage(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	if !quarantine.ValidID(id) {
		h.notFound(w, r)
		return
	}
	m, err := h.cfg.Store.GetMessage(r.Context(), id)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		h.notFound(w, r)
		return
	case err != nil:
		h.fail(w, r, s, err)
		return
	case !s.token.Sees(m.Owner):
		h.notFound(w, r)
		return
	}
	c := messageContent{M: m}
	for k, v := range m.Headers {
		c.Headers = append(c.Headers, header{k, v})
	}
	sort.Slice(c.Headers, func(i, j int) bool { return c.Headers[i].Name < c.Headers[j].Name })
	c.PayloadKind, c.Payload = h.showPayload(s.token, m.Payload)
	h.render(w, r, http.StatusOK, "message", page{Title: "Message " + m.ID, Token: s.token, CSRF: s.csrf, Content: &c})
}

// showPayload is how a payload is shown: indented JSON, text, or a hex
// dump. While redaction pointers are configured, a viewer sees none of
// it: the UI does not mask fields yet, and must not show them unmasked.
func (h *Handler) showPayload(t *quarantine.Token, b []byte) (kind, text string) {
	if len(h.cfg.RedactPointers) > 0 && !canSeeRedacted(t) {
		return "hidden", ""
	}
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
