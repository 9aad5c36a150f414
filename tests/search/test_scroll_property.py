"""Property: for any data, shard count and slice count, with or without a slice field, the slices
of a scroll are disjoint and together are exactly the unsliced scroll, and writes made while the
scrolls are read never show up in them.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_names = itertools.count()

documents = st.lists(
    st.one_of(
        st.none(),
        st.integers(-(2**62), 2**62),
        st.lists(st.integers(-1000, 1000), min_size=1, max_size=3),
    ),
    max_size=120,
)


def open_scroll(http: httpx.Client, index: str, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(f"/{index}/_search", params={"scroll": "1m"}, json={"size": 11, **body})
    assert response.status_code == 200, response.text
    return response.json()


def drain(http: httpx.Client, batch: dict[str, Any]) -> list[str]:
    ids: list[str] = []
    while batch["hits"]["hits"]:
        ids += [hit["_id"] for hit in batch["hits"]["hits"]]
        batch = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": batch["_scroll_id"]}).json()
    assert http.delete(f"/_search/scroll/{batch['_scroll_id']}").status_code == 200
    return ids


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
    values=documents,
    deleted=st.sets(st.integers(0, 119)),
    shards=st.integers(1, 5),
    slices=st.integers(2, 8),
    by_field=st.booleans(),
    sorted_by_n=st.booleans(),
)
def test_slices_partition_the_scroll(
    http: httpx.Client,
    index_name: str,
    values: list[Any],
    deleted: set[int],
    shards: int,
    slices: int,
    by_field: bool,
    sorted_by_n: bool,
) -> None:
    index = f"{index_name}-{next(_names)}"
    created = http.put(
        f"/{index}",
        json={"settings": {"number_of_shards": shards}, "mappings": {"properties": {"n": {"type": "long"}}}},
    )
    assert created.status_code == 200, created.text
    try:
        lines = []
        for i, value in enumerate(values):
            lines += [action("index", str(i)), json.dumps({} if value is None else {"n": value})]
        bulk(http, index, lines)
        bulk(http, index, [action("delete", str(i)) for i in deleted if i < len(values)])
        live = {str(i) for i in range(len(values)) if i not in deleted}

        body: dict[str, Any] = {"sort": [{"n": "desc"}] if sorted_by_n else ["_doc"]}
        extra = {"field": "n"} if by_field else {}
        whole = open_scroll(http, index, body)
        parts = [
            open_scroll(http, index, {**body, "slice": {"id": i, "max": slices, **extra}})
            for i in range(slices)
        ]
        # Writes after the scrolls opened: new documents, updates, deletes of live ones.
        writes = [line for i in range(5) for line in (action("index", f"new{i}"), json.dumps({"n": i}))]
        writes += [line for d in sorted(live)[:5] for line in (action("index", d), json.dumps({"n": 1}))]
        writes += [action("delete", d) for d in sorted(live)[5:10]]
        bulk(http, index, writes)

        unsliced = drain(http, whole)
        assert sorted(unsliced) == sorted(live)
        assert whole["hits"]["total"]["value"] == len(live)
        seen: list[str] = []
        for part in parts:
            ids = drain(http, part)
            assert part["hits"]["total"]["value"] == len(ids)
            seen += ids
        assert len(seen) == len(set(seen))  # disjoint
        assert set(seen) == live  # together, the unsliced scroll
    finally:
        http.delete(f"/{index}")
