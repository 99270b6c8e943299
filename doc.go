// Package quarantine holds the domain of the dead-letter quarantine: the
// messages collected from failure queues, the filters that select them, the
// status machine they move through, the hash-chained audit log, API tokens
// and the one error type every layer returns.
//
// The package does no I/O. Storage lives in store/, HTTP in api/, and the
// broker adapters in broker/; they all speak these types.
package quarantine
