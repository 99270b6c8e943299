// Package auditvector holds a known-answer vector of the audit chain: a
// small chain whose canonical forms and hashes were computed by an
// independent implementation (audit_chain_v1.py, Python), so that a change
// to the Go canonical JSON or time format fails tests instead of
// invalidating every stored chain.
package auditvector

import (
	_ "embed"
	"encoding/json"

	"github.com/quarantine-dev/quarantine"
)

//go:embed audit_chain_v1.json
var raw []byte

// Event is one event of the vector (its fields as the audit log's JSON
// names them), with what it must hash to: its canonical form, PrevHash
// and Hash.
type Event struct {
	quarantine.AuditEvent
	Canonical string `json:"canonical"`
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
