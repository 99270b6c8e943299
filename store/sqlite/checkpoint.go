package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"
)

// The WAL is checkpointed (its pages copied back into the database file)
// by a connection of its own, in the background, not by the writer at the
// end of the commit that filled it: with SQLite's automatic checkpoint
// every 1000 pages, the collector's single writer spent about 8% of the
// binary's CPU copying pages, and every write waited meanwhile. The
// checkpointer runs a PASSIVE checkpoint, which never waits for the
// writer or the readers, after writes, at most once every
// checkpointEvery.
//
// The writer keeps an automatic checkpoint as a backstop should the
// checkpointer fall behind, set far above what a long read lets pile up:
// a pin's snapshot is one read that lasts the whole pin, the WAL cannot
// be copied back past it meanwhile, and a million items leave a few
// hundred MiB. With the backstop at 64 MiB, the first commit after the
// snapshot ended copied all of it inside the writer, and an HTTP ingest
// waited 0.9 to 1.3 s behind it (docs/benchmarks.md).
const (
	checkpointEvery = 100 * time.Millisecond
	// backstop is the writer's wal_autocheckpoint, in pages of 4 KiB
	// (1 GiB).
	backstop = "262144"
)

// checkpointer checkpoints the WAL of one store in the background.
type checkpointer struct {
	db   *sql.DB
	kick chan struct{}
	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
	err  error // of close
	// full counts the checkpoints that copied the whole WAL back (tests).
	full atomic.Int64
}

// startCheckpointer opens the checkpointer's connection and starts its
// loop; nil (the writer checkpoints by itself, at the backstop) when the
// connection cannot be opened.
func startCheckpointer(dsn string) *checkpointer {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	c.done.Add(1)
	go c.run()
	return c
}

// wrote tells the checkpointer that a write committed.
func (c *checkpointer) wrote() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer c.done.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		// A failed checkpoint (the database busy in another process's
		// checkpoint) is tried again after the next write.
		var busy, log, copied int
		err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &copied)
		if err == nil && busy == 0 && log == copied {
			c.full.Add(1)
		}
		select {
		case <-c.stop:
			return
		case <-time.After(checkpointEvery):
		}
	}
}

// close stops the loop and closes its connection; closing again (a
// store closed twice) returns the first close's error.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() {
		close(c.stop)
		c.done.Wait()
		c.err = c.db.Close()
	})
	return c.err
}
