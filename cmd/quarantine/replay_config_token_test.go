package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestLoadConfig_DestinationToken(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(writeConfig(t, "destinations:\n  - queues: [work]\n    kind: cloudflare\n    url: http://127.0.0.1:8787/replay\n    token: \" s3cret \"\n"), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Destinations[0]
	if d.Token.Reveal() != " s3cret " || d.Kind != "cloudflare" {
		t.Fatalf("destination %+v", d)
	}
	if s := fmt.Sprintf("%v %+v %#v", d, d, c); strings.Contains(s, "s3cret") {
		t.Fatalf("the token is printed: %s", s)
	}
	for _, tc := range []struct{ yaml, field, want string }{
		{"    token: a\n    token_file: /run/secrets/b\n", "destinations[0].token", "not both"},
		{"    token: \"  \"\n", "destinations[0].token", "blank"},
	} {
		_, err := LoadConfig(writeConfig(t, "destinations:\n  - queues: [work]\n    kind: http\n    url: http://127.0.0.1:8787/replay\n"+tc.yaml), envOf(nil))
		if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %s: %s", tc.yaml, err, tc.field, tc.want)
		}
	}
}
