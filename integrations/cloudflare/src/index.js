// The quarantine's Cloudflare Worker (plain JavaScript, an ES module, no
// bundler). Two handlers:
//
//   queue(batch, env)  consumer of the dead-letter queues named in QUEUES:
//                      every message becomes a canonical failure envelope
//                      (quarantine.failure/v1) POSTed to the quarantine's
//                      ingest; a message is acked only when the quarantine
//                      stored it (2xx and an id for its item), else retried
//                      with a delay. Commit before ack: a quarantine that is
//                      down loses nothing.
//   fetch POST /replay receiver of the replay engine's HTTP destination
//                      (kind cloudflare): sends the envelope's payload to the
//                      producer binding of the envelope's queue, keeping the
//                      idempotency key in the body's configured field.
//
// Bindings: vars QUARANTINE_URL, QUEUES (JSON, see parseQueues), optional
// SOURCE_NAME (default "cloudflare") and RETRY_DELAY_SECONDS (default 30);
// secrets QUARANTINE_TOKEN, REPLAY_TOKEN; the producer bindings QUEUES names.

const ENVELOPE_V1 = "quarantine.failure/v1";

// Cloudflare's default max_retries of a consumer: a message is delivered
// max_retries + 1 times before it is dead-lettered.
const DEFAULT_MAX_RETRIES = 3;
const DEFAULT_RETRY_DELAY = 30; // seconds
const INGEST_CHUNK = 1000; // envelopes per ingest request (the quarantine takes 10,000)
const INGEST_TIMEOUT_MS = 30_000;

export default {
  async queue(batch, env) {
    const delaySeconds = retryDelay(env);
    let entry;
    try {
      entry = parseQueues(env)[batch.queue];
    } catch (e) {
      console.error(`quarantine-worker: ${e.message}: ${batch.messages.length} messages of ${batch.queue} retried`);
      batch.retryAll({ delaySeconds });
      return;
    }
    if (!entry) {
      // Not configured: never ack what was not stored.
      console.error(`quarantine-worker: queue ${batch.queue} is not a dead-letter queue of QUEUES: ${batch.messages.length} messages retried`);
      batch.retryAll({ delaySeconds });
      return;
    }
    const items = batch.messages.map((m) => ({ m, body: buildEnvelope(m, batch.queue, entry) }));
    for (let i = 0; i < items.length; i += INGEST_CHUNK) {
      await ingestChunk(items.slice(i, i + INGEST_CHUNK), batch.queue, env, delaySeconds);
    }
  },

  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname !== "/replay") {
      return problem(404, "not found: the Worker answers POST /replay only");
    }
    if (request.method !== "POST") {
      return problem(405, "use POST", { Allow: "POST" });
    }
    return replay(request, env);
  },
};

// parseQueues reads QUEUES: a JSON object (or, from wrangler [vars], an
// object) keyed by dead-letter queue:
//   {"<dead-letter queue>": {"queue": "<original queue>", "producer": "<binding>",
//     "idempotency_pointer": "/key", "job_name": "<name>", "max_retries": 3}}
// queue and producer are required; job_name defaults to the original
// queue; max_retries is that of the original queue's consumer (for
// job.attempts).
function parseQueues(env) {
  let q = env.QUEUES;
  if (typeof q === "string") {
    try {
      q = JSON.parse(q);
    } catch {
      throw new Error("QUEUES is not valid JSON");
    }
  }
  if (q === null || typeof q !== "object" || Array.isArray(q)) {
    throw new Error("QUEUES must be a JSON object keyed by dead-letter queue");
  }
  for (const [dlq, e] of Object.entries(q)) {
    if (e === null || typeof e !== "object" || typeof e.queue !== "string" || e.queue === "" ||
      typeof e.producer !== "string" || e.producer === "") {
      throw new Error(`QUEUES[${dlq}] needs queue and producer`);
    }
    if (e.idempotency_pointer !== undefined && e.idempotency_pointer !== "" &&
      (typeof e.idempotency_pointer !== "string" || !e.idempotency_pointer.startsWith("/"))) {
      throw new Error(`QUEUES[${dlq}].idempotency_pointer is not a JSON Pointer`);
    }
  }
  return q;
}

function retryDelay(env) {
  const n = Number(env.RETRY_DELAY_SECONDS ?? DEFAULT_RETRY_DELAY);
  return Number.isInteger(n) && n >= 0 && n <= 43200 ? n : DEFAULT_RETRY_DELAY;
}

// ingestChunk POSTs one array of envelopes and acks the messages the
// quarantine stored; all others are retried.
async function ingestChunk(items, dlq, env, delaySeconds) {
  const retryAll = (why) => {
    console.error(`quarantine-worker: ingest of ${items.length} messages of ${dlq} failed (${why}): retried in ${delaySeconds}s`);
    for (const { m } of items) m.retry({ delaySeconds });
  };
  if (!env.QUARANTINE_URL) {
    retryAll("QUARANTINE_URL is not set");
    return;
  }
  let res, answer;
  try {
    const headers = {
      "Content-Type": "application/json",
      "User-Agent": "quarantine-cloudflare-worker",
      "X-Quarantine-Source-Kind": "cloudflare",
      "X-Quarantine-Source": env.SOURCE_NAME || "cloudflare",
    };
    if (env.QUARANTINE_TOKEN) headers.Authorization = `Bearer ${env.QUARANTINE_TOKEN}`;
    res = await fetch(`${String(env.QUARANTINE_URL).replace(/\/+$/, "")}/api/v1/ingest`, {
      method: "POST",
      headers,
      body: `[${items.map((it) => it.body).join(",")}]`,
      signal: AbortSignal.timeout(INGEST_TIMEOUT_MS),
    });
    if (res.status < 200 || res.status > 299) {
      const text = (await res.text()).slice(0, 200);
      retryAll(`HTTP ${res.status}: ${text}`);
      return;
    }
    answer = await res.json();
  } catch (e) {
    retryAll(String(e && e.message ? e.message : e));
    return;
  }
  const stored = new Map();
  for (const it of Array.isArray(answer && answer.items) ? answer.items : []) {
    if (it && Number.isInteger(it.index) && typeof it.id === "string" && it.id !== "") stored.set(it.index, it.id);
  }
  let acked = 0;
  items.forEach(({ m }, i) => {
    if (stored.has(i)) {
      m.ack();
      acked++;
    } else {
      m.retry({ delaySeconds });
    }
  });
  if (acked < items.length) {
    console.error(`quarantine-worker: ${items.length - acked} of ${items.length} messages of ${dlq} not confirmed: retried`);
  }
}

// buildEnvelope turns a dead-lettered message into the canonical envelope's
// JSON text. It is deterministic (the same message gives the same bytes on
// every delivery), so that a redelivery after a lost answer is one entry:
// the quarantine deduplicates on the envelope's bytes. That is why
// job.attempts comes from the configuration (max_retries + 1) and not from
// the dead-letter delivery count, and why failed_at is left to the
// quarantine (it records when it collected the message).
function buildEnvelope(m, dlq, entry) {
  const maxRetries = Number.isInteger(entry.max_retries) && entry.max_retries >= 0 ? entry.max_retries : DEFAULT_MAX_RETRIES;
  const body = encodeBody(m.body);
  const job = [
    ["id", JSON.stringify(String(m.id))],
    ["name", JSON.stringify(entry.job_name || entry.queue)],
    ["queue", JSON.stringify(entry.queue)],
  ];
  const key = entry.idempotency_pointer ? keyAt(body.value, entry.idempotency_pointer) : undefined;
  if (key !== undefined) job.push(["idempotency_key", JSON.stringify(key)]);
  job.push(["attempts", String(maxRetries + 1)]);
  const ts = m.timestamp instanceof Date ? m.timestamp : new Date(m.timestamp);
  if (!Number.isNaN(ts.getTime())) job.push(["enqueued_at", JSON.stringify(ts.toISOString())]);
  job.push(["content_type", JSON.stringify(body.contentType)]);
  job.push(["headers", JSON.stringify({ "x-cloudflare-dead-letter-queue": dlq })]);
  if (body.json !== undefined) job.push(["payload", body.json]);
  else job.push(["payload_base64", JSON.stringify(body.base64)]);
  const failure = {
    class: "exhausted",
    reason: `exhausted ${maxRetries + 1} attempts on Cloudflare queue ${entry.queue}; dead-lettered to ${dlq}`,
  };
  return `{"envelope":${JSON.stringify(ENVELOPE_V1)},"job":{${job.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}},"failure":${JSON.stringify(failure)}}`;
}

// encodeBody says how a message body travels: JSON text (json, and the
// parsed value for the key lookup), or bytes (base64) with a content type.
function encodeBody(b) {
  if (b instanceof ArrayBuffer || ArrayBuffer.isView(b)) {
    const bytes = b instanceof ArrayBuffer ? new Uint8Array(b) : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    return { base64: toBase64(bytes), contentType: "application/octet-stream" };
  }
  if (typeof b === "string") {
    // A string holding JSON (no surrounding white space) travels as that
    // JSON, byte for byte; other text as UTF-8 bytes.
    if (b !== "" && b.trim() === b) {
      try {
        return { json: b, value: JSON.parse(b), contentType: "application/json" };
      } catch { /* text */ }
    }
    return { base64: toBase64(new TextEncoder().encode(b)), contentType: "text/plain; charset=utf-8" };
  }
  let text;
  try {
    text = JSON.stringify(b);
  } catch { /* not JSON: a cycle, a BigInt */ }
  if (text === undefined) {
    return { base64: toBase64(new TextEncoder().encode(String(b))), contentType: "text/plain; charset=utf-8" };
  }
  return { json: text, value: JSON.parse(text), contentType: "application/json" };
}

// keyAt returns the idempotency key at a JSON Pointer: a non-empty string,
// or a finite number as text; undefined otherwise.
function keyAt(value, pointer) {
  const v = pointerGet(value, pointer);
  if (typeof v === "string" && v !== "") return v;
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  return undefined;
}

function pointerTokens(pointer) {
  return pointer.slice(1).split("/").map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function pointerGet(value, pointer) {
  let v = value;
  for (const t of pointerTokens(pointer)) {
    if (v === null || typeof v !== "object" || !Object.prototype.hasOwnProperty.call(v, t)) return undefined;
    v = v[t];
  }
  return v;
}

// pointerSet sets the value at pointer, creating missing objects on the
// way; false when a step is not an object (nothing is changed then).
function pointerSet(root, pointer, value) {
  const tokens = pointerTokens(pointer);
  let v = root;
  for (let i = 0; i < tokens.length - 1; i++) {
    if (v === null || typeof v !== "object") return false;
    if (v[tokens[i]] === undefined) v[tokens[i]] = {};
    v = v[tokens[i]];
  }
  if (v === null || typeof v !== "object" || (Array.isArray(v) && !/^\d+$/.test(tokens[tokens.length - 1]))) return false;
  v[tokens[tokens.length - 1]] = value;
  return true;
}

function toBase64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

function fromBase64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// replay handles POST /replay: 2xx only once send resolved; 4xx for a bad
// token, a bad envelope or an unknown queue (the engine fails the item);
// 5xx for what may work later (the engine retries).
async function replay(request, env) {
  if (!env.REPLAY_TOKEN) {
    return problem(500, "REPLAY_TOKEN is not set");
  }
  if (!(await bearerIs(request.headers.get("Authorization"), env.REPLAY_TOKEN))) {
    return problem(401, "a valid Authorization: Bearer token is needed", { "WWW-Authenticate": "Bearer" });
  }
  let queues;
  try {
    queues = parseQueues(env);
  } catch (e) {
    return problem(500, e.message);
  }
  let envelope;
  try {
    envelope = JSON.parse(await request.text());
  } catch {
    return problem(400, "the body is not JSON: send a quarantine.failure/v1 envelope");
  }
  const job = envelope && envelope.job;
  if (!envelope || envelope.envelope !== ENVELOPE_V1 || !job || typeof job !== "object") {
    return problem(400, `the body is not a ${ENVELOPE_V1} envelope`);
  }
  const entry = Object.values(queues).find((e) => e.queue === job.queue);
  if (!entry) {
    return problem(404, `unknown queue ${JSON.stringify(String(job.queue ?? ""))}: not in QUEUES`);
  }
  const producer = env[entry.producer];
  if (!producer || typeof producer.send !== "function") {
    return problem(500, `the producer binding ${entry.producer} is missing`);
  }
  const key = typeof job.idempotency_key === "string" ? job.idempotency_key : "";
  let body, contentType;
  if (Object.prototype.hasOwnProperty.call(job, "payload") && job.payload !== null && job.payload_base64 == null) {
    body = job.payload;
    contentType = "json";
    if (entry.idempotency_pointer && key !== "") {
      const current = pointerGet(body, entry.idempotency_pointer);
      const same = (typeof current === "string" || typeof current === "number") && String(current) === key;
      if (!same && !pointerSet(body, entry.idempotency_pointer, key)) {
        return problem(422, `the payload has no place for the idempotency key at ${entry.idempotency_pointer}`);
      }
    }
  } else if (typeof job.payload_base64 === "string") {
    let bytes;
    try {
      bytes = fromBase64(job.payload_base64);
    } catch {
      return problem(400, "job.payload_base64 is not base64");
    }
    if (/^text\//i.test(String(job.content_type ?? ""))) {
      body = new TextDecoder().decode(bytes);
      contentType = "text";
    } else {
      body = bytes;
      contentType = "bytes";
    }
  } else {
    return problem(400, "the envelope has no job.payload or job.payload_base64");
  }
  try {
    await producer.send(body, { contentType });
  } catch (e) {
    console.error(`quarantine-worker: send to ${entry.queue} failed: ${e && e.message ? e.message : e}`);
    return problem(502, `send to queue ${entry.queue} failed`);
  }
  return new Response(JSON.stringify({ queue: entry.queue, producer: entry.producer, idempotency_key: key }), {
    status: 200,
    headers: { "Content-Type": "application/json" },
  });
}

// bearerIs compares a bearer token with want in constant time (over their
// SHA-256 digests).
async function bearerIs(header, want) {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header || "");
  if (!m) return false;
  const enc = new TextEncoder();
  const [a, b] = await Promise.all([
    crypto.subtle.digest("SHA-256", enc.encode(m[1])),
    crypto.subtle.digest("SHA-256", enc.encode(String(want))),
  ]);
  if (typeof crypto.subtle.timingSafeEqual === "function") return crypto.subtle.timingSafeEqual(a, b);
  const x = new Uint8Array(a), y = new Uint8Array(b);
  let d = 0;
  for (let i = 0; i < x.length; i++) d |= x[i] ^ y[i];
  return d === 0;
}

function problem(status, detail, headers = {}) {
  return new Response(JSON.stringify({ status, title: statusTitle(status), detail }), {
    status,
    headers: { "Content-Type": "application/problem+json", ...headers },
  });
}

function statusTitle(status) {
  return { 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed", 422: "Unprocessable Content", 500: "Internal Server Error", 502: "Bad Gateway" }[status] || "Error";
}
