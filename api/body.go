package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/quarantine-dev/quarantine"
)

// mediaTypeError refuses a body that is not JSON: 415. No domain code
// maps to 415, so fail writes it itself.
type mediaTypeError struct{ got string }

func (e mediaTypeError) Error() string {
	if e.got == "" {
		return "the request has a body but no Content-Type: send it as application/json"
	}
	return fmt.Sprintf("the body is %s: send it as application/json", quarantine.Clip(e.got))
}

// checkJSONMediaType refuses, with a mediaTypeError, a Content-Type that
// is not JSON: application/json, text/json or a +json type, in UTF-8 if a
// charset is named. A missing Content-Type is refused too: a form, XML or
// text sent by a client that names no type is not read as JSON.
func checkJSONMediaType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if !jsonContentType(ct) {
		return mediaTypeError{got: ct}
	}
	if _, params, _ := mime.ParseMediaType(ct); params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8") {
		return mediaTypeError{got: ct}
	}
	return nil
}

// readBody reads a command's body: JSON by its Content-Type (415
// otherwise), at most MaxBodyBytes (413 above, and nothing happens), not
// empty.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := checkJSONMediaType(r); err != nil {
		return nil, err
	}
	tooLarge := quarantine.Errorf(quarantine.ETOOLARGE, "the request body is larger than %d bytes", s.cfg.MaxBodyBytes)
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, quarantine.Errorf(quarantine.EINVALID, "the request body could not be read")
	case len(bytes.TrimSpace(body)) == 0:
		return nil, quarantine.Errorf(quarantine.EINVALID, "the request body is empty: send a JSON object")
	}
	return body, nil
}

// decodeBody reads r's body into v, a pointer to a struct: one JSON
// object, no unknown fields, nothing after it. Errors are EINVALID (413
// for a body above the cap) and name the field as a JSON Pointer.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeObject(body, v, "")
}

// decodeObject decodes data, which must be one JSON object, into v, a
// pointer to a struct, with json/v2's strict options: member names
// matched exactly, no unknown or duplicate member, nothing after the
// object. at is the JSON Pointer of data within the request body (""
// for all of it); errors are EINVALID and name the member as a JSON
// Pointer below it (the element of an array: /ids/1, not /ids).
func decodeObject(data []byte, v any, at string) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s must be a JSON object", describePointer(at))
	}
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true))
	if err := json.UnmarshalDecode(dec, v, json.RejectUnknownMembers(true)); err != nil {
		return jsonError(err, at)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s must be one JSON object, with nothing after it", describePointer(at))
	}
	return nil
}

func describePointer(at string) string {
	if at == "" {
		return "the request body"
	}
	return quarantine.Clip(at)
}

// jsonError turns a json/v2 error into an EINVALID naming the member.
func jsonError(err error, at string) error {
	var (
		syntax   *jsontext.SyntacticError
		semantic *json.SemanticError
	)
	switch {
	case errors.As(err, &syntax):
		field := quarantine.Clip(at + string(syntax.JSONPointer))
		switch {
		case errors.Is(err, jsontext.ErrDuplicateName):
			return quarantine.FieldErrorf(quarantine.EINVALID, field, "field %q is given twice", quarantine.Clip(syntax.JSONPointer.LastToken()))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s is cut short: not valid JSON", describePointer(at))
		}
		return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s is not valid JSON (at byte %d)", describePointer(at), syntax.ByteOffset)
	case errors.As(err, &semantic):
		field := quarantine.Clip(at + string(semantic.JSONPointer))
		if errors.Is(err, json.ErrUnknownName) {
			return quarantine.FieldErrorf(quarantine.EINVALID, field, "unknown field %q", quarantine.Clip(semantic.JSONPointer.LastToken()))
		}
		return quarantine.FieldErrorf(quarantine.EINVALID, field, "%s must be %s", describePointer(field), typeName(semantic.GoType))
	}
	return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s could not be decoded", describePointer(at))
}

func typeName(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer in range"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "of another type"
}
