// A Node.js worker running quarantine's delivery state machine
// (DESIGN.md, "The one idea") on RabbitMQ through amqplib, with its
// idempotency-key claims in PostgreSQL through pg:
//
//   reserve -> claim (idempotency key) -> effect -> record result -> ack
//   transient failure          -> retry with bounded, jittered backoff (Retry-After wins)
//   permanent / attempts spent -> dead-letter the canonical failure envelope
//
// It speaks the wire format of the Go package worker (worker/doc.go) and
// settles like the Go driver broker/rabbitmq.WorkDriver: delays through
// per-delay TTL queues "<queue>.delay.<ms>" that dead-letter back to the
// work queue, and every retry or dead-letter is published with a
// publisher confirm before the original delivery is acked. Go producers
// (worker.Dispatch), the quarantine's replay engine and this worker
// interoperate on the same queues.
//
// Configuration is by environment variables (README.md). Logs are JSON
// lines on stdout, one per settlement.

import { randomUUID } from 'node:crypto';
import process from 'node:process';
import { pathToFileURL } from 'node:url';

import amqp from 'amqplib';
import pg from 'pg';

// ---------------------------------------------------------------------------
// Wire format (worker/doc.go)

export const H = {
  key: 'x-idempotency-key',
  jobName: 'x-quarantine-job-name',
  schemaVersion: 'x-schema-version',
  enqueuedAt: 'x-quarantine-enqueued-at',
  attempts: 'x-quarantine-attempts',
  firstFailedAt: 'x-quarantine-first-failed-at',
};

export const ENVELOPE_V1 = 'quarantine.failure/v1';

// The delay buckets of broker/rabbitmq.DefaultDelayBuckets, in ms.
export const DEFAULT_DELAY_BUCKETS_MS = [
  250, 500, 1000, 2000, 3000, 5000, 10000, 15000, 20000, 30000, 45000,
  60000, 90000, 120000, 180000, 300000, 450000, 600000, 900000, 1200000,
  1800000, 2700000, 3600000, 5400000, 7200000, 10800000, 14400000,
  21600000, 28800000, 43200000, 64800000, 86400000,
];

const DELAY_EXPIRY_MARGIN_MS = 10 * 60 * 1000; // an idle delay queue outlives its TTL by this
const REDECLARE_EVERY_MS = 60 * 1000;
const MAX_REASON_BYTES = 1024;

// ---------------------------------------------------------------------------
// Handler outcomes

/** PermanentError dead-letters at once (class "permanent", or "malformed"). */
export class PermanentError extends Error {
  constructor(message, { malformed = false } = {}) {
    super(message);
    this.name = 'PermanentError';
    this.permanent = true;
    this.malformed = malformed;
  }
}

/** RetryAfterError retries after ms instead of the backoff (still capped). */
export class RetryAfterError extends Error {
  constructor(message, ms) {
    super(message);
    this.name = 'RetryAfterError';
    this.retryAfterMs = Math.max(0, Number(ms) || 0);
  }
}

// ---------------------------------------------------------------------------
// Configuration

function envInt(name, def) {
  const v = process.env[name];
  if (v === undefined || v === '') return def;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name}=${v}: not a non-negative number`);
  return n;
}

export function loadConfig(env = process.env) {
  const work = env.WORK_QUEUE || 'reports';
  const cfg = {
    amqpUrl: env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672/',
    workQueue: work,
    failureQueue: env.FAILURE_QUEUE || `${work}.failed`,
    claimsUrl: env.CLAIMS_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable',
    prefetch: envInt('PREFETCH', 8),
    maxAttempts: envInt('MAX_ATTEMPTS', 5),
    backoffInitialMs: envInt('BACKOFF_INITIAL_MS', 500),
    backoffMultiplier: Math.max(envInt('BACKOFF_MULTIPLIER', 2), 1),
    backoffMaxMs: envInt('BACKOFF_MAX_MS', 60000),
    claimLeaseMs: envInt('CLAIM_LEASE_MS', 60000),
    requeueAfterMs: envInt('REQUEUE_AFTER_MS', 5000),
    drainTimeoutMs: envInt('DRAIN_TIMEOUT_MS', 10000),
    unknownRetryDelayMs: envInt('UNKNOWN_RETRY_DELAY_MS', 30000),
    unknownMaxDeliveries: envInt('UNKNOWN_MAX_DELIVERIES', 10),
    declareQueues: env.DECLARE_QUEUES === '1' || env.DECLARE_QUEUES === 'true',
    delayBucketsMs: DEFAULT_DELAY_BUCKETS_MS,
  };
  if (env.DELAY_BUCKETS_MS) {
    cfg.delayBucketsMs = env.DELAY_BUCKETS_MS.split(',').map((s) => Number(s.trim()));
  }
  const b = cfg.delayBucketsMs;
  if (!b.length || b.some((v, i) => !Number.isInteger(v) || v <= 0 || v > 86400000 || (i > 0 && v <= b[i - 1]))) {
    throw new Error('DELAY_BUCKETS_MS: increasing whole milliseconds, each in (0, 24 h]');
  }
  if (cfg.failureQueue === cfg.workQueue) throw new Error('FAILURE_QUEUE must differ from WORK_QUEUE');
  if (cfg.prefetch < 1 || cfg.prefetch > 65535) throw new Error('PREFETCH must be between 1 and 65535');
  if (cfg.claimLeaseMs < 1000) throw new Error('CLAIM_LEASE_MS must be at least 1000');
  return cfg;
}

/** pgConfig turns a postgres:// URL into pg options; a search_path query
 * parameter (as internal/pgtest writes it) becomes "-c search_path=…". */
export function pgConfig(url) {
  const u = new URL(url);
  const opts = [];
  const sp = u.searchParams.get('search_path');
  if (sp) {
    if (!/^[A-Za-z_][A-Za-z0-9_$,]*$/.test(sp)) throw new Error('CLAIMS_DATABASE_URL: search_path must be plain schema names');
    opts.push(`-c search_path=${sp}`);
    u.searchParams.delete('search_path');
  }
  const extra = u.searchParams.get('options');
  if (extra) {
    opts.unshift(extra);
    u.searchParams.delete('options');
  }
  const c = { connectionString: u.toString() };
  if (opts.length) c.options = opts.join(' ');
  return c;
}

// ---------------------------------------------------------------------------
// Logging: JSON lines, never payloads.

function log(level, msg, fields = {}) {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`);
}

// ---------------------------------------------------------------------------
// The canonical failure envelope (quarantine.MarshalEnvelope)

function jstr(s) {
  // JSON.stringify escapes like encoding/json without HTML escaping, bar
  // U+2028/U+2029, which Go escapes too.
  return JSON.stringify(String(s)).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/** rfc3339 formats a Date like Go's time.RFC3339Nano in UTC (trailing
 * zeros of the fraction dropped). */
export function rfc3339(d) {
  return d.toISOString().replace(/\.?0+Z$/, 'Z');
}

/** parseTime reads an RFC 3339 string; null when it is not one. */
function parseTime(s) {
  if (typeof s !== 'string' || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(s)) return null;
  const d = new Date(s);
  if (Number.isNaN(d.getTime())) return null;
  // Keep a UTC string as written (nanoseconds survive); reformat others.
  return /Z$/.test(s) ? s : rfc3339(d);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** payloadIsJSON: embed the payload as JSON only when it reads back byte
 * for byte: valid UTF-8 JSON, no surrounding white space, an empty or
 * JSON content type. */
export function payloadIsJSON(contentType, payload) {
  if (!payload.length) return false;
  const ws = (b) => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
  if (ws(payload[0]) || ws(payload[payload.length - 1])) return false;
  let ct = String(contentType || '').trim().toLowerCase();
  const i = ct.indexOf(';');
  if (i >= 0) ct = ct.slice(0, i).trim();
  if (!(ct === '' || ct === 'application/json' || ct.endsWith('+json'))) return false;
  try {
    JSON.parse(utf8.decode(payload));
    return true;
  } catch {
    return false;
  }
}

/** marshalEnvelope writes the canonical failure envelope, field for field
 * in the order of quarantine.MarshalEnvelope; empty text fields and absent
 * times are left out, attempts is always written, header names sorted. */
export function marshalEnvelope(m, payload, headers) {
  const job = [];
  const field = (out, k, v) => {
    if (v !== undefined && v !== null && v !== '') out.push(`${jstr(k)}:${jstr(v)}`);
  };
  field(job, 'id', m.id);
  field(job, 'name', m.name);
  field(job, 'queue', m.queue);
  field(job, 'idempotency_key', m.idempotencyKey);
  field(job, 'schema_version', m.schemaVersion);
  job.push(`"attempts":${Math.max(Math.trunc(m.attempts) || 0, 0)}`);
  field(job, 'enqueued_at', m.enqueuedAt);
  field(job, 'content_type', m.contentType);
  if (headers) {
    const names = Object.keys(headers).sort();
    job.push(`"headers":{${names.map((k) => `${jstr(k)}:${jstr(headers[k])}`).join(',')}}`);
  }
  if (payloadIsJSON(m.contentType, payload)) {
    job.push(`"payload":${payload.toString('utf8')}`);
  } else {
    job.push(`"payload_base64":${jstr(payload.toString('base64'))}`);
  }
  const failure = [];
  field(failure, 'class', m.failureClass);
  field(failure, 'reason', m.reason);
  field(failure, 'failed_at', m.failedAt);
  field(failure, 'first_failed_at', m.firstFailedAt);
  return Buffer.from(`{"envelope":${jstr(ENVELOPE_V1)},"job":{${job.join(',')}},"failure":{${failure.join(',')}}}`, 'utf8');
}

/** compact makes s one line of at most n UTF-8 bytes: white space and
 * control characters collapse into single spaces. */
export function compact(s, n = MAX_REASON_BYTES) {
  let out = '';
  let bytes = 0;
  let space = false;
  for (const ch of String(s)) {
    if (/[\s\p{Cc}]/u.test(ch)) {
      space = true;
      continue;
    }
    if (space && out) {
      if (bytes + 1 > n) break;
      out += ' ';
      bytes += 1;
    }
    space = false;
    const len = Buffer.byteLength(ch, 'utf8');
    if (bytes + len > n) break;
    out += ch;
    bytes += len;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Headers

function brokerHeader(name) {
  const l = name.toLowerCase();
  return l === 'x-death' || l === 'x-delivery-count' || l.startsWith('x-first-death-') || l.startsWith('x-last-death-');
}

/** stringHeaders keeps the job's headers as strings, less the broker's
 * bookkeeping (x-death, x-delivery-count…), as the Go driver does. */
export function stringHeaders(h) {
  const out = {};
  for (const [k, v] of Object.entries(h || {})) {
    if (brokerHeader(k) || v === undefined || v === null) continue;
    if (typeof v === 'string') out[k] = v;
    else if (Buffer.isBuffer(v)) out[k] = v.toString('utf8');
    else out[k] = JSON.stringify(v);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Claims in PostgreSQL: the table of worker/pgclaims, so that
// worker.ProofQuery (worker/claims.sql) runs against it as is.

export const CLAIMS_SCHEMA = `CREATE TABLE IF NOT EXISTS worker_claims (
	key         text PRIMARY KEY,
	state       text NOT NULL CHECK (state IN ('held', 'done', 'released')),
	owner       text NOT NULL,
	lease_until timestamptz,
	completions integer NOT NULL DEFAULT 0,
	claimed_at  timestamptz NOT NULL,
	updated_at  timestamptz NOT NULL
)`;

// The demo handler's business effects, one row per key.
export const EFFECTS_SCHEMA = `CREATE TABLE IF NOT EXISTS effects (
	key text PRIMARY KEY,
	n   integer NOT NULL
)`;

export class Claims {
  constructor(pool) {
    this.pool = pool;
  }

  async migrate() {
    await this.pool.query(CLAIMS_SCHEMA);
  }

  /** claim takes key for owner: {status: 'claimed'|'done'|'held', leaseUntil}.
   * New, released and expired-lease keys are claimed; a done key is done. */
  async claim(key, owner, leaseMs) {
    const now = new Date();
    const until = new Date(now.getTime() + leaseMs);
    const r = await this.pool.query(
      `INSERT INTO worker_claims AS w (key, state, owner, lease_until, completions, claimed_at, updated_at)
       VALUES ($1, 'held', $2, $3, 0, $4, $4)
       ON CONFLICT (key) DO UPDATE SET state = 'held', owner = excluded.owner, lease_until = excluded.lease_until,
         claimed_at = excluded.claimed_at, updated_at = excluded.updated_at
       WHERE w.state = 'released' OR (w.state = 'held' AND w.lease_until <= $4)
       RETURNING owner`, [key, owner, until, now]);
    if (r.rowCount === 1) return { status: 'claimed', leaseUntil: until };
    const s = await this.pool.query('SELECT state, owner, lease_until FROM worker_claims WHERE key = $1', [key]);
    if (!s.rowCount) return this.claim(key, owner, leaseMs); // deleted in between
    const row = s.rows[0];
    if (row.state === 'done') return { status: 'done', owner: row.owner };
    return { status: 'held', owner: row.owner, leaseUntil: row.lease_until };
  }

  /** The fenced statements: each changes the row only under owner's live
   * hold; false means the claim was lost (taken over after expiry). */
  async extend(key, owner, leaseMs) {
    const now = new Date();
    const r = await this.pool.query(
      `UPDATE worker_claims SET lease_until = $3, updated_at = $4 WHERE key = $1 AND owner = $2 AND state = 'held'`,
      [key, owner, new Date(now.getTime() + leaseMs), now]);
    return r.rowCount === 1;
  }

  /** complete records the key's one terminal result; db may be the
   * transaction the handler wrote its effects in. */
  async complete(key, owner, db = this.pool) {
    const r = await db.query(
      `UPDATE worker_claims SET state = 'done', lease_until = NULL, completions = completions + 1, updated_at = $3
       WHERE key = $1 AND owner = $2 AND state = 'held'`, [key, owner, new Date()]);
    return r.rowCount === 1;
  }

  async release(key, owner) {
    const now = new Date();
    const r = await this.pool.query(
      `UPDATE worker_claims SET state = 'released', lease_until = $3, updated_at = $3
       WHERE key = $1 AND owner = $2 AND state = 'held'`, [key, owner, now]);
    return r.rowCount === 1;
  }
}

// ---------------------------------------------------------------------------
// The demo job: build-report

const FORMATS = new Set(['pdf', 'csv']);

/** buildReport: payload {account, month: "YYYY-MM", format: "pdf"|"csv",
 * fail_until_attempt?}. An unknown format or month is permanent; while
 * attempt < fail_until_attempt it fails transiently (a flaky upstream).
 * Its business effect is one row per key in effects, written in the
 * transaction that also completes the claim. */
export async function buildReport(job) {
  let p;
  try {
    p = JSON.parse(job.body.toString('utf8'));
  } catch (err) {
    throw new PermanentError(`invalid JSON: ${err.message}`, { malformed: true });
  }
  if (p === null || typeof p !== 'object' || Array.isArray(p)) throw new PermanentError('the payload is not a JSON object', { malformed: true });
  const format = p.format ?? 'pdf';
  if (!FORMATS.has(format)) throw new PermanentError(`unknown report format ${JSON.stringify(String(format)).slice(0, 60)} (want pdf or csv)`);
  if (typeof p.month !== 'string' || !/^\d{4}-(0[1-9]|1[0-2])$/.test(p.month)) {
    throw new PermanentError(`month ${JSON.stringify(String(p.month)).slice(0, 40)} is not YYYY-MM`);
  }
  if (Number.isInteger(p.fail_until_attempt) && job.attempt < p.fail_until_attempt) {
    throw new Error(`report service busy (attempt ${job.attempt})`);
  }
  await job.db.query(
    'INSERT INTO effects (key, n) VALUES ($1, 1) ON CONFLICT (key) DO UPDATE SET n = effects.n + 1',
    [job.key || `no-key:${job.id}`]);
}

// ---------------------------------------------------------------------------
// The worker

export class Worker {
  constructor(cfg, jobs) {
    this.cfg = cfg;
    this.jobs = jobs; // name -> {name, schemaVersion, previousVersion, maxAttempts, handler}
    this.inflight = new Set();
    this.stopping = false;
    this.declared = new Map(); // delay bucket -> last declare (ms)
    this.pubLock = Promise.resolve();
    this.returned = new Set();
  }

  async start() {
    const cfg = this.cfg;
    this.pool = new pg.Pool({ ...pgConfig(cfg.claimsUrl), max: cfg.prefetch + 4 });
    this.pool.on('error', (err) => log('error', 'idle database connection failed', { err: err.message }));
    this.claims = new Claims(this.pool);
    await this.claims.migrate();
    await this.pool.query(EFFECTS_SCHEMA);

    this.conn = await amqp.connect(cfg.amqpUrl, { clientProperties: { connection_name: `quarantine node worker ${cfg.workQueue}` } });
    this.conn.on('error', (err) => log('error', 'RabbitMQ connection error', { err: err.message }));
    this.conn.on('close', () => this.lost('the RabbitMQ connection closed'));

    const check = await this.conn.createChannel();
    check.on('error', () => {});
    for (const q of [cfg.workQueue, cfg.failureQueue]) {
      if (cfg.declareQueues) await check.assertQueue(q, { durable: true });
      else await check.checkQueue(q);
    }
    await check.close();

    this.pub = await this.conn.createConfirmChannel();
    this.pub.on('error', (err) => log('error', 'publisher channel error', { err: err.message }));
    this.pub.on('close', () => this.lost('the publisher channel closed'));
    this.pub.on('return', (m) => this.returned.add(`${m.fields.routingKey}\u0000${m.properties.messageId ?? ''}`));

    this.ch = await this.conn.createChannel();
    this.ch.on('error', (err) => log('error', 'consumer channel error', { err: err.message }));
    this.ch.on('close', () => this.lost('the consumer channel closed'));
    await this.ch.prefetch(cfg.prefetch);
    const { consumerTag } = await this.ch.consume(cfg.workQueue, (msg) => {
      if (msg === null) return this.lost('the broker cancelled the consumer');
      const p = this.handle(msg).catch((err) => log('error', 'delivery failed unexpectedly; left to redelivery', { err: String(err?.stack || err) }));
      this.inflight.add(p);
      p.finally(() => this.inflight.delete(p));
    }, { noAck: false });
    this.consumerTag = consumerTag;
    log('info', 'ready', { queue: cfg.workQueue, failure_queue: cfg.failureQueue, prefetch: cfg.prefetch });
  }

  /** lost: without the connection, unacked deliveries go back to the queue
   * and the claims make their repeat harmless; exit for the supervisor to
   * restart us. */
  lost(why) {
    if (this.stopping) return;
    log('error', `${why}: exiting so that a supervisor restarts the worker`);
    process.exit(2);
  }

  /** stop stops taking deliveries, gives in-flight ones drainTimeoutMs to
   * settle, then closes: unsettled deliveries go back to the queue. */
  async stop() {
    if (this.stopping) return;
    this.stopping = true;
    try {
      if (this.consumerTag) await this.ch.cancel(this.consumerTag);
    } catch { /* closing anyway */ }
    const deadline = new Promise((r) => setTimeout(r, this.cfg.drainTimeoutMs).unref());
    await Promise.race([Promise.allSettled([...this.inflight]), deadline]);
    try { await this.conn.close(); } catch { /* already closed */ }
    try { await this.pool.end(); } catch { /* already closed */ }
    log('info', 'stopped');
  }

  // --- one delivery -------------------------------------------------------

  async handle(msg) {
    const props = msg.properties;
    const raw = props.headers || {};
    const d = {
      msg,
      id: props.messageId || '',
      headers: stringHeaders(raw),
      body: msg.content,
      contentType: props.contentType || '',
      type: props.type || '',
      timestamp: props.timestamp,
    };
    d.name = d.type || d.headers[H.jobName] || '';
    d.key = d.headers[H.key] || '';
    // The attempt: the broker's delivery count (quorum queues) or our own
    // x-quarantine-attempts, whichever is higher.
    let n = 1;
    const dc = Number(raw['x-delivery-count']);
    if (Number.isInteger(dc) && dc >= 0) n = dc + 1;
    const done = Number.parseInt(d.headers[H.attempts], 10);
    if (Number.isInteger(done) && done + 1 > n) n = done + 1;
    d.attempt = n;

    const job = this.jobs.get(d.name);
    if (!job) {
      const reason = `no job registered under the name ${JSON.stringify(d.name.slice(0, 200))}`;
      if (n >= this.cfg.unknownMaxDeliveries) return this.deadLetter(d, null, 'unknown_name', reason);
      return this.retry(d, null, 'unknown_name', this.cfg.unknownRetryDelayMs, true, reason);
    }
    d.job = job;
    const v = d.headers[H.schemaVersion] || '';
    if (!(v === '' || v === job.schemaVersion || (job.previousVersion && v === job.previousVersion))) {
      return this.deadLetter(d, null, 'permanent',
        `schema version ${JSON.stringify(v.slice(0, 40))} is not accepted by job ${job.name} (current "${job.schemaVersion}", previous "${job.previousVersion || ''}")`);
    }

    let claim = null; // {owner} while we hold the key
    if (d.key) {
      const owner = randomUUID();
      let c;
      try {
        c = await this.claims.claim(d.key, owner, this.cfg.claimLeaseMs);
      } catch (err) {
        return this.retry(d, null, 'claim_error', this.backoff(1), false, `claim failed: ${err.message}`);
      }
      if (c.status === 'done') {
        // Already done: ack without running (a duplicate absorbed).
        return this.settle(d, 'duplicate', {}, () => this.ack(d));
      }
      if (c.status === 'held') {
        const wait = Math.max(new Date(c.leaseUntil).getTime() - Date.now(), 1000);
        return this.retry(d, null, 'claim_held', wait, false, null);
      }
      claim = { owner };
    }
    if (job.maxAttempts > 0 && n > job.maxAttempts) {
      return this.deadLetter(d, claim, 'exhausted',
        `delivered ${n} times, above the cap of ${job.maxAttempts} attempts: earlier attempts did not settle`);
    }

    // Effect and record: the handler runs in a transaction, and the
    // claim's completion (the key's one terminal result) commits in the
    // same transaction, so a crash cannot keep the effect and lose the
    // record. Ack only after the commit.
    let err = null;
    let recorded = true;
    const renew = claim ? setInterval(() => {
      this.claims.extend(d.key, claim.owner, this.cfg.claimLeaseMs)
        .then((ok) => ok || log('warn', 'claim lost while the handler runs (lease too short?)', { job: job.name, delivery: d.id }))
        .catch((e) => log('warn', 'claim renewal failed', { job: job.name, delivery: d.id, err: e.message }));
    }, this.cfg.claimLeaseMs / 2) : null;
    let client;
    try {
      client = await this.pool.connect();
      await client.query('BEGIN');
      try {
        await job.handler({ id: d.id, name: job.name, key: d.key, attempt: n, headers: d.headers, body: d.body, contentType: d.contentType, db: client });
      } catch (e) {
        err = e instanceof Error ? e : new Error(String(e));
      }
      if (err) {
        await client.query('ROLLBACK');
      } else {
        if (claim && !(await this.claims.complete(d.key, claim.owner, client))) {
          // Taken over after our lease expired: undo our effect, let the
          // delivery come back and find the key done (or run it then).
          await client.query('ROLLBACK');
          claim = null;
          return this.retry(d, null, 'claim_lost', 0, false, 'the claim was taken over before completion');
        }
        try {
          await client.query('COMMIT');
        } catch (e) {
          // Unknown whether it committed: acking would be a guess. Come
          // back after the lease: done then, or taken over and run.
          recorded = false;
          log('error', 'recording the result failed; redelivering after the lease', { job: job.name, delivery: d.id, err: e.message });
        }
      }
    } catch (e) {
      // The database failed around the handler: nothing was recorded.
      if (client) await client.query('ROLLBACK').catch(() => {});
      if (claim) await this.release(d, claim);
      return this.retry(d, null, 'db_error', this.backoff(n), false, `database: ${e.message}`);
    } finally {
      if (renew) clearInterval(renew);
      client?.release();
    }
    if (!recorded) return this.retry(d, null, 'record_error', this.cfg.claimLeaseMs, false, null);
    if (!err) return this.settle(d, 'completed', {}, () => this.ack(d));
    return this.decide(d, claim, err);
  }

  /** decide settles a delivery whose handler failed with err. */
  decide(d, claim, err) {
    const job = d.job;
    if (err.permanent) return this.deadLetter(d, claim, err.malformed ? 'malformed' : 'permanent', err.message);
    if (job.maxAttempts > 0 && d.attempt >= job.maxAttempts) {
      return this.deadLetter(d, claim, 'exhausted', `attempt ${d.attempt} of ${job.maxAttempts} failed: ${err.message}`);
    }
    if (err.retryAfterMs !== undefined) return this.retry(d, claim, 'retry_after', err.retryAfterMs, true, err.message);
    return this.retry(d, claim, 'error', this.backoff(d.attempt), true, err.message);
  }

  /** backoff: full jitter in [0, min(max, initial * mult^(attempt-1))]. */
  backoff(attempt) {
    const c = this.cfg;
    let ceil = c.backoffInitialMs * c.backoffMultiplier ** Math.max(attempt - 1, 0);
    if (c.backoffMaxMs > 0) ceil = Math.min(ceil, c.backoffMaxMs);
    if (!Number.isFinite(ceil)) ceil = c.backoffMaxMs || 86400000;
    return Math.floor(Math.random() * (ceil + 1));
  }

  bucket(ms) {
    const b = this.cfg.delayBucketsMs;
    return b.find((x) => x >= ms) ?? b[b.length - 1];
  }

  async release(d, claim) {
    if (!claim) return;
    try {
      if (!(await this.claims.release(d.key, claim.owner))) log('warn', 'the claim was already lost at release', { delivery: d.id });
    } catch (e) {
      log('warn', 'releasing the claim failed; it frees itself when its lease expires', { delivery: d.id, err: e.message });
    }
  }

  /** retry releases the claim, then publishes the delivery to the delay
   * queue of the bucket at or above delayMs (the work queue for 0) with a
   * confirm, then acks the original. counted: the attempt counts. */
  async retry(d, claim, cls, delayMs, counted, reason) {
    await this.release(d, claim);
    const headers = { ...d.headers, [H.attempts]: String(counted ? d.attempt : d.attempt - 1) };
    if (counted && !headers[H.firstFailedAt]) headers[H.firstFailedAt] = rfc3339(new Date());
    let target = this.cfg.workQueue;
    let bucket = 0;
    if (delayMs > 0) {
      bucket = this.bucket(delayMs);
      target = `${this.cfg.workQueue}.delay.${bucket}`;
    }
    const fields = { class: cls, delay_ms: bucket, target };
    if (reason) fields.reason = compact(reason, 512);
    return this.settle(d, 'retried', fields, async () => {
      if (bucket) await this.declareDelay(target, bucket);
      await this.publish(target, d.body, {
        headers, contentType: d.contentType || undefined, persistent: true, messageId: d.id || undefined,
        type: d.type || undefined, timestamp: d.timestamp,
      });
      this.ack(d);
    });
  }

  /** deadLetter releases the claim (so that a replay runs), publishes the
   * failure envelope to the failure queue with a confirm, then acks. */
  async deadLetter(d, claim, cls, reason) {
    await this.release(d, claim);
    const now = rfc3339(new Date());
    let enqueuedAt;
    if (typeof d.timestamp === 'number' && d.timestamp > 0) enqueuedAt = rfc3339(new Date(d.timestamp * 1000));
    else enqueuedAt = parseTime(d.headers[H.enqueuedAt]) || undefined;
    const headers = {};
    for (const [k, v] of Object.entries(d.headers)) {
      const l = k.toLowerCase();
      if (l !== H.attempts && l !== H.firstFailedAt) headers[k] = v;
    }
    const env = marshalEnvelope({
      id: d.id, name: d.name, queue: this.cfg.workQueue, idempotencyKey: d.key,
      schemaVersion: d.headers[H.schemaVersion], attempts: d.attempt, enqueuedAt,
      contentType: d.contentType, failureClass: cls, reason: compact(reason),
      failedAt: now, firstFailedAt: parseTime(d.headers[H.firstFailedAt]) || now,
    }, d.body, headers);
    return this.settle(d, 'dead_lettered', { class: cls, reason: compact(reason, 512) }, async () => {
      await this.publish(this.cfg.failureQueue, env, {
        headers: d.key ? { [H.key]: d.key } : {}, contentType: 'application/json', persistent: true,
        messageId: d.id || undefined, type: d.name || undefined, timestamp: Math.floor(Date.now() / 1000),
      });
      this.ack(d);
    });
  }

  ack(d) {
    this.ch.ack(d.msg); // throws when the channel is gone: the broker redelivers
  }

  /** settle runs f and logs the outcome once the broker accepted it; when
   * f fails the delivery goes back to the queue after requeueAfterMs. */
  async settle(d, result, fields, f) {
    try {
      await f();
    } catch (err) {
      log('error', 'settlement failed; the delivery goes back to the queue', { result, delivery: d.id, err: err.message });
      setTimeout(() => {
        try { this.ch.nack(d.msg, false, true); } catch { /* channel gone: redelivered anyway */ }
      }, this.cfg.requeueAfterMs).unref();
      return;
    }
    log('info', result, { job: d.name, key: d.key, delivery: d.id, attempt: d.attempt, ...fields });
  }

  /** declareDelay declares a delay queue exactly as the Go driver does
   * (same arguments, AMQP long integers), at most once a minute. */
  async declareDelay(name, bucket) {
    const at = this.declared.get(bucket);
    if (at && Date.now() - at < REDECLARE_EVERY_MS) return;
    const ch = await this.conn.createChannel(); // a failed declare closes its channel
    ch.on('error', () => {});
    try {
      await ch.assertQueue(name, {
        durable: true,
        arguments: {
          'x-message-ttl': { '!': 'long', value: bucket },
          'x-dead-letter-exchange': '',
          'x-dead-letter-routing-key': this.cfg.workQueue,
          'x-expires': { '!': 'long', value: bucket + DELAY_EXPIRY_MARGIN_MS },
        },
      });
    } finally {
      await ch.close().catch(() => {});
    }
    this.declared.set(bucket, Date.now());
  }

  /** publish sends to queue through the default exchange, mandatory, and
   * resolves once the broker confirmed it; an unroutable message (no such
   * queue) or a nack rejects. One publish at a time, so that a
   * basic.return is this call's own. */
  publish(queue, body, options) {
    const run = async () => {
      const id = `${queue}\u0000${options.messageId ?? ''}`;
      this.returned.delete(id);
      await new Promise((resolve, reject) => {
        try {
          const o = Object.fromEntries(Object.entries({ ...options, mandatory: true }).filter(([, v]) => v !== undefined));
          this.pub.publish('', queue, body, o, (err) => (err ? reject(new Error(`the broker refused (nacked) the message for queue ${queue}`)) : resolve()));
        } catch (err) {
          reject(err);
        }
      });
      // basic.return precedes the confirm of the same message.
      if (this.returned.delete(id)) throw new Error(`no queue named ${queue}: the message was unroutable`);
    };
    const p = this.pubLock.then(run, run);
    this.pubLock = p.catch(() => {});
    return p;
  }
}

export function defaultJobs(cfg) {
  return new Map([
    ['build-report', { name: 'build-report', schemaVersion: '1', previousVersion: '', maxAttempts: cfg.maxAttempts, handler: buildReport }],
  ]);
}

async function main() {
  const cfg = loadConfig();
  const w = new Worker(cfg, defaultJobs(cfg));
  const stop = () => w.stop().then(() => process.exit(0), () => process.exit(1));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  try {
    await w.start();
  } catch (err) {
    log('error', 'cannot start', { err: err.message });
    process.exit(1);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main();
}
