package main

// The collector kinds. Each entry decodes and validates its broker's keys
// and returns the opener of its source.
func init() {
}
