package quarantine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// DiscardChunkDetails are the details of the one message.discard event of
// a chunk of a discard operation (subject: the operation's id): every
// message the chunk discarded, by the status it left, and a digest of
// their ids. The event is the only record of those discards in the chain:
// a chunk appends no event per message. A store also lists the event
// under each of those ids (AuditFilter.Subject).
type DiscardChunkDetails struct {
	// Operation is the discard operation's id (the event's subject).
	Operation string `json:"operation"`
	// Reason is the operation's.
	Reason string `json:"reason"`
	// Count is how many messages the chunk discarded.
	Count int `json:"count"`
	// IDsSHA256 is DigestIDs of every id of PreviousStatus.
	IDsSHA256 string `json:"ids_sha256"`
	// PreviousStatus lists the discarded ids by the status each was in,
	// each list sorted.
	PreviousStatus map[Status][]string `json:"previous_status"`
}

// IDs returns every id the details name, sorted.
func (d DiscardChunkDetails) IDs() []string {
	var ids []string
	for _, l := range d.PreviousStatus {
		ids = append(ids, l...)
	}
	slices.Sort(ids)
	return ids
}

// Check reports whether Count and IDsSHA256 agree with the ids named.
func (d DiscardChunkDetails) Check() error {
	ids := d.IDs()
	if len(ids) != d.Count {
		return Errorf(EINVALID, "the event names %d messages, not its count %d", len(ids), d.Count)
	}
	if got := DigestIDs(ids); got != d.IDsSHA256 {
		return Errorf(EINVALID, "the ids' digest is %s, not the event's %s", got, d.IDsSHA256)
	}
	return nil
}

// DigestIDs is the SHA-256 (hex) of ids sorted, each followed by a
// newline: `sort | sha256sum` of the ids one per line (byte order, as
// LC_ALL=C sorts).
func DigestIDs(ids []string) string {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	h := sha256.New()
	for _, id := range sorted {
		h.Write([]byte(id))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ParseDiscardChunk reads the details of e when it is the message.discard
// event of a chunk of a discard operation (ok false for any other event,
// a discard's per-message event included).
func ParseDiscardChunk(e AuditEvent) (d DiscardChunkDetails, ok bool) {
	if e.Action != ActionDiscard || json.Unmarshal(e.Details, &d) != nil || d.Operation == "" || d.Operation != e.Subject {
		return DiscardChunkDetails{}, false
	}
	return d, true
}

// PlanChunk is Plan for a chunk of the discard operation opID: the same
// result and the same message.discard_refused events, but the changes are
// recorded in one message.discard event (DiscardChunkDetails, subject
// opID, last of the events), not one each; none when nothing changes.
func (d *Discard) PlanChunk(opID string, sel []Selected) (BulkResult, []*AuditEvent, error) {
	res, events, err := d.plan(sel, true)
	if err != nil || len(res.Changed) == 0 {
		return res, events, err
	}
	status := make(map[string]Status, len(sel))
	for _, m := range sel {
		status[m.ID] = m.Status
	}
	by := map[Status][]string{}
	for _, id := range res.Changed {
		by[status[id]] = append(by[status[id]], id)
	}
	for _, l := range by {
		slices.Sort(l)
	}
	ev := NewAuditEvent(d.Actor, ActionDiscard, opID, DiscardChunkDetails{Operation: opID, Reason: d.Reason,
		Count: len(res.Changed), IDsSHA256: DigestIDs(res.Changed), PreviousStatus: by})
	return res, append(events, &ev), nil
}
