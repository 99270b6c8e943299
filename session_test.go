package quarantine_test

import (
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

func TestHashSessionIDIsSHA256Hex(t *testing.T) {
	t.Parallel()
	// printf abc | sha256sum
	if got := quarantine.HashSessionID("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("HashSessionID(abc) = %s", got)
	}
	id, hash := quarantine.NewSessionID()
	id2, _ := quarantine.NewSessionID()
	if len(id) != 43 || id == id2 || hash != quarantine.HashSessionID(id) {
		t.Fatalf("NewSessionID = %q, %q (next %q)", id, hash, id2)
	}
}

func TestSessionUseNeverPassesExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	var s quarantine.Session
	s.Start(now, 30*time.Minute, time.Hour)
	if !s.IdleUntil.Equal(now.Add(30*time.Minute)) || !s.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("Start: %+v", s)
	}
	if s.Use(now.Add(30*time.Second), 30*time.Minute) {
		t.Fatal("a use within SessionRefresh asked for a write")
	}
	if !s.Use(now.Add(50*time.Minute), 30*time.Minute) || !s.IdleUntil.Equal(s.ExpiresAt) {
		t.Fatalf("a use near the expiry: IdleUntil %v, ExpiresAt %v", s.IdleUntil, s.ExpiresAt)
	}
	if s.Ended(now.Add(time.Hour-time.Nanosecond)) || !s.Ended(now.Add(time.Hour)) {
		t.Fatal("Ended is not exactly at the expiry")
	}
}
