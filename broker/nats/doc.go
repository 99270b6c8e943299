// Package nats collects dead letters from NATS JetStream for the
// quarantine collector loop (package collect).
//
// A Source works in one of two modes (Config):
//
// (a) A failure stream. Workers publish canonical failure envelopes
// (quarantine.failure/v1) to a stream; the Source drains it through a
// durable pull consumer of its own (AckExplicit, MaxDeliver unlimited,
// AckWait well above the commit time, kept alive by InProgress while a
// batch waits for the store). Envelopes are decoded by
// collect.DecodeEnvelope; any other body is kept raw, byte-exact, classed
// malformed and flagged. Queue is the envelope's job.queue, else the
// subject. The dedupe key is the stream, the stream sequence and the time
// the stream stored the message (DedupeKey), so a redelivery is stored
// once and a re-created stream whose sequences start over is not taken for
// a duplicate.
//
// (b) MaxDeliver advisories. When a worker consumer gives up on a message,
// the server publishes an advisory on
// $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer> carrying
// its stream sequence; the message stays in the stream. The Source keeps
// those advisories in a work-queue stream of its own (the capture stream,
// created at the first start), so that advisories published while the
// collector is down wait for it; it drains them through a durable
// consumer, fetches each original message by sequence, and stores it
// byte-exact as the job (class delivery_limit, Attempts = the advisory's
// deliveries, Queue = the original subject, headers = the original
// headers). After the store commits it acknowledges the advisory and, with
// delete_after_store, deletes the original from the worker stream.
//
// The capture stream (default QUARANTINE_ADV_<stream>_<consumer>) has no
// size or age limit: it only ever holds advisories not yet handled. Delete
// it by hand when the collector is removed for good.
//
// Advisories published before the capture stream existed are found by
// reconciliation, run at each start and every reconcile_every: a message
// still in the stream at or below the worker consumer's ack floor was never
// acknowledged, so the consumer gave up on it. That holds for work-queue
// streams (and interest streams with that one consumer), whose
// acknowledged messages leave the stream; under limits retention it cannot
// be told and reconciliation is skipped (logged). Servers before 2.10 do
// not move the ack floor past a given-up message; there reconciliation
// takes everything delivered whenever the consumer has nothing pending.
// Source.reconcile gives the details.
//
// A message that is gone before it could be fetched is never skipped in
// silence: the Source appends a collect.lost audit event (subject
// "<stream>:<seq>", details stream, seq, consumer, reason) through the
// function given to SetAudit, before it acknowledges the advisory. The
// wiring passes store.AppendAudit:
//
//	src, err := nats.NewSource(name, cfg, logger)
//	src.SetAudit(func(ctx context.Context, e quarantine.AuditEvent) error {
//		_, err := st.AppendAudit(ctx, e)
//		return err
//	})
//
// Acknowledgements are confirmed by the server (double ack). Collectors
// that share a consumer (replicas of one configuration) must share the
// collector name too: the store dedupes per collector.
package nats
