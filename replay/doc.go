// Package replay is the replay engine: it publishes the items of running
// replay batches back to their queues at the batch's rate, and records what
// the broker answered.
//
// Each item goes through the delivery state machine of the service (see
// DESIGN.md): lease (an owner token, an expiry and a fencing token), take
// rate tokens, publish with broker confirmation, record. A process that
// dies between publish and record leaves a lease that expires; the item is
// leased again and published again, with the same idempotency key, so the
// worker pipeline downstream absorbs the repeat. A process whose lease was
// taken over (it was paused or partitioned past the expiry) cannot record
// the item afterwards: its fencing token is stale.
//
// The rate holds across every engine sharing a database: tokens come from
// buckets the store keeps, one per batch and one per destination, and an
// x/time/rate limiter spreads each grant within the second.
//
// Safety: a canary publishes the first items of a batch, then waits for
// its observation window; a canary message that comes back failing (the
// re-failure link ingest records) halts the batch. A breaker pauses a
// running batch whose re-failure ratio passes its threshold.
package replay
