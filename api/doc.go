// Package api serves the quarantine's REST API under /api/v1, plus
// /healthz, /readyz and /metrics.
//
// The route table is in Server.routes and mirrors openapi.yaml at the
// repository root; a test checks that the two list the same routes and
// validates every response the tests see against the spec.
//
// Requests under /api carry "Authorization: Bearer <token secret>". The
// token's role and owners decide what it may do: viewers read, operators
// and admins also ingest, audit routes need a token without owners (or an
// admin). A token with owners sees only its owners' messages; a foreign
// message is "not found". Every refusal (403) is written to the audit log
// as access.denied.
//
// Errors are application/problem+json (RFC 9457) with a stable type per
// error code (urn:quarantine:problem:<code>), the offending field when there
// is one, and the request id. Internal errors are logged, never shown.
//
// POST /api/v1/ingest takes one failure envelope or a JSON array of them.
// The envelope tolerates unknown fields at every level, so that a newer
// worker can add fields; bytes that are not a valid envelope are stored raw
// and flagged rather than refused (see collect.DecodeEnvelope). Only a body
// above the hard size cap, or with too many elements, is refused, and then
// nothing is stored.
package api
