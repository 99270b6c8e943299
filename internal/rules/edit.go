package rules

import (
	"errors"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
)

// EditRules are the checks of a payload edit that need the stored message
// and the configuration: the idempotency rules (an edit may not change the
// key) and the JSON Schemas of the jobs. The API's PUT
// /api/v1/messages/{id}/payload and the web UI's editor both use them.
type EditRules struct {
	Preparer *collect.Preparer  // nil: no idempotency rule reads payloads
	Schemas  map[string]*Schema // by job name
}

// Check refuses an edit the stored message m forbids, in this order: a
// stale If-Match (EPRECONDITION naming If-Match), a status that cannot be
// edited (ECONFLICT), a payload equal to the current one
// (quarantine.PayloadEdit.CheckCurrent: EUNPROCESSABLE naming /payload), a
// payload that would change the idempotency key (EUNPROCESSABLE naming
// /payload), or one that violates its job's JSON Schema (EUNPROCESSABLE
// naming /payload; SchemaViolations lists where).
func (er EditRules) Check(m *quarantine.Message, e quarantine.PayloadEdit) error {
	if m.PayloadSHA256 != e.IfMatch {
		return quarantine.FieldErrorf(quarantine.EPRECONDITION, "If-Match",
			"the payload changed since it was read: its payload_sha256 is now %s; read it again", m.PayloadSHA256)
	}
	if err := m.Status.Editable(); err != nil {
		return err
	}
	if err := e.CheckCurrent(m.PayloadSHA256); err != nil { // a no-op edit: 422 naming /payload
		return err
	}
	// The key a JSON Pointer rule reads from the payload must stay the
	// stored one (or, when the stored key came from elsewhere, what the
	// rule read from the old payload): a replayed job is deduplicated by it.
	if key, fromPayload := er.Preparer.PayloadKey(m.Queue, e.Payload); fromPayload && key != m.IdempotencyKey {
		if old, _ := er.Preparer.PayloadKey(m.Queue, m.Payload); key != old {
			return quarantine.FieldErrorf(quarantine.EUNPROCESSABLE, "/payload",
				"the edit would change the idempotency key from %q to %q: keep the key's field as it is", quarantine.Clip(m.IdempotencyKey), quarantine.Clip(key))
		}
	}
	sch, ok := er.Schemas[m.JobName]
	if !ok {
		return nil
	}
	violations, err := sch.Validate(e.Payload)
	if err != nil || len(violations) == 0 {
		return err
	}
	return &violationsError{
		err: quarantine.FieldErrorf(quarantine.EUNPROCESSABLE, "/payload",
			"the payload violates the JSON Schema of job %q in %d place(s): see violations", quarantine.Clip(m.JobName), len(violations)),
		violations: violations,
	}
}

// SchemaViolations returns the JSON Schema violations err (from
// EditRules.Check) lists, nil when it lists none.
func SchemaViolations(err error) []Violation {
	var ve *violationsError
	if errors.As(err, &ve) {
		return ve.violations
	}
	return nil
}
