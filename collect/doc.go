// Package collect turns what arrives from failure queues into quarantine
// messages.
//
// DecodeEnvelope reads the canonical failure envelope
// ("envelope": "quarantine.failure/v1") that the worker package writes and
// that the HTTP ingest endpoint accepts. It never fails: input that is not a
// valid envelope is kept byte-exact as the payload of a message classed
// malformed, with flags and a reason that say what was wrong, so that bad
// input never blocks a queue and is never lost.
package collect
