package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine/internal/testbin"
)

// envelope is one failure envelope of queue with idempotency key key.
func envelope(queue, key string) []byte {
	return []byte(fmt.Sprintf(`{"envelope":"quarantine.failure/v1","job":{"id":%q,"name":"charge","queue":%q,
		"idempotency_key":%q,"payload":{"key":%q}},"failure":{"class":"permanent","reason":"card declined"}}`, "job-"+key, queue, key, key))
}

// ingester pushes envelopes through the balancer as a pusher would: one
// per request, retrying a request that got no answer or a 5xx (the
// instance died under it) with the same bytes until it is acknowledged.
type ingester struct {
	t     *testing.T
	api   testbin.API
	queue string

	mu      sync.Mutex
	acked   map[string]string // idempotency key -> the id the ack named
	retries int               // requests that were not acknowledged, sent again
	count   atomic.Int64      // acknowledgements so far

	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// startIngest runs workers pushers until stopIngest.
func startIngest(t *testing.T, api testbin.API, queue string, workers int) *ingester {
	in := &ingester{t: t, api: api, queue: queue, acked: map[string]string{}, stop: make(chan struct{})}
	t.Cleanup(func() { in.finish() }) // a test that ends early stops them too
	for w := range workers {
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			for k := 0; ; k++ {
				select {
				case <-in.stop:
					return
				default:
				}
				key := fmt.Sprintf("ing-%d-%d", w, k)
				id, err := in.push(envelope(queue, key))
				if err != nil {
					t.Error(err)
					return
				}
				in.mu.Lock()
				in.acked[key] = id
				in.mu.Unlock()
				in.count.Add(1)
			}
		}()
	}
	return in
}

// push sends body until it is acknowledged and returns the stored id.
func (in *ingester) push(body []byte) (string, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequest("POST", in.api.Base+"/api/v1/ingest", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+in.api.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		var raw []byte
		if err == nil {
			raw, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		switch {
		case err == nil && resp.StatusCode == http.StatusOK:
			var res struct {
				Items []struct {
					ID string `json:"id"`
				} `json:"items"`
			}
			if err := json.Unmarshal(raw, &res); err != nil || len(res.Items) != 1 || res.Items[0].ID == "" {
				return "", fmt.Errorf("ingest answered 200 with %s (%v)", raw, err)
			}
			return res.Items[0].ID, nil
		case err == nil && resp.StatusCode < 500:
			return "", fmt.Errorf("ingest answered %d: %s", resp.StatusCode, raw)
		case attempt == 50:
			return "", fmt.Errorf("ingest not acknowledged after %d attempts: %v %s", attempt, err, raw)
		}
		in.mu.Lock()
		in.retries++
		in.mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a pusher's backoff before it sends again
	}
}

// waitAcks waits until n envelopes are acknowledged in all.
func (in *ingester) waitAcks(n int64, within time.Duration) {
	in.t.Helper()
	for deadline := time.Now().Add(within); in.count.Load() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			in.t.Fatalf("%d envelopes acknowledged after %s, want %d", in.count.Load(), within, n)
		}
	}
}

// finish stops the pushers, waits for them, and returns what was
// acknowledged and how many requests were sent again.
func (in *ingester) finish() (map[string]string, int) {
	in.once.Do(func() { close(in.stop) })
	in.wg.Wait()
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.acked, in.retries
}

// stored lists every message of queue (following the cursor): id by
// idempotency key, and how many each key has.
func stored(t *testing.T, api testbin.API, queue string) (ids map[string]string, perKey map[string]int) {
	t.Helper()
	ids, perKey = map[string]string{}, map[string]int{}
	cursor := ""
	for {
		var page struct {
			Items []testbin.Message `json:"items"`
			Next  *string           `json:"next_cursor"`
		}
		q := url.Values{"queue": {queue}, "limit": {"1000"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		api.MustDo(t, 200, "GET", "/api/v1/messages?"+q.Encode(), nil, &page)
		for _, m := range page.Items {
			ids[m.IdempotencyKey] = m.ID
			perKey[m.IdempotencyKey]++
		}
		if page.Next == nil || *page.Next == "" {
			return ids, perKey
		}
		cursor = *page.Next
	}
}
