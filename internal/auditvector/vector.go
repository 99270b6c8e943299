// Package auditvector holds a known-answer vector of the audit chain: a
// small chain whose canonical forms and hashes were computed by an
// independent implementation (audit_chain_v1.py, Python), so that a change
// to the Go canonical JSON or time format fails tests instead of
// invalidating every stored chain.
package auditvector

import (
	_ "embed"
	"encoding/json"
	"time"
)

//go:embed audit_chain_v1.json
var raw []byte

// Event is one event of the vector, with what it must hash to.
type Event struct {
	Seq       int64           `json:"seq"`
	Time      time.Time       `json:"time"`
	Actor     string          `json:"actor"`
	Action    string          `json:"action"`
	Subject   string          `json:"subject"`
	Details   json.RawMessage `json:"details"`
	Canonical string          `json:"canonical"`
	PrevHash  string          `json:"prev_hash"`
	Hash      string          `json:"hash"`
}

// Events returns the vector's events in chain order.
func Events() []Event {
	var v struct {
		Events []Event `json:"events"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		panic("auditvector: " + err.Error())
	}
	return v.Events
}
