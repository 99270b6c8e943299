// Package auditlog holds what both stores do around their SQL when they
// walk the audit log (store.Store's VerifyAudit).
package auditlog

import "github.com/quarantine-dev/quarantine"

// Rows is what Walk needs of a query's rows (database/sql's and pgx's).
type Rows interface {
	Next() bool
}

// Walk feeds the events of rows (the audit log in seq order), each read
// by scan, to v until v has seen enough (its Add returns false) or the
// rows end. It returns the error of a scan; the caller closes rows and
// checks their error before it asks v to finish.
func Walk[R Rows](v *quarantine.ChainVerifier, rows R, scan func(R) (quarantine.AuditEvent, error)) error {
	for rows.Next() {
		e, err := scan(rows)
		if err != nil {
			return err
		}
		if !v.Add(&e) {
			break
		}
	}
	return nil
}
