// harness.mjs: runs the Worker of src/index.js in workerd (through
// miniflare) with a work queue and its dead-letter queue, for
// cloudflare_test.go. Environment:
//
//   UPSTREAM          the quarantine's base URL (http://127.0.0.1:PORT)
//   QUARANTINE_TOKEN  the token the Worker sends to ingest
//   REPLAY_TOKEN      the token /replay wants
//   MAX_RETRIES       max_retries of the work queue's consumer (default 2)
//
// Queues: "work" (consumer: the "consumer" Worker, which retries every
// poison job on purpose and acks the others; max_retries MAX_RETRIES; dead
// letters to "work-dlq") and "work-dlq" (consumer: the quarantine Worker).
// The quarantine Worker's QUARANTINE_URL is this harness, which forwards
// /api/v1/ingest to UPSTREAM and records every request (the exact bytes
// and what became of it), and can lose answers on purpose: the quarantine
// stored the envelopes but the Worker never hears so.
//
// It prints one line `HARNESS {"control": URL, "worker": URL}` when
// ready. Control API (JSON):
//   POST /enqueue {"bodies": [...]}  sends bodies to "work"
//   POST /lose {"n": N}              loses the answers of the next N ingests
//   GET  /state                      {"records": [...], "ingests": [...]}
// records: what the consumer got: {id, attempts, queue, body}; ingests:
// {body, outcome: "ok" | "lost" | "down" | "status <n>"}.
import http from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare, Log, LogLevel } from "miniflare";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const upstream = new URL(process.env.UPSTREAM || "http://127.0.0.1:8080");
const maxRetries = Number(process.env.MAX_RETRIES || 2);

const records = [];
const ingests = [];
let lose = 0;

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function json(res, status, v) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(v));
}

// forward sends an ingest request on to the quarantine. A quarantine that
// is down (or an answer lost on purpose) drops the Worker's connection, as
// a dead host would.
function forward(req, res, body) {
  const rec = { body: body.toString("utf8"), outcome: "pending" };
  ingests.push(rec);
  const headers = { ...req.headers, host: upstream.host, "content-length": String(body.length) };
  const up = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers }, (ur) => {
    readBody(ur).then((b) => {
      if (lose > 0) {
        lose--;
        rec.outcome = "lost";
        req.socket.destroy();
        return;
      }
      rec.outcome = ur.statusCode >= 200 && ur.statusCode < 300 ? "ok" : `status ${ur.statusCode}`;
      res.writeHead(ur.statusCode, { "Content-Type": ur.headers["content-type"] || "application/json" });
      res.end(b);
    });
  });
  up.on("error", () => {
    rec.outcome = "down";
    req.socket.destroy();
  });
  up.end(body);
}

let mf;
const server = http.createServer(async (req, res) => {
  try {
    const body = await readBody(req);
    const url = new URL(req.url, "http://harness");
    if (url.pathname.startsWith("/api/v1/")) return forward(req, res, body);
    if (req.method === "POST" && url.pathname === "/record") {
      records.push(JSON.parse(body.toString("utf8")));
      return json(res, 200, {});
    }
    if (req.method === "POST" && url.pathname === "/enqueue") {
      const { bodies } = JSON.parse(body.toString("utf8"));
      const q = await mf.getQueueProducer("WORK", "consumer");
      await q.sendBatch(bodies.map((b) => ({ body: b })));
      return json(res, 200, { sent: bodies.length });
    }
    if (req.method === "POST" && url.pathname === "/lose") {
      lose = JSON.parse(body.toString("utf8")).n;
      return json(res, 200, { lose });
    }
    if (req.method === "GET" && url.pathname === "/state") {
      return json(res, 200, { records, ingests });
    }
    json(res, 404, { error: "not found" });
  } catch (e) {
    json(res, 500, { error: String(e && e.stack ? e.stack : e) });
  }
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const control = `http://127.0.0.1:${server.address().port}`;

// The consumer of "work": poison jobs (an object with poison: true, or a
// string starting with "poison") fail on purpose until they are
// dead-lettered; the others are acked. Every delivery is recorded.
const consumer = `
export default {
  async queue(batch, env) {
    for (const m of batch.messages) {
      let body = m.body;
      if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) body = { bytes: Array.from(new Uint8Array(body.buffer ?? body)) };
      await fetch(env.CONTROL + "/record", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ id: m.id, attempts: m.attempts, queue: batch.queue, body }) });
      const poison = (body && typeof body === "object" && body.poison === true) || (typeof body === "string" && body.startsWith("poison"));
      if (poison) m.retry(); else m.ack();
    }
  },
};`;

mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  log: new Log(LogLevel.WARN),
  cf: false,
  workers: [
    {
      name: "quarantine-worker",
      modules: true,
      modulesRoot: root,
      scriptPath: path.join(root, "src", "index.js"),
      compatibilityDate: "2025-01-01",
      bindings: {
        QUARANTINE_URL: control,
        QUARANTINE_TOKEN: process.env.QUARANTINE_TOKEN || "",
        REPLAY_TOKEN: process.env.REPLAY_TOKEN || "",
        RETRY_DELAY_SECONDS: "1",
        SOURCE_NAME: "cf-test",
        QUEUES: JSON.stringify({
          "work-dlq": { queue: "work", producer: "WORK", idempotency_pointer: "/key", job_name: "work-job", max_retries: maxRetries },
        }),
      },
      queueProducers: { WORK: { queueName: "work" } },
      // The dead-letter queue's own retries must outlast a quarantine
      // outage: 100 is Cloudflare's maximum.
      queueConsumers: { "work-dlq": { maxBatchSize: 3, maxBatchTimeout: 0.2, maxRetries: 100 } },
    },
    {
      name: "consumer",
      modules: true,
      script: consumer,
      compatibilityDate: "2025-01-01",
      bindings: { CONTROL: control },
      queueProducers: { WORK: { queueName: "work" } },
      queueConsumers: { work: { maxBatchSize: 5, maxBatchTimeout: 0.2, maxRetries, deadLetterQueue: "work-dlq", retryDelay: 0 } },
    },
  ],
});
const worker = (await mf.ready).toString().replace(/\/$/, "");
console.log(`HARNESS ${JSON.stringify({ control, worker })}`);

async function stop() {
  await mf.dispose().catch(() => {});
  server.close();
  process.exit(0);
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
// The Go test holds stdin; its end (the test is over, or died) stops us.
process.stdin.on("end", stop);
process.stdin.resume();
