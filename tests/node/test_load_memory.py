"""A server loaded without pause gives its memory back: bulks from several clients with refreshes
beside them, the buffers handed to the search workers and the segments merged by the merge
worker, round after round, against `leafsearch serve` and its processes. Each round writes the
same documents again (the same ids), so the index stays the same size and every round is the
same work: new segments, deletes in the older ones, merges that drop them.

What is read is the anonymous memory of the server and every process below it (`RssAnon`: heaps
and arrays, not the segment files they map, which grow with the index and are the page cache's):
once the first rounds have taken the allocators to their high-water mark, later rounds of the same
work must not add more than a margin. A merge that held its whole segment, a worker that kept a
build's arrays, or a buffer that was never let go would each add a round's worth every round.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from conftest import running_server

from bench.server import tree_memory_kb
from tests import web
from tests.concurrency import writers_beside_refresher

INDEX = "load"
MAPPING = {"properties": {"k": {"type": "keyword"}, "t": {"type": "text"}, "n": {"type": "long"}}}
CLIENTS = 4
#: Documents each client sends a round, in bodies of `BODY_DOCS`.
ROUND_DOCS = 1_500
BODY_DOCS = 500
ROUNDS = 9
#: What the last half of the rounds may add to the processes' anonymous memory together.
MARGIN_KB = 48 * 1024


def _body(start: int, round_: int) -> bytes:
    return b"".join(
        b'{"index":{"_id":"%d"}}\n' % i
        + orjson.dumps({"k": f"k{i % 97}", "t": f"w{i % 1000} w{i % 7} round {round_}", "n": i})
        + b"\n"
        for i in range(start, start + BODY_DOCS)
    )


def test_rounds_of_bulks_refreshes_and_merges_leave_the_processes_memory_bounded(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", "--search-workers", "2") as (url, process),
        web.Client(base_url=url, timeout=120) as http,
    ):
        assert http.put(f"/{INDEX}", json={"mappings": MAPPING}).status_code == 200
        anon: list[int] = []
        for round_ in range(ROUNDS):

            def client(first: int, round_: int = round_) -> None:
                with web.Client(base_url=url, timeout=120) as own:
                    for start in range(first, first + ROUND_DOCS, BODY_DOCS):
                        response = own.post(
                            f"/{INDEX}/_bulk",
                            content=_body(start, round_),
                            headers={"content-type": "application/x-ndjson"},
                        )
                        assert response.status_code == 200 and not response.json()["errors"]

            writers = [lambda first=c * ROUND_DOCS: client(first) for c in range(CLIENTS)]
            refreshes = writers_beside_refresher(
                writers, lambda: http.post(f"/{INDEX}/_refresh").raise_for_status()
            )
            assert refreshes == []
            assert http.post(f"/{INDEX}/_refresh").status_code == 200
            anon.append(tree_memory_kb(process.pid, "RssAnon"))
        assert http.get(f"/{INDEX}/_count").json()["count"] == CLIENTS * ROUND_DOCS
        merges = http.get(f"/{INDEX}/_stats/merge").json()["_all"]["primaries"]["merges"]["total"]
        assert merges > 0  # the rounds' segments were merged as they came
        settled, end = max(anon[ROUNDS // 3 : ROUNDS // 2]), max(anon[ROUNDS // 2 :])
        assert end - settled < MARGIN_KB, [kb // 1024 for kb in anon]
