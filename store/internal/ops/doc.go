// Package ops holds the rules of the operator actions on messages that
// both stores apply around their own SQL, as store/internal/replays does
// for replays: what is checked before a transaction, what the current row
// decides, what is written and which audit events go with it. A store
// reads and writes rows (Tx); it does not restate the rules, and the
// store methods themselves are written once (Methods).
package ops
