package quarantine

import (
	"context"
	"slices"
	"time"
)

// AlarmStatus is the state of one alarm rule on one queue.
//
//	inactive -> pending (the condition holds) -> firing (it held for `for`)
//	pending -> inactive (it stopped holding before firing)
//	firing -> resolved (it stopped holding; a resolved notification is owed)
//	resolved -> pending (it holds again)
type AlarmStatus string

// Alarm states.
const (
	AlarmInactive AlarmStatus = "inactive"
	AlarmPending  AlarmStatus = "pending"
	AlarmFiring   AlarmStatus = "firing"
	AlarmResolved AlarmStatus = "resolved"
)

// AlarmStatuses lists every alarm state.
var AlarmStatuses = []AlarmStatus{AlarmInactive, AlarmPending, AlarmFiring, AlarmResolved}

// AlarmState is the persisted state of one alarm rule on one queue.
type AlarmState struct {
	Alarm string      `json:"alarm"`
	Queue string      `json:"queue"`
	Owner string      `json:"owner"`
	State AlarmStatus `json:"state"`
	// Since is when State began.
	Since time.Time `json:"since"`
	// ActiveAt is when the condition began to hold (pending and firing);
	// nil otherwise.
	ActiveAt *time.Time `json:"active_at,omitempty"`
	// NotifiedAt is when the last firing (or repeat) notification was
	// queued; ResentAt when the last Alertmanager refresh was.
	NotifiedAt *time.Time `json:"notified_at,omitempty"`
	ResentAt   *time.Time `json:"resent_at,omitempty"`
	AlarmReading
	UpdatedAt time.Time `json:"updated_at"`
}

// AlarmReading is what an evaluation read of a queue: which threshold was
// crossed (Reason, empty when none is) and the values it compared.
type AlarmReading struct {
	Reason          string  `json:"reason"`
	AgeSeconds      float64 `json:"age_seconds"`
	Depth           int64   `json:"depth"`
	InflowPerMinute float64 `json:"inflow_per_minute"`
}

// Validate checks a state a store is to save: a named alarm in one of
// AlarmStatuses. Errors are EINVALID naming "state".
func (a AlarmState) Validate() error {
	if a.Alarm == "" || !slices.Contains(AlarmStatuses, a.State) {
		return FieldErrorf(EINVALID, "state", "alarm %q on %q has state %q", a.Alarm, a.Queue, a.State)
	}
	return nil
}

// AlarmKind says why a notification is sent.
type AlarmKind string

// Notification kinds.
const (
	AlarmKindFiring   AlarmKind = "firing"   // the alarm began to fire
	AlarmKindRepeat   AlarmKind = "repeat"   // still firing after `repeat`
	AlarmKindRefresh  AlarmKind = "refresh"  // Alertmanager re-send while firing
	AlarmKindResolved AlarmKind = "resolved" // the alarm stopped firing
)

// AlarmDelivery is where a notification of the outbox stands.
type AlarmDelivery string

// Delivery states.
const (
	AlarmDeliveryPending   AlarmDelivery = "pending"
	AlarmDeliveryDelivered AlarmDelivery = "delivered"
	AlarmDeliveryFailed    AlarmDelivery = "failed" // refused for good (a 4xx): not retried
)

// AlarmEvent is what a notification says, rendered by each receiver.
type AlarmEvent struct {
	Alarm    string      `json:"alarm"`
	Queue    string      `json:"queue"`
	Owner    string      `json:"owner"`
	Status   AlarmStatus `json:"status"` // firing or resolved
	StartsAt time.Time   `json:"starts_at"`
	// EndsAt is when a resolved alarm stopped firing.
	EndsAt *time.Time `json:"ends_at,omitempty"`
	AlarmReading
	// At is when the evaluation that queued it ran.
	At time.Time `json:"at"`
	// URL opens the UI's list of exactly the alarm's messages (its queue,
	// quarantined, older than the alarm's max_age when the age fired);
	// RunbookURL the runbook section for it. Empty in events queued
	// before they existed.
	URL        string `json:"url,omitempty"`
	RunbookURL string `json:"runbook_url,omitempty"`
}

// AlarmNotification is one notification for one receiver in the outbox.
type AlarmNotification struct {
	ID            int64         `json:"id"` // assigned by the store, increasing
	Receiver      string        `json:"receiver"`
	Kind          AlarmKind     `json:"kind"`
	Event         AlarmEvent    `json:"event"`
	CreatedAt     time.Time     `json:"created_at"`
	Delivery      AlarmDelivery `json:"delivery"`
	Attempts      int           `json:"attempts"`
	NextAttemptAt time.Time     `json:"next_attempt_at"`
	LastError     string        `json:"last_error,omitempty"`
	DeliveredAt   *time.Time    `json:"delivered_at,omitempty"`
}

// Validate checks a notification a store is to queue: a known kind and a
// receiver. Errors are EINVALID naming "kind" or "receiver".
func (n AlarmNotification) Validate() error {
	switch n.Kind {
	case AlarmKindFiring, AlarmKindRepeat, AlarmKindRefresh, AlarmKindResolved:
	default:
		return FieldErrorf(EINVALID, "kind", "notification kind %q", n.Kind)
	}
	if n.Receiver == "" {
		return FieldErrorf(EINVALID, "receiver", "a notification needs a receiver")
	}
	return nil
}

// ValidateAlarms checks what a store's SaveAlarms is given: every state
// and every notification (their Validate), the first error first.
func ValidateAlarms(states []AlarmState, notes []AlarmNotification) error {
	for _, a := range states {
		if err := a.Validate(); err != nil {
			return err
		}
	}
	for _, n := range notes {
		if err := n.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// AlarmAttempt is the outcome of one delivery attempt.
type AlarmAttempt struct {
	Delivered bool
	// Err is why it failed; GiveUp marks it failed for good, otherwise it
	// is tried again at Next.
	Err    string
	GiveUp bool
	Next   time.Time
}

// AlarmLock is the alarm evaluator's hold on a store's alarms (see
// store.Alarms.LockAlarms).
type AlarmLock interface {
	// Check returns nil while the lock is still held (on PostgreSQL: its
	// connection answers), EUNAVAILABLE otherwise.
	Check(ctx context.Context) error
	// Release gives the lock up; later calls do nothing.
	Release()
}
