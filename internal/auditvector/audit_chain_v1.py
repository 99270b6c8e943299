#!/usr/bin/env python3
"""Writes audit_chain_v1.json (run it in this folder): a small audit chain with its hashes, computed
here independently of the Go code (RFC 8785-like canonical JSON: keys
sorted, no insignificant space, UTF-8 kept as is; the time in RFC 3339 UTC
with microseconds), so that a change to the Go canonical form or the time
format fails the known-answer tests instead of invalidating stored chains.

    hash = hex(SHA-256(prev_hash || canonical({action, actor, details, seq, subject, time})))
"""
import hashlib, json

GENESIS = "0" * 64
events = [
    {"seq": 1, "time": "2026-01-02T03:04:05.000000Z", "actor": "system", "action": "token.create",
     "subject": "01KB0000000000000000000000", "details": {"name": "admin", "role": "admin", "owners": []}},
    {"seq": 2, "time": "2026-01-02T03:04:06.123456Z", "actor": "token:alice", "action": "message.edit",
     "subject": "01KB0000000000000000000001",
     "details": {"version": 2, "old_sha256": "a" * 64, "new_sha256": "b" * 64,
                 "reason": "montant corrigé: 19.99 € <not> & \"quoted\"\ttab"}},
    {"seq": 3, "time": "2026-01-02T03:05:00.000001Z", "actor": "token:bob", "action": "replay.create",
     "subject": "01KB0000000000000000000002",
     "details": {"reason": "fix deployed", "dry_run": False, "total": 3, "skipped": 0,
                 "destination": {}, "rate": 2.5, "nested": {"z": [1, None, True], "a": "x"}}},
]

def canonical(v):
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

prev = GENESIS
for e in events:
    body = canonical({k: e[k] for k in ("action", "actor", "details", "seq", "subject", "time")})
    e["canonical"] = body
    e["prev_hash"] = prev
    e["hash"] = hashlib.sha256((prev + body).encode("utf-8")).hexdigest()
    prev = e["hash"]

with open("audit_chain_v1.json", "w", encoding="utf-8") as f:
    json.dump({"genesis": GENESIS, "events": events}, f, ensure_ascii=False, indent=2)
    f.write("\n")
