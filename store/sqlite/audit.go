package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/store/internal/auditlog"
	"github.com/quarantine-dev/quarantine/store/internal/txn"
)

const auditColumns = `seq, time, actor, action, subject, details, prev_hash, hash`

// appendAudit seals e after the kept head and stores it, moving the head,
// inside tx (the caller's write transaction, which holds the write lock).
func (s *Store) appendAudit(ctx context.Context, tx *sql.Tx, e quarantine.AuditEvent) (quarantine.AuditEvent, error) {
	es := []*quarantine.AuditEvent{&e}
	err := s.appendAudits(ctx, tx, es)
	return e, err
}

// auditRows is how many events one INSERT of appendAudits stores.
const auditRows = 100

// appendAudits seals es as the next events of the chain, in order, and
// stores them, up to auditRows per INSERT, moving the head once, inside
// tx.
func (s *Store) appendAudits(ctx context.Context, tx *sql.Tx, es []*quarantine.AuditEvent) error {
	if len(es) == 0 {
		return nil
	}
	head, err := readHead(ctx, tx)
	if err != nil {
		return err
	}
	now := s.clock()
	for _, e := range es {
		if err := e.Seal(head, now); err != nil {
			return err
		}
		head = quarantine.AuditHead{Seq: e.Seq, Hash: e.Hash}
	}
	var full *sql.Stmt
	for len(es) > 0 {
		n := min(len(es), auditRows)
		args := make([]any, 0, 8*n)
		for _, e := range es[:n] {
			args = append(args, e.Seq, micros(e.Time), e.Actor, e.Action, e.Subject, string(e.Details), e.PrevHash, e.Hash)
		}
		if n < auditRows {
			_, err = tx.ExecContext(ctx, insertAudits(n), args...)
		} else {
			if full == nil {
				if full, err = tx.PrepareContext(ctx, insertAudits(n)); err != nil {
					return err
				}
				defer full.Close()
			}
			_, err = full.ExecContext(ctx, args...)
		}
		if err != nil {
			return err
		}
		es = es[n:]
	}
	_, err = tx.ExecContext(ctx, `UPDATE audit_head SET seq = ?, hash = ? WHERE id = 1`, head.Seq, head.Hash)
	return err
}

// insertAudits is the INSERT of n audit events.
func insertAudits(n int) string {
	return `INSERT INTO audit_log (` + auditColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)` +
		strings.Repeat(`, (?, ?, ?, ?, ?, ?, ?, ?)`, n-1)
}

// AppendAudit seals e as the next event of the chain and stores it.
// EINTERNAL when e.Details is not valid JSON.
func (s *Store) AppendAudit(ctx context.Context, e quarantine.AuditEvent) (quarantine.AuditEvent, error) {
	var out quarantine.AuditEvent
	err := s.write(ctx, "append to the audit log", func(tx *sql.Tx) error {
		var err error
		out, err = s.appendAudit(ctx, tx, e)
		return err
	})
	if err != nil {
		return quarantine.AuditEvent{}, err
	}
	return out, nil
}

func scanAudit(r scanner) (quarantine.AuditEvent, error) {
	var e quarantine.AuditEvent
	var at int64
	var details string
	if err := r.Scan(&e.Seq, &at, &e.Actor, &e.Action, &e.Subject, &details, &e.PrevHash, &e.Hash); err != nil {
		return e, err
	}
	e.Time = fromMicros(at)
	e.Details = []byte(details)
	return e, nil
}

// ListAudit returns the events matching f, oldest first. EINVALID for a
// bad filter. f.Subject selects the events whose subject it is and, for a
// message discarded by a chunk of a discard operation, the chunk's event
// (its discard_seq, migration 0022), read first: without one, the query
// reads the subject index in order, as it always did.
func (s *Store) ListAudit(ctx context.Context, f quarantine.AuditFilter) ([]quarantine.AuditEvent, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return txn.Get(ctx, s.read, "list the audit log", func(tx *sql.Tx) ([]quarantine.AuditEvent, error) {
		var seq sql.NullInt64
		if quarantine.ValidID(f.Subject) {
			err := tx.QueryRowContext(ctx, `SELECT discard_seq FROM messages WHERE id = ?`, f.Subject).Scan(&seq)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
		}
		q, args := auditQuery(f, seq.Int64)
		return queryAll(ctx, tx, scanAudit, q, args...)
	})
}

// auditQuery is the query of ListAudit for f (valid), with discardSeq the
// discard_seq of the message f.Subject (0: none).
func auditQuery(f quarantine.AuditFilter, discardSeq int64) (string, []any) {
	var c clause
	c.add("seq > ?", f.Seq)
	switch {
	case discardSeq > 0:
		c.add("(subject = ? OR seq = ?)", f.Subject, discardSeq)
	case f.Subject != "":
		c.add("subject = ?", f.Subject)
	}
	for _, eq := range []struct{ col, v string }{{"actor", f.Actor}, {"action", f.Action}} {
		if eq.v != "" {
			c.add(eq.col+" = ?", eq.v)
		}
	}
	c.between("time", f.After, f.Before)
	return `SELECT ` + auditColumns + ` FROM audit_log` + c.where() + ` ORDER BY seq LIMIT ?`, append(c.args, f.Limit)
}

func readHead(ctx context.Context, tx *sql.Tx) (quarantine.AuditHead, error) {
	var h quarantine.AuditHead
	err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&h.Seq, &h.Hash)
	return h, err
}

// AuditHead returns the head kept beside the log.
func (s *Store) AuditHead(ctx context.Context) (quarantine.AuditHead, error) {
	var h quarantine.AuditHead
	err := s.read(ctx, "read the audit head", func(tx *sql.Tx) (err error) {
		h, err = readHead(ctx, tx)
		return err
	})
	return h, err
}

// VerifyAudit walks the whole chain, in one snapshot, through a
// quarantine.ChainVerifier that must end at the kept head and contain each
// of expect. A broken chain is a result, not an error.
func (s *Store) VerifyAudit(ctx context.Context, expect ...quarantine.AuditHead) (quarantine.AuditVerification, error) {
	var res quarantine.AuditVerification
	err := s.read(ctx, "verify the audit log", func(tx *sql.Tx) error {
		head, err := readHead(ctx, tx)
		if err != nil {
			return err
		}
		v := quarantine.NewChainVerifier(expect...)
		v.EndAt(head)
		rows, err := tx.QueryContext(ctx, `SELECT `+auditColumns+` FROM audit_log ORDER BY seq`)
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := auditlog.Walk(v, rows, func(r *sql.Rows) (quarantine.AuditEvent, error) { return scanAudit(r) }); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		res = v.Finish()
		return nil
	})
	return res, err
}
