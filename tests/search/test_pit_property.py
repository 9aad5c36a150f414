"""Point-in-time walks, in-process (`leafsearch.Node`), checked against an independent model.

The property: whatever happens to the index after it opened, before its first page and between
pages (new documents, updates and deletes of the documents it sees, refreshes, merges), a PIT
walked with `search_after` returns exactly the documents of the snapshot taken when it opened,
each once, in the order Elasticsearch defines for the sort (computed here from the documents
themselves, missing values and all), with `_shard_doc` breaking ties. The PIT opens on segments
that already hold deleted documents, whose live-docs arrays a later delete must copy rather than
change. Then: the live-docs walk behind `track_total_hits: false` equals the counted walk, and a
PIT's memory and segment files go when it is closed or expires.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import FakeClock
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from inprocess import search

import leafsearch
from leafsearch.indices import admin
from leafsearch.search.workers.pool import LONE_WALKS_IN_SERVER

LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)
NANOS_BASE = 1_700_000_000_000_000_000
MAPPINGS = {
    "properties": {
        "kw": {"type": "keyword"},
        "lg": {"type": "long"},
        "db": {"type": "double"},
        "dt": {"type": "date"},
        "dn": {"type": "date_nanos"},
    }
}
#: Scores the model can compute: 0.5 for every document, +2 for kw "a", +1 for lg >= 1.
QUERY = {
    "bool": {
        "should": [
            {"match_all": {"boost": 0.5}},
            {"constant_score": {"filter": {"term": {"kw": "a"}}, "boost": 2.0}},
            {"constant_score": {"filter": {"range": {"lg": {"gte": 1}}}, "boost": 1.0}},
        ]
    }
}
#: A custom `missing` per field, from the values the documents use (so it ties with real ones).
CUSTOM_MISSING = {"kw": "b", "lg": 0, "db": 0.0, "dt": 1_600_000_000_000, "dn": NANOS_BASE + 2}

_counter = itertools.count()


@pytest.fixture(scope="module")
def clock() -> FakeClock:
    return FakeClock()


@contextmanager
def walking_node(
    folder: Path, search_workers: int, worker_settings: dict[str, str] | None = None, **options: Any
) -> Iterator[leafsearch.Node]:
    """A node without background threads whose PIT pages run in its process (`search_workers`
    0) or in a search worker process (search/workers/: every walk, even one that runs alone,
    which the server process would otherwise serve itself; `worker_settings` send more there)."""
    with leafsearch.Node(folder, background=False, search_workers=search_workers, **options) as instance:
        if instance.search_workers is not None:
            settings = {LONE_WALKS_IN_SERVER: "false", **(worker_settings or {})}
            instance.cluster_settings.update({"transient": settings})
            assert instance.search_workers.wait_ready(60)
        yield instance


@pytest.fixture(scope="module", params=[0, 1], ids=["in-process", "search-worker"])
def node(
    tmp_path_factory: pytest.TempPathFactory,
    clock: FakeClock,
    request: pytest.FixtureRequest,
    worker_processes: BaseContext,
) -> Iterator[leafsearch.Node]:
    """A walking node on a clock the tests advance to expire contexts."""
    folder = tmp_path_factory.mktemp("pit-node")
    with walking_node(folder, request.param, clock=clock, worker_processes=worker_processes) as instance:
        yield instance


# ---------------------------------------------------------------------------------------------
# documents and the model of their order

values = {
    "kw": st.sampled_from(["a", "ab", "b", "c", "é"]),
    "lg": st.integers(-3, 3),
    "db": st.sampled_from([-1.5, 0.0, 0.25, 2.0, 1e10]),
    "dt": st.sampled_from([1_500_000_000_000, 1_600_000_000_000, 1_600_000_000_001]),
    "dn": st.integers(0, 4).map(lambda n: NANOS_BASE + n),
}
documents = st.fixed_dictionaries({}, optional=values)


def nanos_text(nanos: int) -> str:
    seconds, fraction = divmod(nanos, 10**9)
    stamp = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{fraction:09d}Z"


def to_source(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: nanos_text(v) if k == "dn" else v for k, v in doc.items()}


def score_of(doc: dict[str, Any]) -> float:
    return 0.5 + (2.0 if doc.get("kw") == "a" else 0.0) + (1.0 if doc.get("lg", -99) >= 1 else 0.0)


sort_specs = st.lists(
    st.tuples(
        st.sampled_from(["kw", "lg", "db", "dt", "dn", "_score"]),
        st.sampled_from(["asc", "desc"]),
        st.sampled_from(["default", "_first", "_last", "custom"]),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda spec: spec[0],
)


def sort_body(specs: list[tuple[str, str, str]], explicit_tiebreaker: str | None) -> list[Any]:
    body: list[Any] = []
    for field, order, missing in specs:
        options: dict[str, Any] = {"order": order}
        if field != "_score" and missing != "default":
            options["missing"] = CUSTOM_MISSING[field] if missing == "custom" else missing
        body.append({field: options})
    if explicit_tiebreaker is not None:
        body.append({"_shard_doc": explicit_tiebreaker})
    return body


class _Desc:
    """Reverses the order of a string (byte order, a prefix first when ascending)."""

    def __init__(self, text: str) -> None:
        self.key = tuple(-b for b in text.encode()) + (1,)

    def __lt__(self, other: _Desc) -> bool:
        return self.key < other.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key


def model(doc: dict[str, Any], specs: list[tuple[str, str, str]]) -> tuple[tuple, list[Any]]:
    """(order key, rendered sort values) of a document, by Elasticsearch's rules."""
    key: list[Any] = []
    rendered: list[Any] = []
    for field, order, missing in specs:
        desc = order == "desc"
        value = score_of(doc) if field == "_score" else doc.get(field)
        if value is None and missing == "custom":
            value = CUSTOM_MISSING[field]
        if value is None:
            last = missing != "_first"
            key.append((1 if last else -1, 0))
            if field == "kw":
                rendered.append(None)
            elif field == "db":
                rendered.append("Infinity" if last != desc else "-Infinity")
            else:
                rendered.append(LONG_MAX if last != desc else LONG_MIN)
            continue
        if field == "kw":
            key.append((0, _Desc(value) if desc else value.encode()))
        else:
            key.append((0, -value if desc else value))
        rendered.append(value)
    return tuple(key), rendered


# ---------------------------------------------------------------------------------------------
# writes between pages


def bulk(node: leafsearch.Node, index: str, docs: dict[str, dict[str, Any]]) -> None:
    lines = []
    for doc_id, doc in docs.items():
        lines.append(orjson.dumps({"index": {"_id": doc_id}}))
        lines.append(orjson.dumps(to_source(doc)))
    if lines:
        node.bulk(b"\n".join(lines) + b"\n", index=index)


#: What may happen to the index while a PIT is open.
OPERATIONS = ["index", "update", "delete", "refresh", "merge"]


def mutate(node: leafsearch.Node, index: str, op: str, live: dict[str, dict[str, Any]]) -> None:
    """One change to the index after the PIT opened; `live` tracks the current documents (an
    update or a delete picks one of them, so the documents of the PIT's snapshot among them)."""
    n = next(_counter)
    if op == "index":
        new = {f"new{n}-{i}": {"kw": "a", "lg": i, "dn": NANOS_BASE + i} for i in range(3)}
        bulk(node, index, new)
        live.update(new)
    elif op == "update" and live:
        doc_id = sorted(live)[n % len(live)]
        live[doc_id] = {"kw": "zz", "lg": -100 - n, "db": -7.0}
        bulk(node, index, {doc_id: live[doc_id]})
    elif op == "delete" and live:
        doc_id = sorted(live)[n % len(live)]
        node.delete_doc(index, doc_id)
        del live[doc_id]
    elif op == "refresh":
        node.indices[index].refresh()
    elif op == "merge":
        # Enough small segments for the merge policy to act on every shard, then merge them all.
        for i in range(12):
            bulk(node, index, {f"seg{n}-{i}-{j}": {"lg": j} for j in range(2)})
            live.update({f"seg{n}-{i}-{j}": {"lg": j} for j in range(2)})
            node.indices[index].refresh()
        for shard in node.indices[index].shards:
            while shard.maybe_merge():
                pass
        node.indices[index].refresh()


def new_index(node: leafsearch.Node, shards: int) -> str:
    name = f"prop-{next(_counter)}"
    admin.create_index(node, name, {"settings": {"number_of_shards": shards}, "mappings": MAPPINGS})
    return name


def pit_walk(
    node: leafsearch.Node, pit_id: str, body: dict[str, Any], sizes: list[int], between
) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    after = None
    for page_no in range(100_000):
        request = {**body, "pit": {"id": pit_id}, "size": sizes[page_no % len(sizes)]}
        if after is not None:
            request["search_after"] = after
        response = search(node, None, request, {})
        assert response["pit_id"] == pit_id
        batch = response["hits"]["hits"]
        if not batch:
            return hits
        hits.extend(batch)
        after = batch[-1]["sort"]
        between(page_no)
    raise AssertionError("the walk did not end")


# ---------------------------------------------------------------------------------------------
# the properties


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(documents, max_size=40),
    deleted=st.sets(st.integers(0, 39), max_size=12),
    specs=sort_specs,
    explicit=st.sampled_from([None, None, "asc", "desc"]),
    sizes=st.lists(st.integers(1, 7), min_size=1, max_size=4),
    first_ops=st.lists(st.sampled_from(OPERATIONS), max_size=4),
    ops=st.lists(st.sampled_from(OPERATIONS), max_size=6),
    shards=st.integers(1, 3),
)
@example(  # always: one segment with a deletion, and documents of it deleted and updated under the PIT
    docs=[{"kw": "a", "lg": i % 4} for i in range(9)],
    deleted={4},
    specs=[("lg", "asc", "default")],
    explicit=None,
    sizes=[4],
    first_ops=["delete", "update"],
    ops=["delete", "update", "refresh"],
    shards=1,
)
@example(  # always: a keyword sort whose window holds only documents with a value, one without
    docs=[{}, *[{"kw": "a"}] * 8],  # after them: the window's keys keep the missing flag column
    deleted=set(),
    specs=[("kw", "asc", "default")],
    explicit=None,
    sizes=[1],
    first_ops=[],
    ops=[],
    shards=2,
)
def test_a_pit_walk_is_the_sorted_snapshot(
    node: leafsearch.Node, docs, deleted, specs, explicit, sizes, first_ops, ops, shards
) -> None:
    """`deleted` documents are deleted before the PIT opens (its segments hold deletions);
    `first_ops` happen after it opened, then a refresh publishes them before its first page;
    `ops` happen after every page."""
    index = new_index(node, shards)
    try:
        indexed = {f"d{i}": doc for i, doc in enumerate(docs)}
        bulk(node, index, indexed)
        node.indices[index].refresh()
        for doc_id in sorted(f"d{i}" for i in deleted if i < len(docs)):
            node.delete_doc(index, doc_id)
        node.indices[index].refresh()
        snapshot = {doc_id: doc for doc_id, doc in indexed.items() if int(doc_id[1:]) not in deleted}
        pit_id = node.open_pit(index, "5m")["id"]
        live = dict(snapshot)
        for op in [*first_ops, "refresh"]:
            mutate(node, index, op, live)
        body = {"query": QUERY, "sort": sort_body(specs, explicit)}
        hits = pit_walk(node, pit_id, body, sizes, lambda page: [mutate(node, index, op, live) for op in ops])
        node.close_pit(pit_id)
    finally:
        node.drop_index(index)

    assert sorted(h["_id"] for h in hits) == sorted(snapshot)
    assert all(h["_source"].parsed() == to_source(snapshot[h["_id"]]) for h in hits)
    expected = sorted((model(doc, specs) for doc in snapshot.values()), key=lambda m: m[0])
    assert [h["sort"][:-1] for h in hits] == [rendered for _, rendered in expected]
    # `_shard_doc` breaks ties: ascending unless given descending explicitly.
    for (prefix_a, tie_a), (prefix_b, tie_b) in itertools.pairwise(
        (h["sort"][:-1], h["sort"][-1]) for h in hits
    ):
        if prefix_a == prefix_b:
            assert tie_a > tie_b if explicit == "desc" else tie_a < tie_b


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(0, 60),
    deleted=st.sets(st.integers(0, 59), max_size=20),
    shards=st.integers(1, 3),
    routed=st.booleans(),
    order=st.sampled_from(["asc", "desc"]),
    slices=st.integers(1, 4),
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    ops=st.lists(st.sampled_from(OPERATIONS), max_size=3),
)
@example(  # always: one segment with deletions, and documents of it deleted and updated under the PIT
    count=30,
    deleted={3, 11},
    shards=1,
    routed=False,
    order="asc",
    slices=1,
    sizes=[4],
    ops=["delete", "update", "refresh"],
)
def test_the_uncounted_shard_doc_walk_equals_the_counted_walk(
    node: leafsearch.Node, count, deleted, shards, routed, order, slices, sizes, ops
) -> None:
    """`track_total_hits: false` with a `_shard_doc` sort reads live-doc counts instead of a match
    list; sliced or not, in either order, before and after writes, it must return the same pages.
    The PIT opens after `deleted` were deleted; the writes (once it opened, and after the first
    two pages of each uncounted walk) update and delete documents it sees."""
    index = new_index(node, shards)
    try:
        lines = []
        for i in range(count):
            meta = {"_id": f"d{i}", **({"routing": "r"} if routed and i % 4 else {})}
            lines += [orjson.dumps({"index": meta}), orjson.dumps({"lg": i})]
        if lines:
            node.bulk(b"\n".join(lines) + b"\n", index=index)
        node.indices[index].refresh()
        for i in sorted(deleted):
            if i < count:
                node.delete_doc(index, f"d{i}", routing="r" if routed and i % 4 else None)
        node.indices[index].refresh()
        expected_ids = {f"d{i}" for i in range(count) if i not in deleted}
        pit_id = node.open_pit(index, "5m")["id"]
        # The documents `mutate` may update or delete: the snapshot's, but for the routed ones.
        live = {f"d{i}": {"lg": i} for i in range(count) if i not in deleted and not (routed and i % 4)}
        for op in ops:
            mutate(node, index, op, live)

        def writes(page: int) -> None:
            if page < 2:  # writes early in each walk: every later page reads a changed index
                for op in ops:
                    mutate(node, index, op, live)

        walks = {}
        for counted in (False, True):
            parts = []
            for slice_id in range(slices):
                body: dict[str, Any] = {"sort": [{"_shard_doc": order}], "track_total_hits": counted}
                if slices > 1:
                    body["slice"] = {"id": slice_id, "max": slices}
                part = pit_walk(node, pit_id, body, sizes, (lambda page: None) if counted else writes)
                parts.append([(h["_id"], h["sort"][0]) for h in part])
            walks[counted] = parts
        node.close_pit(pit_id)
    finally:
        node.drop_index(index)
    assert walks[False] == walks[True]
    flat = [pair for part in walks[False] for pair in part]
    assert sorted(doc_id for doc_id, _ in flat) == sorted(expected_ids)
    assert len({key for _, key in flat}) == len(flat)
    for part in walks[False]:
        keys = [key for _, key in part]
        assert keys == sorted(keys, reverse=order == "desc")


# ---------------------------------------------------------------------------------------------
# resources


def segment_folders(node: leafsearch.Node, pit_id: str) -> set[Path]:
    ctx = node.contexts.get(pit_id, "pit")
    return {view.segment.folder for t in ctx.targets for view in t.searcher.views}


def walks_held(node: leafsearch.Node) -> tuple[int, int]:
    """What the processes running PIT pages keep of walks: the lists of every match kept for
    `_score` walks (in this process or a search worker), and the snapshots a search worker
    mirrors (released when the PIT ends)."""
    stats = next(iter(node.nodes_stats(["walks,search_workers"])["nodes"].values()))
    mirrored = sum(worker["snapshots"] for worker in stats.get("search_workers", {}).get("workers", ()))
    return stats["walks"]["lists"], mirrored


@pytest.mark.parametrize("ending", ["close", "expiry"])
def test_a_pit_holds_its_segments_until_it_ends(node: leafsearch.Node, clock: FakeClock, ending: str) -> None:
    index = new_index(node, 1)
    try:
        bulk(node, index, {f"d{i}": {"lg": i, "kw": "x"} for i in range(30)})
        node.indices[index].refresh()
        lists_before, mirrored_before = walks_held(node)
        pit_id = node.open_pit(index, "1s" if ending == "expiry" else "5m")["id"]
        held = segment_folders(node, pit_id)
        # A `_score` walk keeps its list of every match from its first page with a cursor.
        scored = {"pit": {"id": pit_id}, "query": QUERY, "sort": ["_score"], "size": 5}
        first = search(node, None, scored, {})["hits"]["hits"]
        search(node, None, {**scored, "search_after": first[-1]["sort"]}, {})
        lists, mirrored = walks_held(node)
        assert lists == lists_before + 1
        assert mirrored == mirrored_before + (node.search_workers is not None)
        # Replace every document, then merge: the current snapshot no longer needs the old segment.
        bulk(node, index, {f"d{i}": {"lg": -i} for i in range(30)})
        mutate(node, index, "merge", {})
        current = node.indices[index].shards[0].acquire_searcher()
        try:
            assert held.isdisjoint(view.segment.folder for view in current.views)
        finally:
            current.release()
        assert all(folder.exists() for folder in held)
        page = search(node, None, {"pit": {"id": pit_id}, "sort": [{"lg": "desc"}], "size": 3}, {})
        assert [h["sort"][0] for h in page["hits"]["hits"]] == [29, 28, 27]
        if ending == "close":
            assert node.close_pit(pit_id) == {"succeeded": True, "num_freed": 1}
        else:
            clock.advance(1.001)
            node.contexts.reap()
        assert not any(folder.exists() for folder in held)
        assert walks_held(node) == (lists_before, mirrored_before)
        assert node.contexts.open_count() == 0
    finally:
        node.drop_index(index)
