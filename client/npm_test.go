package client_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// nodeTool returns the path of an npm tool that scripts/node-tools.sh
// installs into .tools/node. Without it (or node) the test skips, and
// fails under CI=true, where make test has installed it.
func nodeTool(t *testing.T, name string) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, ".tools", "node", "node_modules", ".bin", name)
	_, statErr := os.Stat(p)
	_, nodeErr := exec.LookPath("node")
	if statErr == nil && nodeErr == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed (%v, node: %v): make test runs scripts/node-tools.sh", name, statErr, nodeErr)
	}
	t.Skipf("%s is not installed: run scripts/node-tools.sh", name)
	return ""
}

// npmCmd runs an npm tool quietly (no telemetry, no update notices).
func npmCmd(t *testing.T, dir, tool string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), tool, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")
	return cmd
}

// TestRedoclyLint lints openapi.yaml with Redocly's recommended rules
// (redocly.yaml): no error and no warning; the few accepted occurrences
// are in .redocly.lint-ignore.yaml, each with its reason.
func TestRedoclyLint(t *testing.T) {
	t.Parallel()
	redocly := nodeTool(t, "redocly")
	cmd := npmCmd(t, ".", redocly, "lint", "../openapi.yaml", "--config", "redocly.yaml", "--format=json")
	out, err := cmd.Output()
	var res struct {
		Totals struct {
			Errors, Warnings, Ignored int
		}
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string
			Message  string
			Location []struct {
				Pointer string
			}
		}
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("redocly lint: %v (%v)\n%s", jerr, err, out)
	}
	for _, p := range res.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("%s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	if res.Totals.Errors+res.Totals.Warnings > 0 || err != nil {
		t.Fatalf("redocly lint: %d errors, %d warnings (%v)", res.Totals.Errors, res.Totals.Warnings, err)
	}
}

// checkTS uses the generated types the way a TypeScript client would;
// tsc --strict must accept it, including each @ts-expect-error (which
// fails the compile when its line is not an error: the types are not
// any).
const checkTS = `import type { components, paths } from "./api";

type Message = components["schemas"]["Message"];
type Problem = components["schemas"]["Problem"];
type Envelope = components["schemas"]["Envelope"];

type ListOK = paths["/api/v1/messages"]["get"]["responses"][200]["content"]["application/json"];
type GetOK = paths["/api/v1/messages/{id}"]["get"]["responses"][200]["content"]["application/json"];
type EditBody = NonNullable<paths["/api/v1/messages/{id}/payload"]["put"]["requestBody"]>["content"]["application/json"];
type ReplayBody = NonNullable<paths["/api/v1/replays"]["post"]["requestBody"]>["content"]["application/json"];
type Unsupported = paths["/api/v1/messages/sample"]["post"]["responses"][415]["content"]["application/problem+json"];
type Throttled = paths["/api/v1/messages"]["get"]["responses"][429]["headers"]["Retry-After"];
type SampleBody = NonNullable<paths["/api/v1/messages/sample"]["post"]["requestBody"]>["content"]["application/json"];
type StartBody = NonNullable<paths["/api/v1/replays/{id}/start"]["post"]["requestBody"]>["content"]["application/json"];

export function firstId(page: ListOK): string | undefined {
  return page.items[0]?.id;
}

export function sha(m: GetOK): string {
  return m.payload_sha256;
}

export const edit: EditBody = { payload: { amount: 42 }, reason: "fix the amount" };
export const dryRun: ReplayBody = { ids: ["01J00000000000000000000000"], reason: "after the fix", dry_run: true };
export const versions: Envelope["job"]["schema_version"][] = ["v2", 3];
export const problem: Unsupported = { type: "urn:quarantine:problem:unsupported_media_type", title: "Unsupported Media Type", status: 415, detail: "send JSON" };
export const retry: Throttled = "3";

// What the server assumes when a member is absent is not required of a
// client: the smallest valid bodies compile.
export const minimalReplay: ReplayBody = { ids: ["01J00000000000000000000000"], reason: "after the fix" };
export const minimalStart: StartBody = { reason: "after the fix" };
export const minimalSample: SampleBody = {};

export function field(p: Problem): string {
  return p.field ?? "";
}

export function status(m: Message): string {
  return m.status;
}

// @ts-expect-error: status is a number
export const badStatus: Problem["status"] = "415";
// @ts-expect-error: an edit needs a reason
export const noReason: EditBody = { payload: 1 };
// @ts-expect-error: schema_version is a string or a number
export const badVersion: Envelope["job"]["schema_version"] = true;
`

// TestTypeScriptTypes generates TypeScript types from openapi.yaml with
// openapi-typescript, with its default flags only (as a user would), and
// type-checks a client of them with tsc --strict.
func TestTypeScriptTypes(t *testing.T) {
	t.Parallel()
	gen, tsc := nodeTool(t, "openapi-typescript"), nodeTool(t, "tsc")
	dir := t.TempDir()
	spec, err := filepath.Abs("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// openapi-typescript 7 makes a member with a `default` required, even
	// in a request body ($ref'd from components), where the default is
	// what the server assumes when the client leaves it out (its issue
	// 1741): the spec says those in descriptions ("Absent: false"), and
	// TestSpecRequestBodiesHaveNoDefaults in package api keeps it so.
	if out, err := npmCmd(t, dir, gen, spec, "-o", "api.d.ts").CombinedOutput(); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "check.ts"), []byte(checkTS), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := npmCmd(t, dir, tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "esnext",
		"--moduleResolution", "bundler", "--skipLibCheck", "false", "check.ts").CombinedOutput()
	if err != nil {
		t.Fatalf("tsc on the generated types: %v\n%s", err, out)
	}
}
