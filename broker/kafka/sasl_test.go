package kafka

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/quarantine-dev/quarantine"
	"github.com/quarantine-dev/quarantine/replay"
)

// A cluster that requires SCRAM-SHA-512: the collector authenticates with
// its password_file and drains the topic; the publisher replays through
// the same credentials; a wrong password collects nothing and says so.
func TestSASLSCRAM(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.Ports(0), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "quarantine", "s3cret"),
		kfake.SeedTopics(1, "orders", "orders.DLT"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.SASL(scram.Auth{User: "quarantine", Pass: "s3cret"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := admin.ProduceSync(ctx, springRecord("orders.DLT", "orders", 0, 1, []byte("k"), []byte(`{}`), time.Now(), "E", "m")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Brokers: c.ListenAddrs(), Topics: []string{"orders.DLT"},
		SASL: &SASLConfig{Mechanism: "SCRAM-SHA-512", Username: "quarantine", PasswordFile: pw}}

	bad := cfg
	bad.SASL = &SASLConfig{Mechanism: "SCRAM-SHA-512", Username: "quarantine", Password: "wrong"}
	src, err := NewSource("bad", bad, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	src.poll = 300 * time.Millisecond
	rctx, rcancel := context.WithTimeout(context.Background(), patience*5*time.Second)
	ds, err := src.Receive(rctx, 10, 0)
	rcancel()
	_ = src.Close()
	if len(ds) != 0 || quarantine.ErrorCode(err) != quarantine.EUNAVAILABLE {
		t.Fatalf("a wrong password: %d deliveries, error %v; want none and unavailable", len(ds), err)
	}

	st := openStore(t)
	r := runCollector(t, "scram", cfg, st, 10)
	eventually(t, 10*time.Second, "the dead letter stored", func() bool { return len(allMessages(t, st, "scram")) == 1 })
	r.Stop()
	pub, err := NewPublisher(cfg, "scram", quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	res := pub.Publish(ctx, []replay.Outgoing{{Queue: "orders", Payload: []byte(`{}`)}})
	if res[0].Outcome != quarantine.ItemPublished {
		t.Fatalf("publish with SCRAM: %+v", res[0])
	}
}
