-- 0005: alarm states and the outbox of alarm notifications.
--
-- One state row per alarm rule and queue. Times are microseconds since the
-- epoch. The outbox keeps every notification until it is delivered (or
-- refused for good); event is the JSON of quarantine.AlarmEvent.

CREATE TABLE alarm_states (
    alarm             TEXT    NOT NULL,
    queue             TEXT    NOT NULL,
    owner             TEXT    NOT NULL,
    state             TEXT    NOT NULL,
    since             INTEGER NOT NULL,
    active_at         INTEGER,
    notified_at       INTEGER,
    resent_at         INTEGER,
    reason            TEXT    NOT NULL,
    age_seconds       REAL    NOT NULL,
    depth             INTEGER NOT NULL,
    inflow_per_minute REAL    NOT NULL,
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (alarm, queue)
);

CREATE TABLE alarm_outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    receiver        TEXT    NOT NULL,
    kind            TEXT    NOT NULL,
    event           TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    delivery        TEXT    NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT    NOT NULL,
    delivered_at    INTEGER
);

-- PendingAlarmNotifications: the pending ones by id.
CREATE INDEX alarm_outbox_pending ON alarm_outbox (id) WHERE delivery = 'pending';
