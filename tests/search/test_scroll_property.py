"""Property: for any data, shard count and slice count, with or without a slice field, the slices
of a scroll are disjoint and together are exactly the unsliced scroll, and writes made while the
scrolls are read (new documents, updates and deletes of documents they see, in segments that
already hold deleted documents) never show up in them: every hit has the source its document had
when the scroll opened. The unsliced scroll, opened first and alone, runs in the server process
(as `serve` runs a walk that starts alone) or, as every walk of the suite's server, in a search
worker.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from leafsearch.search.workers.pool import LONE_WALKS_IN_SERVER

_names = itertools.count()

documents = st.lists(
    st.one_of(
        st.none(),
        st.integers(-(2**62), 2**62),
        st.lists(st.integers(-1000, 1000), min_size=1, max_size=3),
    ),
    max_size=120,
)


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[Any], set[int]]:
    """Documents (their `n`) and the positions of those deleted before the scrolls open."""
    values = draw(documents)
    return values, draw(st.sets(st.integers(0, len(values) - 1))) if values else set()


def open_scroll(http: httpx.Client, index: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(f"/{index}/_search", params={"scroll": "1m"}, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def drain(http: httpx.Client, batch: dict[str, Any]) -> dict[str, Any]:
    """The sources of every hit of a scroll, by id (a document met twice fails)."""
    sources: dict[str, Any] = {}
    while batch["hits"]["hits"]:
        for hit in batch["hits"]["hits"]:
            assert hit["_id"] not in sources, f"{hit['_id']} came twice"
            sources[hit["_id"]] = hit["_source"]
        response = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": batch["_scroll_id"]})
        assert response.status_code == 200, response.text
        batch = response.json()
    assert http.delete(f"/_search/scroll/{batch['_scroll_id']}").status_code == 200
    return sources


def lone_walks_in_server(http: httpx.Client, value: bool) -> None:
    response = http.put("/_cluster/settings", json={"transient": {LONE_WALKS_IN_SERVER: value}})
    assert response.status_code == 200, response.text


def action(name: str, doc_id: str) -> str:
    return json.dumps({name: {"_id": doc_id}})


def bulk(http: httpx.Client, index: str, lines: list[str]) -> None:
    if lines:
        response = http.post(
            f"/{index}/_bulk",
            params={"refresh": "true"},
            content="\n".join(lines) + "\n",
            headers={"content-type": "application/x-ndjson"},
        )
        assert response.status_code == 200 and not response.json()["errors"], response.text


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpus=corpora(),
    shards=st.integers(1, 5),
    slices=st.integers(2, 8),
    by_field=st.booleans(),
    sorted_by_n=st.booleans(),
    in_server=st.booleans(),
    size=st.integers(1, 11),
)
@example(  # always: the `_doc` scroll in the server process, over shards whose segments hold deletions
    corpus=(list(range(60)), {0, 1, 2, 3, 20, 21, 22, 40, 41, 42}),
    shards=3,
    slices=2,
    by_field=False,
    sorted_by_n=False,
    in_server=True,
    size=11,
)
def test_slices_partition_the_scroll(
    http: httpx.Client,
    index_name: str,
    corpus: tuple[list[Any], set[int]],
    shards: int,
    slices: int,
    by_field: bool,
    sorted_by_n: bool,
    in_server: bool,
    size: int,
) -> None:
    values, deleted = corpus
    index = f"{index_name}-{next(_names)}"
    created = http.put(
        f"/{index}",
        json={"settings": {"number_of_shards": shards}, "mappings": {"properties": {"n": {"type": "long"}}}},
    )
    assert created.status_code == 200, created.text
    lone_walks_in_server(http, in_server)
    try:
        lines = []
        for i, value in enumerate(values):
            lines += [action("index", str(i)), json.dumps({} if value is None else {"n": value})]
        bulk(http, index, lines)
        bulk(http, index, [action("delete", str(i)) for i in deleted])
        snapshot = {
            str(i): {} if value is None else {"n": value}
            for i, value in enumerate(values)
            if i not in deleted
        }

        body: dict[str, Any] = {"sort": [{"n": "desc"}] if sorted_by_n else ["_doc"], "size": size}
        extra = {"field": "n"} if by_field else {}
        whole = open_scroll(http, index, body)
        parts = [
            open_scroll(http, index, {**body, "slice": {"id": i, "max": slices, **extra}})
            for i in range(slices)
        ]
        # Writes after the scrolls opened: new documents, updates, deletes of live ones.
        writes = [line for i in range(5) for line in (action("index", f"new{i}"), json.dumps({"n": i}))]
        writes += [line for d in sorted(snapshot)[:5] for line in (action("index", d), json.dumps({"n": 1}))]
        writes += [action("delete", d) for d in sorted(snapshot)[5:10]]
        bulk(http, index, writes)

        assert drain(http, whole) == snapshot
        assert whole["hits"]["total"]["value"] == len(snapshot)
        seen: dict[str, Any] = {}
        for part in parts:
            sources = drain(http, part)
            assert part["hits"]["total"]["value"] == len(sources)
            assert seen.keys().isdisjoint(sources)
            seen.update(sources)
        assert seen == snapshot  # together, the unsliced scroll
    finally:
        lone_walks_in_server(http, False)  # as the suite's server runs
        http.delete(f"/{index}")
