package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// ProblemTypePrefix starts the type of every problem; the error code follows.
const ProblemTypePrefix = "urn:quarantine:problem:"

// Problem is an RFC 9457 problem detail, the body of every error response.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Field     string `json:"field,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Violations lists, for a payload that fails its job's JSON Schema,
	// each violation with its JSON Pointer into the payload.
	Violations []rules.Violation `json:"violations,omitempty"`
}

// fail writes err as application/problem+json: the one error writer of the
// API. Internal errors are logged with their cause and shown as "internal
// error"; the others are shown as their safe message.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var mte mediaTypeError
	if errors.As(err, &mte) {
		writeProblem(w, r, http.StatusUnsupportedMediaType, "unsupported_media_type", mte.Error(), "Content-Type")
		return
	}
	code := quarantine.ErrorCode(err)
	status := rules.ErrorStatus(code)
	id := requestIDFrom(r.Context())
	switch code {
	case quarantine.EINTERNAL:
		s.log.ErrorContext(r.Context(), "request failed", "request_id", id, "method", r.Method, "path", rules.ClipPath(r.URL.Path), "err", err)
	case quarantine.EUNAVAILABLE:
		s.log.WarnContext(r.Context(), "dependency unavailable", "request_id", id, "path", rules.ClipPath(r.URL.Path), "err", err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="quarantine"`)
	}
	writeProblem(w, r, status, code, quarantine.ErrorMessage(err), quarantine.ErrorField(err), rules.SchemaViolations(err)...)
}

// writeProblem writes one problem; fail is the way in for errors.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, code, detail, field string, violations ...rules.Violation) {
	p := Problem{
		Type:       ProblemTypePrefix + code,
		Title:      http.StatusText(status),
		Status:     status,
		Detail:     detail,
		Field:      field,
		RequestID:  requestIDFrom(r.Context()),
		Violations: violations,
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, quarantine.Errorf(quarantine.ENOTFOUND, "no route for %s", quarantine.Clip(r.URL.Path)))
}

// methodNotAllowed answers 405 with the Allow header chi's own handler
// would have set.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allow []string
	if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.Routes != nil {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if rctx.Routes.Match(chi.NewRouteContext(), m, r.URL.Path) {
				allow = append(allow, m)
				if m == http.MethodGet {
					allow = append(allow, http.MethodHead) // middleware.GetHead serves it
				}
			}
		}
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeProblem(w, r, http.StatusMethodNotAllowed, "method_not_allowed", "method "+quarantine.Clip(r.Method)+" is not allowed here", "")
}

// preconditionRequired answers 428: a write that needs If-Match came
// without it. No domain code maps to 428, so it is written here.
func preconditionRequired(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, http.StatusPreconditionRequired, "precondition_required",
		`If-Match is required: send the message's ETag, the quoted payload_sha256 you read, like If-Match: "9f86d0…"`, "If-Match")
}

// writeJSON writes v as a JSON response.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.fail(w, r, quarantine.Internal(err, "encode response"))
		return
	}
	s.writeRawJSON(w, status, b)
}

func (s *Server) writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
