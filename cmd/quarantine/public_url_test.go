package main

import (
	"testing"

	"github.com/quarantine-dev/quarantine"
)

// public_url and runbook_url come from the file, QUARANTINE_PUBLIC_URL
// overrides public_url, and anything but an absolute http(s) URL is
// refused naming the key.
func TestLoadConfig_PublicURL(t *testing.T) {
	t.Parallel()
	p := writeConfig(t, "public_url: https://q.example.com/ui\nrunbook_url: https://wiki.example.com/dlq#runbook\n")
	c, err := LoadConfig(p, nil)
	if err != nil || c.PublicURL != "https://q.example.com/ui" || c.RunbookURL != "https://wiki.example.com/dlq#runbook" {
		t.Fatalf("file: %+v %v", c.PublicURL, err)
	}
	env := map[string]string{EnvPublicURL: "https://other.example.com"}
	c, err = LoadConfig(p, func(k string) string { return env[k] })
	if err != nil || c.PublicURL != "https://other.example.com" {
		t.Fatalf("env: %q %v", c.PublicURL, err)
	}
	for yaml, field := range map[string]string{"public_url: q.example.com\n": "public_url", "runbook_url: ftp://x/y\n": "runbook_url"} {
		if _, err := LoadConfig(writeConfig(t, yaml), nil); quarantine.ErrorField(err) != field {
			t.Errorf("%q: %v", yaml, err)
		}
	}
	env[EnvPublicURL] = "/relative"
	if _, err := LoadConfig("", func(k string) string { return env[k] }); quarantine.ErrorField(err) != "public_url" {
		t.Errorf("env relative: %v", err)
	}
}
