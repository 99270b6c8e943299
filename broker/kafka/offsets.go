package kafka

import (
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// ledger keeps, per assigned partition, the offsets handed out and not yet
// stored, so that the offset committed for a partition never passes a
// record that is not stored: it is the offset after the longest run of
// stored records from the front. Batches acknowledged out of order, or a
// batch the store never took (acknowledged never), hold the commit back;
// the records after it are redelivered after a restart, which the store's
// dedupe key makes harmless.
//
// Each assignment of a partition has its own generation: a delivery of a
// partition revoked (and perhaps assigned again) since is ignored.
type ledger struct {
	mu    sync.Mutex
	gen   uint64
	parts map[tp]*partLedger
}

type partLedger struct {
	gen     uint64
	pending []entry // handed out, in offset order
	// done is the offset to commit (the next record to read) and its
	// leader epoch; set is false until a record was stored.
	done kgo.EpochOffset
	set  bool
	// committed is the last offset committed, -1 for none.
	committed int64
}

type entry struct {
	offset int64
	epoch  int32
	stored bool
}

// mark is what a delivery carries to find its entry.
type mark struct {
	tp     tp
	gen    uint64
	offset int64
}

func newLedger() *ledger { return &ledger{parts: map[tp]*partLedger{}} }

// handOut records r as handed out and returns its mark.
func (l *ledger) handOut(r *kgo.Record) mark {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := tp{r.Topic, r.Partition}
	p := l.parts[k]
	if p == nil {
		l.gen++
		p = &partLedger{gen: l.gen, committed: -1}
		l.parts[k] = p
	}
	if n := len(p.pending); n > 0 && p.pending[n-1].offset >= r.Offset {
		// A rewind (the client fetched again from an older offset): what
		// was pending is handed out anew.
		p.pending = p.pending[:0]
	}
	p.pending = append(p.pending, entry{offset: r.Offset, epoch: r.LeaderEpoch})
	return mark{tp: k, gen: p.gen, offset: r.Offset}
}

// stored marks ms as stored and returns the offsets that may now be
// committed (those that moved), by topic and partition.
func (l *ledger) stored(ms []mark) map[string]map[int32]kgo.EpochOffset {
	l.mu.Lock()
	defer l.mu.Unlock()
	moved := map[tp]bool{}
	for _, m := range ms {
		p := l.parts[m.tp]
		if p == nil || p.gen != m.gen {
			continue // revoked since: its new owner reads it again
		}
		i := sort.Search(len(p.pending), func(i int) bool { return p.pending[i].offset >= m.offset })
		if i < len(p.pending) && p.pending[i].offset == m.offset {
			p.pending[i].stored = true
		}
		n := 0
		for n < len(p.pending) && p.pending[n].stored {
			n++
		}
		if n > 0 {
			last := p.pending[n-1]
			p.done, p.set = kgo.EpochOffset{Epoch: last.epoch, Offset: last.offset + 1}, true
			p.pending = append(p.pending[:0], p.pending[n:]...)
			moved[m.tp] = true
		}
	}
	out := map[string]map[int32]kgo.EpochOffset{}
	for k := range moved {
		p := l.parts[k]
		if p.done.Offset <= p.committed {
			continue
		}
		if out[k.topic] == nil {
			out[k.topic] = map[int32]kgo.EpochOffset{}
		}
		out[k.topic][k.partition] = p.done
	}
	return out
}

// current reports whether m belongs to its partition's assignment now.
func (l *ledger) current(m mark) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.parts[m.tp]
	return p != nil && p.gen == m.gen
}

// committed records that offsets were committed.
func (l *ledger) committed(offsets map[string]map[int32]kgo.EpochOffset) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for t, ps := range offsets {
		for part, eo := range ps {
			if p := l.parts[tp{t, part}]; p != nil && eo.Offset > p.committed {
				p.committed = eo.Offset
			}
		}
	}
}

// drop forgets the partitions (revoked or lost) and returns the offsets
// stored but not committed yet, for a last commit.
func (l *ledger) drop(revoked map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]map[int32]kgo.EpochOffset{}
	for t, parts := range revoked {
		for _, part := range parts {
			k := tp{t, part}
			p := l.parts[k]
			if p == nil {
				continue
			}
			delete(l.parts, k)
			if p.set && p.done.Offset > p.committed {
				if out[t] == nil {
					out[t] = map[int32]kgo.EpochOffset{}
				}
				out[t][part] = p.done
			}
		}
	}
	return out
}

// dropAll forgets every partition.
func (l *ledger) dropAll() {
	l.mu.Lock()
	l.parts = map[tp]*partLedger{}
	l.mu.Unlock()
}
