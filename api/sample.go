package api

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"net/http"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// maxRandomSeed bounds the seeds the server picks: 2^53, so that they
// survive a round trip through any JSON number.
const maxRandomSeed = 1 << 53

// sampleBody is the body of POST /api/v1/messages/sample.
type sampleBody struct {
	Filter     json.RawMessage `json:"filter"`
	Size       *int            `json:"size"` // absent: 10
	StratifyBy string          `json:"stratify_by"`
	Seed       *int64          `json:"seed"` // absent: the server picks one
}

// sampleResult is its answer: the seed (given or picked) that reproduces
// the sample, and the sampled messages without payloads.
type sampleResult struct {
	Seed       int64         `json:"seed"`
	Size       int           `json:"size"`
	StratifyBy string        `json:"stratify_by"`
	Items      []messageView `json:"items"`
}

// sampleMessages answers a uniformly random sample of the filtered
// messages the token may see, reproducible with the same seed.
func (s *Server) sampleMessages(w http.ResponseWriter, r *http.Request) {
	var b sampleBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	in, err := filterFromBody(b.Filter)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := in.Filter(s.cfg.Now(), "/filter/")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req := quarantine.SampleRequest{Filter: f, StratifyBy: b.StratifyBy, Seed: randomSeed()}
	if b.Seed != nil {
		req.Seed = *b.Seed
	}
	if b.Size != nil {
		if *b.Size == 0 {
			s.fail(w, r, quarantine.FieldErrorf(quarantine.EINVALID, "/size", "size must be between 1 and %d", quarantine.MaxSample))
			return
		}
		req.Size = *b.Size
	}
	if err := req.Validate(); err != nil {
		s.fail(w, r, rules.InBody(err, ""))
		return
	}
	res := sampleResult{Seed: req.Seed, Size: req.Size, StratifyBy: req.StratifyBy, Items: []messageView{}}
	if s.searchDenied(w, r, &req.Filter) {
		return
	}
	if !rules.Scope(tokenFrom(r.Context()), &req.Filter) {
		s.writeJSON(w, r, http.StatusOK, res)
		return
	}
	msgs, err := s.cfg.Store.Sample(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res.Items = views(msgs)
	s.writeJSON(w, r, http.StatusOK, res)
}

// randomSeed picks a seed in [0, 2^53).
func randomSeed() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) % maxRandomSeed)
}
