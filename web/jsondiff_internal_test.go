package web

import (
	"fmt"
	"testing"
)

func TestJSONDiffIsStructural(t *testing.T) {
	t.Parallel()
	indented := "{\n  \"b\": [1, 2, {\"x\": \"y\"}],\n  \"a\": 1\n}"
	for _, tc := range []struct {
		name     string
		old, new string
		want     []jsonChange
	}{
		{"compacted and reordered: no change", indented, `{"a":1,"b":[1,2,{"x":"y"}]}`, nil},
		{"changed member", `{"a":1,"b":"x"}`, `{"a":2,"b":"x"}`, []jsonChange{{Op: "change", Pointer: "/a", Old: "1", New: "2"}}},
		{"number text", `{"a":1}`, `{"a":1.0}`, []jsonChange{{Op: "change", Pointer: "/a", Old: "1", New: "1.0"}}},
		{"added and removed", `{"a":1,"gone":true}`, `{"a":1,"new":{"k":[null]}}`, []jsonChange{
			{Op: "remove", Pointer: "/gone", Old: "true"}, {Op: "add", Pointer: "/new", New: `{"k":[null]}`}}},
		{"array tail", `[1,2,3]`, `[1,5]`, []jsonChange{{Op: "change", Pointer: "/1", Old: "2", New: "5"}, {Op: "remove", Pointer: "/2", Old: "3"}}},
		{"escaped names", `{"a/b":{"c~d":1}}`, `{"a/b":{"c~d":2}}`, []jsonChange{{Op: "change", Pointer: "/a~1b/c~0d", Old: "1", New: "2"}}},
		{"kind change", `{"a":{"x":1}}`, `{"a":[1]}`, []jsonChange{{Op: "change", Pointer: "/a", Old: `{"x":1}`, New: "[1]"}}},
		{"whole document", `1`, `"<b>"`, []jsonChange{{Op: "change", Pointer: wholeDocument, Old: "1", New: `"<b>"`}}},
	} {
		got, cut, ok := jsonDiff([]byte(tc.old), []byte(tc.new))
		if !ok || cut || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v (cut %v, ok %v), want %v", tc.name, got, cut, ok, tc.want)
		}
	}
	if _, _, ok := jsonDiff([]byte(`{`), []byte(`{}`)); ok {
		t.Error("a side that is not JSON must not be compared")
	}
	big := "["
	for i := range maxJSONChanges + 10 {
		if i > 0 {
			big += ","
		}
		big += "1"
	}
	big += "]"
	if got, cut, ok := jsonDiff([]byte("[]"), []byte(big)); !ok || !cut || len(got) != maxJSONChanges {
		t.Errorf("%d changes, cut %v: want %d, cut", len(got), cut, maxJSONChanges)
	}
}
