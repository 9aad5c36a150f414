"""Through the HTTP API: an index whose segments a merge wrote in runs (their compressed source
blocks copied where no document of a group was deleted, index/source_blocks.py) gives every
source back as it was sent, byte for byte, to every reader (get, `_source`, mget, a search's
fetch, `_export`, scroll, reindex) and filters it as before (`_source` includes), while clients
read it during the merge."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import orjson

from leafsearch.index import source_blocks
from tests import web
from tests.conftest import running_server

INDEX = "runs"
#: One segment (below a buffer's 25,000 documents): its first group with a delete (compressed
#: again: 63 documents), then a run of live groups copied, a run deleted (over a third: the
#: segment is merged alone), a run compressed again (too short to copy) and a run with a delete
#: in every group.
LIVE = source_blocks.COPY_MIN_DOCS + 128
DOCS = 3 * LIVE - 768
DELETED = {3} | set(range(LIVE + 64, 2 * LIVE)) | set(range(2 * LIVE + 2000, DOCS, 50))
NDJSON = {"content-type": "application/x-ndjson"}


def source(i: int) -> bytes:
    """A source whose bytes a decode and encode would change (spaces, an escape, key order)."""
    return b'{"n": %d,  "msg" : "w%d caf\\u00e9",  "a":{"b":%d}}' % (i, i % 97, i % 5)


def bulk(http: httpx.Client, lines: list[bytes]) -> None:
    for at in range(0, len(lines), 6000):
        response = http.post(f"/{INDEX}/_bulk", content=b"".join(lines[at : at + 6000]), headers=NDJSON)
        assert response.status_code == 200 and response.json()["errors"] is False, response.text[:500]


def merges(http: httpx.Client) -> int:
    """Merges the index completed."""
    stats = http.get(f"/{INDEX}/_stats/merge").json()
    return stats["indices"][INDEX]["primaries"]["merges"]["total"]


def in_order(content: bytes, sources: list[bytes], key: bytes) -> None:
    """Each source follows `key` in `content`, in this order, as its bytes."""
    at = 0
    for raw in sources:
        found = content.find(key + raw, at)
        assert found >= 0, raw
        at = found + len(key) + len(raw)


def scroll_all(http: httpx.Client, index: str) -> bytes:
    """Every page of a scroll sorted by `n`, end to end."""
    page = http.post(f"/{index}/_search?scroll=1m", json={"size": 2000, "sort": [{"n": "asc"}]})
    pages = []
    while True:
        assert page.status_code == 200, page.text[:500]
        hits = page.json()["hits"]["hits"]
        if not hits:
            break
        pages.append(page.content)
        page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": page.json()["_scroll_id"]})
    http.request("DELETE", "/_search/scroll", json={"scroll_id": page.json()["_scroll_id"]})
    return b"".join(pages)


def test_every_reader_gives_a_merged_in_runs_segments_sources_as_sent(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=120) as http:
        mapping = {"n": {"type": "long"}, "msg": {"type": "text"}}
        settings = {"number_of_shards": 1, "refresh_interval": "-1"}
        created = http.put(f"/{INDEX}", json={"settings": settings, "mappings": {"properties": mapping}})
        assert created.status_code == 200, created.text
        bulk(http, [b'{"index":{"_id":"%d"}}\n%s\n' % (i, source(i)) for i in range(DOCS)])
        assert http.post(f"/{INDEX}/_refresh").status_code == 200
        assert len(http.get(f"/_cat/segments/{INDEX}?format=json").json()) == 1
        bulk(http, [b'{"delete":{"_id":"%d"}}\n' % i for i in sorted(DELETED)])
        kept = [i for i in range(DOCS) if i not in DELETED]
        expected = [source(i) for i in kept]

        failures: list[str] = []
        stop = threading.Event()

        def read() -> None:
            with web.Client(base_url=url, timeout=120) as reader:
                while not stop.is_set():
                    try:
                        in_order(scroll_all(reader, INDEX), expected, b'"_source":')
                    except AssertionError as error:  # pragma: no cover - reported below
                        failures.append(repr(error)[:300])
                        return

        readers = [threading.Thread(target=read) for _ in range(2)]
        for reader in readers:
            reader.start()
        try:
            assert http.post(f"/{INDEX}/_refresh").status_code == 200  # the merge's trigger
            deadline = time.monotonic() + 120
            while merges(http) < 1 and time.monotonic() < deadline and not failures:
                time.sleep(0.1)
            assert merges(http) == 1
        finally:
            stop.set()
            for reader in readers:
                reader.join()
        assert not failures, failures
        metas = [
            orjson.loads(p.read_bytes())
            for p in data.rglob("meta.json")
            if (p.parent / "_source.bin").exists()
        ]
        in_runs = [m for m in metas if m.get("source_runs")]
        assert len(in_runs) == 1 and in_runs[0]["max_doc"] == len(kept), metas
        runs = [p for p in data.rglob("_source.runs.npy")]
        assert len(runs) == 1

        for i in kept[:: len(kept) // 40]:
            assert http.get(f"/{INDEX}/_source/{i}").content == source(i)
            in_order(http.get(f"/{INDEX}/_doc/{i}").content, [source(i)], b'"_source":')
        ids = [str(i) for i in kept[7::500]]
        in_order(
            http.post(f"/{INDEX}/_mget", json={"ids": ids}).content,
            [source(int(i)) for i in ids],
            b'"_source":',
        )
        page = http.post(f"/{INDEX}/_search", json={"size": 1000, "sort": [{"n": "desc"}], "from": 100})
        in_order(page.content, expected[::-1][100:1100], b'"_source":')
        in_order(scroll_all(http, INDEX), expected, b'"_source":')
        exported = http.post(f"/{INDEX}/_export", json={"sort": [{"n": "asc"}]})
        assert exported.status_code == 200
        assert len(exported.content.splitlines()) == len(kept) + 1
        in_order(exported.content, expected, b'"_source":')
        filtered = http.post(
            f"/{INDEX}/_search",
            json={"size": 500, "sort": [{"n": "asc"}], "_source": {"includes": ["a.b", "n"]}},
        )
        assert [h["_source"] for h in filtered.json()["hits"]["hits"]] == [
            {"n": i, "a": {"b": i % 5}} for i in kept[:500]
        ]
        copied = http.post(
            "/_reindex?refresh=true", json={"source": {"index": INDEX}, "dest": {"index": "copy"}}
        )
        assert copied.status_code == 200 and copied.json()["created"] == len(kept), copied.text[:500]
        in_order(scroll_all(http, "copy"), expected, b'"_source":')
