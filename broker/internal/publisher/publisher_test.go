package publisher

import (
	"slices"
	"testing"

	"github.com/quarantine-dev/quarantine/replay"
)

func TestHeaders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		headers map[string]string
		names   []string
		ct      bool
	}{
		{map[string]string{"a": "1", "own": "2"}, []string{"a"}, false},
		{map[string]string{"Content-Type": "text/plain", "own": "x"}, []string{"Content-Type"}, true},
		{map[string]string{"contentType": "text/plain"}, []string{"contentType"}, true},
		{map[string]string{"ContentType": "text/plain"}, []string{"ContentType"}, false},
		{map[string]string{"own": "content-type"}, []string{}, false},
	} {
		names, ct := Headers(&replay.Outgoing{Headers: c.headers}, func(k, _ string) bool { return k == "own" })
		slices.Sort(names)
		if !slices.Equal(names, c.names) || ct != c.ct {
			t.Errorf("Headers(%v) = %v, %v; want %v, %v", c.headers, names, ct, c.names, c.ct)
		}
	}
}

func TestLog(t *testing.T) {
	t.Parallel()
	Log(nil, "kafka", "p").Info("discarded")
}
