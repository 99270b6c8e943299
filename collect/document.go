package collect

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The members of job and failure that DecodeEnvelope reads, as indices
// into object.fields.
const (
	jobID = iota
	jobName
	jobQueue
	jobIdempotencyKey
	jobSchemaVersion
	jobAttempts
	jobEnqueuedAt
	jobContentType
	jobPayload
	jobPayloadBase64
	numFields

	failureClass         = jobID
	failureReason        = jobName
	failureFailedAt      = jobQueue
	failureFirstFailedAt = jobIdempotencyKey
)

// document is an envelope as one pass over its bytes finds it: the raw
// JSON values of the members the decoder reads (slices of the input,
// validated), every other member validated and skipped. The payload is
// therefore scanned once, whatever its size, instead of once per level
// of json.Unmarshal into maps of json.RawMessage. As with those maps, a
// repeated member replaces the earlier one.
type document struct {
	kind     jsontext.Kind // of the top-level value
	envelope []byte
	job      object
	failure  object
}

// object is a member that should be a JSON object: raw is its value
// when it is not one.
type object struct {
	present  bool
	isObject bool
	raw      []byte
	fields   [numFields][]byte
	headers  headersObject // job.headers
}

func (o *object) get(i int) []byte { return o.fields[i] }

// headersObject is job.headers: its members in the order they came (a
// repeated name keeps its first place and its last value).
type headersObject struct {
	present  bool
	isObject bool
	raw      []byte
	members  []member
}

type member struct {
	name  string
	value []byte
}

// Options of the one pass: duplicate names are allowed (the last wins,
// as with encoding/json) and so are invalid surrogate escapes, which the
// decoder flags itself. The input was checked to be valid UTF-8 first.
var parseOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewBuffer(nil)) }}

var errNotObject = errors.New("expected an object member name or '}'")

// parse reads raw, which must hold exactly one JSON value. The slices it
// keeps point into raw.
func (doc *document) parse(raw []byte) error {
	dec := decoders.Get().(*jsontext.Decoder)
	dec.Reset(bytes.NewBuffer(raw), parseOptions...)
	defer func() {
		dec.Reset(bytes.NewBuffer(nil)) // drop raw
		decoders.Put(dec)
	}()
	p := parser{dec}
	doc.kind = dec.PeekKind()
	var err error
	if doc.kind == '{' {
		err = p.object(func(name []byte) error {
			switch string(name) {
			case "envelope":
				v, err := dec.ReadValue()
				doc.envelope = v
				return err
			case "job":
				return p.fields(&doc.job, jobMember)
			case "failure":
				return p.fields(&doc.failure, failureMember)
			}
			return dec.SkipValue()
		})
	} else {
		_, err = dec.ReadValue()
	}
	if err != nil {
		return err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the top-level value")
		}
		return err
	}
	return nil
}

// parser walks one document.
type parser struct{ dec *jsontext.Decoder }

// object reads an object whose '{' is next, calling each with every
// member's name (unquoted; valid only during the call), which must read
// the member's value.
func (p parser) object(each func(name []byte) error) error {
	if _, err := p.dec.ReadToken(); err != nil {
		return err
	}
	var buf []byte
	for {
		switch p.dec.PeekKind() {
		case '}':
			_, err := p.dec.ReadToken()
			return err
		case '"':
		default:
			if _, err := p.dec.ReadToken(); err != nil {
				return err
			}
			return errNotObject
		}
		n, err := p.dec.ReadValue()
		if err != nil {
			return err
		}
		var name []byte
		if name, buf = unquoteInto(buf[:0], n); name == nil {
			name = []byte{}
		}
		if err := each(name); err != nil {
			return err
		}
	}
}

// fields reads the value of a member that should be an object into o,
// replacing what an earlier member of the same name gave: the members
// that index names are kept.
func (p parser) fields(o *object, index func(name []byte) int) error {
	*o = object{present: true}
	if p.dec.PeekKind() != '{' {
		v, err := p.dec.ReadValue()
		o.raw = v
		return err
	}
	o.isObject = true
	return p.object(func(name []byte) error {
		i := index(name)
		if i == jobHeaders {
			return p.headers(&o.headers)
		}
		if i < 0 {
			return p.dec.SkipValue()
		}
		v, err := p.dec.ReadValue()
		o.fields[i] = v
		return err
	})
}

// headers reads job.headers.
func (p parser) headers(h *headersObject) error {
	*h = headersObject{present: true}
	if p.dec.PeekKind() != '{' {
		v, err := p.dec.ReadValue()
		h.raw = v
		return err
	}
	h.isObject = true
	return p.object(func(name []byte) error {
		v, err := p.dec.ReadValue()
		if err != nil {
			return err
		}
		for i := range h.members {
			if h.members[i].name == string(name) {
				h.members[i].value = v
				return nil
			}
		}
		h.members = append(h.members, member{name: string(name), value: v})
		return nil
	})
}

// jobHeaders is the index jobMember gives "headers" (read by headers).
const jobHeaders = -2

func jobMember(name []byte) int {
	switch string(name) {
	case "id":
		return jobID
	case "name":
		return jobName
	case "queue":
		return jobQueue
	case "idempotency_key":
		return jobIdempotencyKey
	case "schema_version":
		return jobSchemaVersion
	case "attempts":
		return jobAttempts
	case "enqueued_at":
		return jobEnqueuedAt
	case "headers":
		return jobHeaders
	case "content_type":
		return jobContentType
	case "payload":
		return jobPayload
	case "payload_base64":
		return jobPayloadBase64
	}
	return -1
}

func failureMember(name []byte) int {
	switch string(name) {
	case "class":
		return failureClass
	case "reason":
		return failureReason
	case "failed_at":
		return failureFailedAt
	case "first_failed_at":
		return failureFirstFailedAt
	}
	return -1
}

// unquote returns the text of a JSON string (valid, from parse), and
// whether it held a lone UTF-16 surrogate escape, which becomes U+FFFD
// (the input being valid UTF-8, that is the only thing jsontext can
// find wrong in a valid string).
func unquote(v []byte) (s string, lone bool) {
	if len(v) >= 2 && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), false
	}
	b, err := jsontext.AppendUnquote(nil, v)
	return string(b), err != nil
}

// unquoteInto returns the text of the JSON string v, without copying
// when it holds no escape (into buf, grown, otherwise).
func unquoteInto(buf, v []byte) (text, grown []byte) {
	if len(v) >= 2 && bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1], buf
	}
	b, _ := jsontext.AppendUnquote(buf, v)
	return b, b
}

// IsEnvelope reports whether raw is one JSON object with a non-null
// "envelope" member: whether it claims to be a failure envelope, valid or
// not (DecodeEnvelope says which). Invalid UTF-8 inside its strings does
// not count against it, as with encoding/json. It reads raw once.
func IsEnvelope(raw []byte) bool {
	var doc document
	return doc.parse(raw) == nil && doc.kind == '{' && doc.envelope != nil && !isNull(doc.envelope)
}
