// Package memory is an in-process broker: named queues held in memory,
// with a replay publisher that confirms at once. It serves the demo and
// the replay engine's tests; nothing in it survives the process.
package memory
