package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// printings renders v every way the program might print it.
func printings(t *testing.T, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%10s"} {
		out[verb] = fmt.Sprintf(verb, v)
	}
	out["Sprint"] = fmt.Sprint(v)
	var j bytes.Buffer
	enc := json.NewEncoder(&j)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"v": v}); err != nil {
		t.Fatal(err)
	}
	out["json"] = j.String()
	y, err := yaml.Marshal(map[string]any{"v": v})
	if err != nil {
		t.Fatal(err)
	}
	out["yaml"] = string(y)
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var b bytes.Buffer
		slog.New(h(&b)).Info("msg", "v", v)
		out[fmt.Sprintf("slog %T", h(&b))] = b.String()
	}
	return out
}

func TestSecret_NeverPrints(t *testing.T) {
	t.Parallel()
	s := Secret("qt_hunter2")
	if s.Reveal() != "qt_hunter2" {
		t.Fatalf("Reveal = %q", s.Reveal())
	}
	type holder struct{ Token Secret }
	for _, v := range []any{s, holder{s}, &holder{s}} {
		for how, got := range printings(t, v) {
			if strings.Contains(got, "hunter2") {
				t.Errorf("%s of %T leaks the secret: %s", how, v, got)
			}
			if !strings.Contains(got, "<secret>") {
				t.Errorf("%s of %T does not say <secret>: %s", how, v, got)
			}
		}
	}
}

func TestDatabaseURL_PrintsRedacted(t *testing.T) {
	t.Parallel()
	u := DatabaseURL("postgres://quarantine:hunter2@db.internal:5432/q?sslmode=disable")
	if u.Reveal() != string(u) {
		t.Fatal("Reveal changed the URL")
	}
	for how, got := range printings(t, u) {
		if strings.Contains(got, "hunter2") {
			t.Errorf("%s leaks the password: %s", how, got)
		}
		if !strings.Contains(got, "db.internal:5432") || !strings.Contains(got, "<secret>") {
			t.Errorf("%s lost the host or the marker: %s", how, got)
		}
	}
	c := DefaultConfig()
	c.Database = u
	if got := fmt.Sprintf("%+v", c); strings.Contains(got, "hunter2") {
		t.Fatalf("a printed Config leaks the password: %s", got)
	}
	if got := DatabaseURL("sqlite:./q.db").String(); got != "sqlite:./q.db" {
		t.Fatalf("a SQLite URL prints as %q", got)
	}
}
