"""The same rows in SQLite, queried the way a careful application would: the baseline of every ratio.

SQLite is also the oracle of the correctness checks: the timestamps at a given depth of a sorted
result do not depend on how ties are broken, so they must equal what leafsearch returns there.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from bench.generate import Dataset

COLUMNS = "ts, id, status, service, user_id, bytes, message"
# Sorts before every real (ts, id) in descending order: the keyset "after" of a first page.
TOP = (2**62, "")


# Every index a workload's queries use, built by the load: a careful application has them before
# its queries run, and leafsearch's load likewise makes every field searchable.
INDEXES = (
    "CREATE INDEX docs_ts_id ON docs (ts, id)",  # sorted and keyset pages, walks (W1-W3, W7, W9)
    "CREATE INDEX docs_service_ts ON docs (service, ts)",  # a service's time range (W6, W10)
    "CREATE INDEX docs_bytes ON docs (bytes)",  # sorted by bytes (W8)
    "CREATE VIRTUAL TABLE fts USING fts5(message, content='docs')",  # the `match` (W1, W3)
    "INSERT INTO fts(fts) VALUES ('rebuild')",
)


class SqliteBaseline:
    """`docs` table with the indexes in INDEXES.

    `match` arguments are None (all rows) or (term, service): the `match` + `term` query of W1/W3.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path)
        self.load_seconds = 0.0

    def load(self, dataset: Dataset) -> None:
        """Insert every row, build every index and commit, in one transaction timed as
        `load_seconds`: leafsearch's figure likewise runs until its documents are searchable."""
        start = time.perf_counter()
        with self._db:
            self._db.execute(
                "CREATE TABLE docs (id TEXT PRIMARY KEY, ts INTEGER, status INTEGER, service TEXT,"
                " user_id TEXT, bytes INTEGER, message TEXT)"
            )
            self._db.executemany(
                "INSERT INTO docs (id, ts, status, service, user_id, bytes, message)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                dataset.rows(),
            )
            for statement in INDEXES:
                self._db.execute(statement)
        self.load_seconds = time.perf_counter() - start

    def file_bytes(self) -> int:
        return self.path.stat().st_size

    def _filter(self, match: tuple[str, str] | None) -> tuple[str, list]:
        if match is None:
            return "", []
        term, service = match
        return "service = ? AND rowid IN (SELECT rowid FROM fts WHERE fts MATCH ?) AND ", [service, term]

    def count(self, match: tuple[str, str] | None = None) -> int:
        where, params = self._filter(match)
        return self._db.execute(f"SELECT count(*) FROM docs WHERE {where}1", params).fetchone()[0]

    def offset_page(self, offset: int, size: int, match: tuple[str, str] | None = None) -> list[tuple]:
        """Rows `offset`..`offset+size` by descending ts: what `from`/`size` paging does."""
        where, params = self._filter(match)
        return self._db.execute(
            f"SELECT {COLUMNS} FROM docs WHERE {where}1 ORDER BY ts DESC LIMIT ? OFFSET ?",
            [*params, size, offset],
        ).fetchall()

    def keyset_page(
        self, after: tuple[int, str], size: int, match: tuple[str, str] | None = None
    ) -> list[tuple]:
        """Rows after the key `after` in (ts, id) descending order: what `search_after` does."""
        where, params = self._filter(match)
        return self._db.execute(
            f"SELECT {COLUMNS} FROM docs WHERE {where}(ts, id) < (?, ?) ORDER BY ts DESC, id DESC LIMIT ?",
            [*params, *after, size],
        ).fetchall()

    def keyset_after(self, depth: int, match: tuple[str, str] | None = None) -> tuple[int, str]:
        """The key whose keyset page starts at `depth`."""
        if depth == 0:
            return TOP
        where, params = self._filter(match)
        return tuple(
            self._db.execute(
                f"SELECT ts, id FROM docs WHERE {where}1 ORDER BY ts DESC, id DESC LIMIT 1 OFFSET ?",
                [*params, depth - 1],
            ).fetchone()
        )

    def service_range_page(self, service: str, lo: int, hi: int, size: int) -> list[tuple[int, str]]:
        """(ts, id) of the first `size` rows of `service` with lo <= ts < hi, by ts desc then id asc."""
        return self._db.execute(
            "SELECT ts, id FROM docs WHERE service = ? AND ts >= ? AND ts < ? ORDER BY ts DESC, id LIMIT ?",
            [service, lo, hi, size],
        ).fetchall()

    def service_range_count(self, service: str, lo: int, hi: int) -> int:
        return self._db.execute(
            "SELECT count(*) FROM docs WHERE service = ? AND ts >= ? AND ts < ?", [service, lo, hi]
        ).fetchone()[0]

    def range_top_bytes(self, lo: int, hi: int, size: int) -> list[int]:
        """The `size` largest `bytes` of the rows with lo <= ts < hi, largest first."""
        rows = self._db.execute(
            "SELECT bytes FROM docs WHERE ts >= ? AND ts < ? ORDER BY bytes DESC LIMIT ?", [lo, hi, size]
        ).fetchall()
        return [row[0] for row in rows]

    def range_count(self, lo: int, hi: int) -> int:
        return self._db.execute("SELECT count(*) FROM docs WHERE ts >= ? AND ts < ?", [lo, hi]).fetchone()[0]

    def keyset_page_id_asc(self, after: tuple[int, str] | None, size: int) -> list[tuple[int, str]]:
        """(ts, id) of the rows after `after` in (ts desc, id asc) order (None: from the start)."""
        if after is None:
            return self._db.execute("SELECT ts, id FROM docs ORDER BY ts DESC, id LIMIT ?", [size]).fetchall()
        ts, id_ = after
        return self._db.execute(
            "SELECT ts, id FROM docs WHERE ts <= ? AND (ts < ? OR id > ?) ORDER BY ts DESC, id LIMIT ?",
            [ts, ts, id_, size],
        ).fetchall()

    def service_counts(self) -> list[tuple[str, int]]:
        """(service, count) by count desc then name: what a `terms` aggregation on service counts."""
        return self._db.execute(
            "SELECT service, count(*) AS c FROM docs GROUP BY service ORDER BY c DESC, service"
        ).fetchall()

    def service_counts_and_days(self) -> tuple[list[tuple[str, int]], list[tuple[int, int]]]:
        """(service, count) by count desc then name, and (UTC day start in ms, count) by day: what a
        `terms` and a daily `date_histogram` aggregation over every document count."""
        services = self.service_counts()
        days = self._db.execute(
            "SELECT ts - ts % 86400000 AS day, count(*) FROM docs GROUP BY day ORDER BY day"
        ).fetchall()
        return services, days

    def walk(self, size: int, match: tuple[str, str] | None = None) -> int:
        """Read every row by keyset pages of `size`; the number of rows read."""
        after, seen = TOP, 0
        while page := self.keyset_page(after, size, match):
            seen += len(page)
            after = page[-1][:2]
        return seen

    def scan(self, batch: int, share: int = 0, shares: int = 1) -> int:
        """Read every row into Python in storage order, as an export would; or only the `share`-th
        of `shares` equal rowid ranges, as one of `shares` readers exporting together would."""
        last = self._db.execute("SELECT max(rowid) FROM docs").fetchone()[0] or 0
        cursor = self._db.execute(
            f"SELECT {COLUMNS} FROM docs WHERE rowid > ? AND rowid <= ?",
            [share * last // shares, (share + 1) * last // shares],
        )
        seen = 0
        while rows := cursor.fetchmany(batch):
            seen += len(rows)
        return seen

    def close(self) -> None:
        self._db.close()
