package web

import "net/http"

// auditRoutes registers the audit log and its chain verification.
func (h *Handler) auditRoutes(m *http.ServeMux) {}
