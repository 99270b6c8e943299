// Package workdriver holds what the broker packages' worker drivers
// share.
package workdriver

import (
	"maps"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/worker"
)

// Ref is d's Ref, a *R that a driver of broker (its name, for the error)
// made. Errors are EINTERNAL for a delivery another driver made.
func Ref[R any](d *worker.Delivery, broker string) (*R, error) {
	r, ok := d.Ref.(*R)
	if !ok || r == nil {
		return nil, quarantine.Errorf(quarantine.EINTERNAL, "%s: the delivery was not made by this driver", broker)
	}
	return r, nil
}

// Headers are the headers Send puts on m: a copy of m.Headers, with room
// for extra more, and m's job name under worker.HeaderJobName unless they
// have that header.
func Headers(m *worker.Message, extra int) map[string]string {
	h := make(map[string]string, len(m.Headers)+extra)
	maps.Copy(h, m.Headers)
	if m.JobName != "" {
		if _, ok := h[worker.HeaderJobName]; !ok {
			h[worker.HeaderJobName] = m.JobName
		}
	}
	return h
}
