// Package api serves the quarantine's REST API under /api/v1, plus
// /healthz, /readyz and /metrics.
//
// The route table is in Server.routes and mirrors openapi.yaml at the
// repository root; a test checks that the two list the same routes and
// validates every response the tests see against the spec.
//
// Requests under /api carry "Authorization: Bearer <token secret>". The
// token's role and owners decide what it may do: viewers read (messages,
// versions, samples, groups, queues), operators also ingest, edit and
// discard, admins also manage tokens; audit routes need a token without
// owners, or an admin. A token with owners sees and acts on only its
// owners' messages: another team's message is "not found", like one that
// does not exist, and a write attempt on it is still audited. Every
// refusal (403) is written to the audit log as access.denied. Refused
// logins (401) are counted per client address: one auth.refused event per
// client and minute with the counts, and past the client's budget (20,
// then one per 3 s) or the global one (600 a minute over every client)
// a refused attempt is 429 with Retry-After instead of 401, so that
// guessing cannot go on at request speed. A valid token is never refused
// by these budgets: others' failures do not lock it out.
// Authenticated answers carry Cache-Control: no-store. HEAD on a GET
// route answers like GET, without a body.
//
// Errors are application/problem+json (RFC 9457) with a stable type per
// error code (urn:quarantine:problem:<code>), the offending field when
// there is one (a query parameter, a header, or a JSON Pointer into the
// body), and the request id. Internal errors are logged, never shown.
//
// Command bodies (sample, edit, discard, tokens) are one JSON object,
// labelled JSON (application/json or a +json type; else 415), of at most
// Config.MaxBodyBytes; a member the route does not know, spelled in
// another case or given twice is refused naming it. An edit needs
// If-Match with the payload's ETag (its SHA-256): missing is 428, stale
// 412, and it must change the payload (an unchanged one is 422, so that
// the ETag of every version differs from the one before). It may not change the idempotency key a JSON Pointer rule reads
// from the payload, and must satisfy the job's JSON Schema if one is
// configured (422 with each violation's pointer).
//
// Payloads are shown byte-exact under "payload" when they are JSON, as
// base64 under "payload_base64" otherwise; for viewers the values at
// Config.RedactPointers are masked as "<redacted>" first. The stored
// payload is never changed by what a response shows.
//
// POST /api/v1/ingest takes one failure envelope or a JSON array of them.
// The envelope tolerates unknown fields at every level, so that a newer
// worker can add fields; bytes that are not a valid envelope are stored raw
// and flagged rather than refused (see collect.DecodeEnvelope). Only a body
// not labelled JSON (415), above the hard size cap or with too many
// elements (413) is refused, and then nothing is stored.
package api
