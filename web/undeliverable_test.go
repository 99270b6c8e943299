package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/web"
)

// The preview of a replay whose messages cannot be delivered says so,
// prominently and per message, before Start.
func TestReplayPreviewWarnsOfUndeliverableMessages(t *testing.T) {
	t.Parallel()
	refuse := func(b *quarantine.ReplayBatch, m *quarantine.Message) error {
		if m.SourceKind == quarantine.SourceHTTP {
			return quarantine.Errorf(quarantine.EUNPROCESSABLE, "the message came through HTTP ingest, which cannot publish: configure a destination for queue %s", m.Queue)
		}
		return nil
	}
	e := newEnv(t, func(c *web.Config) { c.Replay.Route = refuse })
	var ids []string
	for i, kind := range []quarantine.SourceKind{quarantine.SourceHTTP, quarantine.SourceHTTP, quarantine.SourceMemory} {
		m := e.message(quarantine.Message{Queue: "payments", JobName: "charge", Payload: []byte(`{}`), SourceKind: kind,
			IdempotencyKey: "k" + string(rune('a'+i)), FailureClass: quarantine.ClassPermanent, Reason: "bad"})
		ids = append(ids, m.ID)
	}
	nokey := e.message(quarantine.Message{Queue: "payments", JobName: "charge", Payload: []byte(`{}`), SourceKind: quarantine.SourceMemory,
		FailureClass: quarantine.ClassPermanent, Reason: "bad"})
	b, err := e.store.CreateReplay(context.Background(), quarantine.ReplayRequest{IDs: append(ids, nokey.ID), Rate: 10, Burst: 1,
		DryRun: true, Reason: "try", Actor: "token:op"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))
	_, body := get(t, c, e.srv.URL+"/replays/"+b.ID)
	sec := sectionOf(body, "undeliverable")
	if !strings.Contains(sec, `id="undeliverable-count">3<`) || !strings.Contains(sec, "3 of 4 messages cannot be delivered") ||
		strings.Count(sec, "configure a destination for queue payments") != 2 || !strings.Contains(sec, "no idempotency key") ||
		!strings.Contains(sec, nokey.ID) || strings.Contains(sec, ids[2]) {
		t.Fatalf("preview: %s", sec)
	}
	// A draft whose every message is deliverable shows no warning.
	ok, err := e.store.CreateReplay(context.Background(), quarantine.ReplayRequest{IDs: ids[2:], Rate: 10, Burst: 1,
		DryRun: true, Reason: "try", Actor: "token:op"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, c, e.srv.URL+"/replays/"+ok.ID); strings.Contains(body, `id="undeliverable"`) {
		t.Fatal("a deliverable draft warns")
	}
}

// sectionOf returns the HTML of the element with id, up to its </section>.
func sectionOf(body, id string) string {
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], "</section>")
	if j < 0 {
		return body[i:]
	}
	return body[i : i+j]
}
