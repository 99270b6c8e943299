package sqlite

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/quarantine-dev/quarantine"
)

// TestWALIsCheckpointedInTheBackground writes far more than the WAL may
// hold and checks that the checkpointer, not the writer's backstop
// (backstop pages, 1 GiB), copies it back after the writes: each batch
// is followed by a complete checkpoint, and the WAL file stays a few
// batches long.
//
// A checkpoint that began while the batch was still being written is
// complete for the frames it saw, not for the batch: the test waits for
// two complete checkpoints counted after the batch returned (the second
// began after the first ended, so after the batch), which is what lets
// the next write start the WAL again from its beginning. Waiting for one
// let a slow machine chain batches into the WAL (10 MiB seen in CI).
func TestWALIsCheckpointedInTheBackground(t *testing.T) {
	s := openTest(t, WithoutSearchIndexer())
	payload := bytes.Repeat([]byte("x"), 4096)
	const batches, per = 24, 250 // about 1 MiB of payload per batch
	for b := range batches {
		msgs := make([]*quarantine.Message, per)
		for i := range msgs {
			m := purgeMsg(fmt.Sprintf("k-%d-%d", b, i))
			m.Payload = payload
			msgs[i] = m
		}
		if _, err := s.InsertBatch(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
		after := s.ckpt.full.Load()
		for deadline := time.Now().Add(10 * time.Second); s.ckpt.full.Load() < after+2; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("batch %d: no complete checkpoint in 10 s after the write", b)
			}
			s.ckpt.wrote() // as the next commit would
		}
	}
	fi, err := os.Stat(s.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// 24 MiB of payloads went through the WAL; once checkpointed, each
	// write starts it again from its beginning.
	if fi.Size() > 8<<20 {
		t.Fatalf("the WAL file is %d bytes after %d batches of about 1 MiB", fi.Size(), batches)
	}
}

// A store may be closed twice (a test's cleanup after the code under test
// closed it): the second close does nothing.
func TestCloseTwice(t *testing.T) {
	s := openTest(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
