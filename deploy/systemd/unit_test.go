package systemd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/quarantine-dev/quarantine/internal/testbin"
	"github.com/quarantine-dev/quarantine/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

const unitFile = "quarantine.service"

// options reads the unit: section and key to the values, in order.
func options(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]string{}
	for _, o := range opts {
		k := o.Section + "." + o.Name
		m[k] = append(m[k], o.Value)
	}
	return m
}

// TestUnitHardening: the unit runs `quarantine serve` as a dynamic user
// owning only its state directory (where the SQLite default lives), on
// loopback, with the usual hardening: no new privileges, no
// capabilities, a read-only system, private /tmp and devices, filtered
// system calls and address families.
func TestUnitHardening(t *testing.T) {
	t.Parallel()
	m := options(t)
	want := map[string]string{
		"Service.ExecStart":               "/usr/local/bin/quarantine serve",
		"Service.Type":                    "exec",
		"Service.DynamicUser":             "yes",
		"Service.StateDirectory":          "quarantine",
		"Service.StateDirectoryMode":      "0700",
		"Service.WorkingDirectory":        "/var/lib/quarantine",
		"Service.UMask":                   "0077",
		"Service.KillSignal":              "SIGTERM",
		"Service.Restart":                 "on-failure",
		"Service.NoNewPrivileges":         "yes",
		"Service.CapabilityBoundingSet":   "",
		"Service.AmbientCapabilities":     "",
		"Service.ProtectSystem":           "strict",
		"Service.ProtectHome":             "yes",
		"Service.PrivateTmp":              "yes",
		"Service.PrivateDevices":          "yes",
		"Service.PrivateUsers":            "yes",
		"Service.ProtectKernelTunables":   "yes",
		"Service.ProtectKernelModules":    "yes",
		"Service.ProtectControlGroups":    "yes",
		"Service.RestrictSUIDSGID":        "yes",
		"Service.RestrictNamespaces":      "yes",
		"Service.RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"Service.LockPersonality":         "yes",
		"Service.MemoryDenyWriteExecute":  "yes",
		"Service.SystemCallArchitectures": "native",
		"Install.WantedBy":                "multi-user.target",
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok || got[len(got)-1] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if got := m["Service.SystemCallFilter"]; !slices.Equal(got, []string{"@system-service", "~@privileged"}) {
		t.Errorf("SystemCallFilter = %q", got)
	}
	env := map[string]string{}
	for _, e := range m["Service.Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	if env["QUARANTINE_DATABASE_URL"] != "sqlite:/var/lib/quarantine/quarantine.db" ||
		env["QUARANTINE_LISTEN"] != "127.0.0.1:8080" ||
		env["QUARANTINE_CONFIG"] != "/etc/quarantine/quarantine.yaml" {
		t.Errorf("Environment = %v, want the SQLite default in the state directory, loopback, /etc/quarantine", env)
	}
	// The secrets' file: optional (-), read after the defaults so it wins.
	if got := m["Service.EnvironmentFile"]; !slices.Equal(got, []string{"-/etc/quarantine/quarantine.env"}) {
		t.Errorf("EnvironmentFile = %q", got)
	}
	for _, k := range []string{"Service.User", "Service.ReadWritePaths", "Service.AmbientCapabilities"} {
		if v := m[k]; len(v) > 0 && v[len(v)-1] != "" {
			t.Errorf("%s = %q: the service needs no user, path or capability beyond its state directory", k, v)
		}
	}
}

// TestUnitVerify runs systemd's own checks offline: `systemd-analyze
// verify` prints nothing (an unknown or misspelled key, a bad value or a
// missing binary would be reported), and `systemd-analyze security
// --offline` rates the unit's exposure at most 2.0 ("OK"). The unit's
// binary path is pointed at the built binary (internal/testbin; verify checks it
// exists and is executable).
func TestUnitVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Unavailable(t, "PATH", "systemd-analyze is not installed (Debian's systemd package; scripts/services.sh installs it)")
	}
	dir := t.TempDir()
	bin := testbin.Path(t)
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte("/usr/local/bin/quarantine"), []byte(bin))
	u := filepath.Join(dir, unitFile)
	if err := os.WriteFile(u, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", u).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--no-pager", u).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	match := regexp.MustCompile(`Overall exposure level for quarantine\.service: ([0-9.]+)`).FindSubmatch(out)
	if match == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	level, err := strconv.ParseFloat(string(match[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exposure level %.1f", level)
	if level > 2.0 {
		t.Errorf("exposure level %.1f, want at most 2.0:\n%s", level, out)
	}
}
