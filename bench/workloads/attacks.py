"""W11: whether one heavy or pathological request stalls the others (issue 8, item 5).

While one thread repeats an attack for about 2 s (each request waited for before the next), the
main thread times `GET /` back to back on its own connection; a `GET /` that times out counts as
its full wait. The attacks: a `wildcard` and a `regexp` that a backtracking engine takes
exponential time on, a `histogram` on `bytes` with an interval just wide enough to stay under the
bucket limit beside a `terms` on `user_id` of size 10,000, and a `match` of 5,000 random words.
The benchmark's words are only 6 letters long, so one document whose message is a long run of
`a` is written first (and deleted afterwards): it is what makes the two patterns pathological.
What each attack was answered (statuses, error types) is shown beside its row.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from typing import Any

import numpy as np
import orjson

from bench import harness
from bench.client import Client, HttpError
from bench.generate import vocabulary
from bench.harness import Context, Recorder, Row, each_ms
from bench.workloads.common import extra_docs, future_ms, ndjson_index, refresh, remove_extra_docs

ATTACK_S = 2.0
IDLE_PROBES = 200
PROBE_TIMEOUT_S = 10.0
ATTACK_TIMEOUT_S = 120.0
MAX_BUCKETS = 65_536  # Elasticsearch's search.max_buckets, for all the aggregations of a request
USERS_SIZE = 10_000
REASON_CHARS = 90
POISON_ID = 20_000_000
POISON_MESSAGE = "a" * 64


def _attacks(ctx: Context) -> dict[str, dict[str, Any]]:
    nbytes = ctx.dataset.nbytes
    # The histogram's buckets and the terms' together stay under the limit, with a margin.
    histogram_buckets = MAX_BUCKETS - USERS_SIZE - 5_000
    interval = max(1, -(-(int(nbytes.max()) - int(nbytes.min()) + 1) // histogram_buckets))
    words = np.random.default_rng(ctx.seed + 11).choice(vocabulary(), size=5_000)
    return {
        "wildcard *a*a*a*a*a*a*a*b": {"query": {"wildcard": {"message": {"value": "*a*a*a*a*a*a*a*b"}}}},
        "regexp (a+)+b": {"query": {"regexp": {"message": "(a+)+b"}}},
        f"histogram bytes interval {interval} + terms user_id 10,000": {
            "size": 0,
            "aggs": {
                "bytes": {"histogram": {"field": "bytes", "interval": interval}},
                "users": {"terms": {"field": "user_id", "size": USERS_SIZE}},
            },
        },
        "match of 5,000 random words": {"query": {"match": {"message": " ".join(words.tolist())}}},
    }


class Attacker(threading.Thread):
    """Repeats one request until its time is up (at least once), counting what it was answered.
    The body of a success is not parsed: the client's own work must not slow the probe."""

    def __init__(self, url: str, path: str, body: bytes, seconds: float) -> None:
        super().__init__(daemon=True)
        self.url, self.path, self.body, self.seconds = url, path, body, seconds
        self.answers: Counter[str] = Counter()
        self.reasons: dict[str, str] = {}  # the first reason given with each error answer

    def run(self) -> None:
        client = Client(self.url, timeout=ATTACK_TIMEOUT_S)
        end = time.perf_counter() + self.seconds
        try:
            while not self.answers or time.perf_counter() < end:
                try:
                    client.raw("POST", self.path, self.body)
                    self.answers["200"] += 1
                except HttpError as error:
                    answer = f"{error.status} {error.root_cause or error.type}"  # the cause first
                    self.answers[answer] += 1
                    self.reasons.setdefault(answer, str(error.reason)[:REASON_CHARS])
                except OSError as error:
                    self.answers[type(error).__name__] += 1
        finally:
            client.close()

    def summary(self) -> str:
        return "answered " + ", ".join(
            f"{answer} x{times}" + (f" ({self.reasons[answer]})" if answer in self.reasons else "")
            for answer, times in self.answers.most_common()
        )


def _probe(url: str, attacker: Attacker) -> list[float]:
    """`GET /` latencies in ms, back to back, while the attacker runs (a timeout counts in full)."""
    client = Client(url, timeout=PROBE_TIMEOUT_S)
    samples: list[float] = []
    try:
        while attacker.is_alive():
            start = time.perf_counter_ns()
            with contextlib.suppress(OSError):  # waited until the timeout: that is the figure
                client.raw("GET", "/")  # (the next request reconnects)
            samples.append((time.perf_counter_ns() - start) / 1e6)
    finally:
        client.close()
    return samples


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W11")
    idle = (rec.plan("GET / idle, p50", "ms"), rec.plan("GET / idle, p99", "ms"))
    attacks = _attacks(ctx)
    rows = {
        name: (
            rec.plan(f"GET / during {name}, p50", "ms"),
            rec.plan(f"GET / during {name}, p99", "ms", ("<=", 100.0)),
        )
        for name in attacks
    }
    with rec.step(*idle):
        rec.percentiles(idle, each_ms(lambda: ctx.http.raw("GET", "/") for _ in range(IDLE_PROBES)))

    poison = extra_docs(ctx, POISON_ID, np.array([future_ms(ctx)], dtype=np.int64))
    doc_id, source = poison[0]
    source_fields = orjson.loads(source)
    poison = [(doc_id, orjson.dumps({**source_fields, "message": POISON_MESSAGE}).decode())]
    try:
        ctx.http.raw("POST", f"/{ctx.index}/_bulk", ndjson_index(poison), "application/x-ndjson")
        refresh(ctx, ctx.index)
        for name, body in attacks.items():
            with rec.step(*rows[name]):
                seconds = ATTACK_S * harness.PACE
                attacker = Attacker(ctx.url, f"/{ctx.index}/_search", orjson.dumps(body), seconds)
                attacker.start()
                samples = _probe(ctx.url, attacker)
                attacker.join()
                rec.percentiles(rows[name], samples)
                rec.note(rows[name][1], attacker.summary())
    finally:
        remove_extra_docs(ctx, [doc_id])
    return rec.finish()
