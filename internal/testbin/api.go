package testbin

import (
	"net/url"
	"testing"
	"time"
)

// Message is what the API says of a message, as the end-to-end tests read it.
type Message struct {
	ID             string            `json:"id"`
	IdempotencyKey string            `json:"idempotency_key"`
	PayloadSHA256  string            `json:"payload_sha256"`
	Status         string            `json:"status"`
	Queue          string            `json:"queue"`
	ReplayCount    int               `json:"replay_count"`
	Headers        map[string]string `json:"headers"`
}

// Batch is what the API says of a replay batch.
type Batch struct {
	ID     string         `json:"id"`
	State  string         `json:"state"`
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
}

// Item is one item of a replay batch.
type Item struct {
	MessageID      string   `json:"message_id"`
	Outcome        string   `json:"outcome"`
	Reason         string   `json:"reason"`
	Destination    string   `json:"destination"`
	IdempotencyKey string   `json:"idempotency_key"`
	DroppedHeaders []string `json:"dropped_headers"`
}

// WaitMessages waits (at most within) until the service lists n messages
// of queue, and returns them.
func (a API) WaitMessages(tb testing.TB, queue string, n int, within time.Duration) []Message {
	tb.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		var page struct {
			Items []Message `json:"items"`
		}
		a.MustDo(tb, 200, "GET", "/api/v1/messages?limit=1000&queue="+url.QueryEscape(queue), nil, &page)
		if len(page.Items) == n {
			return page.Items
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d messages of %s listed after %s, want %d", len(page.Items), queue, within, n)
		}
	}
}

// CreateReplay posts body to /api/v1/replays and returns the batch.
func (a API) CreateReplay(tb testing.TB, body map[string]any) Batch {
	tb.Helper()
	var created struct {
		Replay Batch `json:"replay"`
	}
	a.MustDo(tb, 201, "POST", "/api/v1/replays", body, &created)
	return created.Replay
}

// WaitReplay waits (at most within) until batch id is in state.
func (a API) WaitReplay(tb testing.TB, id string, within time.Duration, state string) Batch {
	tb.Helper()
	var b Batch
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		a.MustDo(tb, 200, "GET", "/api/v1/replays/"+id, nil, &b)
		if b.State == state {
			return b
		}
		if time.Now().After(deadline) {
			tb.Fatalf("replay %s is %s %v after %s, want %s", id, b.State, b.Counts, within, state)
		}
	}
}

// Items lists the items of batch id (query: more parameters, like
// "&outcome=failed").
func (a API) Items(tb testing.TB, id, query string) []Item {
	tb.Helper()
	var page struct {
		Items []Item `json:"items"`
	}
	a.MustDo(tb, 200, "GET", "/api/v1/replays/"+id+"/items?limit=1000"+query, nil, &page)
	return page.Items
}

// AuditVerifies fails tb unless GET /api/v1/audit/verify says ok.
func (a API) AuditVerifies(tb testing.TB) {
	tb.Helper()
	var v struct {
		OK bool `json:"ok"`
	}
	a.MustDo(tb, 200, "GET", "/api/v1/audit/verify", nil, &v)
	if !v.OK {
		tb.Error("the audit chain does not verify")
	}
}
