package web

import "net/http"

// editRoutes registers the payload editor.
func (h *Handler) editRoutes(m *http.ServeMux) {}
