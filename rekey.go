package quarantine

// ActionRekey records a message's idempotency key set again by the rules
// configured now (a re-key); details: old_key, new_key, old_rule,
// new_rule, reason.
const ActionRekey = "message.rekey"

// KeyChange is one message's idempotency key before and after a re-key,
// with the rules (Message.KeyRule) that gave them.
type KeyChange struct {
	ID      string `json:"id"`
	Queue   string `json:"queue"`
	OldKey  string `json:"old_key"`
	OldRule string `json:"old_rule"`
	NewKey  string `json:"new_key"`
	NewRule string `json:"new_rule"`
}

// Rekey applies key changes, recorded by Actor with Reason. A change
// applies only while the message still has OldKey and OldRule (another
// re-key meanwhile makes it stale).
type Rekey struct {
	Changes []KeyChange
	Actor   string
	Reason  string
}

// Validate checks r: a reason, an actor, valid message ids and new keys.
func (r *Rekey) Validate() error {
	if err := validateReason(r.Reason); err != nil {
		return err
	}
	if r.Actor == "" {
		return Errorf(EINTERNAL, "a re-key needs an actor")
	}
	for _, c := range r.Changes {
		if !ValidID(c.ID) {
			return Errorf(EINVALID, "%q is not a message id", truncateForError(c.ID))
		}
		if c.NewKey == "" {
			return Errorf(EINVALID, "a re-key does not remove a key (message %s)", c.ID)
		}
	}
	return nil
}

// RekeyResult counts what a re-key of a selection would do (a dry run)
// or did: Changed messages get a key (or another one) from the rules now;
// Unchanged ones keep theirs (the same key, a key the message carried
// itself, or one the rules no longer find); StillMissing ones have none
// and the rules find none. Stale counts changes not applied because the
// message changed meanwhile. Changes lists the first changes.
type RekeyResult struct {
	DryRun       bool        `json:"dry_run"`
	Matched      int         `json:"matched"`
	Changed      int         `json:"changed"`
	Unchanged    int         `json:"unchanged"`
	StillMissing int         `json:"still_missing"`
	Stale        int         `json:"stale"`
	Changes      []KeyChange `json:"changes"`
}
