package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/quarantine-dev/quarantine"
)

// readBody reads a command's body: at most MaxBodyBytes (413 above, and
// nothing happens), not empty.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
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

// decodeObject decodes data, which must be one JSON object, into v. at is
// the JSON Pointer of data within the request body ("" for all of it);
// errors name fields below it.
func decodeObject(data []byte, v any, at string) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s must be a JSON object", describePointer(at))
	}
	if err := checkMembers(data, v, at); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, at)
	}
	if _, err := dec.Token(); err != io.EOF {
		return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s must be one JSON object, with nothing after it", describePointer(at))
	}
	return nil
}

// checkMembers reads the members of the object in data and refuses one
// that v (a pointer to a struct) does not name exactly (encoding/json
// would match "Size" to "size"), and one given twice (encoding/json would
// keep the last silently). Syntax errors are left to the decoder.
func checkMembers(data []byte, v any, at string) error {
	known := map[string]bool{}
	t := reflect.TypeOf(v).Elem()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			known[name] = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // the '{'
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		field := clip(at + "/" + escapePointerToken(name))
		switch {
		case !known[name]:
			return quarantine.FieldErrorf(quarantine.EINVALID, field, "unknown field %q", clip(name))
		case seen[name]:
			return quarantine.FieldErrorf(quarantine.EINVALID, field, "field %q is given twice", clip(name))
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

func describePointer(at string) string {
	if at == "" {
		return "the request body"
	}
	return clip(at)
}

// jsonError turns an encoding/json error into an EINVALID naming the field.
func jsonError(err error, at string) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s is not valid JSON (at byte %d)", describePointer(at), syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return quarantine.FieldErrorf(quarantine.EINVALID, at, "%s is cut short: not valid JSON", describePointer(at))
	case errors.As(err, &typ):
		field := at
		if typ.Field != "" {
			field = at + "/" + strings.ReplaceAll(typ.Field, ".", "/")
		}
		return quarantine.FieldErrorf(quarantine.EINVALID, field, "%s must be %s", describePointer(field), typeName(typ.Type))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if u, err := strconv.Unquote(name); err == nil {
			name = u
		}
		field := at + "/" + escapePointerToken(name)
		return quarantine.FieldErrorf(quarantine.EINVALID, clip(field), "unknown field %q", clip(name))
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

// inBody returns err with its field, when it names one of a body's
// fields by name (as the domain's Validate methods do), turned into a
// JSON Pointer below at: "reason" becomes "/reason".
func inBody(err error, at string) error {
	var e *quarantine.Error
	if !errors.As(err, &e) || e.Field == "" || strings.HasPrefix(e.Field, "/") || e.Field == "If-Match" {
		return err
	}
	c := *e
	c.Field = at + "/" + escapePointerToken(e.Field)
	return &c
}
