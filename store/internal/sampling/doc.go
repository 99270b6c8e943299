// Package sampling holds the store-independent half of Store.Sample: the
// random rank every message gets at insert, the rank offset a seed picks,
// the exact seeded sampling of a small set, and the allocation of a
// stratified sample over groups. store/postgres and store/sqlite run the
// queries; this package decides what to take from their answers, so that
// both stores sample alike.
//
// Two methods, chosen by the size of the filtered set:
//
//   - Exact (at most Exact messages): every matching id is read, sorted,
//     and a partial Fisher-Yates shuffle driven by a PCG generator seeded
//     with the seed takes the sample. Every subset of the requested size is
//     equally likely, and the same seed over the same set gives the same
//     sample.
//   - Rank (larger sets): each message holds a rank drawn uniformly from
//     [0, RankSpace) when it is stored, indexed (a store may write that
//     index off the ingest path, as store/sqlite does in its search
//     indexer; a Reader's arc then merges the index with the messages not
//     yet in it, so that the answer never depends on how far the indexer
//     is). The seed picks an offset;
//     the sample is the first k matching messages in rank order at or after
//     the offset, wrapping around to rank 0. It reads k index entries
//     instead of sorting the set. Because the ranks are independent and
//     uniform, every message is equally likely to be sampled over the
//     randomness of the ranks drawn at insert; for one fixed set of ranks,
//     a message's chance grows with the gap of ranks before it (the sample
//     is an arc of the rank circle), so it is not exactly uniform over the
//     seeds of a fixed set. The same seed over the same set (same ranks)
//     gives the same sample.
package sampling
