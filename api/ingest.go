package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// IngestSource is the Source of messages pushed over HTTP.
const IngestSource = "http"

// The headers by which a known pusher says what it is. Only the kinds in
// ingestKinds are honoured: X-Quarantine-Source-Kind: cloudflare (the
// Worker of integrations/cloudflare) with X-Quarantine-Source naming the
// source (default "cloudflare"). Without the kind header, or with "http",
// the message is of kind http from source "http" and X-Quarantine-Source
// is ignored.
const (
	HeaderSourceKind = "X-Quarantine-Source-Kind"
	HeaderSource     = "X-Quarantine-Source"
)

// ingestKinds are the source kinds a pusher may claim on ingest.
var ingestKinds = map[quarantine.SourceKind]bool{quarantine.SourceHTTP: true, quarantine.SourceCloudflare: true}

// maxSourceName bounds X-Quarantine-Source.
const maxSourceName = 64

// ingestOrigin reads the source kind and name a request claims. An unknown
// kind or a bad name is EINVALID: a message is never stored under a kind
// it did not come through.
func ingestOrigin(r *http.Request) (string, quarantine.SourceKind, error) {
	raw := strings.TrimSpace(r.Header.Get(HeaderSourceKind))
	kind := quarantine.SourceKind(strings.ToLower(raw))
	switch {
	case raw == "" || kind == quarantine.SourceHTTP:
		return IngestSource, quarantine.SourceHTTP, nil
	case !ingestKinds[kind]:
		return "", "", quarantine.FieldErrorf(quarantine.EINVALID, HeaderSourceKind,
			"%s must be http or cloudflare, got %q: nothing was stored", HeaderSourceKind, quarantine.Clip(raw))
	}
	name := strings.TrimSpace(r.Header.Get(HeaderSource))
	if name == "" {
		return string(kind), kind, nil
	}
	if len(name) > maxSourceName || strings.IndexFunc(name, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:/-", c))
	}) >= 0 {
		return "", "", quarantine.FieldErrorf(quarantine.EINVALID, HeaderSource,
			"%s must be 1 to %d letters, digits or . _ : / -: nothing was stored", HeaderSource, maxSourceName)
	}
	return name, kind, nil
}

// ingestResult is the body of a successful POST /api/v1/ingest.
type ingestResult struct {
	Received   int          `json:"received"`
	Stored     int          `json:"stored"`
	Duplicates int          `json:"duplicates"`
	Items      []ingestItem `json:"items"`
}

// ingestItem says what became of one envelope.
type ingestItem struct {
	Index        int                     `json:"index"`
	ID           string                  `json:"id"`
	New          bool                    `json:"new"`
	FailureClass quarantine.FailureClass `json:"failure_class"`
	Flags        []string                `json:"flags"`
	Problems     []collect.Problem       `json:"problems"`
}

// ingest stores one envelope, or a JSON array of them, in one batch. Bad
// envelopes are stored raw and flagged, never refused; only a body that
// is not labelled JSON (415), above the hard cap or with too many
// elements is refused, and nothing is stored then.
func (s *Server) ingest(w http.ResponseWriter, r *http.Request) {
	if err := checkJSONMediaType(r); err != nil { // 415: a body that says it is not JSON is not read as one
		s.fail(w, r, err)
		return
	}
	source, kind, err := ingestOrigin(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	tooLarge := r.ContentLength > s.cfg.MaxBodyBytes
	var body []byte
	if !tooLarge {
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		var mbe *http.MaxBytesError
		tooLarge = errors.As(err, &mbe)
	}
	switch {
	case tooLarge:
		s.fail(w, r, quarantine.Errorf(quarantine.ETOOLARGE, "the request body is larger than %d bytes: nothing was stored", s.cfg.MaxBodyBytes))
		return
	case err != nil:
		s.fail(w, r, quarantine.Errorf(quarantine.EINVALID, "the request body could not be read"))
		return
	case len(body) == 0:
		s.fail(w, r, quarantine.Errorf(quarantine.EINVALID, "the request body is empty: send an envelope or an array of envelopes"))
		return
	}
	elems, err := splitBody(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(elems) == 0 {
		s.writeJSON(w, r, http.StatusOK, ingestResult{Items: []ingestItem{}})
		return
	}
	origin := collect.Origin{Source: source, Kind: kind, MaxPayloadBytes: s.cfg.MaxPayloadBytes}
	now := s.cfg.Now()
	t := tokenFrom(r.Context())
	msgs := make([]*quarantine.Message, len(elems))
	res := ingestResult{Received: len(elems), Items: make([]ingestItem, len(elems))}
	for i, e := range elems {
		m, problems := collect.DecodeEnvelope(e, origin)
		s.cfg.Preparer.Prepare(m) // idempotency rules, header redaction, owner
		m.Normalize(now)
		if !t.Sees(m.Owner) {
			s.deny(w, r, map[string]any{"required_role": ruleIngest.requireAs, "index": i, "owner": m.Owner},
				"envelope %d would belong to owner %q, outside this token's owners: nothing was stored", i, quarantine.Clip(m.Owner))
			return
		}
		if problems == nil {
			problems = []collect.Problem{}
		}
		msgs[i] = m
		res.Items[i] = ingestItem{Index: i, FailureClass: m.FailureClass, Flags: m.Flags, Problems: problems}
	}
	results, err := s.cfg.Store.InsertBatch(r.Context(), msgs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for i, ir := range results {
		res.Items[i].ID, res.Items[i].New = ir.ID, ir.New
		result := "duplicate"
		if ir.New {
			res.Stored++
			result = "stored"
		} else {
			res.Duplicates++
		}
		s.metrics.ingested.WithLabelValues(result, string(msgs[i].FailureClass)).Inc()
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// splitBody returns the envelopes of a body: the elements of a JSON array
// (each element's exact bytes), or else the body itself, which may be any
// bytes at all. Whitespace around a valid JSON body is not part of it.
func splitBody(body []byte) ([][]byte, error) {
	trimmed := bytes.Trim(body, " \t\r\n") // JSON's whitespace only
	if !json.Valid(trimmed) {
		return [][]byte{body}, nil
	}
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return [][]byte{trimmed}, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return [][]byte{body}, nil // unreachable: the body is a valid array
	}
	if len(raw) > MaxIngestElements {
		return nil, quarantine.Errorf(quarantine.ETOOLARGE, "an ingest request holds at most %d envelopes, this one %d: nothing was stored", MaxIngestElements, len(raw))
	}
	out := make([][]byte, len(raw))
	for i, e := range raw {
		out[i] = e
	}
	return out, nil
}
