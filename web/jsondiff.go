package web

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// jsonChange is one difference between two JSON documents, at a JSON
// Pointer: Op is "add" (New only), "remove" (Old only) or "change";
// Old and New are the values as compact JSON, cut to maxChangeValue.
type jsonChange struct {
	Op       string
	Pointer  string
	Old, New string
}

// maxJSONChanges bounds the changes a page shows; maxChangeValue the
// characters of a value shown.
const (
	maxJSONChanges = 500
	maxChangeValue = 300
)

// jsonDiff compares two JSON documents by structure, not by line: members
// of an object by name (their order ignored), elements of an array by
// index, other values by equality (numbers by their text, so 1 and 1.0
// differ as the bytes replayed would). A compacted or re-indented payload
// has no change. ok is false when either side is not JSON; cut is true
// when there are more than maxJSONChanges changes.
func jsonDiff(old, new []byte) (changes []jsonChange, cut, ok bool) {
	a, errA := decodeJSON(old)
	b, errB := decodeJSON(new)
	if errA != nil || errB != nil {
		return nil, false, false
	}
	d := &differ{}
	d.walk("", a, b)
	return d.out, d.cut, true
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

type differ struct {
	out []jsonChange
	cut bool
}

func (d *differ) add(c jsonChange) {
	if len(d.out) == maxJSONChanges {
		d.cut = true
		return
	}
	d.out = append(d.out, c)
}

func (d *differ) walk(at jsontext.Pointer, a, b any) {
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			names := slices.Sorted(maps.Keys(av))
			for _, k := range slices.Sorted(maps.Keys(bv)) {
				if _, in := av[k]; !in {
					names = append(names, k)
				}
			}
			for _, k := range names {
				x, inA := av[k]
				y, inB := bv[k]
				p := at.AppendToken(k)
				switch {
				case !inB:
					d.add(jsonChange{Op: "remove", Pointer: pointerText(p), Old: showValue(x)})
				case !inA:
					d.add(jsonChange{Op: "add", Pointer: pointerText(p), New: showValue(y)})
				default:
					d.walk(p, x, y)
				}
			}
			return
		}
	case []any:
		if bv, ok := b.([]any); ok {
			for i := range max(len(av), len(bv)) {
				p := at.AppendToken(strconv.Itoa(i))
				switch {
				case i >= len(bv):
					d.add(jsonChange{Op: "remove", Pointer: pointerText(p), Old: showValue(av[i])})
				case i >= len(av):
					d.add(jsonChange{Op: "add", Pointer: pointerText(p), New: showValue(bv[i])})
				default:
					d.walk(p, av[i], bv[i])
				}
			}
			return
		}
	}
	if sa, sb := showValue(a), showValue(b); !sameValue(a, b) {
		d.add(jsonChange{Op: "change", Pointer: pointerText(at), Old: sa, New: sb})
	}
}

// sameValue reports whether two decoded scalars (or values of different
// kinds) are the same JSON value.
func sameValue(a, b any) bool {
	switch av := a.(type) {
	case map[string]any, []any:
		return false // a container against a value of another kind
	case json.Number:
		bv, ok := b.(json.Number)
		return ok && av == bv
	default:
		return a == b
	}
}

// pointerText is a pointer as shown: "(the whole payload)" for the
// empty pointer.
func pointerText(p jsontext.Pointer) string {
	if p == "" {
		return wholeDocument
	}
	return string(p)
}

// wholeDocument names the empty JSON Pointer on the page.
const wholeDocument = "(the whole payload)"

// showValue is v as compact JSON (HTML characters as they are: the page
// escapes them), cut to maxChangeValue characters.
func showValue(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "?"
	}
	return truncate(maxChangeValue, string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))))
}
