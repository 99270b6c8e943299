package api

import (
	"encoding/base64"
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/rules"
)

// maxContentTypeBytes bounds a content type given with an edit.
const maxContentTypeBytes = 1024

// editBody is the body of PUT /api/v1/messages/{id}/payload.
type editBody struct {
	Payload       json.RawMessage `json:"payload"`
	PayloadBase64 *string         `json:"payload_base64"`
	ContentType   *string         `json:"content_type"`
	Reason        string          `json:"reason"`
}

// editPayload replaces a message's payload with a new version. The
// checks, in order: If-Match present (428) and well formed (400), the
// body (400, 413), the reason (422), the message (404), If-Match current
// (412), the status (409), a payload that changes (422), the idempotency key the rules derive from the
// payload (422), the job's JSON Schema (422). The store then writes the
// version and its audit event in one transaction, checking If-Match again
// so that of concurrent edits with the same If-Match exactly one wins.
func (s *Server) editPayload(w http.ResponseWriter, r *http.Request) {
	ifMatch, err := parseIfMatch(r.Header.Values("If-Match"))
	if _, missing := err.(errIfMatchMissing); missing {
		preconditionRequired(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b editBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	edit, err := b.edit(ifMatch, tokenFrom(r.Context()).Actor())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	m, ok := s.loadMessage(w, r, true)
	if !ok {
		return
	}
	edit.MessageID = m.ID
	if edit.ContentType == "" && b.Payload != nil && !jsonContentType(m.ContentType) {
		edit.ContentType = "application/json" // JSON was given for a payload that was not JSON
	}
	if err := s.checkEdit(m, edit); err != nil {
		s.fail(w, r, err)
		return
	}
	updated, err := s.cfg.Store.EditPayload(r.Context(), edit)
	if quarantine.ErrorCode(err) == quarantine.EPRECONDITION { // lost a race to a concurrent edit
		err = quarantine.FieldErrorf(quarantine.EPRECONDITION, "If-Match", "%s", quarantine.ErrorMessage(err))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	setETag(w, updated.PayloadSHA256)
	s.writeMessage(w, r, http.StatusOK, updated)
}

// errIfMatchMissing marks a missing If-Match: it carries no code.
type errIfMatchMissing struct{}

func (errIfMatchMissing) Error() string { return "If-Match is missing" }

// parseIfMatch returns the SHA-256 of an If-Match header: one strong
// entity tag, "<64 lowercase hex>". No header is errIfMatchMissing;
// anything else is EINVALID naming If-Match.
func parseIfMatch(values []string) (string, error) {
	if len(values) == 0 || strings.TrimSpace(strings.Join(values, "")) == "" {
		return "", errIfMatchMissing{}
	}
	bad := quarantine.FieldErrorf(quarantine.EINVALID, "If-Match",
		`If-Match must be one strong ETag: the quoted payload_sha256 of the payload you read, like "9f86d0…"`)
	v := strings.TrimSpace(values[0])
	if len(values) > 1 || len(v) != 66 || v[0] != '"' || v[65] != '"' {
		return "", bad
	}
	sha := v[1:65]
	if !hexHash.MatchString(sha) {
		return "", bad
	}
	return sha, nil
}

// edit builds the store's edit from the body and checks what needs no
// stored state.
func (b *editBody) edit(ifMatch, actor string) (quarantine.PayloadEdit, error) {
	e := quarantine.PayloadEdit{IfMatch: ifMatch, Reason: b.Reason, Actor: actor}
	switch {
	case b.Payload != nil && b.PayloadBase64 != nil:
		return e, quarantine.FieldErrorf(quarantine.EINVALID, "/payload_base64", "give payload or payload_base64, not both")
	case b.Payload != nil:
		e.Payload = []byte(b.Payload)
	case b.PayloadBase64 != nil:
		p, err := base64.StdEncoding.Strict().DecodeString(*b.PayloadBase64)
		if err != nil {
			return e, quarantine.FieldErrorf(quarantine.EINVALID, "/payload_base64", "payload_base64 is not standard base64 (RFC 4648, with padding)")
		}
		e.Payload = p
	default:
		return e, quarantine.FieldErrorf(quarantine.EINVALID, "/payload", "give the new payload: payload (JSON) or payload_base64 (bytes)")
	}
	if b.ContentType != nil {
		ct := *b.ContentType
		if _, _, err := mime.ParseMediaType(ct); err != nil || len(ct) > maxContentTypeBytes || quarantine.SanitizeText(ct) != ct {
			return e, quarantine.FieldErrorf(quarantine.EINVALID, "/content_type", "content_type must be a media type, like application/json")
		}
		e.ContentType = ct
	}
	return e, rules.InBody(e.Validate(), "")
}

// checkEdit refuses an edit the stored message forbids (see rules.EditRules.Check).
func (s *Server) checkEdit(m *quarantine.Message, e quarantine.PayloadEdit) error {
	return rules.EditRules{Preparer: s.cfg.Preparer, Schemas: s.cfg.Schemas}.Check(m, e)
}
