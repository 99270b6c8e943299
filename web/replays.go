package web

import "net/http"

// replayRoutes registers the replay form, the replays list and a replay's progress.
func (h *Handler) replayRoutes(m *http.ServeMux) {}
