-- 0004_alarms: alarm states and the outbox of alarm notifications.
--
-- One state row per alarm rule and queue. The outbox keeps every
-- notification until it is delivered (or refused for good); event is the
-- JSON of quarantine.AlarmEvent.

CREATE TABLE alarm_states (
    alarm             text COLLATE "C" NOT NULL,
    queue             text COLLATE "C" NOT NULL,
    owner             text NOT NULL,
    state             text NOT NULL,
    since             timestamptz NOT NULL,
    active_at         timestamptz,
    notified_at       timestamptz,
    resent_at         timestamptz,
    reason            text NOT NULL,
    age_seconds       double precision NOT NULL,
    depth             bigint NOT NULL,
    inflow_per_minute double precision NOT NULL,
    updated_at        timestamptz NOT NULL,
    PRIMARY KEY (alarm, queue)
);

CREATE TABLE alarm_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    receiver        text NOT NULL,
    kind            text NOT NULL,
    event           jsonb NOT NULL,
    created_at      timestamptz NOT NULL,
    delivery        text NOT NULL,
    attempts        integer NOT NULL,
    next_attempt_at timestamptz NOT NULL,
    last_error      text NOT NULL,
    delivered_at    timestamptz
);

-- PendingAlarmNotifications: the pending ones by id.
CREATE INDEX alarm_outbox_pending ON alarm_outbox (id) WHERE delivery = 'pending';
