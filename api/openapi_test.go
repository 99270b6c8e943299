package api_test

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/quarantine-dev/quarantine/api"
)

// TestSpecMatchesRoutes checks that openapi.yaml and the route table list
// exactly the same routes.
func TestSpecMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.yaml is %s, want 3.1", doc.OpenAPI)
	}
	var inSpec []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			inSpec = append(inSpec, method+" "+path)
		}
	}
	e := newEnv(t)
	var inServer []string
	h := api.New(apiConfig(e)).Handler()
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("Handler is a %T, not a chi router", h)
	}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		inServer = append(inServer, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(inSpec)
	slices.Sort(inServer)
	if !slices.Equal(inSpec, inServer) {
		t.Fatalf("routes differ:\nspec:   %v\nserver: %v", inSpec, inServer)
	}
}

// TestSpecOperationsAreDocumented checks what every operation of the spec
// promises: an operationId, a success response (200, or 201 for a
// creation), problem responses, and 401/403 on the authenticated routes.
func TestSpecOperationsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	id := regexp.MustCompile(`^[a-z][A-Za-z0-9]+$`)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			success := op.Responses.Status(200) != nil || (method == http.MethodPost && op.Responses.Status(201) != nil)
			if !id.MatchString(op.OperationID) || op.Responses.Default() == nil || !success {
				t.Errorf("%s %s: operationId %q, default and 200 (or 201) responses are required", method, path, op.OperationID)
			}
			if strings.HasPrefix(path, "/api/") {
				if op.Security != nil || op.Responses.Status(401) == nil || op.Responses.Status(403) == nil {
					t.Errorf("%s %s: must use the bearer scheme and document 401 and 403", method, path)
				}
			}
		}
	}
	if _, ok := doc.Components.SecuritySchemes["bearer"]; !ok {
		t.Error("no bearer security scheme")
	}
}

// TestSpecRequestBodiesHaveNoDefaults: no member of a request body
// declares a `default`. openapi-typescript 7 (with its default flags)
// makes every member with a default required, in request bodies too (its
// issue 1741), so a strict TypeScript client would have to send what the
// server already assumes; the spec says those values in the member's
// description instead ("Absent: false").
func TestSpecRequestBodiesHaveNoDefaults(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			for ct, mt := range op.RequestBody.Value.Content {
				if mt.Schema == nil {
					continue
				}
				for _, where := range defaultsIn(mt.Schema, "", map[*openapi3.Schema]bool{}) {
					t.Errorf("%s %s (%s): %s has a default: say it in its description", method, path, ct, where)
				}
			}
		}
	}
}

// defaultsIn lists the JSON Pointers of the members of s (and of the
// schemas it combines or nests) that declare a default.
func defaultsIn(ref *openapi3.SchemaRef, at string, seen map[*openapi3.Schema]bool) []string {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return nil
	}
	s := ref.Value
	seen[s] = true
	var out []string
	for name, p := range s.Properties {
		if p != nil && p.Value != nil && p.Value.Default != nil {
			out = append(out, fmt.Sprintf("%s/%s", at, name))
		}
		out = append(out, defaultsIn(p, at+"/"+name, seen)...)
	}
	for _, group := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range group {
			out = append(out, defaultsIn(sub, at, seen)...)
		}
	}
	out = append(out, defaultsIn(s.Items, at+"/0", seen)...)
	if s.AdditionalProperties.Schema != nil {
		out = append(out, defaultsIn(s.AdditionalProperties.Schema, at+"/*", seen)...)
	}
	return out
}

// TestSpecJSONLinesNameTheirLines: every JSON Lines response names the
// schema of its lines (contentSchema), which checkResponse validates
// each line against.
func TestSpecJSONLinesNameTheirLines(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, r := range op.Responses.Map() {
				if r.Value == nil {
					continue
				}
				mt := r.Value.Content.Get("application/x-ndjson")
				if mt == nil {
					continue
				}
				n++
				if mt.Schema == nil || mt.Schema.Value == nil || mt.Schema.Value.ContentSchema == nil ||
					!strings.HasPrefix(mt.Schema.Value.ContentSchema.Ref, "#/components/schemas/") {
					t.Errorf("%s %s %s: a JSON Lines body without a contentSchema naming its lines", method, path, code)
				}
			}
		}
	}
	if n != 2 {
		t.Errorf("%d JSON Lines responses, want 2 (audit export, replay report)", n)
	}
}
