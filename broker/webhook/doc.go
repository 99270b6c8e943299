// Package webhook is the HTTP replay destination: a replay.Publisher that
// POSTs each replayed message, as a canonical failure envelope
// ("envelope": "quarantine.failure/v1", quarantine.MarshalEnvelope), to
// one configured URL.
//
// Each request carries Content-Type: application/json, Idempotency-Key
// (the message's idempotency key; its transport message id when it has
// none), Authorization: Bearer TOKEN when a token is configured, and the
// replay headers (x-quarantine-replay-id, x-quarantine-replayed-by,
// x-quarantine-original-id, x-idempotency-key, x-quarantine-job-name) as
// HTTP headers besides their copy in job.headers. job.id is the fresh
// transport message id (replay.Outgoing.MessageID), job.queue the
// destination queue.
//
// A 2xx answer is published. 429 and 503 are pending with the delay their
// Retry-After asks for (seconds or an HTTP date); 408, other 5xx answers
// and network errors are pending with the engine's backoff; any other
// answer (4xx, and 3xx: redirects are not followed) fails the message,
// with the status and the first 200 bytes of the body, sanitised, as the
// reason. One Publish call sends up to 8 requests at a time.
//
// The destination is configured under destinations: (kind http or
// cloudflare) with url and token_file; see Config.
package webhook
