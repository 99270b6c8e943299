package replays

import "github.com/quarantine-dev/quarantine"

// MessageItems starts a store's MessageReplayItems of message id: the
// limit checked (quarantine.ValidateLimit), the slice to fill, and
// whether to query at all (an id that cannot name a message has none).
func MessageItems(id string, limit int) ([]quarantine.ReplayItem, bool, error) {
	if err := quarantine.ValidateLimit(limit); err != nil {
		return nil, false, err
	}
	return []quarantine.ReplayItem{}, quarantine.ValidID(id), nil
}
