package api

import (
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"strconv"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

var auditParams = []string{"subject", "message", "actor", "action", "after", "before", "cursor", "limit"}

// auditPage is the body of GET /api/v1/audit.
type auditPage struct {
	Items      []quarantine.AuditEvent `json:"items"`
	NextCursor *string                 `json:"next_cursor"`
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	f, err := parseAuditFilter(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	events, err := s.cfg.Store.ListAudit(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := auditPage{Items: []quarantine.AuditEvent{}}
	for _, e := range events {
		if len(e.Details) == 0 {
			e.Details = json.RawMessage(`{}`)
		}
		page.Items = append(page.Items, e)
	}
	if len(events) == f.Limit {
		c := strconv.FormatInt(events[len(events)-1].Seq, 10)
		page.NextCursor = &c
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

func parseAuditFilter(r *http.Request) (quarantine.AuditFilter, error) {
	q, err := parseQuery(r, auditParams...)
	if err != nil {
		return quarantine.AuditFilter{}, err
	}
	f, err := auditFilter(q)
	if err != nil {
		return f, err
	}
	if f.Seq, err = q.int("cursor", 0, math.MaxInt64); err != nil {
		return f, err
	}
	if f.Limit, err = q.limit(); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// auditFilter reads the filters shared by the audit list and export.
func auditFilter(q query) (quarantine.AuditFilter, error) {
	var f quarantine.AuditFilter
	subject, err := q.one("subject")
	if err != nil {
		return f, err
	}
	message, err := q.one("message")
	if err != nil {
		return f, err
	}
	if subject != "" && message != "" {
		return f, quarantine.FieldErrorf(quarantine.EINVALID, "message", "message is another name for subject: give one of them")
	}
	f.Subject = subject + message
	if f.Actor, err = q.one("actor"); err != nil {
		return f, err
	}
	if f.Action, err = q.one("action"); err != nil {
		return f, err
	}
	if f.After, err = q.time("after"); err != nil {
		return f, err
	}
	if f.Before, err = q.time("before"); err != nil {
		return f, err
	}
	if !f.After.IsZero() && !f.Before.IsZero() && !f.After.Before(f.Before) {
		return f, quarantine.FieldErrorf(quarantine.EINVALID, "after", "after must be before before")
	}
	g := f
	g.Limit = 1
	return f, g.Validate()
}

var hexHash = regexp.MustCompile(`^[0-9a-f]{64}$`)

// verifyAudit walks the whole chain. A broken chain is a 200 whose body
// says ok=false and where.
func (s *Server) verifyAudit(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	q, err := parseQuery(r, "head_seq", "head_hash")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var expect []quarantine.AuditHead
	seqStr, err1 := q.one("head_seq")
	hash, err2 := q.one("head_hash")
	switch {
	case err1 != nil:
		s.fail(w, r, err1)
		return
	case err2 != nil:
		s.fail(w, r, err2)
		return
	case seqStr == "" && hash != "":
		s.fail(w, r, quarantine.FieldErrorf(quarantine.EINVALID, "head_seq", "head_seq is required with head_hash"))
		return
	case seqStr != "" && hash == "":
		s.fail(w, r, quarantine.FieldErrorf(quarantine.EINVALID, "head_hash", "head_hash is required with head_seq"))
		return
	case seqStr != "":
		seq, err := q.int("head_seq", 0, math.MaxInt64)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if !hexHash.MatchString(hash) {
			s.fail(w, r, quarantine.FieldErrorf(quarantine.EINVALID, "head_hash", "head_hash must be 64 lowercase hex digits"))
			return
		}
		expect = append(expect, quarantine.AuditHead{Seq: seq, Hash: hash})
	}
	res, err := s.cfg.Store.VerifyAudit(r.Context(), expect...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// auditExportParams are the filters of GET /api/v1/audit/export: those of
// the list, without paging.
var auditExportParams = []string{"subject", "message", "actor", "action", "after", "before"}

// exportAudit streams every event matching the filters as JSON Lines
// (application/x-ndjson), oldest first, one page of events at a time. An
// error after the first line can only cut the stream: the connection is
// aborted, so the client sees a truncated response, never a clean end.
func (s *Server) exportAudit(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, auditExportParams...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := auditFilter(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f.Limit = quarantine.MaxLimit
	events, err := s.cfg.Store.ListAudit(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	enc, rc := rules.StartJSONLines(w, "quarantine-audit.jsonl")
	for {
		for i := range events {
			if len(events[i].Details) == 0 {
				events[i].Details = json.RawMessage(`{}`)
			}
			if err := enc.Encode(&events[i]); err != nil {
				return // the client went away
			}
		}
		if len(events) < f.Limit {
			return
		}
		_ = rc.Flush()
		f.Seq = events[len(events)-1].Seq
		if events, err = s.cfg.Store.ListAudit(r.Context(), f); err != nil {
			s.log.ErrorContext(r.Context(), "audit export cut short", "request_id", requestIDFrom(r.Context()),
				"after_seq", f.Seq, "err", err)
			panic(http.ErrAbortHandler)
		}
	}
}
