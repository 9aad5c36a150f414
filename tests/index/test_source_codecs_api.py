"""Through the HTTP API: `index.codec` as Elasticsearch has it. An index of each codec (`default`:
LZ4 source blocks, `best_compression`: zstd) gives every `_source` back as it was sent, byte for
byte, to get, search, scroll, sliced scroll, a PIT walk and `_export`, while clients write and
refresh beside and the index merges (leafsearch has no `_forcemerge`: its merges run on their
own, here after ten refreshes); a restarted node reads both; the setting is static, validated as
Elasticsearch validates it, carried by templates, and a change made while the index is closed
applies to its new segments (a merge compresses the older ones again)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import httpx
import orjson

from tests import web
from tests.concurrency import readers_beside_writers, wait_for
from tests.conftest import running_server

NDJSON = {"content-type": "application/x-ndjson"}
#: Each index's first documents: two shards of 3,000, segments in the hash layout.
FIRST = 6000
WRITERS, PER_WRITER, BULK = 2, 1500, 150
INDICES = {"fast": None, "small": "best_compression"}


def source(i: int) -> bytes:
    """A source whose bytes a decode and encode would change (spaces, an escape, key order)."""
    return b'{"n": %d,  "msg" : "w%d caf\\u00e9",  "z":{"b":%d}, "a": "%s"}' % (
        i,
        i % 97,
        i % 5,
        b"x" * (i % 40),
    )


def bulk(http: httpx.Client, index: str, lines: list[bytes], refresh: str = "false") -> None:
    response = http.post(f"/{index}/_bulk?refresh={refresh}", content=b"".join(lines), headers=NDJSON)
    assert response.status_code == 200 and response.json()["errors"] is False, response.text[:500]


def index_lines(ids: range) -> list[bytes]:
    return [b'{"index":{"_id":"%d"}}\n%s\n' % (i, source(i)) for i in ids]


def as_sent(content: bytes, hits: list[dict]) -> None:
    """Each hit's `_source` in `content` is the bytes its document was sent with, in order."""
    at = 0
    for hit in hits:
        raw = b'"_source":' + source(int(hit["_id"]))
        found = content.find(raw, at)
        assert found >= 0, (hit["_id"], content[at : at + 300])
        at = found + len(raw)


def checked(page: httpx.Response, ids: list[str]) -> list[dict]:
    """A page's hits, their sources checked as sent, their ids added to `ids`."""
    assert page.status_code == 200, page.text[:500]
    hits = page.json()["hits"]["hits"]
    as_sent(page.content, hits)
    ids += [h["_id"] for h in hits]
    return hits


def scroll(http: httpx.Client, index: str, body: dict) -> list[str]:
    """Every page of a scroll: the ids, in order."""
    page = http.post(f"/{index}/_search?scroll=1m", json={"size": 700, **body})
    ids: list[str] = []
    while checked(page, ids):
        page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": page.json()["_scroll_id"]})
    http.request("DELETE", "/_search/scroll", json={"scroll_id": page.json()["_scroll_id"]})
    return ids


def pit_walk(http: httpx.Client, index: str) -> list[str]:
    """Every page of a PIT walk by `n` descending: the ids, in order."""
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    ids: list[str] = []
    body: dict = {"size": 900, "pit": {"id": pit, "keep_alive": "1m"}, "sort": [{"n": "desc"}]}
    while hits := checked(http.post("/_search", json=body), ids):
        body["search_after"] = hits[-1]["sort"]
    http.request("DELETE", "/_pit", json={"id": pit})
    return ids


def export(http: httpx.Client, index: str) -> list[str]:
    response = http.post(f"/{index}/_export", json={"sort": [{"n": "asc"}]})
    assert response.status_code == 200, response.text[:500]
    lines = response.content.splitlines()
    assert orjson.loads(lines[-1])["_export"]["complete"] is True
    hits = [orjson.loads(line) for line in lines[:-1]]
    as_sent(response.content, hits)
    return [h["_id"] for h in hits]


def read_all(http: httpx.Client, index: str) -> list[set[str]]:
    """The ids every reader gives (each checking the sources it reads): a `_doc` scroll, a
    sorted one, each slice of 2 and of 3 together, a PIT walk, `_export`."""
    sliced = [
        [i for s in range(count) for i in scroll(http, index, {"slice": {"id": s, "max": count}})]
        for count in (2, 3)
    ]
    walks = [scroll(http, index, {"sort": ["_doc"]}), scroll(http, index, {"sort": [{"n": "asc"}]}), *sliced]
    walks += [pit_walk(http, index), export(http, index)]
    for walk in walks:
        assert len(walk) == len(set(walk))
    return [set(walk) for walk in walks]


def spot_reads(http: httpx.Client, index: str, ids: list[int]) -> None:
    """Get, `_source`, mget and a search page by `n` (scattered hits) give the bytes as sent."""
    for i in ids[:: max(1, len(ids) // 25)]:
        assert http.get(f"/{index}/_source/{i}").content == source(i)
        got = http.get(f"/{index}/_doc/{i}")
        as_sent(got.content, [got.json()])
    docs = http.post(f"/{index}/_mget", json={"ids": [str(i) for i in ids[::97]]})
    as_sent(docs.content, docs.json()["docs"])
    wanted = ids[::37][:200]
    page = http.post(
        f"/{index}/_search", json={"size": 200, "query": {"terms": {"n": wanted}}, "sort": [{"n": "asc"}]}
    )
    assert [int(h["_id"]) for h in page.json()["hits"]["hits"]] == sorted(wanted)
    as_sent(page.content, page.json()["hits"]["hits"])
    body = {"size": 200, "query": {"terms": {"n": wanted}}, "sort": [{"n": "asc"}], "_source": ["z.b", "n"]}
    filtered = http.post(f"/{index}/_search", json=body).json()["hits"]["hits"]
    assert [h["_source"] for h in filtered] == [{"n": i, "z": {"b": i % 5}} for i in sorted(wanted)]


def segment_metas(data: Path, http: httpx.Client, index: str) -> list[dict]:
    """The meta.json of each segment the index searches (`_cat/segments`; a merge's parts are
    deleted once no reader holds them)."""
    uuid = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]
    listed = http.get(f"/_cat/segments/{index}?format=json").json()
    names = {(row["shard"], row["segment"]) for row in listed}
    return [
        orjson.loads((data / "indices" / uuid / shard / segment / "meta.json").read_bytes())
        for shard, segment in sorted(names)
    ]


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def frames_on_disk(data: Path, http: httpx.Client, index: str) -> set[bytes]:
    """The first four bytes of each of the index's segments' source blocks (`_cat/segments`)."""
    uuid = http.get(f"/{index}/_settings").json()[index]["settings"]["index"]["uuid"]
    listed = http.get(f"/_cat/segments/{index}?format=json").json()
    return {
        (data / "indices" / uuid / row["shard"] / row["segment"] / "_source.bin").read_bytes()[:4]
        for row in listed
    }


def merges(http: httpx.Client, index: str) -> int:
    """Merges the index completed."""
    stats = http.get(f"/{index}/_stats/merge").json()
    return stats["indices"][index]["primaries"]["merges"]["total"]


def merged(http: httpx.Client, index: str, count: int) -> None:
    """Wait for the index's merges (run on their own after refreshes) to reach `count`."""
    wait_for(lambda: merges(http, index) >= count, attempts=2400)


def codecs_on_disk(data: Path, http: httpx.Client, index: str) -> set[str | None]:
    return {meta.get("source_codec") for meta in segment_metas(data, http, index)}


def test_each_codec_gives_every_source_as_sent_beside_writes_and_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    expected: dict[str, set[str]] = {}
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=120) as http:
        for name, codec in INDICES.items():
            settings = {"number_of_shards": 2, "refresh_interval": "-1"}
            if codec is not None:
                settings["codec"] = codec
            mappings = {"properties": {"n": {"type": "long"}, "msg": {"type": "text"}}}
            created = http.put(f"/{name}", json={"settings": settings, "mappings": mappings})
            assert created.status_code == 200, created.text
            for at in range(0, FIRST, 2000):
                bulk(http, name, index_lines(range(at, at + 2000)))
            assert http.post(f"/{name}/_refresh").status_code == 200
            expected[name] = {str(i) for i in range(FIRST)}

        def write(w: int) -> None:
            """Each writer: its own ids in both indices, in refreshed bulks (ten segments each: the
            index merges), a delete of an earlier one in each."""
            with web.Client(base_url=url, timeout=120) as client:
                first = FIRST + w * PER_WRITER
                for at in range(first, first + PER_WRITER, BULK):
                    for name in INDICES:
                        lines = index_lines(range(at, at + BULK))
                        lines.append(b'{"delete":{"_id":"%d"}}\n' % (w + at // BULK * 7))
                        bulk(client, name, lines, "true")

        def read() -> None:
            """Beside the writes: a refresh of each index, then each walk's sources as sent, no
            document twice."""
            with web.Client(base_url=url, timeout=120) as client:
                for name in INDICES:
                    assert client.post(f"/{name}/_refresh").status_code == 200
                    read_all(client, name)

        readers_beside_writers([partial(write, w) for w in range(WRITERS)], read)
        for name in INDICES:
            assert http.post(f"/{name}/_refresh").status_code == 200
            merged(http, name, 1)
            gone = {
                str(w + at // BULK * 7)
                for w in range(WRITERS)
                for at in range(FIRST + w * PER_WRITER, FIRST + (w + 1) * PER_WRITER, BULK)
            }
            expected[name] = {str(i) for i in range(FIRST + WRITERS * PER_WRITER)} - gone
            assert all(walk == expected[name] for walk in read_all(http, name))
        assert codecs_on_disk(data, http, "fast") == {"lz4"}
        assert codecs_on_disk(data, http, "small") == {None}  # zstd: no key, as every older segment
        assert frames_on_disk(data, http, "small") == {ZSTD_MAGIC}
        assert ZSTD_MAGIC not in frames_on_disk(data, http, "fast")

    with running_server(data) as (url, _), web.Client(base_url=url, timeout=120) as http:
        for name in INDICES:
            assert all(walk == expected[name] for walk in read_all(http, name))
            spot_reads(http, name, sorted(int(i) for i in expected[name]))


def test_the_setting_is_static_validated_and_carried_by_templates(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, _), web.Client(base_url=url, timeout=60) as http:
        bad = http.put("/bad", json={"settings": {"index.codec": "zip"}})
        assert bad.status_code == 400
        assert bad.json()["error"]["type"] == "illegal_argument_exception"
        assert bad.json()["error"]["reason"] == (
            "unknown value for [index.codec] must be one of [default, best_compression] but was: zip"
        )
        assert http.head("/bad").status_code == 404
        for name, codec in (("plain", None), ("lucene", "lucene_default"), ("small", "best_compression")):
            body = {"settings": {"number_of_shards": 1} | ({"codec": codec} if codec else {})}
            assert http.put(f"/{name}", json=body).status_code == 200
        assert (
            http.get("/small/_settings").json()["small"]["settings"]["index"]["codec"] == "best_compression"
        )
        plain = http.get("/plain/_settings?include_defaults=true").json()["plain"]
        assert "codec" not in plain["settings"]["index"] and plain["defaults"]["index"]["codec"] == "default"
        flat = http.get("/small/_settings/index.codec?flat_settings=true").json()
        assert flat == {"small": {"settings": {"index.codec": "best_compression"}}}

        changed = http.put("/small/_settings", json={"index": {"codec": "default"}})
        assert changed.status_code == 400
        uuid = http.get("/small/_settings").json()["small"]["settings"]["index"]["uuid"]
        assert changed.json()["error"]["reason"] == (
            f"Can't update non dynamic settings [[index.codec]] for open indices [[small/{uuid}]]"
        )
        bad_update = http.put("/plain/_settings", json={"index.codec": "zip"})
        assert bad_update.status_code == 400 and "but was: zip" in bad_update.text

        for name in ("plain", "lucene", "small"):
            bulk(http, name, index_lines(range(0, 1500)))
            assert http.post(f"/{name}/_refresh").status_code == 200
        assert codecs_on_disk(data, http, "plain") == {"lz4"}
        assert codecs_on_disk(data, http, "lucene") == {"lz4"}
        assert codecs_on_disk(data, http, "small") == {None}

        # Changed while closed: the new segments take it; a merge compresses the older ones again.
        assert http.post("/small/_close").status_code == 200
        assert http.put("/small/_settings", json={"index.codec": "default"}).status_code == 200
        assert http.post("/small/_open").status_code == 200
        assert http.get("/small/_settings").json()["small"]["settings"]["index"]["codec"] == "default"
        for at in range(1500, 2400, 100):  # nine segments beside the zstd one: the ten merge
            assert merges(http, "small") == 0
            bulk(http, "small", index_lines(range(at, at + 100)))
            assert http.post("/small/_refresh").status_code == 200
            if at == 1500:
                assert codecs_on_disk(data, http, "small") == {None, "lz4"}
                assert all(walk == {str(i) for i in range(1600)} for walk in read_all(http, "small"))
        merged(http, "small", 1)
        assert http.post("/small/_refresh").status_code == 200  # (a merge is searched from the next refresh)
        assert codecs_on_disk(data, http, "small") == {"lz4"}
        assert len(segment_metas(data, http, "small")) == 1
        assert all(walk == {str(i) for i in range(2400)} for walk in read_all(http, "small"))

        # Synthetic `_source` rebuilt from either codec's stored sources.
        for name, codec in (("synth-fast", "default"), ("synth-small", "best_compression")):
            settings = {"number_of_shards": 1, "codec": codec, "mapping.source.mode": "synthetic"}
            assert http.put(f"/{name}", json={"settings": settings}).status_code == 200
            bulk(http, name, index_lines(range(0, 1200)), "true")
            for i in (0, 7, 640, 1199):
                rebuilt = http.get(f"/{name}/_doc/{i}").json()["_source"]
                assert rebuilt == orjson.loads(source(i)) and list(rebuilt) == sorted(rebuilt)
        assert codecs_on_disk(data, http, "synth-fast") == {"lz4"}
        assert codecs_on_disk(data, http, "synth-small") == {None}

        template = {
            "index_patterns": ["logs-*"],
            "template": {"settings": {"index.codec": "best_compression"}},
        }
        assert http.put("/_index_template/compressed", json=template).status_code == 200
        bulk(http, "logs-1", index_lines(range(0, 1200)))
        assert (
            http.get("/logs-1/_settings").json()["logs-1"]["settings"]["index"]["codec"] == "best_compression"
        )
        assert http.post("/logs-1/_refresh").status_code == 200
        assert codecs_on_disk(data, http, "logs-1") == {None}
        bad_template = {"index_patterns": ["x-*"], "template": {"settings": {"index.codec": "zip"}}}
        refused = http.put("/_index_template/bad", json=bad_template)
        assert refused.status_code == 400 and "but was: zip" in refused.text
