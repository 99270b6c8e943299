package ops

import (
	"context"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/notfound"
)

// Current is what a store reads of a message (its row locked, where the
// store locks rows) before an edit.
type Current struct {
	Status      quarantine.Status
	SHA256      string // of the current payload
	Version     int    // the current payload version
	ContentType string
}

// EditPlan is what an edit writes: the next payload version and the
// message's new state, with its audit event.
type EditPlan struct {
	Version     int    // the new version (current + 1)
	SHA256      string // of the new payload
	PrevSHA256  string // of the payload it replaces
	ContentType string // the edit's, or the current one when it gives none
	Actor       string // sanitised, for the version row
	Event       quarantine.AuditEvent
}

// CheckEdit checks e before any transaction: a valid edit (e.Validate)
// of something that can be a message id (ENOTFOUND otherwise).
func CheckEdit(e quarantine.PayloadEdit) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if !quarantine.ValidID(e.MessageID) {
		return notfound.Message(e.MessageID)
	}
	return nil
}

// PlanEdit applies the rules of an edit to the current row: the status
// must allow it (ECONFLICT while replaying or once discarded), e.IfMatch
// must be the current hash and the payload must change (e.CheckCurrent:
// EPRECONDITION, EUNPROCESSABLE). It returns what to write.
func PlanEdit(e quarantine.PayloadEdit, cur Current) (EditPlan, error) {
	if err := cur.Status.Editable(); err != nil {
		return EditPlan{}, err
	}
	if err := e.CheckCurrent(cur.SHA256); err != nil {
		return EditPlan{}, err
	}
	p := EditPlan{
		Version:     cur.Version + 1,
		SHA256:      quarantine.PayloadHash(e.Payload),
		PrevSHA256:  cur.SHA256,
		ContentType: quarantine.SanitizeText(e.ContentType),
		Actor:       quarantine.SanitizeText(e.Actor),
	}
	if p.ContentType == "" {
		p.ContentType = cur.ContentType
	}
	p.Event = quarantine.NewAuditEvent(e.Actor, quarantine.ActionEdit, e.MessageID, map[string]any{
		"version": p.Version, "old_sha256": p.PrevSHA256, "new_sha256": p.SHA256, "reason": e.Reason,
	})
	return p, nil
}

// EditTx is what the edit flow (Edit) needs of a store's transaction:
// read the current row (locked, where the store locks rows), write the
// new payload version and the message's new state, append the audit
// event, and read the message back.
type EditTx interface {
	Holds
	// Current reads the row of message id; ENOTFOUND when there is none.
	Current(ctx context.Context, id string) (Current, error)
	// WritePayload stores e.Payload as version p.Version of message
	// e.MessageID (its row in payload_versions, with e.Reason) and moves
	// the message to it (hash, version, size, content type, updated now).
	WritePayload(ctx context.Context, e quarantine.PayloadEdit, p EditPlan) error
	// AppendAudits appends events in the same transaction.
	AppendAudits(ctx context.Context, events []*quarantine.AuditEvent) error
	// Message reads message id as stored now.
	Message(ctx context.Context, id string) (*quarantine.Message, error)
}

// Edit runs e inside a store's transaction: the current row, the rules
// (PlanEdit; ECONFLICT too while a replay holds the message: Holds), the
// writes and the audit event, in that order. It returns the edited
// message.
func Edit(ctx context.Context, e quarantine.PayloadEdit, tx EditTx) (*quarantine.Message, error) {
	cur, err := tx.Current(ctx, e.MessageID)
	if err != nil {
		return nil, err
	}
	p, err := PlanEdit(e, cur)
	if err == nil {
		err = checkNotHeld(ctx, e.MessageID, tx)
	}
	if err != nil {
		return nil, err
	}
	if err := tx.WritePayload(ctx, e, p); err != nil {
		return nil, err
	}
	if err := tx.AppendAudits(ctx, []*quarantine.AuditEvent{&p.Event}); err != nil {
		return nil, err
	}
	return tx.Message(ctx, e.MessageID)
}
