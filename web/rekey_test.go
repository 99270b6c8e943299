package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/collect"
	"github.com/quarantine-dev/quarantine/internal/rules"
	"github.com/quarantine-dev/quarantine/web"
)

// The messages list links to a re-key of its filter; the page previews
// the counts, and its form applies exactly the previewed change.
func TestRekeyPage(t *testing.T) {
	t.Parallel()
	prep := &collect.Preparer{Idempotency: []collect.IdempotencyRule{{Queues: []string{"orders"}, Header: "x-job-key"}}}
	e := newEnv(t, func(c *web.Config) { c.Edit = rules.EditRules{Preparer: prep} })
	var ids []string
	for _, k := range []string{"a", "b"} {
		m := e.message(quarantine.Message{Queue: "orders", JobName: "charge", Payload: []byte(`{}`), Headers: map[string]string{"x-job-key": k},
			FailureClass: quarantine.ClassPermanent, Reason: "bad", KeyRule: quarantine.KeyRuleNone})
		ids = append(ids, m.ID)
	}
	e.message(quarantine.Message{Queue: "orders", JobName: "charge", Payload: []byte(`{}`), FailureClass: quarantine.ClassPermanent, Reason: "bad"})
	c := e.client()
	e.login(c, e.token("op", quarantine.RoleOperator))

	_, list := get(t, c, e.srv.URL+"/messages?queue=orders")
	if !strings.Contains(list, `id="rekey-link"`) || !strings.Contains(list, `/messages/rekey?queue=orders`) {
		t.Fatalf("the messages list has no re-key link for its filter: %s", list)
	}
	res, body := get(t, c, e.srv.URL+"/messages/rekey?queue=orders")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `id="rekey-changed"><strong>2</strong>`) ||
		!strings.Contains(body, `id="rekey-missing">1<`) || !strings.Contains(body, `Re-key 2 messages`) {
		t.Fatalf("preview %d: %s", res.StatusCode, body)
	}
	tok := csrf(t, body)
	form := url.Values{"csrf": {tok}, "queue": {"orders"}, "expect_changed": {"2"}, "reason": {"rule for x-job-key"}}
	res, body = postForm(t, c, e.srv.URL+"/messages/rekey", form)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `id="rekey-changed"><strong>2</strong>`) || strings.Contains(body, `id="rekey-form"`) {
		t.Fatalf("apply %d: %s", res.StatusCode, body)
	}
	for i, id := range ids {
		m, err := e.store.GetMessage(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"a", "b"}[i]; m.IdempotencyKey != want || m.KeyRule != "header:x-job-key" {
			t.Errorf("message %d: key %q rule %q", i, m.IdempotencyKey, m.KeyRule)
		}
	}
	// A stale count changes nothing and shows the counts of now.
	form.Set("expect_changed", "2")
	res, body = postForm(t, c, e.srv.URL+"/messages/rekey", form)
	if res.StatusCode != http.StatusConflict || !strings.Contains(body, `id="rekey-changed"><strong>0</strong>`) {
		t.Fatalf("stale apply %d: %s", res.StatusCode, body)
	}
	// A viewer may not.
	v := e.client()
	e.login(v, e.token("viewer", quarantine.RoleViewer))
	if res, _ := get(t, v, e.srv.URL+"/messages/rekey?queue=orders"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("viewer: %d", res.StatusCode)
	}
}
