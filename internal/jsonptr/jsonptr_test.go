package jsonptr

import (
	"encoding/json"
	"testing"
)

func TestGetSet(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{"items":[{"id":"a"},{"id":"b"}],"a/b":{"m~n":1},"":2}`), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p    string
		want any
		ok   bool
	}{
		{"/items/1/id", "b", true},
		{"/items/01/id", nil, false}, // a leading zero names nothing
		{"/items/2/id", nil, false},
		{"/items/-", nil, false},
		{"/items/+1", nil, false},
		{"/a~1b/m~0n", 1.0, true},
		{"/", 2.0, true},
		{"/nope", nil, false},
		{"/items/1/id/x", nil, false},
	} {
		got, ok := Get(doc, c.p)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("Get(%q) = %v, %v; want %v, %v", c.p, got, ok, c.want, c.ok)
		}
	}
	if !Set(doc, "/items/0/id", "X") || !Set(doc, "/a~1b/m~0n", "Y") || Set(doc, "/items/01", "Z") || Set(doc, "/new", 1) {
		t.Fatal("Set answered wrong")
	}
	if v, _ := Get(doc, "/items/0/id"); v != "X" {
		t.Fatalf("Set did not set: %v", v)
	}
}

func TestValid(t *testing.T) {
	for p, want := range map[string]bool{"/a": true, "/a~0~1": true, "": false, "a": false, "/a~": false, "/a~2": false, "/\x00": false, "/\xff": false} {
		if Valid(p) != want {
			t.Errorf("Valid(%q) = %v", p, !want)
		}
	}
	if got := Escape("/x", "a/b~c"); got != "/x/a~1b~0c" {
		t.Errorf("Escape = %q", got)
	}
}
