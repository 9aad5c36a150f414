"""Sliced scroll (SPEC 4.2) as Elasticsearch's SliceBuilder, TermsSliceQuery and DocValuesSliceQuery
split it: slices go to shards first (numbered by shard, then index name), then inside a shard by a
hash of the `_id` or of a numeric field. Expected slices are computed here independently, in plain
Python, from Elasticsearch's definitions (murmur3 x86_32 with seed 7919 over `Uid.encodeId`, HPPC's
`BitMixer.mix` over Lucene's sortable longs).
"""

from __future__ import annotations

import base64
import struct
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import mmh3
import numpy as np
import orjson
import pytest
from elasticsearch import Elasticsearch, helpers
from hypothesis import given, settings
from hypothesis import strategies as st
from inprocess import search

from leafsearch import Node
from leafsearch.index import derived_files, uid
from leafsearch.indices import admin
from leafsearch.search import slicing
from leafsearch.testing import Server
from tests import web
from tests.server_zygote import SERVER_ZYGOTE

_M64 = (1 << 64) - 1


def scroll_ids(http: httpx.Client, index: str, body: dict[str, Any]) -> list[str]:
    """The `_id`s of a whole scroll, in the order returned; the context is cleared afterwards."""
    response = http.post(f"/{index}/_search", params={"scroll": "1m"}, json={"size": 7, **body})
    assert response.status_code == 200, response.text
    batch = response.json()
    ids: list[str] = []
    while batch["hits"]["hits"]:
        ids += [hit["_id"] for hit in batch["hits"]["hits"]]
        batch = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": batch["_scroll_id"]}).json()
    http.delete(f"/_search/scroll/{batch['_scroll_id']}")
    return ids


def sliced(http: httpx.Client, index: str, slice_id: int, max_slices: int, **extra: Any) -> set[str]:
    ids = scroll_ids(http, index, {"slice": {"id": slice_id, "max": max_slices, **extra}, "sort": ["_doc"]})
    assert len(ids) == len(set(ids))
    return set(ids)


def root_cause(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    return response.status_code, body["error"]["root_cause"][0]["reason"]


# ---- Elasticsearch's definitions, in plain Python --------------------------------------------


def encode_id(doc_id: str) -> bytes:
    """Uid.encodeId: packed digits, url-safe base64 decoded, or 0xff + UTF-8."""
    if doc_id.isascii() and doc_id.isdigit():
        digits = [int(c) for c in doc_id] + ([15] if len(doc_id) % 2 else [])
        return bytes([0xFE]) + bytes(a << 4 | b for a, b in zip(digits[::2], digits[1::2], strict=True))
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    last_ok = {0: True, 1: False, 2: doc_id[-1] in "AQgw", 3: doc_id[-1] in "AEIMQUYcgkosw048"}
    if last_ok[len(doc_id) % 4] and set(doc_id) <= alphabet:
        raw = base64.urlsafe_b64decode(doc_id + "=" * (-len(doc_id) % 4))
        return bytes([0xFD]) + raw if raw[0] >= 0xFD else raw
    return bytes([0xFF]) + doc_id.encode()


def id_slice(doc_id: str, max_slices: int) -> int:
    return mmh3.hash(encode_id(doc_id), 7919, signed=True) % max_slices


def bit_mixer_mix(value: int) -> int:
    """HPPC BitMixer.mix(long): (int) mix64(value)."""
    z = value & _M64
    z = ((z ^ (z >> 32)) * 0x4CD6944C5CC20B6D) & _M64
    z = ((z ^ (z >> 29)) * 0xFC12C5B19D3259E9) & _M64
    z = (z ^ (z >> 32)) & 0xFFFFFFFF
    return z - (1 << 32) if z >= 1 << 31 else z


def sortable_long(value: Any, field_type: str) -> int:
    """The long Lucene keeps in doc values for a value of the field type."""
    if field_type == "double":
        bits = struct.unpack("<q", struct.pack("<d", value))[0]
        return bits ^ ((bits >> 63) & 0x7FFFFFFFFFFFFFFF)
    if field_type == "float":
        bits = struct.unpack("<i", struct.pack("<f", value))[0]
        return bits ^ ((bits >> 31) & 0x7FFFFFFF)
    if field_type == "half_float":
        bits = struct.unpack("<h", struct.pack("<e", value))[0]
        return bits ^ ((bits >> 15) & 0x7FFF)
    if field_type == "date":
        return int(datetime.fromisoformat(value).astimezone(UTC).timestamp() * 1000)
    if field_type == "boolean":
        return int(value)
    return int(value)


def field_slice(values: list[Any], field_type: str, max_slices: int) -> int:
    """A document's slice: the mix of its first (smallest) value; no value counts as hash 0."""
    if not values:
        return 0
    return bit_mixer_mix(sortable_long(min(values), field_type)) % max_slices


# ---- Elasticsearch's conformance test ---------------------------------------------------------


def test_elasticsearch_sliced_scroll_yaml(http: httpx.Client, new_index: Callable[..., str]) -> None:
    """rest-api-spec scroll/12_slices.yml: 5 shards, 5 routing shards, ids 1..4, 2 slices."""
    index = new_index(
        settings={"number_of_shards": 5, "number_of_routing_shards": 5},
        mappings={"properties": {"foo": {"type": "long"}}},
    )
    for i in range(1, 5):
        http.put(f"/{index}/_doc/{i}", json={"foo": i})
    http.post(f"/{index}/_refresh")
    slice0 = http.post(
        f"/{index}/_search",
        params={"scroll": "1m", "sort": "foo", "rest_total_hits_as_int": "true"},
        json={"slice": {"id": "0", "max": 2}, "query": {"match_all": {}}},
    ).json()
    assert slice0["hits"]["total"] == 3
    assert [hit["_id"] for hit in slice0["hits"]["hits"]] == ["2", "3", "4"]
    slice1 = scroll_ids(http, index, {"slice": {"id": 1, "max": 2}, "sort": ["foo"]})
    assert slice1 == ["1"]
    by_field = http.post(
        f"/{index}/_search",
        params={"scroll": "1m", "sort": "foo", "rest_total_hits_as_int": "true"},
        json={"slice": {"field": "foo", "id": "0", "max": 2}},
    ).json()
    assert by_field["hits"]["total"] == 3
    http.delete("/_search/scroll/_all")


# ---- shard assignment -------------------------------------------------------------------------


@pytest.fixture
def two_shards(es: Elasticsearch, new_index: Callable[..., str]) -> str:
    index = new_index(settings={"number_of_shards": 2}, mappings={"properties": {"n": {"type": "long"}}})
    helpers.bulk(
        es, ({"_index": index, "_id": str(i), "_source": {"n": i}} for i in range(120)), refresh=True
    )
    return index


def test_slices_go_to_shards_first(http: httpx.Client, two_shards: str) -> None:
    # As many slices as shards: slice i is shard i, whole.
    shard = [sliced(http, two_shards, i, 2) for i in range(2)]
    assert shard[0] and shard[1] and not shard[0] & shard[1]
    assert shard[0] | shard[1] == {str(i) for i in range(120)}
    # 4 slices on 2 shards: 0 and 2 split the first shard, 1 and 3 the second.
    quarters = [sliced(http, two_shards, i, 4) for i in range(4)]
    assert quarters[0] | quarters[2] == shard[0] and not quarters[0] & quarters[2]
    assert quarters[1] | quarters[3] == shard[1] and not quarters[1] & quarters[3]
    # Inside a shard, slice i of 4 is sub-slice i // 2 of 2 by the id hash.
    assert quarters[0] == {d for d in shard[0] if id_slice(d, 2) == 0}
    assert quarters[3] == {d for d in shard[1] if id_slice(d, 2) == 1}
    # 3 slices on 2 shards: shard 0 holds slices 0 and 2, shard 1 only slice 1 (whole).
    thirds = [sliced(http, two_shards, i, 3) for i in range(3)]
    assert thirds[1] == shard[1]
    assert thirds[0] == {d for d in shard[0] if id_slice(d, 2) == 0}


def test_fewer_slices_than_shards_take_whole_shards(http: httpx.Client, es: Elasticsearch, new_index) -> None:
    index = new_index(settings={"number_of_shards": 5})
    helpers.bulk(es, ({"_index": index, "_id": str(i), "_source": {}} for i in range(60)), refresh=True)
    shards = [sliced(http, index, i, 5) for i in range(5)]
    assert sliced(http, index, 0, 2) == shards[0] | shards[2] | shards[4]
    assert sliced(http, index, 1, 2) == shards[1] | shards[3]


def test_shards_of_several_indices_are_numbered_by_shard_then_index(
    http: httpx.Client, es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    a, b = (
        new_index(settings={"number_of_shards": 2}, suffix="-a"),
        new_index(settings={"number_of_shards": 2}, suffix="-b"),
    )
    for index in (a, b):
        helpers.bulk(
            es, ({"_index": index, "_id": f"{index[-1]}{i}", "_source": {}} for i in range(40)), refresh=True
        )
    a_shards = [sliced(http, a, i, 2) for i in range(2)]
    b_shards = [sliced(http, b, i, 2) for i in range(2)]
    both = f"{b},{a}"
    assert [sliced(http, both, i, 4) for i in range(4)] == [
        a_shards[0],
        b_shards[0],
        a_shards[1],
        b_shards[1],
    ]


# ---- the hash inside a shard ----------------------------------------------------------------


def test_id_hash_is_murmur3_of_the_encoded_id(http: httpx.Client, es: Elasticsearch, new_index) -> None:
    index = new_index(settings={"number_of_shards": 1})
    ids = [str(i) for i in range(40)] + ["abcd", "AQID", "xyz-_Q", "hello world", "été", "0042", "-1"]
    helpers.bulk(es, ({"_index": index, "_id": d, "_source": {}} for d in ids), refresh=True)
    for max_slices in (2, 3, 7):
        for slice_id in range(max_slices):
            assert sliced(http, index, slice_id, max_slices) == {
                d for d in ids if id_slice(d, max_slices) == slice_id
            }
    # `_id` as the field is the default split.
    assert sliced(http, index, 1, 3, field="_id") == sliced(http, index, 1, 3)


_BASE64_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_IDS = st.one_of(
    st.text(alphabet="0123456789", min_size=1, max_size=40),
    st.text(alphabet=_BASE64_CHARS, min_size=1, max_size=40),
    st.text(alphabet=_BASE64_CHARS, min_size=1, max_size=6).map(lambda s: "_" + s),  # decodes to >= 0xfd
    st.text(alphabet="0123456789-_aQw ", min_size=1, max_size=12),
    # Any text a JSON id can carry: no lone surrogate (not UTF-8), no NUL (numpy strips it).
    st.text(
        alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=30
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_IDS, min_size=1, max_size=40))
def test_segment_id_hashes_equal_elasticsearch_definition(ids: list[str]) -> None:
    """The vectorized hash over a segment's id terms (numpy byte matrices) gives, for every kind
    of id (packed digits, url-safe base64 with and without the 0xfd escape, UTF-8), the value of
    murmur3 over Uid.encodeId computed one id at a time."""
    terms = np.array([d.encode() for d in ids], dtype=np.bytes_)
    want = [mmh3.hash(encode_id(d), 7919, signed=True) for d in ids]
    assert uid.slice_hashes(terms).tolist() == want


def test_segment_id_hashes_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [str(i) for i in range(50)] + [f"id-{i}" for i in range(50)] + ["AQID", "été"]
    monkeypatch.setattr(uid, "_CHUNK", 7)
    terms = np.array([d.encode() for d in ids], dtype=np.bytes_)
    assert uid.slice_hashes(terms).tolist() == [mmh3.hash(encode_id(d), 7919, signed=True) for d in ids]


@pytest.mark.parametrize(
    ("field_type", "values"),
    [
        ("long", [0, 1, -1, 7, 2**40, -(2**62), 12345, 99, None, [5, 3], [-8, 100]]),
        ("integer", [0, 1, -1, 7, 2**30, 12, 13, 14, None, [4, 2]]),
        ("double", [0.0, -0.0, 1.5, -2.25, 1e300, 3.14159, 2.0, None, [7.5, -1.0]]),
        ("float", [0.0, 1.5, -2.25, 3.14159, 1e30, 2.0, 0.1, None]),
        ("half_float", [0.0, 1.5, -2.25, 3.14, 100.0, 0.1, None]),
        (
            "date",
            ["2024-01-01T00:00:00+00:00", "1999-12-31T23:59:59.123+00:00", "2030-06-15T12:00:00+00:00", None],
        ),
        ("boolean", [True, False, None]),
    ],
)
def test_field_hash_is_bit_mixer_of_the_sortable_long(
    http: httpx.Client, es: Elasticsearch, new_index: Callable[..., str], field_type: str, values: list[Any]
) -> None:
    index = new_index(settings={"number_of_shards": 1}, mappings={"properties": {"f": {"type": field_type}}})
    docs = {f"d{i}": value for i, value in enumerate(values * 3)}
    helpers.bulk(
        es,
        ({"_index": index, "_id": d, "_source": {} if v is None else {"f": v}} for d, v in docs.items()),
        refresh=True,
    )
    for max_slices in (2, 5):
        expected = {s: set() for s in range(max_slices)}
        for d, v in docs.items():
            as_list = [] if v is None else v if isinstance(v, list) else [v]
            expected[field_slice(as_list, field_type, max_slices)].add(d)
        assert [sliced(http, index, s, max_slices, field="f") for s in range(max_slices)] == [
            expected[s] for s in range(max_slices)
        ]


# ---- refusals ---------------------------------------------------------------------------------


def test_slice_refusals(http: httpx.Client, es: Elasticsearch, new_index: Callable[..., str]) -> None:
    index = new_index(
        settings={"number_of_shards": 1},
        mappings={
            "properties": {
                "n": {"type": "long"},
                "k": {"type": "keyword"},
                "t": {"type": "text"},
                "nodv": {"type": "long", "doc_values": False},
            }
        },
    )
    es.index(index=index, id="1", document={"n": 1, "k": "a"}, refresh=True)

    def search(slice_: dict[str, Any], params: dict[str, str] | None = None) -> httpx.Response:
        return http.post(
            f"/{index}/_search", params={"scroll": "1m"} if params is None else params, json={"slice": slice_}
        )

    assert root_cause(search({"id": 0, "max": 1025})) == (
        400,
        "The number of slices [1025] is too large. It must be less than [1024]. This limit can be set by "
        "changing the [index.max_slices_per_scroll] index level setting.",
    )
    es.indices.put_settings(index=index, settings={"index.max_slices_per_scroll": 1025})
    assert search({"id": 0, "max": 1025}).status_code == 200
    for slice_, reason in (
        ({"id": 2, "max": 2}, "max must be greater than id"),
        ({"id": 0, "max": 1}, "max must be greater than 1"),
        ({"id": -1, "max": 2}, "id must be greater than or equal to 0"),
    ):
        refused = search(slice_)
        assert refused.status_code == 400 and reason in refused.text
    for field in ("k", "t", "nodv"):
        assert root_cause(search({"id": 0, "max": 2, "field": field})) == (
            400,
            f"cannot load numeric doc values on {field}",
        )
    assert root_cause(search({"id": 0, "max": 2, "field": "nope"})) == (400, "field nope not found")
    assert root_cause(search({"id": 0, "max": 2}, params={})) == (
        400,
        "Validation Failed: 1: [slice] can only be used with [scroll] or [point-in-time] requests;",
    )
    pit_id = http.post(f"/{index}/_pit", params={"keep_alive": "1m"}).json()["id"]
    by_id = http.post("/_search", json={"pit": {"id": pit_id}, "slice": {"id": 0, "max": 2, "field": "_id"}})
    assert root_cause(by_id) == (400, "cannot slice on [_id] when using [point-in-time]")
    http.request("DELETE", "/_pit", json={"id": pit_id})
    http.delete("/_search/scroll/_all")


# ---- union and disjointness on the sorted (match list) path -----------------------------------


def test_sorted_sliced_scrolls_with_a_query_and_deletes(
    http: httpx.Client, es: Elasticsearch, new_index
) -> None:
    index = new_index(settings={"number_of_shards": 3}, mappings={"properties": {"n": {"type": "long"}}})
    helpers.bulk(
        es, ({"_index": index, "_id": str(i), "_source": {"n": i}} for i in range(300)), refresh=True
    )
    helpers.bulk(
        es, ({"_op_type": "delete", "_index": index, "_id": str(i)} for i in range(0, 300, 7)), refresh=True
    )
    body = {"query": {"range": {"n": {"gte": 50}}}, "sort": [{"n": "desc"}]}
    whole = scroll_ids(http, index, body)
    for field in (None, "n"):
        extra = {} if field is None else {"field": field}
        parts = [scroll_ids(http, index, {**body, "slice": {"id": i, "max": 4, **extra}}) for i in range(4)]
        for part in parts:  # each slice keeps the requested order
            assert [int(d) for d in part] == sorted((int(d) for d in part), reverse=True)
        assert sorted(d for part in parts for d in part) == sorted(whole)


def test_concurrent_sliced_scrolls_of_one_snapshot_hold_exactly_their_slices(
    server: str, es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    """Slices of 2 and of 4 (six selections of one snapshot, more than it keeps: some are dropped
    and built again while others are read) scrolled by six clients at once, twice, over segments
    with deletes: each holds exactly the live documents of its ids' hash, once."""
    index = new_index(settings={"number_of_shards": 1})
    for part in range(3):  # three segments
        docs = range(part * 400, part * 400 + 400)
        helpers.bulk(es, ({"_index": index, "_id": f"d{i}", "_source": {"n": i}} for i in docs), refresh=True)
    gone = range(0, 1200, 9)
    helpers.bulk(es, ({"_op_type": "delete", "_index": index, "_id": f"d{i}"} for i in gone), refresh=True)
    live = {f"d{i}" for i in range(1200)} - {f"d{i}" for i in gone}
    slices = [(s, count) for count in (2, 4) for s in range(count)]

    def read(spec: tuple[int, int]) -> set[str]:
        with web.Client(base_url=server, timeout=60) as client:
            return sliced(client, index, *spec)

    for _ in range(2):
        with ThreadPoolExecutor(len(slices)) as readers:
            found = list(readers.map(read, slices))
        for (slice_id, count), ids in zip(slices, found, strict=True):
            assert ids == {d for d in live if id_slice(d, count) == slice_id}


# ---- cost: a segment is partitioned once ---------------------------------------------------------


def test_a_segment_is_hashed_once_for_every_request_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = slicing._hashes

    def counting(segment, field, field_type):
        calls.append(segment.max_doc)
        return real(segment, field, field_type)

    monkeypatch.setattr(slicing, "_hashes", counting)
    with Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "t", {"settings": {"number_of_shards": 1}})
        lines = b"".join(b'{"index":{"_id":"%d"}}\n{"n":%d}\n' % (i, i) for i in range(500))
        node.bulk(lines, index="t", refresh="true")
        seen = set()
        for slice_id in range(4):
            for sort in (["_doc"], ["n"]):
                body = {"slice": {"id": slice_id, "max": 4}, "sort": sort, "size": 1000}
                first = search(node, "t", body, {"scroll": "1m"})
                seen |= {hit["_id"] for hit in first["hits"]["hits"]}
                node.clear_scroll([first["_scroll_id"]])
        assert len(seen) == 500
        assert calls == [500]


def test_a_segments_id_partition_is_kept_as_a_file_every_process_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first sliced scroll on a segment hashes its ids and writes `slices-<n>.order`; a
    process that has not partitioned it (here: the in-memory cache emptied) maps the file, the
    same slices, with no hashing; a damaged file is derived and written again."""
    monkeypatch.setattr(derived_files, "MIN_DOCS", 0)
    with Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "t", {})
        node.bulk(b"".join(b'{"index":{"_id":"d%d"}}\n{"n":%d}\n' % (i, i) for i in range(500)), index="t")
        node.indices["t"].refresh()
        searcher = node.indices["t"].shards[0].acquire_searcher()
        try:
            segment = searcher.views[0].segment
            built = slicing._partition(segment, None, None, 3)
            path = segment.folder / "slices-3.order"
            assert path.exists()
            ids = segment.id_terms[np.asarray(segment.id_rank)].astype(str)
            assert all(id_slice(i, 3) == s for s in range(3) for i in ids[built.docs(s)])
            assert sum(len(built.docs(s)) for s in range(3)) == 500
            slicing._partitions.clear()

            def no_hashing(*_: object) -> None:
                raise AssertionError("hashed again")

            with monkeypatch.context() as patched:
                patched.setattr(slicing, "_hashes", no_hashing)
                mapped = slicing._partition(segment, None, None, 3)
            assert [list(mapped.docs(s)) for s in range(3)] == [list(built.docs(s)) for s in range(3)]
            path.write_bytes(path.read_bytes()[:-8])  # truncated: taken for absent
            slicing._partitions.clear()
            again = slicing._partition(segment, None, None, 3)
            assert [list(again.docs(s)) for s in range(3)] == [list(built.docs(s)) for s in range(3)]
            assert derived_files.read(path) is not None  # written whole again
        finally:
            searcher.release()


# ---- large segments (sources in the hash layout) under writes, merges and a restart ----------


_NDJSON = {"content-type": "application/x-ndjson"}


def _sliced_sources(client: httpx.Client, index: str, slice_id: int, count: int) -> dict[str, bytes]:
    """A `_doc` scroll of one slice: each `_id` and its source as received."""
    body = {"slice": {"id": slice_id, "max": count}, "sort": ["_doc"], "size": 500}
    batch = client.post(f"/{index}/_search", params={"scroll": "1m"}, json=body).json()
    found: dict[str, bytes] = {}
    while batch["hits"]["hits"]:
        for hit in batch["hits"]["hits"]:
            assert hit["_id"] not in found
            found[hit["_id"]] = orjson.dumps(hit["_source"])
        batch = client.post("/_search/scroll", json={"scroll": "1m", "scroll_id": batch["_scroll_id"]}).json()
    client.delete(f"/_search/scroll/{batch['_scroll_id']}")
    return found


def _check_slices(client: httpx.Client, index: str, stable: dict[str, bytes]) -> None:
    """2, 3 and 4 slices: each holds only its ids' hash's documents, the stable documents with
    their sources, and every stable document is in one."""
    for count in (2, 3, 4):
        parts = [_sliced_sources(client, index, s, count) for s in range(count)]
        for s, part in enumerate(parts):
            assert all(id_slice(doc_id, count) == s for doc_id in part)
            assert all(part[doc_id] == source for doc_id, source in stable.items() if doc_id in part)
        assert sum(len(p.keys() & stable.keys()) for p in parts) == len(stable)


def test_hash_slices_of_large_segments_under_writes_merges_and_a_restart(tmp_path: Path) -> None:
    """Segments of thousands of documents keep their sources grouped by the bucket of the id's
    hash (index/source_blocks.py): sliced scrolls over them, while two clients add and delete
    documents with refreshes and force merges (which write new segments in that layout), hold
    exactly their slice's documents with the sources indexed, and again after a restart."""
    n = 3000
    stable = {f"d{i}": orjson.dumps({"n": i, "msg": f"message {i % 97} of {i}"}) for i in range(n)}
    lines = b"".join(b'{"index":{"_id":"%s"}}\n%s\n' % (k.encode(), v) for k, v in stable.items())
    stop = threading.Event()
    errors: list[str] = []

    def write(url: str, offset: int) -> None:
        with web.Client(base_url=url, timeout=60) as client:
            i = 0
            while not stop.is_set() or i < 3:
                body = b"".join(
                    b'{"index":{"_id":"w%d-%d-%d"}}\n{"n":%d}\n' % (offset, i, j, -j) for j in range(400)
                )
                body += b'{"delete":{"_id":"w%d-%d-5"}}\n' % (offset, i)
                response = client.post("/t/_bulk", content=body, headers=_NDJSON)
                if response.status_code != 200 or response.json()["errors"]:
                    errors.append(response.text[:500])
                client.post("/t/_refresh")
                if i % 3 == 2:
                    client.post("/t/_forcemerge", params={"max_num_segments": 1})
                i += 1

    with (
        Server(tmp_path / "data", popen=SERVER_ZYGOTE.popen) as server,
        web.Client(base_url=server.url, timeout=60) as client,
    ):
        client.put("/t", json={"settings": {"number_of_shards": 1}})
        response = client.post("/t/_bulk", params={"refresh": "true"}, content=lines, headers=_NDJSON)
        assert response.status_code == 200 and not response.json()["errors"]
        writers = [threading.Thread(target=write, args=(server.url, o)) for o in range(2)]
        for writer in writers:
            writer.start()
        try:
            _check_slices(client, "t", stable)
        finally:
            stop.set()
            for writer in writers:
                writer.join()
        assert errors == []
        client.post("/t/_forcemerge", params={"max_num_segments": 1})
        total = client.get("/t/_count").json()["count"]
    with (
        Server(tmp_path / "data", popen=SERVER_ZYGOTE.popen) as server,
        web.Client(base_url=server.url, timeout=60) as client,
    ):
        _check_slices(client, "t", stable)
        parts = [_sliced_sources(client, "t", s, 2) for s in range(2)]
        assert len(parts[0]) + len(parts[1]) == total


def test_a_sliced_scroll_gathers_its_live_documents_once_per_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sliced `_doc` scroll finds each segment's live documents of its slice once for its
    snapshot, not once a batch, over segments without deletes and with them; its batches hold
    exactly the slice's live documents, and a scroll opened after more deletes (a new snapshot)
    holds its own."""
    gathered: list[int] = []
    real = slicing._Partition.docs

    def counting(self: slicing._Partition, slice_id: int) -> np.ndarray:
        gathered.append(slice_id)
        return real(self, slice_id)

    def walk(node: Node, slice_id: int) -> list[str]:
        body = {"slice": {"id": slice_id, "max": 2}, "sort": ["_doc"], "size": 20}
        batch = search(node, "t", body, {"scroll": "1m"})
        found = []
        while batch["hits"]["hits"]:
            found += [hit["_id"] for hit in batch["hits"]["hits"]]
            batch = node.scroll(batch["_scroll_id"], "1m")
        node.clear_scroll([batch["_scroll_id"]])
        return found

    monkeypatch.setattr(slicing._Partition, "docs", counting)
    with Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "t", {"settings": {"number_of_shards": 1}})
        for part in range(3):  # three segments
            lines = b"".join(
                b'{"index":{"_id":"d%d"}}\n{"n":%d}\n' % (i, i) for i in range(part * 300, part * 300 + 300)
            )
            node.bulk(lines, index="t", refresh="true")
        live = {f"d{i}" for i in range(900)}
        for step in (None, 7, 5):
            if step is not None:
                gone = b"".join(b'{"delete":{"_id":"d%d"}}\n' % i for i in range(0, 900, step))
                node.bulk(gone, index="t", refresh="true")
                live -= {f"d{i}" for i in range(0, 900, step)}
            for slice_id in range(2):
                gathered.clear()
                found = walk(node, slice_id)
                assert len(found) > 200  # (more than 10 batches)
                assert sorted(found) == sorted(d for d in live if id_slice(d, 2) == slice_id)
                assert gathered == [slice_id] * 3
