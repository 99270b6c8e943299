// Package rules holds the product's rules that the REST API (package api)
// and the web UI (package web) share, so that an action gives the same
// answer whichever way it comes in: which messages, batches and discard
// operations a token sees and acts on (Scope, SeesReplay, ActsOnReplay,
// DiscardVisible, the destination rules), bulk selections (CleanIDs,
// FilterFromValues, DiscardAs and the Discards runner), the checks of a
// payload edit (EditRules, Schema), replay requests and their defaults
// (ReplayDefaults, ReplayInput), what is computed from a batch
// (ReplayView, EstimateSeconds, ReplayRate, Undeliverable, the replay
// report), and the one table from domain error codes to HTTP statuses
// (ErrorStatus).
//
// It sits below both transports and imports neither (imports_test.go
// checks it); they keep only what is theirs: routes, decoding, rendering.
package rules
