package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/auditlog"
)

// appendAudit seals e as the next event of the chain and stores it,
// inside tx. The row lock on audit_head serialises appends: the head read
// here is the one the event follows, and it is moved in the same
// transaction.
func (s *Store) appendAudit(ctx context.Context, tx pgx.Tx, e *quarantine.AuditEvent) error {
	return s.appendAudits(ctx, tx, []*quarantine.AuditEvent{e})
}

// appendAudits seals es as the next events of the chain, in order, and
// stores them with one statement, inside tx: a bulk action appends its
// thousands of events in three round trips.
func (s *Store) appendAudits(ctx context.Context, tx pgx.Tx, es []*quarantine.AuditEvent) error {
	if len(es) == 0 {
		return nil
	}
	var head quarantine.AuditHead
	if err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1 FOR UPDATE`).Scan(&head.Seq, &head.Hash); err != nil {
		return err
	}
	now := s.clock()
	n := len(es)
	seq := make([]int64, n)
	at := make([]time.Time, n)
	actor, action, subject, details, prev, hash := mk(n), mk(n), mk(n), mk(n), mk(n), mk(n)
	for i, e := range es {
		if err := e.Seal(head, now); err != nil {
			return err
		}
		head = quarantine.AuditHead{Seq: e.Seq, Hash: e.Hash}
		seq[i], at[i], actor[i], action[i], subject[i] = e.Seq, e.Time, e.Actor, e.Action, e.Subject
		details[i], prev[i], hash[i] = string(e.Details), e.PrevHash, e.Hash
	}
	if _, err := tx.Exec(ctx, `INSERT INTO audit_log (seq, "time", actor, action, subject, details, prev_hash, hash)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])`,
		seq, at, actor, action, subject, details, prev, hash); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1`, head.Seq, head.Hash)
	return err
}

// AppendAudit seals e as the next event of the chain and stores it.
// Errors: EINTERNAL when e.Details is not valid JSON, EUNAVAILABLE.
func (s *Store) AppendAudit(ctx context.Context, e quarantine.AuditEvent) (quarantine.AuditEvent, error) {
	err := s.inTx(ctx, "append an audit event", func(tx pgx.Tx) error {
		return s.appendAudit(ctx, tx, &e)
	})
	if err != nil {
		return quarantine.AuditEvent{}, err
	}
	return e, nil
}

const auditColumns = `seq, "time", actor, action, subject, details, prev_hash, hash`

// scanAudit reads one audit_log row.
func scanAudit(row pgx.CollectableRow) (quarantine.AuditEvent, error) {
	var e quarantine.AuditEvent
	var details string
	err := row.Scan(&e.Seq, &e.Time, &e.Actor, &e.Action, &e.Subject, &details, &e.PrevHash, &e.Hash)
	e.Time = e.Time.UTC()
	e.Details = json.RawMessage(details)
	return e, err
}

// ListAudit returns the events matching f, oldest first. Errors: EINVALID
// naming the field, EUNAVAILABLE, EINTERNAL.
func (s *Store) ListAudit(ctx context.Context, f quarantine.AuditFilter) ([]quarantine.AuditEvent, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	w := &where{}
	if f.Subject != "" {
		// The events whose subject it is, and the event that discarded it
		// when it is a message discarded by a chunk of a discard
		// operation (its discard_seq, migration 0024), read first: without
		// one, the query reads the subject index in order, as it always did.
		var seq *int64
		if quarantine.ValidID(f.Subject) {
			err := s.pool.QueryRow(ctx, `SELECT discard_seq FROM messages WHERE id = $1`, f.Subject).Scan(&seq)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return nil, translate(err, "list audit events")
			}
		}
		if seq != nil {
			w.conds = append(w.conds, "(subject = "+w.arg(f.Subject)+" OR seq = "+w.arg(*seq)+")")
		} else {
			w.conds = append(w.conds, "subject = "+w.arg(f.Subject))
		}
	}
	if f.Actor != "" {
		w.conds = append(w.conds, "actor = "+w.arg(f.Actor))
	}
	if f.Action != "" {
		w.conds = append(w.conds, "action = "+w.arg(f.Action))
	}
	if !f.After.IsZero() {
		w.conds = append(w.conds, `"time" >= `+w.arg(f.After))
	}
	if !f.Before.IsZero() {
		w.conds = append(w.conds, `"time" < `+w.arg(f.Before))
	}
	if f.Seq > 0 {
		w.conds = append(w.conds, "seq > "+w.arg(f.Seq))
	}
	q := "SELECT " + auditColumns + " FROM audit_log" + w.sql() + " ORDER BY seq LIMIT " + w.arg(f.Limit)
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, translate(err, "list audit events")
	}
	out, err := pgx.CollectRows(rows, scanAudit)
	if err != nil {
		return nil, translate(err, "list audit events")
	}
	if out == nil {
		out = []quarantine.AuditEvent{}
	}
	return out, nil
}

// AuditHead returns the head kept beside the log. Errors: EUNAVAILABLE,
// EINTERNAL.
func (s *Store) AuditHead(ctx context.Context) (quarantine.AuditHead, error) {
	var h quarantine.AuditHead
	err := s.pool.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&h.Seq, &h.Hash)
	if err != nil {
		return quarantine.AuditHead{}, translate(err, "read the audit head")
	}
	return h, nil
}

// VerifyAudit walks the whole chain in one snapshot (a repeatable-read,
// read-only transaction, so the head and the log agree), streaming rows
// through a ChainVerifier that must end at the stored head and contain
// expect. Errors: EUNAVAILABLE, EINTERNAL; a broken chain is a result.
func (s *Store) VerifyAudit(ctx context.Context, expect ...quarantine.AuditHead) (quarantine.AuditVerification, error) {
	var res quarantine.AuditVerification
	err := s.snapshot(ctx, "verify the audit log", func(tx pgx.Tx) error {
		var head quarantine.AuditHead
		if err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&head.Seq, &head.Hash); err != nil {
			return err
		}
		v := quarantine.NewChainVerifier(expect...)
		v.EndAt(head)
		rows, err := tx.Query(ctx, "SELECT "+auditColumns+" FROM audit_log ORDER BY seq")
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := auditlog.Walk(v, rows, func(r pgx.Rows) (quarantine.AuditEvent, error) { return scanAudit(r) }); err != nil {
			return err
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		res = v.Finish()
		return nil
	})
	return res, err
}
