package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/quarantine-dev/quarantine"
)

// mediaTypeError refuses a body that is not JSON: 415. No domain code
// maps to 415, so fail writes it itself.
type mediaTypeError struct{ got string }

func (e mediaTypeError) Error() string {
	if e.got == "" {
		return "the request has a body but no Content-Type: send it as application/json"
	}
	return fmt.Sprintf("the body is %s: send it as application/json", clip(e.got))
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
		return jsonError(err, data, at)
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
func jsonError(err error, data []byte, at string) error {
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
		if p, ok := pointerAt(data, typ.Offset); ok { // names the element: /ids/0, not /ids
			field = clip(at + p)
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

// pointerAt returns the JSON Pointer of the innermost value of data
// around offset, the byte offset encoding/json reports for a value of
// the wrong type: the end of a scalar, or just after the opening
// delimiter of an object or array. ok is false when no value is there.
func pointerAt(data []byte, offset int64) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path string) (string, bool, error)
	walk = func(path string) (string, bool, error) {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return "", false, err
		}
		end := dec.InputOffset()
		d, composite := tok.(json.Delim)
		if !composite {
			return path, start < offset && offset <= end, nil
		}
		if end == offset {
			return path, true, nil
		}
		for i := 0; dec.More(); i++ {
			child := path + "/" + strconv.Itoa(i)
			if d == '{' {
				k, err := dec.Token()
				if err != nil {
					return "", false, err
				}
				name, _ := k.(string)
				child = path + "/" + escapePointerToken(name)
			}
			p, found, err := walk(child)
			if err != nil || found {
				return p, found, err
			}
		}
		_, err = dec.Token() // the closing delimiter
		return "", false, err
	}
	p, found, err := walk("")
	return p, found && err == nil
}
