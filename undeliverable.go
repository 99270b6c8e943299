package quarantine

// MaxUndeliverableShown is how many undeliverable messages a preview
// names; Undeliverable.Count counts them all.
const MaxUndeliverableShown = 100

// UndeliverableItem is one message of a batch that would not be
// published, and why: skipped when the batch was pinned (no idempotency
// key, a changed key rule, not quarantined) or refused by the routes of
// the configuration (no destination for an HTTP-ingested message, an
// unknown collector, no queue).
type UndeliverableItem struct {
	MessageID string `json:"message_id"`
	Queue     string `json:"queue"`
	Reason    string `json:"reason"`
}

// Undeliverable is what a dry run says cannot be delivered: Count items
// in all, the first MaxUndeliverableShown of them named in Items.
type Undeliverable struct {
	Count int                 `json:"count"`
	Items []UndeliverableItem `json:"items"`
}

// RouteCheck says whether a message of batch b has somewhere to be
// published (nil), or why not (a user-safe error): the replay engine's
// routing, asked before the batch starts.
type RouteCheck func(b *ReplayBatch, m *Message) error
