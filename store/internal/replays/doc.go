// Package replays holds what both stores do alike for replay batches:
// building a new batch from its planned items, the audit events of a
// batch's life, the validation of results, and the arithmetic of the
// shared token buckets, and the replay methods of store.Replays written
// once (Methods) over a store's Backend. No I/O: each store runs its own
// SQL around it.
package replays
