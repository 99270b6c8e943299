package workdriver

import (
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/worker"
)

type ref struct{ n int }

func TestRef(t *testing.T) {
	t.Parallel()
	r, err := Ref[ref](&worker.Delivery{Ref: &ref{n: 1}}, "x")
	if err != nil || r.n != 1 {
		t.Fatalf("Ref = %v, %v", r, err)
	}
	for _, d := range []*worker.Delivery{{}, {Ref: (*ref)(nil)}, {Ref: ref{}}, {Ref: "other"}} {
		if _, err := Ref[ref](d, "x"); quarantine.ErrorCode(err) != quarantine.EINTERNAL || !strings.HasSuffix(err.Error(), "x: the delivery was not made by this driver") {
			t.Errorf("Ref(%#v) = %v, want EINTERNAL", d.Ref, err)
		}
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	m := &worker.Message{Headers: map[string]string{"a": "1"}, JobName: "send-email"}
	h := Headers(m, 1)
	if len(h) != 2 || h["a"] != "1" || h[worker.HeaderJobName] != "send-email" {
		t.Errorf("Headers = %v", h)
	}
	h["b"] = "2"
	if _, ok := m.Headers["b"]; ok {
		t.Error("Headers changed the message's headers")
	}
	m = &worker.Message{Headers: map[string]string{worker.HeaderJobName: "kept"}, JobName: "other"}
	if h := Headers(m, 0); h[worker.HeaderJobName] != "kept" {
		t.Errorf("Headers replaced the job name header: %v", h)
	}
	if h := Headers(&worker.Message{}, 0); len(h) != 0 {
		t.Errorf("Headers of an empty message = %v", h)
	}
}
