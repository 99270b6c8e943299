// Package cluster tests the production shape of docs/deploy.md's
// "Several instances": three `quarantine serve` processes (the built
// binary) on one PostgreSQL schema behind a round-robin HAProxy on
// loopback, one of them killed with SIGKILL while HTTP ingest, a replay
// to a RabbitMQ queue and a logged-in browser go through the proxy.
//
// It needs PostgreSQL, RabbitMQ, HAProxy and Chromium (scripts/services.sh
// installs and records them); without one it skips, and fails under
// CI=true. The package holds tests only.
package cluster
