// Package worker is the delivery state machine job consumers run, the
// same one the collectors and the replay engine follow (DESIGN.md, "The
// one idea"):
//
//	reserve -> claim (idempotency key) -> effect -> record result -> ack
//	transient failure          -> retry with bounded, jittered backoff (RetryAfter wins)
//	permanent / attempts spent -> dead-letter the canonical failure envelope, compact reason
//
// It is broker-neutral: a Driver (declared here; implemented by
// broker/memory.WorkQueue, broker/rabbitmq.WorkDriver (delays through
// per-delay TTL queues), broker/sqs.WorkDriver (retries re-sent with
// DelaySeconds, at most 15 minutes), broker/nats.WorkDriver
// (NakWithDelay, the worker's headers kept in a key-value bucket) and
// broker/kafka.WorkDriver (a retry topic held until due; Kafka counts no
// deliveries, so one that never settled is run again uncounted) and
// broker/pubsub.WorkDriver (the ack deadline set to the delay, at most
// 10 minutes))
// receives and settles deliveries; Claims (MemoryClaims,
// worker/sqliteclaims, worker/pgclaims) store idempotency keys durably.
//
// # Handlers and outcomes
//
// A Handler returns:
//
//   - nil: the claim is completed (the key's one terminal result), then
//     the delivery is acked;
//   - an ordinary error: retried after the job's Backoff, or
//     dead-lettered as "exhausted" on the MaxAttempts-th attempt (the
//     first attempt counts; 0 means no cap; a delivery arriving past the
//     cap because earlier ones never settled is dead-lettered without
//     running, so active retries never exceed the cap);
//   - RetryAfter(err, d): retried after d (negative d is zero), still
//     capped; RetryAfterResponse builds it from an HTTP 429/503 answer's
//     Retry-After (seconds or HTTP-date). d is a lower bound: when it is
//     longer than the driver takes (Limits.MaxDelay: SQS 15 min), the
//     retry is settled with the maximum and x-quarantine-not-before,
//     and a delivery arriving before that time is retried again (class
//     "deferred") without running and without counting an attempt;
//   - Permanent(err) (errors.Is(err, ErrPermanent)): dead-lettered at
//     once, class "permanent" ("malformed" when it also matches
//     ErrMalformed, as the typed decoder JSON returns);
//   - Reject(err): Driver.Reject, the backend's rejection policy decides.
//
// When one error carries several of these, wherever each sits in the
// chain: Reject wins over Permanent (Reject(Permanent(err)) and
// Permanent(Reject(err)) are both rejected), Permanent over the attempt
// cap, and the cap over RetryAfter (at the cap, RetryAfter and ordinary
// errors dead-letter as "exhausted"). A handler returning its context's
// error at shutdown is a shutdown retry whatever it wraps.
//
// A panic is an ordinary error (*PanicError, with the stack, which is
// logged). Job.Timeout is a deadline on the handler's context
// (cooperative); its expiry is an ordinary error. A delivery naming no
// registered job is retried after 30 s until its 10th delivery, then
// dead-lettered as "unknown_name" (Config.UnknownRetryDelay,
// UnknownMaxDeliveries).
//
// # Attempts
//
// The attempt of a delivery is what the worker recorded on its last
// retry (x-quarantine-attempts) plus one, plus every delivery the backend
// counted since then that the worker never settled (the process died, a
// settlement failed): see Delivery.Attempt and Limits.RetryKeepsCount. A
// retry counts this attempt after the handler failed (classes error,
// panic, timeout, retry_after) and for an unknown job name. These
// retries do not count it, on any driver:
//
//   - claim_held: the key is held by a live lease elsewhere (retried when
//     it ends);
//   - claim_error: the claim store could not be reached (retried after
//     the job's backoff for the number of claims that failed in a row in
//     this worker, up to MaxAttempts-1, or 10 without a cap: an outage
//     backs off as a failing job does; the first claim that succeeds
//     starts again from 1);
//   - shutdown: Run is stopping (the handler was cancelled, or never
//     started);
//   - record_error, claim_lost: the handler succeeded but its result could
//     not be recorded (retried after the lease);
//   - deferred: an x-quarantine-not-before still in the future.
//
// So a job is dead-lettered as "exhausted" after exactly MaxAttempts runs
// of its handler, unless some of its deliveries never settled: each
// counts as an attempt, run or not, which is what stops a job that kills
// its process from running for ever.
//
// # Claims
//
// With Config.Claims set, a delivery carrying an idempotency key claims
// it under a fresh owner token for Config.ClaimLease (renewed every half
// lease while the handler runs):
//
//   - already done: acked without running the handler (a claim
//     conflict: metric quarantine_worker_claim_conflicts_total);
//   - held by a live lease elsewhere: retried when that lease ends, not
//     counted as an attempt;
//   - new, released, or held under an expired lease (the holder died):
//     claimed, and the handler runs.
//
// A delivery without a key runs unclaimed (at-least-once); Dispatch
// never sends one. Complete and Release are fenced by the owner token
// (ErrClaimLost). A
// key whose job was retried, rejected or dead-lettered is released, never
// completed, so that its replay runs. The one place an effect can repeat
// is a handler that outlives its lease while another worker takes the key
// over, or a completed effect whose record failed: the worker then does
// not ack (acknowledge means the durable effect is complete) and the
// takeover runs it again. A handler that succeeds after its claim was
// lost claims the key again: free (the takeover failed and released
// it), its result is recorded and the delivery acked; done, it is acked
// as a duplicate; held, it is retried after that lease (class
// claim_lost). Size ClaimLease above the handler's Timeout.
//
// One terminal result per key is provable in SQL: ProofQuery (the file
// claims.sql) returns every key of worker_claims that has more than one
// completion, or a state that disagrees with its count; an empty result
// proves the invariant. The conformance suite (worker/claimtest) and the
// worker's tests run it after every case:
//
//	SELECT key, state, completions FROM worker_claims
//	WHERE completions > 1
//	   OR (state = 'done' AND completions <> 1)
//	   OR (state <> 'done' AND completions <> 0);
//
// # Wire format of a job message
//
// The body is the payload, byte for byte (Dispatch writes JSON,
// content type application/json). Headers (names lower case):
//
//	x-idempotency-key            the business idempotency key (required by Dispatch)
//	x-quarantine-job-name        the job name (or the backend's native type property: Delivery.JobName)
//	x-schema-version             the payload's schema version (kept by a replay)
//	x-quarantine-enqueued-at     when Dispatch sent it, RFC 3339
//	x-quarantine-attempts        attempts already made, set by the worker on a retry
//	x-quarantine-delivered       the backend's delivery count at that retry (drivers with RetryKeepsCount)
//	x-quarantine-not-before      earliest next run, RFC 3339, when a delay exceeded the driver's maximum
//	x-quarantine-first-failed-at first failure, RFC 3339, set on the first retry
//
// This is what the replay engine publishes (replay.Prepare: the payload
// as body, x-idempotency-key, x-quarantine-job-name,
// x-quarantine-replay-id, x-quarantine-original-id, the content type), so
// a replayed job runs through the same path; the replay drops the
// x-quarantine-* bookkeeping, so a replay starts again at attempt 1. A
// consumer accepts the job's SchemaVersion, its PreviousVersion (rolling
// deploys) and messages without a version; any other version is
// dead-lettered as permanent.
//
// A dead-lettered delivery goes to the failure queue as the canonical
// failure envelope (quarantine.MarshalEnvelope, "quarantine.failure/v1"):
// job id, name, queue, idempotency key, schema version, attempts,
// enqueued_at, the headers less the worker's own, the payload, and the
// failure class, a compact one-line reason (at most 1 KiB, never the
// payload) and failed_at / first_failed_at.
//
// # Writing a Driver
//
// A driver adapts one work queue and its failure queue:
//
//   - Receive blocks until at least one delivery (at most max) or ctx ends;
//     it fills Delivery.ID (transport id), Queue, JobName (a native type
//     property, if any), Headers, Body, ContentType, Attempt (the
//     backend's delivery count: NumDelivered, ApproximateReceiveCount,
//     x-delivery-count; 0 if unknown), EnqueuedAt and Ref (its handle).
//   - Ack, Retry, DeadLetter, Reject are each called at most once per
//     delivery and return an error when the backend did not accept the
//     settlement (the worker then reports no outcome and leaves the
//     delivery to redelivery). Retry must carry d.Headers and d.Body
//     (RabbitMQ: publish to a per-delay TTL queue that dead-letters back
//     to the work queue, confirm, then ack; SQS: send a copy with
//     DelaySeconds, then delete the original; NATS: store the worker's
//     headers in a key-value bucket, then NakWithDelay). DeadLetter must
//     publish the envelope to the failure queue and wait for the
//     broker's confirmation before settling the source (RabbitMQ:
//     confirm, then ack; SQS: send, then delete; NATS: publish to the
//     failure stream, then Term).
//   - Limits().RetryKeepsCount says whether Retry redelivers the same
//     message, whose delivery count goes on (memory, NATS), or a new one
//     counted from 1 (RabbitMQ, SQS). A delivery the backend pushed but
//     Receive never returned must not be left to count as a delivery
//     (RabbitMQ: Close re-sends the prefetched ones; NATS: a late
//     arrival is recorded as returned unseen).
//   - Extend renews the delivery's lease (NATS InProgress, SQS visibility);
//     Limits().RenewEvery says how often (half the AckWait or visibility
//     timeout), MaxRenew caps it (SQS: 12 h from the first receive).
//   - Limits().MaxDelay and DelayStep declare the delays the backend takes
//     (SQS: 15 min, 1 s steps); a DelayValidator checks a restricted set
//     (RabbitMQ delay buckets). Register refuses a job whose backoff can
//     exceed them; a longer delay asked at run time is deferred (see
//     RetryAfter).
//   - State it with var _ worker.Driver = (*Driver)(nil), and beside it a
//     worker.Sender for Dispatch.
//
// broker/memory.WorkQueue is the reference implementation.
//
// # Running it
//
// Job.Concurrency bounds the deliveries of a job at once, retries in the
// same budget. Run returns when its context ends: it stops receiving,
// gives in-flight handlers Config.DrainTimeout to reach a decision, then
// cancels their contexts; a handler returning that context's error is
// retried with zero delay, not counted as an attempt. Every settlement
// runs on a fresh context (Config.SettleTimeout, 30 s) detached from the
// cancellation. Handlers still running after that are abandoned: their
// deliveries stay unacknowledged for the backend to redeliver.
//
// Metrics (NewMetrics) count completions, retries by class, redeliveries,
// dead-letters by class, rejections, claim conflicts, settlements the
// backend refused and deliveries abandoned at the drain deadline, and
// time handlers and the age of deliveries at receipt; labels are job
// names, classes and results only. Config.OnOutcome is
// called only after the backend accepted a settlement.
package worker
