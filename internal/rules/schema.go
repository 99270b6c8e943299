package rules

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/internal/jsonptr"
)

// maxViolations bounds the violations one answer lists.
const maxViolations = 100

// Schema is a compiled JSON Schema that edited payloads of one job must
// satisfy. It is safe for concurrent use.
type Schema struct {
	path string
	s    *jsonschema.Schema
}

// CompileSchema reads and compiles the JSON Schema in the file at path
// (any draft the schema names with $schema, 2020-12 by default; $ref to
// other local files is followed, nothing is fetched over the network).
// The error says what is wrong with the file.
func CompileSchema(path string) (*Schema, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s, err := jsonschema.NewCompiler().Compile(abs)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", path, firstLine(err.Error()))
	}
	return &Schema{path: path, s: s}, nil
}

// Path returns the file the schema was compiled from.
func (s *Schema) Path() string { return s.path }

// Violation is one way a payload fails its job's schema: where (a JSON
// Pointer into the payload) and why.
type Violation struct {
	Pointer string `json:"pointer"`
	Detail  string `json:"detail"`
}

// Validate checks payload against the schema. It returns the violations
// (nil when the payload is valid), or an EUNPROCESSABLE error when the
// payload is not one JSON document at all.
func (s *Schema) Validate(payload []byte) ([]Violation, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return nil, quarantine.FieldErrorf(quarantine.EUNPROCESSABLE, "/payload", "the payload must be JSON: its job has a JSON Schema")
	}
	err = s.s.Validate(doc)
	var ve *jsonschema.ValidationError
	if err == nil {
		return nil, nil
	}
	if !errors.As(err, &ve) {
		return nil, quarantine.Internal(err, "validate a payload against %s", s.path)
	}
	var out []Violation
	collectViolations(ve, &out)
	return out, nil
}

// collectViolations gathers the leaves of a validation error tree.
func collectViolations(e *jsonschema.ValidationError, out *[]Violation) {
	if len(*out) >= maxViolations {
		return
	}
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collectViolations(c, out)
		}
		return
	}
	detail := "the value does not match the schema"
	if _, isRoot := e.ErrorKind.(*kind.Schema); !isRoot {
		if o := e.BasicOutput(); o.Error != nil {
			detail = o.Error.String()
		}
	}
	ptr := ""
	for _, t := range e.InstanceLocation {
		ptr = jsonptr.Escape(ptr, t)
	}
	*out = append(*out, Violation{Pointer: ptr, Detail: detail})
}

// violationsError is an EUNPROCESSABLE error that lists schema violations.
type violationsError struct {
	err        *quarantine.Error
	violations []Violation
}

func (e *violationsError) Error() string { return e.err.Error() }
func (e *violationsError) Unwrap() error { return e.err }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
