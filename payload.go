package quarantine

import "time"

// PayloadVersion is one payload a message held. Version 1 is the payload
// as collected; each edit adds the next version and records who changed it,
// why, and the hashes before and after.
type PayloadVersion struct {
	MessageID   string    `json:"message_id"`
	Version     int       `json:"version"`
	SHA256      string    `json:"sha256"`
	PrevSHA256  string    `json:"prev_sha256"` // "" for version 1
	Size        int       `json:"size"`
	ContentType string    `json:"content_type"`
	Actor       string    `json:"actor"`
	Reason      string    `json:"reason"`
	CreatedAt   time.Time `json:"created_at"`
	Payload     []byte    `json:"-"`
}
