-- 0003_replays: replay batches, their items and the shared rate buckets,
-- and the key rule of each message.
--
-- A batch pins its messages as items (seq 0, 1, … in publication order)
-- when it is created. Counts per outcome are grouped from the items (at
-- most quarantine.MaxBulk per batch). Queues and owners are text arrays,
-- distinct and sorted.

ALTER TABLE messages ADD COLUMN key_rule text NOT NULL DEFAULT '';

CREATE TABLE replay_batches (
    id                text COLLATE "C" PRIMARY KEY,
    state             text COLLATE "C" NOT NULL,
    state_reason      text NOT NULL,
    reason            text NOT NULL,
    actor             text COLLATE "C" NOT NULL,
    dest_queue        text NOT NULL,
    dest_collector    text NOT NULL,
    rate              double precision NOT NULL,
    burst             integer NOT NULL,
    canary            integer NOT NULL,
    observe           interval NOT NULL,
    halt_refail_ratio double precision NOT NULL,
    force_without_key boolean NOT NULL,
    queues            text[] COLLATE "C" NOT NULL,
    owners            text[] COLLATE "C" NOT NULL,
    total             integer NOT NULL,
    canary_verdict    text NOT NULL,
    canary_until      timestamptz,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    started_at        timestamptz,
    finished_at       timestamptz,
    expires_at        timestamptz
);

-- RunnableReplays: running batches and drafts by expiry.
CREATE INDEX replay_batches_state_idx ON replay_batches (state, id);

-- One row per pinned message. lease_owner is '' when not leased; fence
-- grows with every lease (and with a cancel), and a result must bring the
-- fence of its lease back. Lock order of every writer: batch, items (by
-- seq), messages (by id).
CREATE TABLE replay_items (
    batch_id         text COLLATE "C" NOT NULL REFERENCES replay_batches (id),
    seq              integer NOT NULL,
    message_id       text COLLATE "C" NOT NULL,
    queue            text COLLATE "C" NOT NULL,
    outcome          text COLLATE "C" NOT NULL,
    reason           text NOT NULL,
    destination      text NOT NULL DEFAULT '',
    idempotency_key  text NOT NULL,
    payload_version  integer NOT NULL DEFAULT 0,
    payload_sha256   text NOT NULL DEFAULT '',
    dropped_headers  text[] NOT NULL DEFAULT '{}',
    attempts         integer NOT NULL DEFAULT 0,
    refail_id        text COLLATE "C" NOT NULL DEFAULT '',
    published_at     timestamptz,
    updated_at       timestamptz NOT NULL,
    lease_owner      text NOT NULL DEFAULT '',
    lease_expires_at timestamptz,
    fence            bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (batch_id, seq)
);

-- The pending items of a batch in seq order (leases, start, cancel).
CREATE INDEX replay_items_pending_idx ON replay_items (batch_id, seq) WHERE outcome = 'pending';
-- Counts by outcome read this index in order, without sorting the items.
CREATE INDEX replay_items_outcome_idx ON replay_items (batch_id, outcome);
-- Results by message, and the re-failure link.
CREATE INDEX replay_items_message_idx ON replay_items (message_id);

-- Token buckets shared by every engine using the database.
CREATE TABLE replay_buckets (
    key        text COLLATE "C" PRIMARY KEY,
    tokens     double precision NOT NULL,
    updated_at timestamptz NOT NULL
);

-- The re-failure link also finds messages still replaying: a worker can
-- fail a replayed message again before the engine recorded its publish.
DROP INDEX messages_replayed_key_idx;
CREATE INDEX messages_replayed_key_idx ON messages (idempotency_key) WHERE status IN ('replayed', 'replaying');
