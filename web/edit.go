package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// editRoutes registers the payload editor.
func (h *Handler) editRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /messages/{id}/edit", h.authed(h.editForm))
	m.HandleFunc("POST /messages/{id}/edit", h.authed(h.editPost))
}

// maxEditFormBytes caps the editor's form: a payload of the API's soft
// cap (1 MiB), percent-encoded.
const maxEditFormBytes = 4 << 20

// maxBody is the cap of a POST's body: the editor's form is larger than
// the others.
func maxBody(r *http.Request) int64 {
	if strings.HasPrefix(r.URL.Path, "/messages/") && strings.HasSuffix(r.URL.Path, "/edit") {
		return maxEditFormBytes
	}
	return maxFormBytes
}

// editContent is what the editor shows.
type editContent struct {
	M *quarantine.Message
	// Problem says why the payload cannot be edited here ("" when it can).
	Problem string
	JSON    bool   // the payload is JSON: the editor checks it
	Current string // the current payload as shown (indented when JSON)
	Payload string // the editor's text
	Reason  string
	IfMatch string // the payload_sha256 the edit is based on
	// Changes is the structural diff of a JSON edit against the current
	// version (by JSON Pointer), Structural whether there is one.
	Changes    []jsonChange
	ChangesCut bool
	Structural bool
	// Diff is the editor's text against the current version (on a POST).
	Diff       []diffLine
	DiffCut    bool
	Changed    bool
	Previewed  bool
	Stale      bool // the payload changed since the editor was opened
	PayloadErr string
	ReasonErr  string
	Violations []rules.Violation
}

// canOperate reports whether t may change messages and replays at all
// (the API's operate rule); its owners decide which.
func canOperate(t *quarantine.Token) bool { return t.Role.AtLeast(quarantine.RoleOperator) }

// editMessage loads the route's message for the editor: a message the
// token may not see is not found (a POST on it is audited), a viewer is
// refused (audited). It reports whether the handler goes on.
func (h *Handler) editMessage(w http.ResponseWriter, r *http.Request, s *session) (*quarantine.Message, bool) {
	m, ok := h.loadVisible(w, r, s)
	if !ok {
		return nil, false
	}
	if !canOperate(s.token) {
		if h.auditDenied(w, r, s, m.ID, "ui: editing needs an operator") {
			h.forbidden(w, r, s, "Your token may not edit payloads: it needs the operator role.")
		}
		return nil, false
	}
	return m, true
}

// auditDenied appends an access.denied event for the session's token, as
// the API does for every refusal, and reports whether it was written (if
// not, it answered the store's error).
func (h *Handler) auditDenied(w http.ResponseWriter, r *http.Request, s *session, target, reason string) bool {
	ev := quarantine.NewAuditEvent(s.token.Actor(), quarantine.ActionAccessDenied, target, map[string]any{
		"method": r.Method, "path": truncate(200, r.URL.Path), "reason": reason})
	if _, err := h.cfg.Store.AppendAudit(r.Context(), ev); err != nil {
		h.fail(w, r, s, err)
		return false
	}
	return true
}

// editForm is GET /messages/{id}/edit: the current payload in the editor.
func (h *Handler) editForm(w http.ResponseWriter, r *http.Request, s *session) {
	m, ok := h.editMessage(w, r, s)
	if !ok {
		return
	}
	c := newEditContent(m)
	c.Payload = c.Current
	h.render(w, r, http.StatusOK, "edit", page{Title: "Edit " + m.ID, Token: s.token, CSRF: s.csrf, Content: c})
}

// newEditContent shows m's current payload, and why it cannot be edited
// here when it cannot.
func newEditContent(m *quarantine.Message) *editContent {
	c := &editContent{M: m, IfMatch: m.PayloadSHA256, JSON: isJSONPayload(m.ContentType, m.Payload)}
	switch {
	case !utf8.Valid(m.Payload) || bytes.ContainsRune(m.Payload, 0):
		c.Problem = "This payload is binary: edit it on the API (PUT /api/v1/messages/" + m.ID + "/payload with payload_base64)."
	default:
		if err := m.Status.Editable(); err != nil {
			c.Problem = quarantine.ErrorMessage(err)
		}
	}
	c.Current = showText(c.JSON, m.Payload)
	return c
}

// isJSONPayload reports whether a payload is edited as JSON: its content
// type says JSON (application/json, or a +json type), or it has none and
// the payload is JSON.
func isJSONPayload(contentType string, payload []byte) bool {
	if contentType == "" {
		return json.Valid(payload)
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// showText is a payload as the editor shows it: JSON indented, else the
// text itself.
func showText(isJSON bool, b []byte) string {
	if isJSON {
		var buf bytes.Buffer
		if err := json.Indent(&buf, b, "", "  "); err == nil {
			return buf.String()
		}
	}
	return string(b)
}

// editPost is POST /messages/{id}/edit: the form's text checked as the
// API checks an edit (JSON, reason, If-Match, status, idempotency key,
// JSON Schema), its diff against the current version, then, when the
// Save button sent it and every check passed, the store's edit (the
// version and its audit event in one transaction) and a redirect to the
// message. A stale If-Match shows the newer version; the text is kept.
func (h *Handler) editPost(w http.ResponseWriter, r *http.Request, s *session) {
	m, ok := h.editMessage(w, r, s)
	if !ok {
		return
	}
	c := newEditContent(m)
	if c.Problem != "" {
		h.render(w, r, http.StatusConflict, "edit", page{Title: "Edit " + m.ID, Token: s.token, CSRF: s.csrf, Error: c.Problem, Content: c})
		return
	}
	text := r.PostFormValue("payload")
	if !bytes.Contains(m.Payload, []byte("\r\n")) {
		text = strings.ReplaceAll(text, "\r\n", "\n") // a browser sends a textarea's lines with CRLF
	}
	c.Payload, c.Reason, c.IfMatch = text, r.PostFormValue("reason"), r.PostFormValue("if_match")
	save := r.PostFormValue("action") == "save"
	c.Previewed = !save
	payload, shown, perr := editedPayload(c.JSON, m.Payload, text)
	if perr != "" {
		c.PayloadErr = perr
	}
	c.diff(m.Payload, payload, shown, perr == "")
	edit := quarantine.PayloadEdit{MessageID: m.ID, IfMatch: c.IfMatch, Payload: payload, Reason: c.Reason, Actor: s.token.Actor()}
	status := http.StatusOK
	err := edit.Validate()
	if err == nil && perr == "" {
		err = h.cfg.Edit.Check(m, edit)
	}
	if err == nil && perr == "" && save {
		var saved *quarantine.Message
		saved, err = h.cfg.Store.EditPayload(r.Context(), edit)
		if err == nil {
			http.Redirect(w, r, "/messages/"+m.ID+"?saved="+strconv.Itoa(saved.PayloadVersion), http.StatusSeeOther)
			return
		}
		if quarantine.ErrorCode(err) == quarantine.EPRECONDITION { // lost a race to a concurrent edit
			if m, err = h.cfg.Store.GetMessage(r.Context(), m.ID); err != nil {
				h.fail(w, r, s, err)
				return
			}
			err = quarantine.FieldErrorf(quarantine.EPRECONDITION, "If-Match", "stale")
		}
	}
	var pageErr string
	switch code, field := quarantine.ErrorCode(err), quarantine.ErrorField(err); {
	case err == nil && perr != "":
		status = http.StatusUnprocessableEntity
	case err == nil:
	case code == quarantine.EPRECONDITION || field == "If-Match":
		// Show the newer version; the text stays, its diff now against
		// the newer version, and the next save is based on it.
		status = http.StatusConflict
		fresh := newEditContent(m)
		c.M, c.Current, c.IfMatch, c.Stale = m, fresh.Current, m.PayloadSHA256, true
		c.diff(m.Payload, payload, shown, perr == "")
		pageErr = fmt.Sprintf("Not saved: the payload changed since you opened the editor (it is now version %d, shown below). Your text is kept: check its diff against the new version, then save again.", m.PayloadVersion)
	case field == "reason":
		status, c.ReasonErr = http.StatusUnprocessableEntity, quarantine.ErrorMessage(err)
	case field == "/payload":
		status, c.PayloadErr = http.StatusUnprocessableEntity, quarantine.ErrorMessage(err)
		c.Violations = rules.SchemaViolations(err)
	case code == quarantine.EINVALID || code == quarantine.EUNPROCESSABLE || code == quarantine.ECONFLICT:
		status, pageErr = rules.ErrorStatus(code), quarantine.ErrorMessage(err)
	default:
		h.fail(w, r, s, err)
		return
	}
	if pageErr == "" && (c.PayloadErr != "" || c.ReasonErr != "") {
		pageErr = "Not saved: correct the fields marked below."
	}
	h.render(w, r, status, "edit", page{Title: "Edit " + m.ID, Token: s.token, CSRF: s.csrf, Error: pageErr, Content: c})
}

// diff sets the page's diffs of the edit against current: by line
// (shown against the current version as shown), and by JSON Pointer when
// both are JSON (valid: the edit parsed).
func (c *editContent) diff(current, payload []byte, shown string, valid bool) {
	c.Diff, c.DiffCut = lineDiff(c.Current, shown)
	c.Changed = changed(c.Diff)
	c.Changes, c.ChangesCut, c.Structural = nil, false, false
	if c.JSON && valid {
		if ch, cut, ok := jsonDiff(current, payload); ok {
			c.Changes, c.ChangesCut, c.Structural = ch, cut, true
			c.Changed = len(ch) > 0
		}
	}
}

// editedPayload turns the editor's text into the payload to store and
// the text to diff: JSON must parse, and is stored compact when the
// current payload is compact (so that an edit of one field does not
// reformat the message); shown is it indented. problem says why the text
// is not a payload ("" when it is).
func editedPayload(isJSON bool, current []byte, text string) (payload []byte, shown, problem string) {
	if !isJSON {
		return []byte(text), text, ""
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return []byte(text), text, "This is not JSON: " + jsonErrorAt(text, err)
	}
	payload = []byte(text)
	var compact bytes.Buffer
	if err := json.Compact(&compact, current); err == nil && bytes.Equal(compact.Bytes(), current) {
		compact.Reset()
		_ = json.Compact(&compact, payload) // it parsed
		payload = compact.Bytes()
	}
	return payload, showText(true, payload), ""
}

// jsonErrorAt describes a JSON syntax error with its line and column.
func jsonErrorAt(text string, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err.Error()
	}
	off := int(se.Offset)
	if off > len(text) {
		off = len(text)
	}
	line := 1 + strings.Count(text[:off], "\n")
	col := off - strings.LastIndex(text[:off], "\n")
	return fmt.Sprintf("line %d, column %d: %s", line, col, se.Error())
}
