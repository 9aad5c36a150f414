"""Property: on a frozen index, the `from`/`size` pages of a sorted search, joined, are the full
sorted result: no hit missing, none twice, in the order Elasticsearch's sort rules give.

Each example builds a small index (1 to 3 shards) from random documents, picks a random sort
(keyword, long and double keys, either order, missing values first or last) and a random page size.
With a unique tiebreaker the expected order is computed here independently; without one, ties
must still break the same way on every request against the same snapshot (shard, then doc).
"""

from __future__ import annotations

import functools
import json
import uuid
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MAPPINGS = {
    "properties": {
        "g": {"type": "keyword"},
        "v": {"type": "long"},
        "f": {"type": "double"},
        "uid": {"type": "keyword"},
    }
}

documents = st.lists(
    st.fixed_dictionaries(
        {
            "g": st.sampled_from(["a", "b", "ab", "c", None]),
            "v": st.one_of(st.none(), st.integers(-3, 3)),
            "f": st.one_of(st.none(), st.integers(-20, 20).map(lambda i: i / 10)),
        }
    ),
    # At least one document: a keyword sort over an empty index has its own test in
    # test_search_sorting.py.
    min_size=1,
    max_size=45,
)
sort_keys = st.lists(
    st.tuples(
        st.sampled_from(["g", "v", "f"]),
        st.sampled_from(["asc", "desc"]),
        st.sampled_from([None, "_first", "_last"]),
    ),
    min_size=1,
    max_size=2,
    unique_by=lambda key: key[0],
)


def _sort_body(keys: list[tuple[str, str, str | None]]) -> list[dict[str, Any]]:
    body = []
    for field, order, missing in keys:
        options: dict[str, Any] = {"order": order}
        if missing is not None:
            options["missing"] = missing
        body.append({field: options})
    return body


def _compare(keys, a: dict[str, Any], b: dict[str, Any]) -> int:
    """Elasticsearch's order of two documents on the sort keys (single-valued fields)."""
    for field, order, missing in keys:
        x, y = a.get(field), b.get(field)
        if x is None and y is None:
            continue
        if x is None or y is None:
            first = missing == "_first"
            return (-1 if first else 1) * (1 if x is None else -1)
        if x != y:
            return (-1 if x < y else 1) * (1 if order == "asc" else -1)
    return 0


def _index(http: httpx.Client, docs: list[dict[str, Any]], shards: int) -> str:
    name = f"offset-prop-{uuid.uuid4().hex[:10]}"
    created = http.put(f"/{name}", json={"settings": {"number_of_shards": shards}, "mappings": MAPPINGS})
    assert created.status_code == 200, created.text
    if docs:
        lines = "".join(json.dumps({"index": {"_id": d["uid"]}}) + "\n" + json.dumps(d) + "\n" for d in docs)
        response = http.post(
            f"/{name}/_bulk",
            content=lines,
            headers={"content-type": "application/x-ndjson"},
            params={"refresh": "true"},
        )
        assert response.status_code == 200 and not response.json()["errors"]
    return name


def _walk(http: httpx.Client, index: str, sort: list, size: int) -> list[dict[str, Any]]:
    """Every page from 0 until an empty one; each page must be full except the last."""
    hits: list[dict[str, Any]] = []
    start = 0
    while True:
        page = http.post(f"/{index}/_search", json={"sort": sort, "from": start, "size": size}).json()
        got = page["hits"]["hits"]
        if not got:
            return hits
        assert len(got) == size or len(hits) + len(got) == page["hits"]["total"]["value"]
        hits.extend(got)
        start += size


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=documents,
    keys=sort_keys,
    size=st.integers(1, 12),
    shards=st.integers(1, 3),
    tiebreak=st.booleans(),
)
def test_pages_joined_are_the_full_sorted_result(
    http: httpx.Client, raw, keys, size, shards, tiebreak
) -> None:
    docs = [{k: v for k, v in d.items() if v is not None} | {"uid": f"u{i:03d}"} for i, d in enumerate(raw)]
    index = _index(http, docs, shards)
    try:
        sort = _sort_body(keys) + ([{"uid": "asc"}] if tiebreak else [])
        full = http.post(f"/{index}/_search", json={"sort": sort, "size": max(len(docs), 1)}).json()
        assert full["hits"]["total"] == {"value": len(docs), "relation": "eq"}
        paged = _walk(http, index, sort, size)
        # No hit missing or twice, and the same order and sort values as the one-page search.
        assert [(h["_id"], h["sort"]) for h in paged] == [(h["_id"], h["sort"]) for h in full["hits"]["hits"]]
        assert sorted(h["_id"] for h in paged) == sorted(d["uid"] for d in docs)
        by_id = {d["uid"]: d for d in docs}
        expected = sorted(
            docs, key=functools.cmp_to_key(functools.partial(_compare, keys + [("uid", "asc", None)]))
        )
        if tiebreak:
            assert [h["_id"] for h in paged] == [d["uid"] for d in expected]
        else:
            # Ties may come in any order, but the sequence of sort keys is fixed.
            def key_values(d: dict[str, Any]) -> list[Any]:
                return [d.get(field) for field, _, _ in keys]

            assert [key_values(by_id[h["_id"]]) for h in paged] == [key_values(d) for d in expected]
            again = _walk(http, index, sort, size)
            assert [h["_id"] for h in again] == [h["_id"] for h in paged]
    finally:
        http.delete(f"/{index}")
