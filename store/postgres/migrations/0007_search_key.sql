-- 0007_search_key: a trigram index that keeps punctuation.
--
-- pg_trgm makes trigrams of words (runs of letters and digits) only, so
-- the trigrams of ' sku-5 ' are those of the words "sku" and "5": on a
-- document index a term like that has as many candidates as documents
-- holding both words anywhere (one in seven in the benchmark's data, for
-- 1 in 2,000 matches), each read from the heap and rechecked. key is the
-- document with every character that is not a letter or digit replaced
-- by 'q', one character for one: a text that is a substring of a
-- document has its key a substring of the document's key, and the key
-- keeps the punctuation as letters, so its trigrams span it ("uq5",
-- "q5q"). A search looks the key of its text up under this index and
-- tests the document itself (store/postgres/text.go), so its results do
-- not change; only the candidates shrink to about the matches.
--
-- The key is a generated column (PostgreSQL computes it when the indexer
-- writes a document: the same function folds the documents and the
-- searched texts, whatever the database's locale calls a letter). Adding
-- it rewrites search_docs: about a minute per million documents.

ALTER TABLE search_docs ADD COLUMN key text NOT NULL
    GENERATED ALWAYS AS (regexp_replace(doc, '[^[:alnum:]]', 'q', 'g')) STORED;

DROP INDEX search_docs_trgm_idx;

CREATE INDEX search_docs_key_idx ON search_docs USING gin (key public.gin_trgm_ops);
