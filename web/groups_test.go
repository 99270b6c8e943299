package web_test

import (
	"html"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/quarantine-dev/quarantine"
)

var groupLinkRE = regexp.MustCompile(`<tr data-fingerprint="([^"]+)" data-row>\s*<td class="count"><a href="([^"]+)" class="group-link">(\d+) messages</a>`)

// The groups page shows the failure groups of the filter, largest first,
// within the token's owners; one click on a group lists its messages.
func TestWebGroupsLinkToTheirMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var declined []*quarantine.Message
	for range 3 {
		declined = append(declined, e.message(quarantine.Message{Queue: "orders", JobName: "charge", FailureClass: quarantine.ClassPermanent,
			Reason: "card declined", Payload: []byte(`{}`)}))
	}
	timeout := e.message(quarantine.Message{Queue: "orders", JobName: "charge", FailureClass: quarantine.ClassExhausted, Reason: "timeout", Payload: []byte(`{}`)})
	billing := e.message(quarantine.Message{Queue: "billing", JobName: "charge", FailureClass: quarantine.ClassPermanent, Reason: "card declined", Payload: []byte(`{}`)})
	e.message(quarantine.Message{Queue: "orders", JobName: "secret-job", Owner: "team-b", Reason: "other team", Payload: []byte(`{}`)})
	c := e.client()
	e.login(c, e.token("a-viewer", quarantine.RoleViewer, "team-a"))

	res, body := get(t, c, e.srv.URL+"/groups")
	if res.StatusCode != http.StatusOK || strings.Contains(body, "secret-job") {
		t.Fatalf("groups: %d %s", res.StatusCode, body)
	}
	rows := groupLinkRE.FindAllStringSubmatch(body, -1)
	if len(rows) != 2 || rows[0][1] != declined[0].Fingerprint || rows[0][3] != "4" || rows[1][1] != timeout.Fingerprint || rows[1][3] != "1" {
		t.Fatalf("groups %v, want card declined (4) then timeout (1)", rows)
	}
	if !strings.Contains(body, "orders, billing") && !strings.Contains(body, "billing, orders") {
		t.Errorf("the group's queues are not shown: %s", body)
	}
	// One click: the group's messages.
	_, list := get(t, c, e.srv.URL+html.UnescapeString(rows[0][2]))
	if got, want := rowIDs(list), sortedIDs(append(slices.Clone(declined), billing)...); !slices.Equal(got, want) {
		t.Fatalf("the group's messages: %v, want %v", got, want)
	}
	if !strings.Contains(list, `name="fingerprint" value="`+declined[0].Fingerprint+`"`) {
		t.Error("the list's filter bar does not show the group")
	}
	// The page's filter narrows the groups, and their links keep it.
	_, body = get(t, c, e.srv.URL+"/groups?queue=billing")
	rows = groupLinkRE.FindAllStringSubmatch(body, -1)
	if len(rows) != 1 || rows[0][3] != "1" || !strings.Contains(rows[0][2], "queue=billing") {
		t.Fatalf("groups of billing: %v", rows)
	}
	_, list = get(t, c, e.srv.URL+html.UnescapeString(rows[0][2]))
	if got := rowIDs(list); !slices.Equal(got, []string{billing.ID}) {
		t.Fatalf("billing's group: %v", got)
	}
	if res, _ := get(t, c, e.srv.URL+"/groups?status=bogus"); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad filter: %d", res.StatusCode)
	}
	if res, _ := get(t, c, e.srv.URL+"/groups?owner=team-b"); res.StatusCode != http.StatusOK {
		t.Fatalf("another team's owner: %d", res.StatusCode)
	} else if _, body := get(t, c, e.srv.URL+"/groups?owner=team-b"); !strings.Contains(body, `id="empty"`) {
		t.Fatal("another team's groups are shown")
	}
}
