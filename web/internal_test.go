package web

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/quarantine-dev/quarantine/store/sqlite"
)

// New fails fast on a missing view.
func TestWebNewFailsOnAMissingView(t *testing.T) {
	st, err := sqlite.Open(t.Context(), t.TempDir()+"/q.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tfs := fstest.MapFS{}
	for _, v := range append([]string{"layout"}, views...) {
		b, err := templateFS.ReadFile("templates/" + v + ".html")
		if err != nil {
			t.Fatal(err)
		}
		if v != "message" {
			tfs["templates/"+v+".html"] = &fstest.MapFile{Data: b}
		}
	}
	_, err = newHandler(Config{Store: st}, tfs, staticFS)
	if err == nil || !strings.Contains(err.Error(), "message") {
		t.Fatalf("New with no message view: %v", err)
	}
	if _, err := newHandler(Config{Store: st}, templateFS, staticFS); err != nil {
		t.Fatal(err)
	}
}

func TestWebAgo(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{10 * time.Second: "just now", 5 * time.Minute: "5 min ago",
		3 * time.Hour: "3 h ago", 72 * time.Hour: "3 d ago", -2 * time.Hour: "in 2 h"} {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
	if got := truncate(3, "héllo"); got != "hél…" {
		t.Errorf("truncate = %q", got)
	}
}

// shortLists cuts long lists of the audit page's details, and only them.
func TestWebShortLists(t *testing.T) {
	long := `{"count":8,"previous_status":{"quarantined":["a","b","c","d","e","f","g","h"]},"reason":"r"}`
	want := `{"count":8,"previous_status":{"quarantined":["a","b","c","d","e","… 3 more (the API lists them all)"]},"reason":"r"}`
	if got := string(shortLists([]byte(long))); got != want {
		t.Fatalf("shortLists = %s, want %s", got, want)
	}
	for _, keep := range []string{`{"ids":["a","b","c","d","e","f"]}`, `not json`, `{}`} {
		if got := string(shortLists([]byte(keep))); got != keep {
			t.Fatalf("shortLists(%s) = %s", keep, got)
		}
	}
}
