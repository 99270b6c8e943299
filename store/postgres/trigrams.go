package postgres

import (
	"context"
	"slices"
	"strconv"
	"strings"
)

// A probe (text.go) asks the GIN index of search_docs.key for the
// documents holding a text. pg_trgm answers a LIKE by reading the posting
// list of every trigram of the pattern and intersecting them, so a text
// costs what its most common trigrams cost, however rare the text: the
// order ID "idem-6043245" has the trigrams of "idem-", held by every
// document of the benchmark's data, and at ten million documents their
// lists are thousands of index pages (docs/benchmarks.md). A probe of a
// text with more than probeTrigramsMin trigrams of ASCII letters and
// digits therefore asks the index for a few of them only, the rarest in
// a sample of the documents, and tests the whole text on each candidate
// (the document's LIKE, as before): the answer is the same, the index
// reads the short lists.
//
// The sample must be random: a trigram it misses but most documents
// hold, taken for a rare one, makes the probe test every document. The
// newest documents were not random during a burst (they were all the
// burst's, whose payloads had another shape than the rest: the "ide" and
// "dem" of "idem-" were in none of them and in every older document).

const (
	// probeTrigramsMin is the count of ASCII trigrams above which a
	// probe chooses some of them.
	probeTrigramsMin = 2
	// probeTrigramsMax is how many trigrams a probe asks the index for
	// at most.
	probeTrigramsMax = 4
	// probeSample is how many documents the choice samples: those of
	// the messages of the lowest sample ranks (drawn uniformly when each
	// message is stored, migration 0002), a uniform random sample of the
	// messages that is the same from one search to the next, so that its
	// pages stay in memory. Pages taken at random (TABLESAMPLE) cost more
	// than the probe they would save (docs/benchmarks.md).
	probeSample = 256
	// probeCandidates is the count of candidates (documents holding
	// every chosen trigram, estimated from the sample as if the trigrams
	// were independent) at which the choice stops adding trigrams.
	probeCandidates = 50
	// probeCommon is the share of the sampled documents above which a
	// trigram is not worth its list (one is always kept).
	probeCommon = 0.25
)

// asciiTrigrams returns the distinct runs of three ASCII letters or
// digits in the folded text fq, in order. They are their own key
// (search_key changes only punctuation, spaces and separators) and
// trigrams of pg_trgm in any locale.
func asciiTrigrams(fq string) []string {
	var out []string
	run := 0
	for i := 0; i < len(fq); i++ {
		c := fq[i]
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			run++
		} else {
			run = 0
		}
		if run >= 3 {
			if t := fq[i-2 : i+1]; !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// chooseTrigrams returns the trigrams a probe asks the index for, given
// how many of sampled documents hold each (counts[i] for trigrams[i]),
// out of docs documents: the rarest first, until the candidates they
// leave are few or probeTrigramsMax are chosen; a trigram held by more
// than probeCommon of the sample is chosen only when none is rarer.
func chooseTrigrams(trigrams []string, counts []int64, sampled int64, docs float64) []string {
	if sampled <= 0 || len(trigrams) == 0 {
		return nil
	}
	order := make([]int, len(trigrams))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(counts[a] - counts[b]) })
	var out []string
	est := docs
	for _, i := range order {
		share := float64(counts[i]) / float64(sampled)
		if len(out) > 0 && (share > probeCommon || est <= probeCandidates || len(out) == probeTrigramsMax) {
			break
		}
		out = append(out, trigrams[i])
		est *= max(share, 0.5/float64(sampled))
	}
	return out
}

// probeTrigrams returns the trigrams of the folded text fq that a probe
// asks the index for, nil to ask it for the whole text's key: texts of
// at most probeTrigramsMin ASCII trigrams, or when the sample reads
// nothing. The sample is the documents of the probeSample messages of
// the lowest sample ranks (read through messages_sample_idx), each tested
// for each trigram (an ASCII trigram is the same in the document and its
// key).
func (s *Store) probeTrigrams(ctx context.Context, fq string, docs float64) ([]string, error) {
	ts := asciiTrigrams(fq)
	if len(ts) <= probeTrigramsMin || docs <= 0 {
		return nil, nil
	}
	var sb strings.Builder
	sb.WriteString("SELECT count(*)")
	args := make([]any, len(ts))
	for i, t := range ts {
		args[i] = t
		sb.WriteString(", count(*) FILTER (WHERE strpos(s.doc, $" + strconv.Itoa(i+1) + ") > 0)")
	}
	sb.WriteString(" FROM (SELECT m.id FROM messages m ORDER BY m.sample_rank, m.id LIMIT " + strconv.Itoa(probeSample) +
		") r JOIN search_docs s ON s.message_id = r.id")
	counts := make([]int64, len(ts))
	var sampled int64
	dest := []any{&sampled}
	for i := range counts {
		dest = append(dest, &counts[i])
	}
	if err := s.pool.QueryRow(ctx, sb.String(), args...).Scan(dest...); err != nil {
		return nil, translate(err, "list messages")
	}
	return chooseTrigrams(ts, counts, sampled, docs), nil
}
