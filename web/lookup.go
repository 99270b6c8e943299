package web

import (
	"context"
	"sync"

	"github.com/quarantine-dev/quarantine"
)

// lookupWorkers bounds the concurrent lookups of messagesByID.
const lookupWorkers = 8

// messagesByID looks the messages of ids up, a few at once (the store
// has no lookup by many ids): those that exist, by id. The first error
// but ENOTFOUND is returned.
func (h *Handler) messagesByID(ctx context.Context, ids []string) (map[string]*quarantine.Message, error) {
	out := make(map[string]*quarantine.Message, len(ids))
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan string)
	for range min(lookupWorkers, len(ids)) {
		wg.Go(func() {
			for id := range next {
				m, err := h.cfg.Store.GetMessage(ctx, id)
				mu.Lock()
				switch {
				case err == nil:
					out[id] = m
				case quarantine.ErrorCode(err) != quarantine.ENOTFOUND && firstErr == nil:
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	return out, firstErr
}
