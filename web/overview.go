package web

import "net/http"

// overviewRoutes registers the overview: per queue counts, ages against alarms, inflow and age charts.
func (h *Handler) overviewRoutes(m *http.ServeMux) {}
