"""Sort orders kept as files beside their segments (index/order_files.py): an order mapped from
its file equals the order computed, and pages served from it equal the full sort's; a torn or
foreign file is ignored and rebuilt; processes writing one file at once leave one whole file;
files go with their segment; search workers build an order once between them and map it after;
a restart maps instead of sorting."""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from collections.abc import Iterator
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import leafsearch
from leafsearch.index import derived_files, order_files, segment
from leafsearch.indices import admin
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import top_hits
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hitlist import build_hitlist
from leafsearch.search.phases import page_bounds
from leafsearch.search.segment_orders import SegmentOrder, SegmentOrders
from leafsearch.search.targets import acquire_targets, release_targets
from leafsearch.search.workers.pool import LONE_REQUESTS_IN_SERVER
from tests.index.order_writer import write_many
from tests.inprocess import search
from tests.search.test_top_hits import MAPPING, random_doc, random_query

BIG = 64 * 1024 * 1024


@pytest.fixture(autouse=True)
def every_segment_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every segment keeps its orders in files (the tests' segments are small)."""
    monkeypatch.setattr(derived_files, "MIN_DOCS", 0)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[leafsearch.Node]:
    rng = random.Random(11)
    with leafsearch.Node(tmp_path_factory.mktemp("orders") / "node", background=False) as node:
        admin.create_index(node, "docs", {"settings": {"number_of_shards": 2}, "mappings": MAPPING})
        for batch in range(5):  # several segments per shard, deletes among them
            lines = []
            for i in range(80):
                lines.append(b'{"index":{"_id":"%d-%d"}}\n' % (batch, i))
                lines.append(orjson.dumps(random_doc(rng)) + b"\n")
            node.bulk(b"".join(lines), index="docs", refresh="true")
            for i in rng.sample(range(80), 9):
                node.delete_doc("docs", f"{batch}-{i}")
        node.indices["docs"].refresh()
        yield node


def field_sort(rng: random.Random) -> list[Any]:
    """A sort by fields only (what segment orders serve), custom `missing` values included."""

    def one() -> dict[str, Any]:
        field = rng.choice(["n", "x", "k", "d"])
        spec: dict[str, Any] = {"order": rng.choice(["asc", "desc"])}
        roll = rng.random()
        if roll < 0.3:
            spec["missing"] = rng.choice(["_first", "_last"])
        elif roll < 0.5:  # a keyword value no document holds adds a term to the column's list
            spec["missing"] = {
                "n": 7,
                "x": -0.5,
                "k": rng.choice(["a", "mm", "zzz"]),
                "d": 1_705_276_800_000,
            }[field]
        if rng.random() < 0.3:
            spec["mode"] = rng.choice(["min", "max"])
        return {field: spec}

    sort = [one() for _ in range(rng.choice([1, 1, 2]))]
    return sort + (["_doc"] if rng.random() < 0.3 else [])


def _orders_of(
    node: leafsearch.Node, targets: list, request: Any, orders: SegmentOrders
) -> list[SegmentOrder]:
    plan = top_hits.sort_plan(request, targets)
    found = []
    for target in targets:
        for view in target.searcher.views:
            order = top_hits.shard_orders(orders, target, plan)[id(view.segment)]
            assert order is not None
            found.append(order)
    return found


def _same(mapped: SegmentOrder, built: SegmentOrder) -> None:
    assert mapped.mapped and not built.mapped
    assert np.array_equal(mapped.order, built.order)
    assert np.array_equal(mapped.rank, built.rank)
    assert len(mapped.keys) == len(built.keys)
    for a, b in zip(mapped.keys, built.keys, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    for a, b in zip(mapped.columns, built.columns, strict=True):
        assert (a.spec, a.kind, a.missing_key, a.field_types) == (
            b.spec,
            b.kind,
            b.missing_key,
            b.field_types,
        )
        assert a.values.dtype == b.values.dtype
        assert (a.present is None) == (b.present is None) and a._flagged() == b._flagged()
        assert (a.terms is None) == (b.terms is None)
        if a.terms is not None:
            assert np.array_equal(np.asarray(a.terms), np.asarray(b.terms))


@pytest.mark.parametrize("seed", range(80))
def test_an_order_mapped_from_its_file_equals_the_order_computed(
    node: leafsearch.Node, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    body: dict[str, Any] = {
        "query": random_query(rng),
        "sort": field_sort(rng),
        "size": rng.choice([1, 5, 30]),
        "from": rng.choice([0, 0, 4]),
    }
    targets = acquire_targets([node.indices["docs"]])
    try:
        request = parse_search_request(body, {})
        writer = SegmentOrders(BIG)
        _orders_of(node, targets, request, writer)  # writes any file still missing
        reader = SegmentOrders(BIG)
        mapped = _orders_of(node, targets, request, reader)
        stats = reader.stats()
        assert (stats["built"], stats["files_mapped"], stats["mapped_count"]) == (0, len(mapped), len(mapped))
        with monkeypatch.context() as m:
            m.setattr(derived_files, "MIN_DOCS", 1 << 40)  # computed, never stored
            built = _orders_of(node, targets, request, SegmentOrders(BIG))
        for a, b in zip(mapped, built, strict=True):
            _same(a, b)
        # The page served from mapped orders is the full sort's.
        monkeypatch.setattr(node.search_services, "sort_orders", reader)
        full = build_hitlist(
            targets, request, now_millis=0, with_aggs=None, guard=SearchGuard(time.monotonic, None)
        )
        shards = top_hits.shard_handles(node.search_services, targets)
        top = top_hits.top_hits(
            node.search_services, targets, request, now_millis=0, aggs=False, shards=shards
        )
        assert _page(top, request) == _page(full, request), body
        assert reader.stats()["built"] == 0
    finally:
        release_targets(targets)


def _page(hits: Any, request: Any) -> list[tuple[int, int]]:
    start, end = page_bounds(hits, request)
    return list(zip(hits.target[start:end].tolist(), hits.doc[start:end].tolist(), strict=True))


def _one_order_file(node: leafsearch.Node, body: dict[str, Any]) -> tuple[list, Any, Path]:
    """(targets, request, the file of the first segment's order), the file written."""
    targets = acquire_targets([node.indices["docs"]])
    request = parse_search_request(body, {})
    _orders_of(node, targets, request, SegmentOrders(BIG))
    view = targets[0].searcher.views[0]
    (path,) = [p for p in view.segment.folder.glob("sort-*.order") if _matches(p, targets, request)]
    return targets, request, path


def _matches(path: Path, targets: list, request: Any) -> bool:
    plan = top_hits.sort_plan(request, targets)
    specs = list(plan.specs)
    seg = targets[0].searcher.views[0].segment
    from leafsearch.search.top_hits import _order_file_name, _type_signature

    types = tuple(_type_signature(targets[0].mapping.field(s.field)) for s in specs)
    return path.name == _order_file_name(seg, specs, tuple(k for k, _ in plan.resolved), types)


@pytest.mark.parametrize("damage", ["truncated", "empty", "trailer", "header", "format", "length", "boot"])
def test_a_torn_or_foreign_file_is_ignored_and_rebuilt(node: leafsearch.Node, damage: str) -> None:
    body = {"sort": [{"k": {"order": "desc", "missing": "mm"}}, {"n": "asc"}], "size": 5}
    targets, request, path = _one_order_file(node, body)
    try:
        whole = path.read_bytes()
        header_length = int.from_bytes(whole[8:16], "little")
        header = orjson.loads(whole[16 : 16 + header_length])
        if damage == "truncated":
            path.write_bytes(whole[: len(whole) // 2])
        elif damage == "empty":
            path.write_bytes(b"")
        elif damage == "trailer":
            path.write_bytes(whole[:-8] + b"\0" * 8)
        elif damage == "header":
            path.write_bytes(whole[:16] + b"{" * header_length + whole[16 + header_length :])
        else:
            if damage == "format":
                header["format"] = derived_files.FORMAT + 1
            elif damage == "boot":  # written unsynced before the machine restarted: maybe torn
                assert header["boot"] == derived_files.boot_id()
                header["boot"] = "00000000-0000-0000-0000-000000000000"
            else:  # the inverse shorter than the order
                header["arrays"][1][2] -= 1
            body_bytes = orjson.dumps(header)
            assert len(body_bytes) <= header_length
            padded = body_bytes + b" " * (header_length - len(body_bytes))
            path.write_bytes(whole[:16] + padded + whole[16 + header_length :])
        assert order_files.read(path) is None
        orders = SegmentOrders(BIG)
        rebuilt = _orders_of(node, targets, request, orders)
        stats = orders.stats()
        assert stats["files_rejected"] == 1 and stats["built"] == 1 and stats["files_written"] == 1
        assert path.read_bytes() == whole  # written again, whole
        again = SegmentOrders(BIG)
        assert all(
            a.order.tolist() == b.order.tolist()
            for a, b in zip(_orders_of(node, targets, request, again), rebuilt, strict=True)
        )
        assert again.stats()["built"] == 0
    finally:
        release_targets(targets)


def test_processes_writing_one_order_file_at_once_leave_one_whole_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 200_000
    keys = rng.integers(0, 1000, n)
    order = np.lexsort((keys,)).astype(np.int32)
    rank = np.empty(n, np.int32)
    rank[order] = np.arange(n, dtype=np.int32)
    np.savez(tmp_path / "source.npz", order=order, rank=rank, key0=keys[order])
    path = tmp_path / "sort-x.order"
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(3)
    writers = [
        context.Process(target=write_many, args=(str(path), str(tmp_path / "source.npz"), 15, start))
        for _ in range(2)
    ]
    for w in writers:
        w.start()
    seen = 0
    start.wait()
    while any(w.is_alive() for w in writers):
        stored = order_files.read(path)  # absent at first, then always whole
        if stored is not None:
            assert np.array_equal(stored.order, order) and np.array_equal(stored.keys[0], keys[order])
            seen += 1
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert seen and order_files.read(path) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sort-x.order", "source.npz"]  # no leftovers


def test_threads_building_one_order_at_once_agree(node: leafsearch.Node) -> None:
    """Threads with their own caches (as processes have) build, write and map one order at once."""
    body = {"sort": [{"x": "desc"}, {"d": {"order": "asc", "missing": "_first"}}], "size": 3}
    targets = acquire_targets([node.indices["docs"]])
    try:
        request = parse_search_request(body, {})
        for p in targets[0].searcher.views[0].segment.folder.glob("sort-*.order"):
            p.unlink()
        results: list[list[SegmentOrder]] = []
        barrier = threading.Barrier(4)

        def build() -> None:
            barrier.wait()
            results.append(_orders_of(node, targets, request, SegmentOrders(BIG)))

        threads = [threading.Thread(target=build) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 4
        for other in results[1:]:
            assert all(np.array_equal(a.order, b.order) for a, b in zip(results[0], other, strict=True))
        assert not list(targets[0].searcher.views[0].segment.folder.glob("sort-*partial*"))
    finally:
        release_targets(targets)


def test_files_go_with_their_segments_and_partial_files_with_a_restart(tmp_path: Path) -> None:
    body = {"sort": [{"n": "desc"}], "size": 3}
    with leafsearch.Node(tmp_path / "n", background=False) as node:
        admin.create_index(node, "logs", {"settings": {"number_of_shards": 1}, "mappings": MAPPING})
        for i in range(40):
            node.index_doc("logs", str(i), orjson.dumps({"n": i}), refresh="true" if i % 10 == 9 else None)
        assert [h["_id"] for h in search(node, "logs", body)["hits"]["hits"]] == ["39", "38", "37"]
        shard = node.indices["logs"].shards[0]
        folders = [s.folder for s in shard.segments]
        assert all(len(list(f.glob("sort-*.order"))) == 1 for f in folders)
        torn = folders[0] / "sort-abc.order.partial-1-ff"
        torn.write_bytes(b"LSORDER")  # a crash mid-write
    with leafsearch.Node(tmp_path / "n", background=False) as node:
        assert not torn.exists()
        hits = search(node, "logs", body)["hits"]["hits"]
        assert [h["_id"] for h in hits] == ["39", "38", "37"]
        stats = node.sort_orders.stats()
        assert (stats["built"], stats["files_mapped"]) == (0, len(folders))  # the restart maps
        shard = node.indices["logs"].shards[0]
        while shard.maybe_merge():
            pass
        node.indices["logs"].refresh()
        assert search(node, "logs", body)["hits"]["total"]["value"] == 40
        assert not any(f.exists() for f in folders if f not in [s.folder for s in shard.segments])
        stats = next(iter(node.nodes_stats(["indices"])["nodes"].values()))["indices"]["sort_orders"]
        assert stats["mapped_count"] >= 1 and stats["mapped_size_in_bytes"] > 0


def test_a_file_written_while_the_segment_is_deleted_goes_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker may write an order file into a segment folder while the server deletes it: the
    file appears after `rmtree` listed the folder, and the folder still goes."""
    folder = tmp_path / "seg_000001"
    folder.mkdir()
    (folder / "meta.json").write_bytes(b"{}")
    real = segment.shutil.rmtree
    calls = []

    def racing(path: Any, ignore_errors: bool = False) -> None:
        calls.append(path)
        real(path, ignore_errors=ignore_errors)
        if len(calls) == 1:  # the writer renames its file in after the listing
            Path(path).mkdir(exist_ok=True)
            (Path(path) / "sort-late.order").write_bytes(b"x")

    monkeypatch.setattr(segment.shutil, "rmtree", racing)
    segment.remove_segment_folder(folder)
    assert not folder.exists() and len(calls) == 2


def _bulk(node: leafsearch.Node, start: int, count: int, refresh: str = "true") -> None:
    lines = b"".join(
        b'{"index":{"_id":"%d"}}\n{"n":%d,"k":"k%d","d":%d}\n' % (i, (i * 7919) % 10_007, i % 13, i)
        for i in range(start, start + count)
    )
    node.bulk(lines, index="t", refresh=refresh)


def _worker_orders(node: leafsearch.Node) -> list[dict[str, int]]:
    assert node.search_workers is not None
    return [w["sort_orders"] for w in node.search_workers.stats()["workers"]]


def test_search_workers_build_an_order_once_and_map_it_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, worker_processes: BaseContext
) -> None:
    """Two workers: the first query on a key builds and writes each large segment's order, the
    other worker maps them (no cold worker); answers equal the server process's own, also while
    clients write, refresh and merge beside the readers."""
    monkeypatch.undo()  # the workers run with the real threshold; these segments exceed it
    with leafsearch.Node(
        tmp_path / "w", background=False, search_workers=2, worker_processes=worker_processes
    ) as node:
        admin.create_index(node, "t", {"settings": {"number_of_shards": 1}})
        _bulk(node, 0, 10_000)
        _bulk(node, 10_000, 9_000)
        assert node.search_workers is not None and node.search_workers.wait_ready(60)
        node.cluster_settings.update({"transient": {LONE_REQUESTS_IN_SERVER: "false"}})  # to the workers
        body = {
            "sort": [{"n": "desc"}, {"k.keyword": "asc"}],
            "size": 20,
            "query": {"range": {"d": {"gte": 500}}},
            "track_total_hits": True,
        }
        answers = [search(node, "t", body) for _ in range(4)]  # idle workers take turns
        stats = _worker_orders(node)
        assert sum(s["built"] for s in stats) == 2  # each large segment once, in one worker
        assert sum(s["files_mapped"] for s in stats) == 2  # ... mapped by the other
        assert all(s["mapped_count"] == 2 for s in stats)
        pool, node.search_services.workers = node.search_services.workers, None
        try:
            here = search(node, "t", body)
        finally:
            node.search_services.workers = pool
        for answer in answers:
            assert answer["hits"] == here["hits"]

        failures: list[BaseException] = []
        done = threading.Event()

        def writer() -> None:
            try:
                for round_ in range(6):
                    _bulk(node, 20_000 + 1_000 * round_, 1_000)
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)
            finally:
                done.set()

        def reader() -> None:
            try:
                while not done.is_set():
                    hits = search(node, "t", body)["hits"]["hits"]
                    keys = [tuple(h["sort"]) for h in hits]
                    assert keys == sorted(keys, key=lambda s: (-s[0], s[1]))
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

        threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        shard = node.indices["t"].shards[0]
        while not done.is_set():  # merges from this thread (the merge process dies with its thread)
            if not shard.maybe_merge():
                done.wait(0.01)
        for t in threads:
            t.join()
        assert not failures, failures
        while shard.maybe_merge():
            pass
        node.indices["t"].refresh()
        via_workers = search(node, "t", body)
        node.search_services.workers = None
        try:
            here = search(node, "t", body)
        finally:
            node.search_services.workers = pool
        assert via_workers["hits"] == here["hits"]
        assert via_workers["hits"]["total"]["value"] == 25_000 - 500


def _postings_pairs(column: Any) -> list[tuple[int, list[int]]]:
    docs, starts = column.postings
    return [(t, docs[starts[t] : starts[t + 1]].tolist()) for t in range(len(column.terms))]


@pytest.mark.parametrize("damage", [None, "truncated", "foreign"])
def test_keyword_postings_mapped_from_their_file_equal_the_postings_computed(
    tmp_path: Path, damage: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Single- and multi-valued keywords, documents without a value: the postings a process maps
    from the file another wrote (or rebuilds, when the file is torn or not postings) are the
    ones it would compute; `term` queries answer the same."""
    rng = random.Random(5)
    with leafsearch.Node(tmp_path / "n", background=False) as node:
        admin.create_index(node, "docs", {"settings": {"number_of_shards": 1}, "mappings": MAPPING})
        lines = []
        for i in range(600):
            lines.append(b'{"index":{"_id":"%d"}}\n' % i)
            lines.append(orjson.dumps(random_doc(rng)) + b"\n")
        node.bulk(b"".join(lines), index="docs", refresh="true")
        counts = {
            t: search(node, "docs", {"query": {"term": {"k": t}}})["hits"]["total"]["value"] for t in "abcz"
        }
        (seg,) = node.indices["docs"].shards[0].segments
        column = seg.column("k")
        path = column.postings_file
        assert (
            path is not None and path.exists() and path.name == f"f{seg.field_meta['k']['number']}.postings"
        )
        written = _postings_pairs(column)
        if damage == "truncated":
            path.write_bytes(path.read_bytes()[:100])
        elif damage == "foreign":  # a whole derived file, but not this column's postings
            derived_files.write(path, {"docs": np.zeros(3, np.int32)}, {"postings": 1})
    with leafsearch.Node(tmp_path / "n", background=False) as node:
        (seg,) = node.indices["docs"].shards[0].segments
        column = seg.column("k")
        if damage is None:
            assert column._stored_postings(path) is not None  # mapped, not computed
        assert _postings_pairs(column) == written
        monkeypatch.setattr(derived_files, "MIN_DOCS", 1 << 40)
        fresh = type(column)(column.terms, column.ords, None)
        assert _postings_pairs(fresh) == written  # what a process computes without the file
        assert column._stored_postings(path) is not None  # (re)written whole
        again = {
            t: search(node, "docs", {"query": {"term": {"k": t}}})["hits"]["total"]["value"] for t in "abcz"
        }
        assert again == counts


def _segment_postings(seg: Any, field: str) -> Path:
    return seg.folder / f"f{seg.field_meta[field]['number']}.postings"


def _derived(column: Any) -> Any:
    """The column without its postings file: its postings computed in memory."""
    return type(column)(column.terms, column.ords, None)


def test_a_new_segment_comes_with_the_postings_of_its_keywords_of_few_terms_and_its_sources_ready(
    tmp_path: Path,
) -> None:
    """A segment written from a buffer, and one a merge writes, hold the postings file of a
    keyword of few terms before any query (equal to the postings a process computes), none for
    a keyword of a term per document; a `term` filter then reads no ordinal (they stay as
    stored), while a query that compares them answers as before; a merged segment is installed
    with what its first fetch would compute already computed, and its sources read back."""
    mapping = {"properties": {"k": {"type": "keyword"}, "u": {"type": "keyword"}}}
    with leafsearch.Node(tmp_path / "n", background=False) as node:
        admin.create_index(node, "docs", {"settings": {"number_of_shards": 1}, "mappings": mapping})
        lines = []
        for i in range(400):
            lines.append(b'{"index":{"_id":"%d"}}\n' % i)
            lines.append(orjson.dumps({"k": "abc"[i % 3], "u": f"u{i}"}) + b"\n")
        node.bulk(b"".join(lines), index="docs", refresh="true")
        shard = node.indices["docs"].shards[0]
        (built,) = shard.segments
        assert _segment_postings(built, "k").exists() and not _segment_postings(built, "u").exists()
        assert _postings_pairs(_derived(built.column("k"))) == _postings_pairs(built.column("k"))
        node.bulk(
            b"".join(b'{"delete":{"_id":"%d"}}\n' % i for i in range(0, 400, 2)), index="docs", refresh="true"
        )
        assert shard.maybe_merge()  # half deleted: merged away
        (merged,) = shard.segments
        assert merged.name != built.name
        assert {"_source_ends", "_source_blocks", "_source_run_lists"} <= set(vars(merged))
        assert _postings_pairs(_derived(merged.column("k"))) == _postings_pairs(merged.column("k"))
        assert not _segment_postings(merged, "u").exists()
        (hit,) = search(node, "docs", {"query": {"ids": {"values": ["5"]}}})["hits"]["hits"]
        assert orjson.loads(hit["_source"].data) == {"k": "c", "u": "u5"}  # spliced as stored
    with leafsearch.Node(tmp_path / "n", background=False) as node:
        (seg,) = node.indices["docs"].shards[0].segments
        term = {"query": {"bool": {"filter": [{"term": {"k": "b"}}]}}, "size": 400}
        hits = search(node, "docs", term)["hits"]["hits"]
        assert sorted(int(hit["_id"]) for hit in hits) == [i for i in range(1, 400, 2) if i % 3 == 1]
        assert "values" not in vars(seg.column("k").ords)  # read from the postings: not widened
        masked = {"query": {"bool": {"filter": [{"term": {"k": "a"}}, {"term": {"u": "u3"}}]}}}
        assert [hit["_id"] for hit in search(node, "docs", masked)["hits"]["hits"]] == ["3"]
        by_k = search(node, "docs", {"size": 0, "aggs": {"k": {"terms": {"field": "k"}}}})
        assert [(b["key"], b["doc_count"]) for b in by_k["aggregations"]["k"]["buckets"]] == [
            ("a", 67),
            ("b", 67),
            ("c", 66),
        ]
