"""The one-page query phase (segment sort orders, top-k selection) returns exactly the page the
full sort of every match returns: same hits in the same order, same totals and max score, for
random data over several segments and shards, random sorts, queries, offsets and cursors."""

from __future__ import annotations

import random
import time
from pathlib import Path

import orjson
import pytest
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import top_hits
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hitlist import build_hitlist
from leafsearch.search.phases import page_bounds
from leafsearch.search.segment_orders import SegmentOrders, first_matches
from leafsearch.search.targets import acquire_targets, release_targets

MAPPING = {
    "properties": {
        "n": {"type": "long"},
        "x": {"type": "double"},
        "k": {"type": "keyword"},
        "d": {"type": "date"},
        "t": {"type": "text"},
    }
}
WORDS = ["red", "green", "blue", "black", "white"]


def random_doc(rng: random.Random) -> dict:
    doc: dict = {"t": " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))}
    if rng.random() < 0.85:
        doc["n"] = rng.randint(-5, 30) if rng.random() < 0.9 else [rng.randint(0, 9), rng.randint(0, 9)]
    if rng.random() < 0.85:
        doc["x"] = round(rng.uniform(-2, 2), 1)
    if rng.random() < 0.8:
        doc["k"] = rng.choice(["a", "b", "c", "dd", "e"]) if rng.random() < 0.9 else ["b", "zz"]
    if rng.random() < 0.8:
        doc["d"] = f"2024-01-{rng.randint(1, 28):02d}"
    return doc


def random_sort(rng: random.Random) -> list:
    def field_sort() -> dict:
        field = rng.choice(["n", "x", "k", "d"])
        spec: dict = {"order": rng.choice(["asc", "desc"])}
        if rng.random() < 0.4:
            spec["missing"] = rng.choice(["_first", "_last"])
        if rng.random() < 0.3:
            spec["mode"] = rng.choice(["min", "max"])
        return {field: spec}

    shape = rng.choice(["one", "two", "score", "score_then", "doc"])
    if shape == "one":
        return [field_sort()]
    if shape == "two":
        return [field_sort(), field_sort()]
    if shape == "score":
        return ["_score"]
    if shape == "score_then":
        return ["_score", field_sort()]
    return [field_sort(), "_doc"]


def random_query(rng: random.Random) -> dict:
    return rng.choice(
        [
            {"match_all": {}},
            {"term": {"k": rng.choice(["a", "b", "zz"])}},
            {"range": {"n": {"gte": rng.randint(-5, 20)}}},
            {"match": {"t": " ".join(rng.sample(WORDS, 2))}},
            {"bool": {"should": [{"match": {"t": "red"}}, {"term": {"k": "c"}}]}},
        ]
    )


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    rng = random.Random(7)
    with leafsearch.Node(tmp_path_factory.mktemp("top") / "node", background=False) as node:
        admin.create_index(node, "docs", {"settings": {"number_of_shards": 2}, "mappings": MAPPING})
        for batch in range(6):  # several segments per shard, some deletes among them
            for i in range(60):
                node.index_doc("docs", f"{batch}-{i}", orjson.dumps(random_doc(rng)))
            node.indices["docs"].refresh()
            for i in rng.sample(range(60), 8):
                node.delete_doc("docs", f"{batch}-{i}")
        node.indices["docs"].refresh()
        yield node


def page(hits, request) -> list[tuple[int, int]]:
    start, end = page_bounds(hits, request)
    return list(zip(hits.target[start:end].tolist(), hits.doc[start:end].tolist(), strict=True))


@pytest.mark.parametrize("seed", range(300))
def test_one_page_equals_the_page_of_the_full_sort(node, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    body = {
        "query": random_query(rng),
        "sort": random_sort(rng),
        "from": rng.choice([0, 0, 3, 17]),
        "size": rng.choice([0, 1, 5, 10, 40]),
        "track_scores": rng.random() < 0.3,
    }
    # And without orders (a cache too small to hold one).
    monkeypatch.setattr(
        node.search_services, "sort_orders", SegmentOrders(64 * 1024 * 1024 if seed % 5 else 0)
    )
    targets = acquire_targets([node.indices["docs"]])
    try:
        now = int(time.time() * 1000)
        full_request = parse_search_request(body, {})
        full = build_hitlist(
            targets, full_request, now_millis=now, with_aggs=None, guard=SearchGuard(time.monotonic, None)
        )
        if rng.random() < 0.5 and len(full) > 2 and all(s != "_score" for s in body["sort"]):
            # A cursor: the sort values of a hit of the full list (no PIT: ties are skipped).
            from leafsearch.search.phases import fetch_page

            at = rng.randrange(len(full) - 1)
            cursor = fetch_page(node, full, at, at + 1, full_request)[0]["sort"]
            body = {**body, "search_after": cursor, "from": 0}
            full_request = parse_search_request(body, {})
        request = parse_search_request(body, {})
        assert top_hits.serves(request)
        top = top_hits.top_hits(
            node.search_services,
            targets,
            request,
            now_millis=now,
            aggs=False,
            shards=top_hits.shard_handles(node.search_services, targets),
        )
        assert page(top, request) == page(full, full_request), body
        assert top.total == full.total
        if full.max_score is not None and request.size > 0:  # a page of no hits shows none
            assert top.max_score == pytest.approx(full.max_score)
    finally:
        release_targets(targets)


@pytest.mark.parametrize("seed", range(60))
def test_deep_pages_bound_every_segments_candidates(node, seed: int) -> None:
    """Pages deeper than a segment holds: the first `k` candidates of one segment bound how far
    the others walk (`_Bound`), ties at the bound kept; the page is still the full sort's."""
    rng = random.Random(seed)
    field = rng.choice(["n", "x", "d"])
    sort: list = [{field: {"order": rng.choice(["asc", "desc"]), "missing": rng.choice(["_first", "_last"])}}]
    if rng.random() < 0.5:
        sort.append({rng.choice(["n", "x", "k"]): rng.choice(["asc", "desc"])})
    body = {
        "query": rng.choice([{"match_all": {}}, random_query(rng)]),
        "sort": sort,
        "from": rng.randint(0, 300),
        "size": rng.randint(1, 60),
    }
    targets = acquire_targets([node.indices["docs"]])
    try:
        request = parse_search_request(body, {})
        full = build_hitlist(
            targets, request, now_millis=0, with_aggs=None, guard=SearchGuard(time.monotonic, None)
        )
        top = top_hits.top_hits(
            node.search_services,
            targets,
            request,
            now_millis=0,
            aggs=False,
            shards=top_hits.shard_handles(node.search_services, targets),
        )
        assert page(top, request) == page(full, request), body
        assert top.total == full.total
    finally:
        release_targets(targets)


def test_segment_orders_are_reused_and_bounded(node, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second query with the same sort builds nothing; a small cache evicts; stats count."""
    orders = SegmentOrders(64 * 1024 * 1024)
    monkeypatch.setattr(node.search_services, "sort_orders", orders)
    request = parse_search_request({"sort": [{"n": "desc"}], "size": 3}, {})
    targets = acquire_targets([node.indices["docs"]])
    try:
        for _ in range(2):
            top_hits.top_hits(
                node.search_services,
                targets,
                request,
                now_millis=0,
                aggs=False,
                shards=top_hits.shard_handles(node.search_services, targets),
            )
        segments = sum(len(t.searcher.views) for t in targets)
        assert orders.stats()["count"] == segments
        assert orders.evictions == 0
        used = orders.stats()["memory_size_in_bytes"]
        orders.resize(used // 2)
        assert orders.stats()["memory_size_in_bytes"] <= used // 2 and orders.evictions > 0
    finally:
        release_targets(targets)


def test_first_matches_reads_only_what_it_needs() -> None:
    import numpy as np

    order = np.arange(100_000, dtype=np.int32)[::-1].copy()
    mask = np.zeros(100_000, dtype=bool)
    mask[::1000] = True
    assert first_matches(order, mask, 0, 3).tolist() == [99_000, 98_000, 97_000]
    assert first_matches(order, mask, 1_500, 2).tolist() == [98_000, 97_000]
    assert len(first_matches(order, mask, 0, 1_000)) == 100


def test_a_new_segment_is_ordered_and_the_others_reused(tmp_path: Path) -> None:
    """A refresh adds one segment: the next query orders only that one."""
    with leafsearch.Node(tmp_path / "n", background=False) as node:
        admin.create_index(node, "logs", {"mappings": MAPPING})
        for i in range(50):
            node.index_doc("logs", str(i), orjson.dumps({"n": i}), refresh="true" if i % 10 == 9 else None)
        body = {"sort": [{"n": "desc"}], "size": 2}
        first = search(node, "logs", body, {})
        built = node.sort_orders.stats()["count"]
        node.index_doc("logs", "new", orjson.dumps({"n": 1000}), refresh="true")
        second = search(node, "logs", body, {})
        assert [h["_id"] for h in first["hits"]["hits"]] == ["49", "48"]
        assert [h["_id"] for h in second["hits"]["hits"]] == ["new", "49"]
        assert node.sort_orders.stats()["count"] == built + 1
        stats = next(iter(node.nodes_stats(["indices"])["nodes"].values()))["indices"]["sort_orders"]
        assert stats["count"] == built + 1
        assert 0 < stats["memory_size_in_bytes"] <= stats["limit_size_in_bytes"]


@pytest.mark.parametrize("seed", range(40))
def test_ranking_few_matches_equals_walking_the_order(seed: int) -> None:
    """`SegmentOrder.first` ranks the matches when they are few and walks the order otherwise:
    both give the first `k` matches from `start` on, in order, whatever the density, and whether
    the matches came as a mask or as their documents (a selective filtered conjunction)."""
    from types import SimpleNamespace

    import numpy as np

    from leafsearch.search.hitlist import SegmentMatches
    from leafsearch.search.segment_orders import SegmentOrder

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 50_000))
    order = rng.permutation(n).astype(np.int32)
    rank = np.empty(n, dtype=np.int32)
    rank[order] = np.arange(n, dtype=np.int32)
    segment_order = SegmentOrder(order, [], [], rank)
    mask = rng.random(n) < rng.choice([0.0001, 0.001, 0.01, 0.5])
    start, k = int(rng.integers(0, n)), int(rng.integers(1, 300))
    end = n if seed % 2 else int(rng.integers(start, n + 1))  # a bound from other segments
    walked = first_matches(order, mask, start, k, end)
    part = order[start:end]
    assert walked.tolist() == part[mask[part]][:k].tolist()
    view = SimpleNamespace(max_doc=n)
    as_mask = SegmentMatches(0, view, mask.copy(), None)  # type: ignore[arg-type]
    as_docs = SegmentMatches(0, view, None, None, np.flatnonzero(mask))  # type: ignore[arg-type]
    for matches in (as_mask, as_docs):
        assert matches.count() == int(mask.sum())
        assert segment_order.first(matches, start, k, matches.count(), end).tolist() == walked.tolist()


@pytest.fixture(scope="module")
def ordered(tmp_path_factory: pytest.TempPathFactory):
    """Time-ordered data, as logs are: each refresh's segment holds later `n` and `d` than the
    one before (with overlaps, missing values, multi-values and deletes), 2 shards."""
    rng = random.Random(11)
    with leafsearch.Node(tmp_path_factory.mktemp("ordered") / "node", background=False) as node:
        admin.create_index(node, "logs", {"settings": {"number_of_shards": 2}, "mappings": MAPPING})
        for batch in range(8):
            for i in range(rng.randint(5, 50)):
                doc = random_doc(rng)
                if "n" in doc:
                    doc["n"] = batch * 10 + rng.randint(-3, 12) if rng.random() < 0.95 else [batch, 90]
                if "x" in doc:
                    doc["x"] = batch + round(rng.uniform(-0.5, 1.5), 1)
                doc["d"] = f"2024-01-{batch * 3 + rng.randint(1, 4):02d}"
                node.index_doc("logs", f"{batch}-{i}", orjson.dumps(doc))
            node.indices["logs"].refresh()
            for i in rng.sample(range(5), 2):
                node.delete_doc("logs", f"{batch}-{i}")
        node.indices["logs"].refresh()
        yield node


@pytest.mark.parametrize("seed", range(200))
def test_a_page_that_stops_counting_equals_the_full_sort(ordered, seed: int) -> None:
    """With `track_total_hits` a small number (or false) a numeric sort skips the segments that
    cannot reach the page once the count is past it: same page as the full sort, and the total
    and relation a full count gives."""
    from leafsearch.search.phases import _total

    rng = random.Random(seed)
    field = rng.choice(["n", "x", "d"])
    spec: dict = {"order": rng.choice(["asc", "desc"])}
    if rng.random() < 0.4:
        spec["missing"] = rng.choice(["_first", "_last"])
    if rng.random() < 0.3:
        spec["mode"] = rng.choice(["min", "max"])
    sort: list = [{field: spec}]
    if rng.random() < 0.5:
        sort.append(rng.choice([{"k": "asc"}, {"n": "desc"}, "_doc"]))
    body: dict = {
        "query": rng.choice([{"match_all": {}}, random_query(rng)]),
        "sort": sort,
        "from": rng.choice([0, 0, 2, 9]),
        "size": rng.choice([1, 3, 10, 25]),
        "track_total_hits": rng.choice([1, 7, 30, 100, False]),
    }
    targets = acquire_targets([ordered.indices["logs"]])
    try:
        full_request = parse_search_request({**body, "track_total_hits": True}, {})
        full = build_hitlist(
            targets, full_request, now_millis=0, with_aggs=None, guard=SearchGuard(time.monotonic, None)
        )
        if rng.random() < 0.4 and len(full) > 2:
            from leafsearch.search.phases import fetch_page

            at = rng.randrange(len(full) - 1)
            cursor = fetch_page(ordered, full, at, at + 1, full_request)[0]["sort"]
            body = {**body, "search_after": cursor, "from": 0}
            full_request = parse_search_request({**body, "track_total_hits": True}, {})
        request = parse_search_request(body, {})
        top = top_hits.top_hits(
            ordered,
            targets,
            request,
            now_millis=0,
            aggs=False,
            shards=top_hits.shard_handles(ordered, targets),
        )
        assert page(top, request) == page(full, full_request), body
        assert _total(top, request) == _total(full, request), body
    finally:
        release_targets(targets)


def test_segments_that_cannot_reach_the_page_are_not_run(ordered, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest page of time-ordered segments runs the query on the newest segments only once
    more than `track_total_hits` matched; counting every match runs it on all of them."""
    from leafsearch.search import hitlist

    runs: list[int] = []
    real, real_live = hitlist.execute, hitlist.live_mask

    def counted(planned, view, ctx):  # noqa: ANN001, ANN202 - the engine's own signature
        runs.append(id(view.segment))
        return real(planned, view, ctx)

    def counted_live(view):  # noqa: ANN001, ANN202 - `match_all` alone: the live documents
        runs.append(id(view.segment))
        return real_live(view)

    monkeypatch.setattr(hitlist, "execute", counted)
    monkeypatch.setattr(hitlist, "live_mask", counted_live)
    newest = search(ordered, "logs", {"sort": [{"d": "desc"}], "size": 3, "track_total_hits": 20})
    stopped = len(runs)
    runs.clear()
    exact = search(ordered, "logs", {"sort": [{"d": "desc"}], "size": 3, "track_total_hits": True})
    assert [h["_id"] for h in newest["hits"]["hits"]] == [h["_id"] for h in exact["hits"]["hits"]]
    assert newest["hits"]["total"] == {"value": 20, "relation": "gte"}
    assert exact["hits"]["total"]["value"] > 20
    targets = acquire_targets([ordered.indices["logs"]])
    try:
        live_segments = sum(1 for t in targets for view in t.searcher.views if view.live_count)
    finally:
        release_targets(targets)
    assert len(runs) == live_segments
    assert stopped < live_segments / 2


@pytest.mark.parametrize("seed", range(60))
def test_a_request_for_no_hits_stops_counting_at_track_total_hits(ordered, seed: int) -> None:
    """`size: 0` needs no scores and, past `track_total_hits`, no more segments: the total and
    relation are those of the exact count, and there is no max score."""
    from inprocess import count

    rng = random.Random(seed)
    query = rng.choice([{"match_all": {}}, random_query(rng)])
    track = rng.choice([1, 7, 30, 100, False])
    body: dict = {"query": query, "size": 0, "track_total_hits": track}
    if rng.random() < 0.5:
        body["sort"] = random_sort(rng)
    exact = count(ordered, "logs", {"query": query})["count"]
    hits = search(ordered, "logs", body)["hits"]
    if track is False:
        assert "total" not in hits
    elif exact > track:
        assert hits["total"] == {"value": track, "relation": "gte"}
    else:
        assert hits["total"] == {"value": exact, "relation": "eq"}
    assert hits["max_score"] is None and hits["hits"] == []
