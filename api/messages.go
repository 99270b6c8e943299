package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// messagePage is the body of GET /api/v1/messages.
type messagePage struct {
	Items      []messageView `json:"items"`
	NextCursor *string       `json:"next_cursor"`
}

// messageView is a message as lists show it: without its payload.
type messageView struct {
	*quarantine.Message
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

func views(ms []*quarantine.Message) []messageView {
	out := make([]messageView, 0, len(ms))
	for _, m := range ms {
		out = append(out, view(m))
	}
	return out
}

// errNoMessage answers an unknown message, and one the token may not see.
var errNoMessage = quarantine.FieldErrorf(quarantine.ENOTFOUND, "id", "no message with this id")

func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) {
	f, q, err := s.queryFilter(r, "cursor", "limit")
	if err == nil {
		err = parsePage(q, &f)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := messagePage{Items: []messageView{}}
	if s.searchDenied(w, r, &f) {
		return
	}
	if !rules.Scope(tokenFrom(r.Context()), &f) {
		s.writeJSON(w, r, http.StatusOK, page)
		return
	}
	res, err := s.cfg.Store.ListMessages(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page.Items = views(res.Messages)
	if res.Next != nil {
		c := res.Next.Encode()
		page.NextCursor = &c
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// parsePage reads the cursor and limit of a list.
func parsePage(q query, f *quarantine.Filter) error {
	cursor, err := q.one("cursor")
	if err != nil {
		return err
	}
	if cursor != "" {
		if f.After, err = quarantine.DecodeCursor(cursor); err != nil {
			return err
		}
	}
	f.Limit, err = q.limit()
	return err
}

// loadMessage returns the message named by the route's id, or answers
// 404 when it does not exist or the token may not see it. On a write
// route (write set), an attempt on another team's message is audited.
func (s *Server) loadMessage(w http.ResponseWriter, r *http.Request, write bool) (*quarantine.Message, bool) {
	id := chi.URLParam(r, "id")
	if !quarantine.ValidID(id) {
		s.fail(w, r, errNoMessage)
		return nil, false
	}
	m, err := s.cfg.Store.GetMessage(r.Context(), id)
	switch {
	case quarantine.ErrorCode(err) == quarantine.ENOTFOUND:
		s.fail(w, r, errNoMessage)
	case err != nil:
		s.fail(w, r, err)
	case !tokenFrom(r.Context()).Sees(m.Owner):
		if write {
			s.denyHidden(w, r, id)
		} else {
			s.fail(w, r, errNoMessage)
		}
	default:
		return m, true
	}
	return nil, false
}

// readMessage loads the message of a read that takes no query
// parameters: any is refused (EINVALID) before the message is looked up.
func (s *Server) readMessage(w http.ResponseWriter, r *http.Request) (*quarantine.Message, bool) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	return s.loadMessage(w, r, false)
}

// getMessage answers one message with its payload, and 304 when the
// client's If-None-Match holds the payload's ETag. A message the token
// may not see is "not found", like one that does not exist.
func (s *Server) getMessage(w http.ResponseWriter, r *http.Request) {
	m, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	setETag(w, m.PayloadSHA256)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagListMatches(inm, m.PayloadSHA256) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.writeMessage(w, r, http.StatusOK, m)
}

// writeMessage writes m with its payload (see writeWithPayload).
func (s *Server) writeMessage(w http.ResponseWriter, r *http.Request, status int, m *quarantine.Message) {
	s.writeWithPayload(w, r, status, view(m), m.ContentType, m.Payload)
}
