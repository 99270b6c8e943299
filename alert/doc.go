// Package alert evaluates the dead-letter alarms and notifies receivers.
//
// An alarm rule selects queues (globs, or every queue of an owner) and
// fires when the oldest quarantined message of a queue is older than
// MaxAge (and, optionally, when its depth or its inflow per minute is
// above a threshold) for at least For. Each rule and queue has a state,
// inactive, pending, firing or resolved, kept in the store with the
// notifications it owes (the outbox) in one transaction: a restart or a
// failover to another instance neither forgets a firing alarm nor pages
// twice for it. Receivers are a generic JSON webhook, a Slack-compatible
// webhook and Alertmanager (POST /api/v2/alerts, re-sent while firing and
// ended on resolve, as Prometheus does). Deliveries are retried with
// backoff; a receiver that is down gets its notifications, in order, once
// it is back.
//
// Exactly one Evaluator of a database evaluates at a time: Run takes the
// store's alarm lock (a PostgreSQL advisory lock) and only evaluates while
// it holds it. A delivery whose result could not be recorded (the process
// died between the POST and the record) is sent again: receivers see at
// least one of each notification, and the webhook body carries the
// notification's id to deduplicate.
package alert
