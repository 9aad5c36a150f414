"""Seeded generator of log-like documents, shared by the server runs and the SQLite baseline.

Everything is built column-wise with numpy and turned into strings with joins, so that a million
documents take seconds: the benchmark must measure the server, not the generator.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import orjson

MAPPING = {
    "properties": {
        "@timestamp": {"type": "date"},
        "status": {"type": "integer"},
        "service": {"type": "keyword"},
        "user_id": {"type": "keyword"},
        "bytes": {"type": "long"},
        "message": {"type": "text"},
        "id": {"type": "keyword"},
    }
}

VOCABULARY_SIZE = 5_000
USERS = 200_000
SERVICES = [f"svc-{i:02d}" for i in range(50)]
STATUSES = np.array([200, 201, 301, 404, 500, 503])
STATUS_WEIGHTS = np.array([0.70, 0.08, 0.05, 0.10, 0.05, 0.02])
START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
SPAN_MS = 30 * 86_400_000
JITTER_BURSTS = 3  # a burst may land this many burst spacings early or late
# Rank 20 of a Zipf(1) vocabulary appears in about 6% of the messages: frequent enough that a
# query on it has pages to walk, rare enough that matching is not the whole index.
MID_TERM_RANK = 20


def vocabulary() -> np.ndarray:
    """Pronounceable lowercase words: one token each for both the standard analyzer and FTS5."""
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words = np.array([a + b + c for a in syllables[:20] for b in syllables for c in syllables[:4]])
    words = np.random.default_rng(0).permutation(words)[:VOCABULARY_SIZE]
    assert all(set(w) <= set(string.ascii_lowercase) for w in words)  # no JSON escaping needed
    return words


def _zipf(n: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1) ** exponent
    return weights / weights.sum()


@dataclass(frozen=True)
class Dataset:
    """Columns of N documents; doc i has `_id` == `ids[i]`. Strings are Python lists for fast joins."""

    ids: list[str]
    timestamps: list[str]
    ts_ms: np.ndarray
    status: np.ndarray
    services: list[str]
    users: list[str]
    nbytes: np.ndarray
    messages: list[str]
    mid_term: str
    top_service: str

    def __len__(self) -> int:
        return len(self.ids)

    def _rows(self) -> Iterator[tuple]:
        """(timestamp, status, service, user, bytes, message, id) of each document, in order."""
        return zip(
            self.timestamps,
            self.status.tolist(),
            self.services,
            self.users,
            self.nbytes.tolist(),
            self.messages,
            self.ids,
            strict=True,
        )

    @cached_property
    def sources(self) -> list[str]:
        """The `_source` of each document as a JSON string (the values need no escaping)."""
        return [
            f'{{"@timestamp":"{t}","status":{s},"service":"{v}","user_id":"{u}",'
            f'"bytes":{b},"message":"{m}","id":"{i}"}}'
            for t, s, v, u, b, m, i in self._rows()
        ]

    def actions(self, index: str) -> Iterator[dict]:
        """Actions for `elasticsearch.helpers.bulk`, built lazily as a client application would."""
        for t, s, v, u, b, m, i in self._rows():
            yield {
                "_index": index,
                "_id": i,
                "_source": {
                    "@timestamp": t,
                    "status": s,
                    "service": v,
                    "user_id": u,
                    "bytes": b,
                    "message": m,
                    "id": i,
                },
            }

    def bulk_bodies(self, chunk_size: int) -> list[bytes]:
        """Pre-encoded NDJSON bodies for `POST /<index>/_bulk`, `chunk_size` documents each."""
        lines = [f'{{"index":{{"_id":"{i}"}}}}\n{s}\n' for i, s in zip(self.ids, self.sources, strict=True)]
        return ["".join(lines[k : k + chunk_size]).encode() for k in range(0, len(lines), chunk_size)]

    def rows(self) -> Iterator[tuple]:
        """Rows for the SQLite baseline: (id, ts, status, service, user_id, bytes, message)."""
        return zip(
            self.ids,
            self.ts_ms.tolist(),
            self.status.tolist(),
            self.services,
            self.users,
            self.nbytes.tolist(),
            self.messages,
            strict=True,
        )


def write_import_files(dataset: Dataset, folder: Path) -> tuple[Path, Path]:
    """The documents as `leafsearch import` reads them (one `{_index, _id, _source}` line each) and
    the mapping as `--mapping` takes it: (records, mapping), written in `folder`."""
    records = folder / "docs.ndjson"
    with open(records, "wb") as out:
        for doc_id, source in zip(dataset.ids, dataset.sources, strict=True):
            out.write(f'{{"_index":"bench","_id":"{doc_id}","_source":{source}}}\n'.encode())
    mapping = folder / "mapping.json"
    mapping.write_bytes(orjson.dumps(MAPPING))
    return records, mapping


def generate(n: int, seed: int = 42) -> Dataset:
    """N documents, identical for the same (n, seed).

    Timestamps come in bursts that share one millisecond (so sorting needs a tiebreaker) and rise
    over 30 days with a jitter of a few bursts (so documents do not arrive in sort order).
    """
    rng = np.random.default_rng(seed)
    vocab = vocabulary()

    bursts = rng.geometric(0.5, size=n)  # mean 2 documents per millisecond
    bursts = bursts[: np.searchsorted(np.cumsum(bursts), n) + 1]
    burst_ms = START_MS + np.arange(len(bursts)) * SPAN_MS // len(bursts)
    spacing = SPAN_MS // len(bursts)
    burst_ms += rng.integers(-JITTER_BURSTS * spacing, JITTER_BURSTS * spacing + 1, size=len(bursts))
    ts_ms = np.repeat(np.maximum(burst_ms, START_MS), bursts)[:n]
    timestamps = np.datetime_as_string(ts_ms.astype("datetime64[ms]"), unit="ms", timezone="UTC")

    lengths = rng.integers(8, 16, size=n)
    words = rng.choice(VOCABULARY_SIZE, size=int(lengths.sum()), p=_zipf(VOCABULARY_SIZE, 1.0))
    last = np.cumsum(lengths) - 1
    words[last] += VOCABULARY_SIZE  # the last word of each message carries the line break
    tokens = np.concatenate([np.char.add(vocab, " "), np.char.add(vocab, "\n")]).astype(object)
    messages = "".join(tokens[words].tolist()).split("\n")[:n]

    service_names = np.array(SERVICES, dtype=object)
    service_weights = _zipf(len(SERVICES), 0.5)
    user_names = np.array([f"u{i:06d}" for i in range(USERS)], dtype=object)
    return Dataset(
        ids=[f"{i:010d}" for i in range(n)],
        timestamps=timestamps.tolist(),
        ts_ms=ts_ms,
        status=rng.choice(STATUSES, size=n, p=STATUS_WEIGHTS),
        services=service_names[rng.choice(len(SERVICES), size=n, p=service_weights)].tolist(),
        users=user_names[rng.integers(0, USERS, size=n)].tolist(),
        nbytes=np.minimum(rng.lognormal(8.0, 1.5, size=n), 1e9).astype(np.int64),
        messages=messages,
        mid_term=str(vocab[MID_TERM_RANK]),
        top_service=SERVICES[0],
    )
