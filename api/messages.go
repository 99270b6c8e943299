package api

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine"
)

// messageParams are the query parameters of GET /api/v1/messages.
var messageParams = []string{"queue", "job_name", "failure_class", "status", "owner", "source", "idempotency_key",
	"failed_after", "failed_before", "q", "cursor", "limit"}

// messagePage is the body of GET /api/v1/messages.
type messagePage struct {
	Items      []messageView `json:"items"`
	NextCursor *string       `json:"next_cursor"`
}

// messageView is a message as the API shows it. The payload is added by
// writeMessage, on GET of one message only.
type messageView struct {
	*quarantine.Message
	PayloadBase64 *string `json:"payload_base64,omitempty"`
}

func view(m *quarantine.Message) messageView {
	c := *m
	if c.Flags == nil {
		c.Flags = []string{}
	}
	if c.Headers == nil {
		c.Headers = map[string]string{}
	}
	return messageView{Message: &c}
}

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := messagePage{Items: []messageView{}}
	if t := tokenFrom(r.Context()); len(t.Owners) > 0 {
		f.Owner = scopeOwners(f.Owner, t.Owners)
		if len(f.Owner) == 0 { // only foreign owners were asked for
			s.writeJSON(w, r, http.StatusOK, page)
			return
		}
	}
	res, err := s.cfg.Store.ListMessages(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, m := range res.Messages {
		page.Items = append(page.Items, view(m))
	}
	if res.Next != nil {
		c := res.Next.Encode()
		page.NextCursor = &c
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// scopeOwners intersects the owners asked for with a token's owners; none
// asked for means all of the token's.
func scopeOwners(asked, allowed []string) []string {
	if len(asked) == 0 {
		return slices.Clone(allowed)
	}
	var out []string
	for _, o := range asked {
		if slices.Contains(allowed, o) && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// parseFilter reads and validates the message filter of a list request.
func parseFilter(r *http.Request) (quarantine.Filter, error) {
	var f quarantine.Filter
	q, err := parseQuery(r, messageParams...)
	if err != nil {
		return f, err
	}
	f.Queue, f.JobName, f.Owner = q.all("queue"), q.all("job_name"), q.all("owner")
	f.Source, f.IdempotencyKey = q.all("source"), q.all("idempotency_key")
	for _, c := range q.all("failure_class") {
		f.FailureClass = append(f.FailureClass, quarantine.FailureClass(c))
	}
	for _, st := range q.all("status") {
		f.Status = append(f.Status, quarantine.Status(st))
	}
	if f.FailedAfter, err = q.time("failed_after"); err != nil {
		return f, err
	}
	if f.FailedBefore, err = q.time("failed_before"); err != nil {
		return f, err
	}
	if f.Text, err = q.one("q"); err != nil {
		return f, err
	}
	cursor, err := q.one("cursor")
	if err != nil {
		return f, err
	}
	if cursor != "" {
		if f.After, err = quarantine.DecodeCursor(cursor); err != nil {
			return f, err
		}
	}
	if f.Limit, err = q.limit(); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// getMessage answers one message with its payload. A message the token may
// not see is "not found", like one that does not exist.
func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) {
	notFound := quarantine.FieldErrorf(quarantine.ENOTFOUND, "id", "no message with this id")
	id := chi.URLParam(r, "id")
	if !quarantine.ValidID(id) {
		s.fail(w, r, notFound)
		return
	}
	m, err := s.cfg.Store.GetMessage(r.Context(), id)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		s.fail(w, r, notFound)
		return
	case err != nil:
		s.fail(w, r, err)
		return
	case !tokenFrom(r.Context()).Sees(m.Owner):
		s.fail(w, r, notFound)
		return
	}
	w.Header().Set("ETag", `"`+m.PayloadSHA256+`"`)
	s.writeMessage(w, r, m)
}

// writeMessage writes m with its payload: the payload's exact bytes under
// "payload" when they are JSON of a JSON content type, base64 under
// "payload_base64" otherwise.
func (s *Server) writeMessage(w http.ResponseWriter, r *http.Request, m *quarantine.Message) {
	v := view(m)
	asJSON := jsonContentType(m.ContentType) && utf8.Valid(m.Payload) && json.Valid(m.Payload)
	if !asJSON {
		b64 := base64.StdEncoding.EncodeToString(m.Payload)
		v.PayloadBase64 = &b64
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.fail(w, r, quarantine.Internal(err, "encode message"))
		return
	}
	if asJSON { // splice the bytes in as they are, so their SHA-256 is payload_sha256
		b = append(b[:len(b)-1], `,"payload":`...)
		b = append(b, m.Payload...)
		b = append(b, '}')
	}
	s.writeRawJSON(w, http.StatusOK, b)
}

// jsonContentType reports whether ct is application/json, text/json or a
// +json type.
func jsonContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}
