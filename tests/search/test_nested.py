"""`nested` fields through HTTP with the official client: each object matched alone, scores by
`score_mode`, nested within nested, `inner_hits`, counts, merges, restarts, concurrent writers,
walks, and the refusals Elasticsearch gives."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from elasticsearch import BadRequestError, Elasticsearch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import running_server, serving_clocked

MAPPING = {
    "properties": {
        "title": {"type": "keyword"},
        "c": {
            "type": "nested",
            "properties": {
                "a": {"type": "keyword"},
                "n": {"type": "long"},
                "r": {"type": "nested", "properties": {"z": {"type": "long"}}},
            },
        },
    }
}

DOCS = {
    "1": {"title": "one", "c": [{"a": "x", "n": 1}, {"a": "y", "n": 2}, {"a": "x", "n": 3}]},
    "2": {"title": "two", "c": [{"a": "y", "n": 1}, {"a": "x", "n": 4, "r": [{"z": 5}, {"z": 6}]}]},
    "3": {"title": "three", "c": {"a": "x", "n": 2, "r": {"z": 7}}},
    "4": {"title": "four"},
}


def both(a: str, n: int) -> dict[str, Any]:
    return {"bool": {"filter": [{"term": {"c.a": a}}, {"term": {"c.n": n}}]}}


def by_n(score_mode: str, query: dict | None = None) -> dict[str, Any]:
    """A nested query whose children score their `n` (a script score), joined by `score_mode`."""
    inner = {"script_score": {"query": query or {"match_all": {}}, "script": {"source": "doc['c.n'].value"}}}
    return {"nested": {"path": "c", "score_mode": score_mode, "query": inner}}


@pytest.fixture
def nested_index(es: Elasticsearch, new_index) -> str:
    name = new_index(mappings=MAPPING)
    for doc_id, doc in DOCS.items():
        es.index(index=name, id=doc_id, document=doc)
    es.indices.refresh(index=name)
    return name


def ids(response: Any) -> list[str]:
    return [h["_id"] for h in response["hits"]["hits"]]


def test_each_object_is_matched_alone(es: Elasticsearch, nested_index: str) -> None:
    found = es.search(index=nested_index, query={"nested": {"path": "c", "query": both("x", 1)}})
    assert ids(found) == ["1"]
    assert ids(es.search(index=nested_index, query={"nested": {"path": "c", "query": both("y", 3)}})) == []
    # Without the nested query, a nested object's fields match nothing (as in Elasticsearch).
    assert es.count(index=nested_index, query={"term": {"c.a": "x"}})["count"] == 0
    # The source comes back as stored, the objects inside it.
    assert found["hits"]["hits"][0]["_source"] == DOCS["1"]


def test_include_in_parent_also_indexes_the_values_in_the_parent(es: Elasticsearch, new_index) -> None:
    name = new_index(mappings={"properties": {"c": {"type": "nested", "include_in_parent": True}}})
    es.index(index=name, id="1", document={"c": [{"a": "x", "n": 1}, {"a": "y", "n": 2}]}, refresh=True)
    flat = {"bool": {"filter": [{"term": {"c.a": "x"}}, {"term": {"c.n": 2}}]}}
    assert es.count(index=name, query=flat)["count"] == 1  # across objects, as a plain object
    assert es.count(index=name, query={"nested": {"path": "c", "query": flat}})["count"] == 0
    assert es.indices.stats(index=name, metric="docs")["_all"]["primaries"]["docs"]["count"] == 3


@pytest.mark.parametrize(
    ("mode", "scores"),
    [
        ("sum", {"1": 6.0, "2": 5.0, "3": 2.0}),
        ("avg", {"1": 2.0, "2": 2.5, "3": 2.0}),
        ("max", {"1": 3.0, "2": 4.0, "3": 2.0}),
        ("min", {"1": 1.0, "2": 1.0, "3": 2.0}),
        ("none", {"1": 0.0, "2": 0.0, "3": 0.0}),
    ],
)
def test_score_modes(es: Elasticsearch, nested_index: str, mode: str, scores: dict[str, float]) -> None:
    found = es.search(index=nested_index, query=by_n(mode))
    assert {h["_id"]: h["_score"] for h in found["hits"]["hits"]} == scores


def test_nested_within_nested_and_a_deep_path_from_the_root(es: Elasticsearch, nested_index: str) -> None:
    inner = {"nested": {"path": "c.r", "query": {"term": {"c.r.z": 6}}}}
    both_levels = {"nested": {"path": "c", "query": {"bool": {"must": [inner, {"term": {"c.a": "x"}}]}}}}
    assert ids(es.search(index=nested_index, query=both_levels)) == ["2"]
    wrong_object = {"nested": {"path": "c", "query": {"bool": {"must": [inner, {"term": {"c.a": "y"}}]}}}}
    assert ids(es.search(index=nested_index, query=wrong_object)) == []
    deep = es.search(
        index=nested_index, query={"nested": {"path": "c.r", "query": {"range": {"c.r.z": {"gte": 6}}}}}
    )
    assert sorted(ids(deep)) == ["2", "3"]


def test_inner_hits(es: Elasticsearch, nested_index: str) -> None:
    query = {
        "nested": {
            "path": "c",
            "query": {"term": {"c.a": "x"}},
            "inner_hits": {"sort": [{"c.n": "desc"}], "_source": ["c.n"], "size": 1, "from": 0},
        }
    }
    found = es.search(index=nested_index, query=query, sort=["title"])
    hit = next(h for h in found["hits"]["hits"] if h["_id"] == "1")
    assert hit["inner_hits"]["c"]["hits"] == {
        "total": {"value": 2, "relation": "eq"},
        "max_score": None,
        "hits": [
            {
                "_index": nested_index,
                "_id": "1",
                "_nested": {"field": "c", "offset": 2},
                "_score": None,
                "_source": {"n": 3},
                "sort": [3],
            }
        ],
    }
    assert list(hit)[-1] == "inner_hits"
    named = {"nested": {"path": "c", "query": {"match_all": {}}, "inner_hits": {"name": "all", "from": 1}}}
    found = es.search(index=nested_index, query={"bool": {"must": [named, {"term": {"title": "one"}}]}})
    inner = found["hits"]["hits"][0]["inner_hits"]["all"]["hits"]
    assert inner["total"]["value"] == 3
    assert [(h["_nested"]["offset"], h["_source"]) for h in inner["hits"]] == [
        (1, {"a": "y", "n": 2}),
        (2, {"a": "x", "n": 3}),
    ]


def test_inner_hits_window_is_bounded(es: Elasticsearch, nested_index: str) -> None:
    query = {"nested": {"path": "c", "query": {"match_all": {}}, "inner_hits": {"from": 95, "size": 10}}}
    with pytest.raises(BadRequestError) as refused:
        es.search(index=nested_index, query=query)
    assert refused.value.body["error"]["root_cause"][0]["reason"] == (
        "Inner result window is too large, the inner hit definition's [c]'s from + size must be less "
        "than or equal to: [100] but was [105]. This limit can be set by changing the "
        "[index.max_inner_result_window] index level setting."
    )


def test_counts_are_parents_and_stats_count_lucene_documents(
    es: Elasticsearch, http: httpx.Client, nested_index: str
) -> None:
    assert es.count(index=nested_index)["count"] == 4
    assert es.search(index=nested_index)["hits"]["total"]["value"] == 4
    # Lucene's count, which `_cat/indices` and `_stats` show: 4 parents, 6 objects of c, 3 of c.r.
    cat = http.get(f"/_cat/indices/{nested_index}", params={"format": "json", "h": "docs.count"}).json()
    assert cat == [{"docs.count": "13"}]
    stats = es.indices.stats(index=nested_index, metric="docs")
    assert stats["_all"]["primaries"]["docs"]["count"] == 13


def test_updates_and_deletes_replace_the_children(es: Elasticsearch, nested_index: str) -> None:
    es.index(index=nested_index, id="1", document={"c": [{"a": "q", "n": 9}]})
    es.delete(index=nested_index, id="3")
    es.indices.refresh(index=nested_index)
    assert ids(es.search(index=nested_index, query={"nested": {"path": "c", "query": both("x", 1)}})) == []
    assert ids(es.search(index=nested_index, query={"nested": {"path": "c", "query": both("q", 9)}})) == ["1"]
    x = es.search(index=nested_index, query={"nested": {"path": "c", "query": {"term": {"c.a": "x"}}}})
    assert ids(x) == ["2"]
    assert (
        es.indices.stats(index=nested_index, metric="docs")["_all"]["primaries"]["docs"]["count"] == 3 + 3 + 2
    )


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (
            {"nested": {"path": "title", "query": {"match_all": {}}}},
            "[nested] failed to find nested object under path [title]",
        ),
        (
            {"nested": {"path": "nowhere", "query": {"match_all": {}}}},
            "[nested] failed to find nested object under path [nowhere]",
        ),
        (
            {"nested": {"path": "obj", "query": {"match_all": {}}}},
            "[nested] nested object under path [obj] is not of nested type",
        ),
    ],
)
def test_bad_paths_are_query_shard_exceptions(es: Elasticsearch, new_index, query: dict, reason: str) -> None:
    name = new_index(
        mappings={"properties": {**MAPPING["properties"], "obj": {"properties": {"k": {"type": "keyword"}}}}}
    )
    with pytest.raises(BadRequestError) as refused:
        es.search(index=name, query=query)
    assert refused.value.body["error"]["root_cause"][0] == {
        "type": "query_shard_exception",
        "reason": reason,
        "index_uuid": refused.value.body["error"]["root_cause"][0]["index_uuid"],
        "index": name,
    }


def test_ignore_unmapped_and_malformed_queries(es: Elasticsearch, nested_index: str) -> None:
    unmapped = {"nested": {"path": "nowhere", "ignore_unmapped": True, "query": {"match_all": {}}}}
    assert es.count(index=nested_index, query=unmapped)["count"] == 0
    for query, error_type, reason in (
        ({"nested": {"query": {"match_all": {}}}}, "parsing_exception", "[nested] requires 'path' field"),
        ({"nested": {"path": "c"}}, "parsing_exception", "[nested] requires 'query' field"),
        (
            {"nested": {"path": "c", "query": {"match_all": {}}, "score_mode": "most"}},
            "illegal_argument_exception",
            "illegal score_mode [most]",
        ),
        (
            {"nested": {"path": "c", "query": {"match_all": {}}, "size": 1}},
            "parsing_exception",
            "[nested] query does not support [size]",
        ),
    ):
        with pytest.raises(BadRequestError) as refused:
            es.search(index=nested_index, query=query)
        assert (refused.value.error, refused.value.body["error"]["reason"]) == (error_type, reason)


def test_mapping_limits_and_index_sort(
    es: Elasticsearch, new_index, http: httpx.Client, index_name: str
) -> None:
    two = {"properties": {"a": {"type": "nested"}, "b": {"type": "nested"}}}
    response = http.put(
        f"/{index_name}-lim", json={"settings": {"index.mapping.nested_fields.limit": 1}, "mappings": two}
    )
    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "Limit of nested fields [1] has been exceeded"
    name = new_index(settings={"index.mapping.nested_objects.limit": 2}, mappings=MAPPING)
    with pytest.raises(BadRequestError) as refused:
        es.index(index=name, id="1", document={"c": [{"n": 1}, {"n": 2}, {"n": 3}]})
    assert refused.value.error == "document_parsing_exception"
    assert "[index.mapping.nested_objects.limit]" in refused.value.body["error"]["reason"]
    assert es.count(index=name)["count"] == 0
    sorted_index = {"settings": {"index.sort.field": "title"}, "mappings": MAPPING}
    response = http.put(f"/{index_name}-sorted", json=sorted_index)
    assert response.status_code == 400
    assert response.json()["error"]["reason"] == "cannot have nested fields when index sort is activated"


def test_field_caps_and_mapping(es: Elasticsearch, nested_index: str) -> None:
    caps = es.field_caps(index=nested_index, fields="c*")["fields"]
    assert caps["c"] == {
        "nested": {"type": "nested", "metadata_field": False, "searchable": False, "aggregatable": False}
    }
    assert caps["c.n"]["long"]["searchable"] is True
    mapping = es.indices.get_mapping(index=nested_index)[nested_index]["mappings"]
    assert mapping["properties"]["c"]["type"] == "nested"
    assert mapping["properties"]["c"]["properties"]["r"]["type"] == "nested"


def test_walks_see_parents_once(es: Elasticsearch, nested_index: str) -> None:
    pit = es.open_point_in_time(index=nested_index, keep_alive="1m")["id"]
    try:
        seen, after = [], None
        while True:
            page = es.search(pit={"id": pit}, size=1, sort=["_shard_doc"], search_after=after)
            if not page["hits"]["hits"]:
                break
            seen += ids(page)
            after = page["hits"]["hits"][-1]["sort"]
        assert sorted(seen) == ["1", "2", "3", "4"]
    finally:
        es.close_point_in_time(id=pit)
    scrolled = es.search(index=nested_index, scroll="1m", size=2)
    seen = ids(scrolled)
    while True:
        scrolled = es.scroll(scroll_id=scrolled["_scroll_id"], scroll="1m")
        if not scrolled["hits"]["hits"]:
            break
        seen += ids(scrolled)
    es.clear_scroll(scroll_id=scrolled["_scroll_id"])
    assert sorted(seen) == ["1", "2", "3", "4"]


def sorted_by(es: Elasticsearch, index: str, spec: dict, **options: Any) -> list[tuple[str, Any]]:
    """(id, nested sort value) of each hit sorted by `spec` then `_doc`."""
    found = es.search(index=index, sort=[spec, "_doc"], **options)
    return [(h["_id"], h["sort"][0]) for h in found["hits"]["hits"]]


def test_nested_sort(es: Elasticsearch, nested_index: str) -> None:
    big, small = 2**63 - 1, -(2**63)
    nested = {"path": "c"}
    ascending = sorted_by(es, nested_index, {"c.n": {"order": "asc", "nested": nested}})
    assert ascending == [("1", 1), ("2", 1), ("3", 2), ("4", big)]
    descending = sorted_by(es, nested_index, {"c.n": {"order": "desc", "nested": nested}})
    assert descending == [("2", 4), ("1", 3), ("3", 2), ("4", small)]
    only_x = {"path": "c", "filter": {"term": {"c.a": "x"}}}
    summed = sorted_by(es, nested_index, {"c.n": {"mode": "sum", "nested": only_x}})
    assert summed == [("3", 2), ("1", 4), ("2", 4), ("4", big)]
    first_child = {"path": "c", "max_children": 1}
    assert sorted_by(es, nested_index, {"c.n": {"order": "desc", "nested": first_child}}, size=3) == [
        ("3", 2),
        ("1", 1),
        ("2", 1),
    ]
    by_term = sorted_by(es, nested_index, {"c.a": {"order": "desc", "nested": only_x}})
    assert by_term == [("1", "x"), ("2", "x"), ("3", "x"), ("4", None)]
    page = es.search(
        index=nested_index, sort=[{"c.n": {"order": "desc", "nested": nested}}], search_after=[3], size=5
    )
    assert [(h["_id"], h["sort"]) for h in page["hits"]["hits"]] == [("3", [2]), ("4", [small])]


def test_nested_sort_columns_do_not_outlive_their_requests(clocked) -> None:
    """Each distinct nested sort builds its column per segment; those no request holds are
    bounded, so requests naming ever new filters keep no more."""
    es = Elasticsearch(str(clocked.http.base_url), request_timeout=60)
    es.indices.create(index="n", mappings=MAPPING)
    for doc_id, doc in DOCS.items():
        es.index(index="n", id=doc_id, document=doc)
    es.indices.refresh(index="n")
    for n in range(20):
        nested = {"path": "c", "filter": {"range": {"c.n": {"gte": n}}}}
        es.search(index="n", sort=[{"c.n": {"nested": nested}}])
    segments = [
        view.segment for shard in clocked.node.indices["n"].shards for view in shard.published_views()
    ]
    assert any(s._derived for s in segments)  # built here, in the node's process
    assert all(len(s._derived) <= 8 and not s._holds for s in segments)
    es.close()


def test_nested_sort_refusals(es: Elasticsearch, nested_index: str) -> None:
    for sort, reason in (
        ([{"c.n": "asc"}], "it is mandatory to set the [nested] context on the nested sort field: [c.n]."),
        (
            [{"c.n": {"nested": {"path": "title"}}}],
            "[nested] failed to find nested object under path [title]",
        ),
    ):
        with pytest.raises(BadRequestError) as refused:
            es.search(index=nested_index, sort=sort)
        assert refused.value.body["error"]["root_cause"][0]["type"] == "query_shard_exception"
        assert refused.value.body["error"]["root_cause"][0]["reason"] == reason


def test_nested_and_reverse_nested_aggregations(es: Elasticsearch, nested_index: str) -> None:
    aggs = {
        "c": {
            "nested": {"path": "c"},
            "aggs": {
                "a": {
                    "terms": {"field": "c.a"},
                    "aggs": {
                        "n": {"sum": {"field": "c.n"}},
                        "back": {"reverse_nested": {}, "aggs": {"titles": {"terms": {"field": "title"}}}},
                    },
                },
                "r": {
                    "nested": {"path": "c.r"},
                    "aggs": {"z": {"max": {"field": "c.r.z"}}, "up": {"reverse_nested": {"path": "c"}}},
                },
            },
        }
    }
    found = es.search(index=nested_index, aggs=aggs, size=0)["aggregations"]["c"]
    assert found["doc_count"] == 6
    by_key = {b["key"]: b for b in found["a"]["buckets"]}
    assert {k: (b["doc_count"], b["n"]["value"]) for k, b in by_key.items()} == {
        "x": (4, 10.0),
        "y": (2, 3.0),
    }
    assert by_key["x"]["back"]["doc_count"] == 3  # each parent once, though doc 1 has two x objects
    assert [b["key"] for b in by_key["x"]["back"]["titles"]["buckets"]] == ["one", "three", "two"]
    assert (found["r"]["doc_count"], found["r"]["z"]["value"], found["r"]["up"]["doc_count"]) == (3, 7.0, 2)
    # Only the parents the query matched are aggregated.
    narrowed = es.search(index=nested_index, query={"term": {"title": "two"}}, aggs=aggs, size=0)
    assert narrowed["aggregations"]["c"]["doc_count"] == 2


def test_aggregation_refusals(es: Elasticsearch, nested_index: str, new_index) -> None:
    with pytest.raises(BadRequestError) as refused:
        es.search(index=nested_index, aggs={"x": {"reverse_nested": {}}}, size=0)
    assert refused.value.body["error"]["root_cause"][0]["reason"] == (
        "Reverse nested aggregation [x] can only be used inside a [nested] aggregation"
    )
    with pytest.raises(BadRequestError) as refused:
        es.search(index=nested_index, aggs={"x": {"nested": {}}}, size=0)
    assert (
        refused.value.body["error"]["root_cause"][0]["reason"]
        == "Missing [path] field for nested aggregation [x]"
    )
    name = new_index(mappings={"properties": {"o": {"properties": {"k": {"type": "keyword"}}}}}, suffix="-o")
    with pytest.raises(BadRequestError) as refused:
        es.search(index=name, aggs={"x": {"nested": {"path": "o"}}}, size=0)
    assert refused.value.body["error"]["root_cause"][0]["type"] == "aggregation_execution_exception"
    unmapped = es.search(index=name, aggs={"x": {"nested": {"path": "nowhere"}}}, size=0)
    assert unmapped["aggregations"]["x"] == {"doc_count": 0}


# -- correctness against brute force over the sources ----------------------------------------

OBJECTS = st.lists(
    st.fixed_dictionaries({"a": st.sampled_from(["x", "y", "z"]), "n": st.integers(0, 4)}), max_size=4
)


def brute(docs: dict[str, list[dict]], a: str, n_min: int, mode: str) -> dict[str, float]:
    """The expected hits and scores: parents with an object of `a` whose `n` >= n_min, scored by
    the mode over those objects' `n`."""
    out = {}
    for doc_id, objects in docs.items():
        scores = [float(o["n"]) for o in objects if o["a"] == a and o["n"] >= n_min]
        if scores:
            out[doc_id] = {
                "sum": sum(scores),
                "avg": sum(scores) / len(scores),
                "max": max(scores),
                "min": min(scores),
            }[mode]
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.dictionaries(st.sampled_from([str(i) for i in range(12)]), OBJECTS, max_size=12),
    a=st.sampled_from(["x", "y"]),
    n_min=st.integers(0, 4),
    mode=st.sampled_from(["sum", "avg", "max", "min"]),
)
def test_matches_brute_force(
    es: Elasticsearch, http: httpx.Client, index_name: str, docs, a, n_min, mode
) -> None:
    name = f"{index_name}-bf"
    http.delete(f"/{name}")
    es.indices.create(index=name, mappings=MAPPING, settings={"number_of_shards": 2})
    try:
        operations: list[dict] = []
        for doc_id, objects in docs.items():
            operations += [{"index": {"_id": doc_id}}, {"c": objects}]
        if operations:
            es.bulk(index=name, operations=operations, refresh=True)
        query = {"bool": {"filter": [{"term": {"c.a": a}}, {"range": {"c.n": {"gte": n_min}}}]}}
        found = es.search(index=name, query=by_n(mode, query), size=20)
        got = {h["_id"]: h["_score"] for h in found["hits"]["hits"]}
        assert got == pytest.approx(brute(docs, a, n_min, mode))
    finally:
        http.delete(f"/{name}")


# -- concurrency, merges, restart --------------------------------------------------------------


def test_concurrent_updates_keep_parents_and_children_together(es: Elasticsearch, nested_index: str) -> None:
    """Writers replace documents whose objects all carry the document's version; readers check
    that every hit's children (inner hits) carry its version: one snapshot holds both."""
    stop = threading.Event()
    failures: list[str] = []

    def doc(version: int) -> dict:
        return {"title": str(version), "c": [{"a": str(version), "n": version}] * 3}

    def writer(offset: int) -> None:
        try:
            write(offset)
        except Exception as e:  # reported by the assertion below
            failures.append(repr(e))

    def write(offset: int) -> None:
        version = offset
        while not stop.is_set():
            version += 4
            doc_id = f"w{version % 8}"
            if version % 3 == 0:
                es.options(ignore_status=404).delete(index=nested_index, id=doc_id)
            else:
                es.index(index=nested_index, id=doc_id, document=doc(version))

    def refresher() -> None:
        while not stop.is_set():
            es.indices.refresh(index=nested_index)

    def reader() -> None:
        query = {"nested": {"path": "c", "query": {"match_all": {}}, "inner_hits": {"size": 10}}}
        for _ in range(30):
            found = es.search(index=nested_index, query=query, size=20)
            for hit in found["hits"]["hits"]:
                if not hit["_id"].startswith("w"):
                    continue
                inner = hit["inner_hits"]["c"]["hits"]
                versions = {h["_source"]["a"] for h in inner["hits"]}
                if inner["total"]["value"] != 3 or versions != {hit["_source"]["title"]}:
                    failures.append(f"{hit['_id']}: {hit['_source']['title']} with {versions}")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)] + [
        threading.Thread(target=refresher)
    ]
    for t in threads:
        t.start()
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in readers:
        t.start()
    for t in readers:
        t.join()
    stop.set()
    for t in threads:
        t.join()
    assert failures == []


def test_pit_walk_sees_each_parent_once_under_writes(es: Elasticsearch, new_index) -> None:
    """A PIT walk by a nested query while writers replace and delete the documents and refresh:
    each parent of the snapshot once, with the children it had then."""
    name = new_index(mappings=MAPPING, settings={"number_of_shards": 2})
    operations: list[dict] = []
    for i in range(150):
        operations += [{"index": {"_id": str(i)}}, {"title": "v0", "c": [{"a": "all", "n": i}, {"a": "v0"}]}]
    es.bulk(index=name, operations=operations, refresh=True)
    pit = es.open_point_in_time(index=name, keep_alive="1m")["id"]
    stop = threading.Event()
    errors: list[str] = []

    def writer(offset: int) -> None:
        try:
            version = 0
            while not stop.is_set():
                version += 1
                doc_id = str((version * 7 + offset) % 150)
                if version % 5 == 0:
                    es.delete(index=name, id=doc_id)
                    es.index(index=name, id=doc_id, document={"title": "late", "c": [{"a": "all"}]})
                else:
                    es.index(index=name, id=doc_id, document={"title": f"v{version}", "c": [{"a": "all"}]})
                if version % 10 == 0:
                    es.indices.refresh(index=name)
        except Exception as e:  # reported by the assertion below
            errors.append(repr(e))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        seen: list[str] = []
        after = None
        query = {"nested": {"path": "c", "query": {"term": {"c.a": "all"}}, "inner_hits": {}}}
        while True:
            page = es.search(pit={"id": pit}, query=query, size=17, sort=["_shard_doc"], search_after=after)
            hits = page["hits"]["hits"]
            if not hits:
                break
            for hit in hits:
                assert hit["_source"]["title"] == "v0"
                assert hit["inner_hits"]["c"]["hits"]["hits"][0]["_source"]["n"] == int(hit["_id"])
            seen += [h["_id"] for h in hits]
            after = hits[-1]["sort"]
    finally:
        stop.set()
        for t in threads:
            t.join()
        es.close_point_in_time(id=pit)
    assert errors == []
    assert sorted(seen, key=int) == [str(i) for i in range(150)]


def test_merges_and_restart_keep_children_with_parents(tmp_path) -> None:
    """Twelve segments with updates and deletes between them, merged by the policy on a node
    served over HTTP; then the folder served again after a restart."""
    folder = tmp_path / "data"
    with (
        serving_clocked(folder) as clocked,
        Elasticsearch(str(clocked.http.base_url), request_timeout=60) as es,
    ):
        es.indices.create(index="n", mappings=MAPPING, settings={"number_of_shards": 1})
        for round_ in range(12):
            operations: list[dict] = []
            for i in range(20):
                doc_id = str((round_ * 7 + i) % 40)
                operations += [
                    {"index": {"_id": doc_id}},
                    {"c": [{"a": doc_id, "n": round_}, {"a": "all", "n": i}]},
                ]
            operations += [{"delete": {"_id": str(round_ % 40)}}]
            es.bulk(index="n", operations=operations)
            es.indices.refresh(index="n")
        expected = es.search(index="n", query={"match_all": {}}, size=100)
        latest = {h["_id"]: h["_source"] for h in expected["hits"]["hits"]}
        (shard,) = clocked.node.indices["n"].shards
        before = len(shard.segments)
        while shard.maybe_merge():
            pass
        es.indices.refresh(index="n")
        assert len(shard.segments) < before
        check_latest(es, latest)

    with running_server(folder) as (url, _), Elasticsearch(url, request_timeout=60) as es:
        check_latest(es, latest)


def check_latest(es: Elasticsearch, latest: dict[str, dict]) -> None:
    """Each document's own object matches it alone; the shared one matches every document."""
    for doc_id, source in latest.items():
        query = {"nested": {"path": "c", "query": both(doc_id, source["c"][0]["n"])}}
        assert ids(es.search(index="n", query=query)) == [doc_id]
    counted = es.count(index="n", query={"nested": {"path": "c", "query": {"term": {"c.a": "all"}}}})
    assert counted["count"] == len(latest)
    assert es.indices.stats(index="n", metric="docs")["_all"]["primaries"]["docs"]["count"] == 3 * len(latest)


def test_acknowledged_nested_documents_survive_kill_9(tmp_path) -> None:
    """Written without a refresh (in the translog only), updated and deleted, then the server
    killed: the restarted node replays them, each parent with the children it was last given."""
    folder = tmp_path / "data"
    with running_server(folder) as (url, process), Elasticsearch(url, request_timeout=60) as es:
        es.indices.create(index="n", mappings=MAPPING, settings={"refresh_interval": -1})
        operations: list[dict] = []
        for i in range(50):
            operations += [{"index": {"_id": str(i)}}, {"c": [{"a": f"a{i}", "n": i}, {"a": "all", "n": 0}]}]
        es.bulk(index="n", operations=operations)
        es.index(index="n", id="7", document={"c": [{"a": "changed", "n": 7}]})
        es.delete(index="n", id="8")
        process.kill()
        process.wait()
    with running_server(folder) as (url, _), Elasticsearch(url, request_timeout=60) as es:
        es.indices.refresh(index="n")
        shared = es.count(index="n", query={"nested": {"path": "c", "query": {"term": {"c.a": "all"}}}})
        assert shared["count"] == 48
        assert ids(es.search(index="n", query={"nested": {"path": "c", "query": both("changed", 7)}})) == [
            "7"
        ]
        assert ids(es.search(index="n", query={"nested": {"path": "c", "query": both("a9", 9)}})) == ["9"]
        assert es.count(index="n")["count"] == 49
