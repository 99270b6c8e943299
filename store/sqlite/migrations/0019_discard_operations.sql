-- 0019: discard operations, a discard by filter of any size applied in
-- chunks (store/sqlite/discard_op.go). The set of an operation is the
-- messages matching its filter with a rowid at most mark, the largest
-- rowid when it started: SQLite has one writer and messages are never
-- deleted, so every message stored later has a larger rowid. cursor is
-- the last id a committed chunk covered.
CREATE TABLE discard_operations (
    id          TEXT    NOT NULL PRIMARY KEY,
    state       TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    filter      TEXT    NOT NULL,
    mark        TEXT    NOT NULL,
    cursor      TEXT    NOT NULL DEFAULT '',
    matched     INTEGER NOT NULL,
    discarded   INTEGER NOT NULL DEFAULT 0,
    skipped     INTEGER NOT NULL DEFAULT 0,
    error       TEXT    NOT NULL DEFAULT '',
    started_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    finished_at INTEGER
);

CREATE INDEX discard_operations_running ON discard_operations (id) WHERE state = 'running';
