package quarantine

import "time"

// HistogramKind says what a histogram counts.
type HistogramKind string

// Histogram kinds.
const (
	// HistogramInflow counts every message, whatever its status, by
	// collected_at: the inflow of new dead letters.
	HistogramInflow HistogramKind = "inflow"
	// HistogramWaiting counts the quarantined messages by failed_at: how
	// old the dead letters still waiting are.
	HistogramWaiting HistogramKind = "waiting"
)

// Bounds of a histogram request.
const (
	MaxHistogramQueues  = 1000
	MaxHistogramBuckets = 200
)

// HistogramRequest asks for counts of messages per queue in consecutive
// time windows, for the overview's charts.
type HistogramRequest struct {
	Kind HistogramKind
	// Queues are the queues counted, each once; the result has one
	// histogram per queue, in this order.
	Queues []string
	// Owners, when set, counts only these owners' messages (a scoped
	// token's view).
	Owners []string
	// Edges bound the buckets, strictly ascending: bucket i counts the
	// messages whose time t has Edges[i] < t <= Edges[i+1] (the windows of
	// QueueStats' inflow are closed the same way). Times are compared at
	// the stores' microsecond precision.
	Edges []time.Time
}

// QueueHistogram is one queue's counts, one per bucket.
type QueueHistogram struct {
	Queue  string
	Counts []int64
}

// Validate checks r: EINVALID naming the field.
func (r *HistogramRequest) Validate() error {
	switch r.Kind {
	case HistogramInflow, HistogramWaiting:
	default:
		return FieldErrorf(EINVALID, "kind", "unknown histogram kind %q", r.Kind)
	}
	if len(r.Queues) == 0 || len(r.Queues) > MaxHistogramQueues {
		return FieldErrorf(EINVALID, "queues", "a histogram needs between 1 and %d queues", MaxHistogramQueues)
	}
	seen := make(map[string]bool, len(r.Queues))
	for _, q := range r.Queues {
		if err := validateText("queues", q); err != nil {
			return err
		}
		if seen[q] {
			return FieldErrorf(EINVALID, "queues", "queue %q is listed twice", q)
		}
		seen[q] = true
	}
	if err := validateValues("owners", r.Owners); err != nil {
		return err
	}
	if len(r.Edges) < 2 || len(r.Edges) > MaxHistogramBuckets+1 {
		return FieldErrorf(EINVALID, "edges", "a histogram needs between 1 and %d buckets", MaxHistogramBuckets)
	}
	for i := 1; i < len(r.Edges); i++ {
		if !r.Edges[i-1].Truncate(time.Microsecond).Before(r.Edges[i].Truncate(time.Microsecond)) {
			return FieldErrorf(EINVALID, "edges", "the edges must be strictly ascending (to the microsecond)")
		}
	}
	return nil
}
