-- 0019: discard operations, a discard by filter of any size applied in
-- chunks (store/postgres/discard.go). The set of an operation is the
-- messages matching its filter that its snapshot (mark, the text of a
-- pg_snapshot taken when it started) sees as committed: insert_xid is
-- the transaction that stored a message (NULL for the rows stored before
-- this migration: all of them older than any operation). The column is
-- added without a default first, then given one, so that no row is
-- rewritten. cursor is the last id a committed chunk covered.
ALTER TABLE messages ADD COLUMN insert_xid xid8;
ALTER TABLE messages ALTER COLUMN insert_xid SET DEFAULT pg_current_xact_id();

CREATE TABLE discard_operations (
    id          text COLLATE "C" PRIMARY KEY,
    state       text COLLATE "C" NOT NULL,
    actor       text NOT NULL,
    reason      text NOT NULL,
    filter      text NOT NULL,
    mark        text NOT NULL,
    cursor      text COLLATE "C" NOT NULL DEFAULT '',
    matched     bigint NOT NULL,
    discarded   bigint NOT NULL DEFAULT 0,
    skipped     bigint NOT NULL DEFAULT 0,
    error       text NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    finished_at timestamptz
);

CREATE INDEX discard_operations_running_idx ON discard_operations (id) WHERE state = 'running';
