package rules

import (
	"context"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// maxReplayChanges bounds the state changes read for a batch's rate.
const maxReplayChanges = quarantine.MaxLimit

// ReplayRate is b's achieved rate at now with its pauses and halts
// excluded (quarantine.AchievedRate over b's audited state changes); nil
// before it starts. Lists show the rate without reading the changes.
func ReplayRate(ctx context.Context, st AuditLister, b *quarantine.ReplayBatch, now time.Time) (*float64, error) {
	if b.StartedAt == nil {
		return nil, nil
	}
	evs, err := st.ListAudit(ctx, quarantine.AuditFilter{Subject: b.ID, After: *b.StartedAt, Limit: maxReplayChanges})
	if err != nil {
		return nil, err
	}
	return quarantine.AchievedRate(b, evs, now), nil
}

// AuditLister reads audit events (a store.Store does).
type AuditLister interface {
	ListAudit(ctx context.Context, f quarantine.AuditFilter) ([]quarantine.AuditEvent, error)
}
