"""Search and count through the real HTTP API: endpoints and index expressions, every query type of
the DSL on a small corpus, and the response fields clients read.

The expected matches are worked out by hand from Elasticsearch's rules (standard analyzer: words
lowercased, no stemming; `term` not analyzed; keyword fields exact), so a query that matches one
document too many or too few fails.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import error_of
from elasticsearch import BadRequestError, Elasticsearch, NotFoundError, helpers

MAPPINGS = {
    "properties": {
        "title": {"type": "text"},
        "body": {"type": "text"},
        "tag": {"type": "keyword"},
        "code": {"type": "keyword"},
        "n": {"type": "integer"},
        "price": {"type": "double"},
        "date": {"type": "date"},
        "ok": {"type": "boolean"},
    }
}


def _corpus() -> dict[str, dict[str, Any]]:
    today = dt.datetime.now(dt.UTC).date()
    return {
        "1": {
            "title": "The quick brown fox",
            "body": "jumps over the lazy dog",
            "tag": ["animal", "fast"],
            "code": "A-100",
            "n": 1,
            "price": 10.5,
            "date": "2024-01-01",
            "ok": True,
        },
        "2": {
            "title": "Quick brown dogs",
            "body": "dogs are lazy",
            "tag": "animal",
            "code": "A-200",
            "n": 2,
            "price": 20.0,
            "date": "2024-01-15",
            "ok": False,
        },
        "3": {
            "title": "Lazy afternoon",
            "body": "the fox sleeps",
            "tag": "mood",
            "code": "B-100",
            "n": 3,
            "price": 5.0,
            "date": "2024-02-01",
        },
        "4": {
            "title": "brown paper bag",
            "body": "quick quick quick",
            "code": "B-200",
            "n": 4,
            "date": "2024-03-10",
        },
        "5": {"title": "Foxes and hounds", "tag": ["animal", "slow"], "code": "C-1", "n": 5, "price": 100.0},
        "6": {"body": "nothing relevant here", "n": 6, "date": today.isoformat()},
        "7": {"title": "fox brown quick", "n": 7, "date": (today - dt.timedelta(days=2)).isoformat()},
    }


ALL = {"1", "2", "3", "4", "5", "6", "7"}


@pytest.fixture(scope="module")
def corpus(es: Elasticsearch, http: httpx.Client) -> Iterator[str]:
    """Two shards, so every query also runs across shards."""
    name = f"search-api-{uuid.uuid4().hex[:8]}"
    es.indices.create(index=name, settings={"number_of_shards": 2}, mappings=MAPPINGS)
    helpers.bulk(es, ({"_index": name, "_id": i, "_source": d} for i, d in _corpus().items()), refresh=True)
    yield name
    http.delete(f"/{name}")


def ids_of(response: Any) -> set[str]:
    return {hit["_id"] for hit in response["hits"]["hits"]}


QUERIES = [
    ({"match_all": {}}, ALL),
    ({"match_none": {}}, set()),
    ({"match": {"title": "quick fox"}}, {"1", "2", "7"}),
    ({"match": {"title": {"query": "quick fox", "operator": "and"}}}, {"1", "7"}),
    ({"match": {"title": {"query": "quick brown fox", "minimum_should_match": 2}}}, {"1", "2", "7"}),
    ({"match": {"title": {"query": "quick brown fox", "minimum_should_match": "100%"}}}, {"1", "7"}),
    ({"match": {"title": "QUICK"}}, {"1", "2", "7"}),
    ({"match": {"n": "3"}}, {"3"}),
    ({"match_phrase": {"title": "quick brown"}}, {"1", "2"}),
    ({"match_phrase": {"title": "brown quick"}}, {"7"}),
    ({"match_phrase": {"title": {"query": "quick fox", "slop": 1}}}, {"1"}),
    ({"match_phrase": {"title": "quick fox"}}, set()),
    ({"multi_match": {"query": "fox", "fields": ["title", "body"]}}, {"1", "3", "7"}),
    ({"multi_match": {"query": "lazy dogs", "fields": ["title", "body"], "operator": "and"}}, {"2"}),
    ({"multi_match": {"query": "lazy", "fields": ["t*"]}}, {"3"}),
    ({"term": {"tag": "animal"}}, {"1", "2", "5"}),
    ({"term": {"title": "quick"}}, {"1", "2", "7"}),
    ({"term": {"title": "Quick"}}, set()),
    ({"term": {"ok": True}}, {"1"}),
    ({"term": {"n": {"value": 4}}}, {"4"}),
    ({"terms": {"tag": ["fast", "mood"]}}, {"1", "3"}),
    ({"terms": {"n": [1, 7, 99]}}, {"1", "7"}),
    ({"range": {"n": {"gte": 2, "lt": 5}}}, {"2", "3", "4"}),
    ({"range": {"price": {"gt": 10}}}, {"1", "2", "5"}),
    ({"range": {"date": {"gte": "15/01/2024", "lte": "01/03/2024", "format": "dd/MM/yyyy"}}}, {"2", "3"}),
    ({"range": {"date": {"gte": "2024-01-01", "lt": "2024-02-01"}}}, {"1", "2"}),
    ({"range": {"date": {"gte": "now-1d/d"}}}, {"6"}),
    ({"range": {"date": {"lt": "now-1d/d", "gte": "now-5d/d"}}}, {"7"}),
    ({"range": {"code": {"gte": "B", "lt": "C"}}}, {"3", "4"}),
    # Date math rounding: gt and lte round up to the end of the unit, gte and lt down to its start.
    ({"range": {"date": {"lte": "2024-01-15||/M"}}}, {"1", "2"}),
    ({"range": {"date": {"gt": "2024-01-15||/M"}}}, {"3", "4", "6", "7"}),
    ({"range": {"date": {"gte": "2024-01-15||/M", "lt": "2024-02-15||/M"}}}, {"1", "2"}),
    ({"range": {"date": {"gte": "2024-01-31||+1d", "lte": "2024-02-01"}}}, {"3"}),
    (
        {
            "range": {
                "date": {"gte": "2024-01-01T00:30:00", "lt": "2024-01-01T01:30:00", "time_zone": "+01:00"}
            }
        },
        {"1"},
    ),
    ({"multi_match": {"query": "brown fox", "fields": ["title", "body"], "type": "phrase"}}, {"1"}),
    ({"match": {"title": {"query": "", "zero_terms_query": "all"}}}, ALL),
    ({"exists": {"field": "price"}}, {"1", "2", "3", "5"}),
    ({"exists": {"field": "title"}}, ALL - {"6"}),
    ({"ids": {"values": ["1", "5", "nope"]}}, {"1", "5"}),
    ({"prefix": {"code": "A-"}}, {"1", "2"}),
    ({"prefix": {"title": {"value": "fo"}}}, {"1", "5", "7"}),
    ({"wildcard": {"code": "B-*00"}}, {"3", "4"}),
    ({"wildcard": {"code": {"value": "?-1*"}}}, {"1", "3", "5"}),
    (
        {
            "bool": {
                "must": {"match": {"title": "brown"}},
                "filter": [{"range": {"n": {"lte": 4}}}],
                "must_not": [{"term": {"tag": "animal"}}],
            }
        },
        {"4"},
    ),
    ({"bool": {"should": [{"term": {"tag": "fast"}}, {"term": {"tag": "mood"}}]}}, {"1", "3"}),
    (
        {
            "bool": {
                "should": [
                    {"match": {"title": "quick"}},
                    {"match": {"title": "brown"}},
                    {"match": {"title": "fox"}},
                ],
                "minimum_should_match": 2,
            }
        },
        {"1", "2", "7"},
    ),
    ({"bool": {"must_not": {"exists": {"field": "tag"}}}}, {"4", "6", "7"}),
    # Next to a filter clause, should clauses only add score: minimum_should_match defaults to 0.
    ({"bool": {"filter": {"term": {"tag": "animal"}}, "should": {"term": {"n": 2}}}}, {"1", "2", "5"}),
    ({"constant_score": {"filter": {"term": {"tag": "animal"}}}}, {"1", "2", "5"}),
    ({"query_string": {"query": "title:quick AND NOT tag:fast"}}, {"2", "7"}),
    ({"query_string": {"query": "title:(quick OR lazy) AND n:[3 TO 7]"}}, {"3", "7"}),
    ({"query_string": {"query": "fox", "fields": ["title", "body"]}}, {"1", "3", "7"}),
    (
        {"query_string": {"query": "quick fox", "default_field": "title", "default_operator": "AND"}},
        {"1", "7"},
    ),
    ({"query_string": {"query": 'title:"quick brown"'}}, {"1", "2"}),
    ({"query_string": {"query": "title:fo*"}}, {"1", "5", "7"}),
    ({"query_string": {"query": "code:A-100 OR price:>50"}}, {"1", "5"}),
    ({"query_string": {"query": "date:[2024-01-10 TO 2024-02-28]"}}, {"2", "3"}),
    ({"simple_query_string": {"query": '"quick brown" | lazy', "fields": ["title"]}}, {"1", "2", "3"}),
    ({"simple_query_string": {"query": "fox + brown", "fields": ["title"]}}, {"1", "7"}),
    (
        {"simple_query_string": {"query": "quick fox", "fields": ["title"], "default_operator": "and"}},
        {"1", "7"},
    ),
    ({"simple_query_string": {"query": "fo*", "fields": ["title"]}}, {"1", "5", "7"}),
    (
        {"simple_query_string": {"query": "brown -dogs", "fields": ["title"], "default_operator": "and"}},
        {"1", "4", "7"},
    ),
]


@pytest.mark.parametrize(("query", "expected"), QUERIES, ids=[str(q) for q, _ in QUERIES])
def test_query_types_match_what_elasticsearch_matches(
    es: Elasticsearch, corpus: str, query, expected
) -> None:
    response = es.search(index=corpus, query=query, size=20)
    assert ids_of(response) == expected
    assert response["hits"]["total"] == {"value": len(expected), "relation": "eq"}
    assert es.count(index=corpus, query=query)["count"] == len(expected)


def test_filters_and_constant_score_give_constant_scores(es: Elasticsearch, corpus: str) -> None:
    filtered = es.search(index=corpus, query={"bool": {"filter": {"term": {"tag": "animal"}}}})
    assert {h["_score"] for h in filtered["hits"]["hits"]} == {0.0}
    assert filtered["hits"]["max_score"] == 0.0
    boosted = es.search(
        index=corpus, query={"constant_score": {"filter": {"term": {"tag": "animal"}}, "boost": 2.5}}
    )
    assert {h["_score"] for h in boosted["hits"]["hits"]} == {2.5}
    everything = es.search(index=corpus, query={"match_all": {"boost": 1.5}}, size=20)
    assert {h["_score"] for h in everything["hits"]["hits"]} == {1.5}


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"bogus": {}}, "unknown query [bogus]"),
        ({"match": {"title": {"query": "x", "bogus": 1}}}, "[match] query does not support [bogus]"),
        ({"term": {"tag": {"value": "x", "bogus": 1}}}, "[term] query does not support [bogus]"),
        ({"range": {"n": {"gte": 1, "bogus": 2}}}, "[range] query does not support [bogus]"),
        (
            {"match_phrase": {"title": {"query": "x", "bogus": 1}}},
            "[match_phrase] query does not support [bogus]",
        ),
        ({"prefix": {"code": {"value": "x", "bogus": 1}}}, "[prefix] query does not support [bogus]"),
    ],
)
def test_unknown_query_or_option_is_a_parsing_exception(
    es: Elasticsearch, corpus: str, query, reason
) -> None:
    with pytest.raises(BadRequestError) as info:
        es.search(index=corpus, query=query)
    error = info.value.body["error"]
    assert info.value.meta.status == 400
    assert error["type"] == "parsing_exception"
    assert error["root_cause"][0]["type"] == "parsing_exception"
    assert error["reason"] == reason


# ---------------------------------------------------------------------------------------------
# Endpoints, index expressions and URL parameters


def test_every_search_endpoint_form(http: httpx.Client, corpus: str) -> None:
    # Other tests' indices may be searched too: `ids` matches in any of them whatever their mappings.
    body = {"query": {"ids": {"values": ["1", "2", "5"]}}}
    for method in ("GET", "POST"):
        for path in (f"/{corpus}/_search", "/_search", f"/{corpus},{corpus}/_search", "/_all/_search"):
            response = http.request(method, path, json=body, params={"size": "100"})
            assert response.status_code == 200, (method, path, response.text)
            hits = [h for h in response.json()["hits"]["hits"] if h["_index"] == corpus]
            assert {h["_id"] for h in hits} == {"1", "2", "5"}, (method, path)


def test_index_lists_and_wildcards(es: Elasticsearch, http: httpx.Client, corpus: str, new_index) -> None:
    other = new_index(suffix="-other")
    es.index(index=other, id="x", document={"tag": "animal"}, refresh=True)
    query = {"term": {"tag": "animal"}}
    both = es.search(index=f"{corpus},{other}", query=query, size=20)
    assert {(h["_index"], h["_id"]) for h in both["hits"]["hits"]} == {
        (corpus, "1"),
        (corpus, "2"),
        (corpus, "5"),
        (other, "x"),
    }
    assert both["_shards"]["total"] == 3
    by_wildcard = es.search(index=f"{other[:-3]}*", query=query)
    assert ids_of(by_wildcard) == {"x"}
    excluded = es.search(index=f"{corpus[:-4]}*,{other[:-3]}*,-{other}", query=query)
    assert {h["_index"] for h in excluded["hits"]["hits"]} == {corpus}
    assert es.count(index=f"{corpus},{other}", query=query)["count"] == 4


def test_missing_indices_and_the_options_that_allow_them(http: httpx.Client, corpus: str) -> None:
    missing = http.get("/no-such-index-zz/_search")
    assert missing.status_code == 404
    error = error_of(missing)
    assert error["type"] == "index_not_found_exception"
    assert error["reason"] == "no such index [no-such-index-zz]"
    in_list = http.get(f"/{corpus},no-such-index-zz/_search")
    assert in_list.status_code == 404
    ignored = http.get(
        f"/{corpus},no-such-index-zz/_search", params={"ignore_unavailable": "true", "size": "0"}
    )
    assert ignored.status_code == 200
    assert ignored.json()["hits"]["total"]["value"] == len(ALL)
    assert ignored.json()["_shards"]["total"] == 2
    # A wildcard matching nothing is an empty search, unless allow_no_indices=false.
    empty = http.get("/no-such-prefix-zz*/_search")
    assert empty.status_code == 200
    assert empty.json()["hits"] == {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []}
    assert empty.json()["_shards"]["total"] == 0
    refused = http.get("/no-such-prefix-zz*/_search", params={"allow_no_indices": "false"})
    assert refused.status_code == 404
    assert error_of(refused)["reason"] == "no such index [no-such-prefix-zz*]"
    counted = http.get("/no-such-index-zz/_count")
    assert counted.status_code == 404


def test_missing_index_through_the_client(es: Elasticsearch) -> None:
    with pytest.raises(NotFoundError) as info:
        es.search(index="no-such-index-zz")
    assert info.value.body["error"]["type"] == "index_not_found_exception"
    ignored = es.search(index="no-such-index-zz", ignore_unavailable=True)
    assert ignored["hits"]["hits"] == []


def test_url_parameters(http: httpx.Client, corpus: str) -> None:
    def search(**params: str) -> dict[str, Any]:
        response = http.get(f"/{corpus}/_search", params=params)
        assert response.status_code == 200, response.text
        return response.json()

    assert ids_of(search(q="title:quick")) == {"1", "2", "7"}
    assert ids_of(search(q="quick", df="body")) == {"4"}
    assert ids_of(search(q="quick fox", df="title", default_operator="AND")) == {"1", "7"}
    page = search(sort="n:desc,_doc", size="2", **{"from": "1"})
    assert [h["_id"] for h in page["hits"]["hits"]] == ["6", "5"]
    assert [h["sort"][0] for h in page["hits"]["hits"]] == [6, 5]
    assert page["hits"]["max_score"] is None
    ascending = search(sort="n", size="3")
    assert [h["_id"] for h in ascending["hits"]["hits"]] == ["1", "2", "3"]
    only_title = search(q="n:1", _source="title")
    assert only_title["hits"]["hits"][0]["_source"] == {"title": "The quick brown fox"}
    no_source = search(q="n:1", _source="false")
    assert "_source" not in no_source["hits"]["hits"][0]
    includes = search(q="n:1", _source_includes="t*,n", _source_excludes="tag")
    assert includes["hits"]["hits"][0]["_source"] == {"title": "The quick brown fox", "n": 1}
    assert search(track_total_hits="2", size="0")["hits"]["total"] == {"value": 2, "relation": "gte"}
    assert "total" not in search(track_total_hits="false")["hits"]
    assert search(rest_total_hits_as_int="true")["hits"]["total"] == len(ALL)


def test_count_with_any_query(es: Elasticsearch, http: httpx.Client, corpus: str) -> None:
    assert es.count(index=corpus)["count"] == len(ALL)
    assert es.count(index=corpus, query={"range": {"n": {"gt": 5}}})["count"] == 2
    by_get = http.request("GET", f"/{corpus}/_count", json={"query": {"match": {"title": "fox"}}})
    assert by_get.json() == {"count": 2, "_shards": {"total": 2, "successful": 2, "skipped": 0, "failed": 0}}
    by_q = http.post(f"/{corpus}/_count", params={"q": "tag:animal"})
    assert by_q.json()["count"] == 3
    not_a_count_option = http.post(f"/{corpus}/_count", json={"query": {"match_all": {}}, "size": 3})
    assert not_a_count_option.status_code == 400
    assert error_of(not_a_count_option)["reason"] == "request does not support [size]"
    refused = http.post(f"/{corpus}/_count", json={"query": {"bogus": {}}})
    assert refused.status_code == 400
    assert error_of(refused)["type"] == "parsing_exception"


# ---------------------------------------------------------------------------------------------
# Response fields


def test_response_envelope(es: Elasticsearch, corpus: str) -> None:
    response = es.search(index=corpus, query={"match": {"title": "fox"}})
    assert isinstance(response["took"], int) and response["took"] >= 0
    assert response["timed_out"] is False
    assert response["_shards"] == {"total": 2, "successful": 2, "skipped": 0, "failed": 0}
    hits = response["hits"]
    assert hits["total"] == {"value": 2, "relation": "eq"}
    assert hits["max_score"] == hits["hits"][0]["_score"]
    for hit in hits["hits"]:
        assert hit["_index"] == corpus
        assert isinstance(hit["_score"], float)
        assert "sort" not in hit
        assert "_version" not in hit and "_seq_no" not in hit and "_explanation" not in hit


def test_track_total_hits_forms(es: Elasticsearch, corpus: str) -> None:
    assert es.search(index=corpus, track_total_hits=True)["hits"]["total"] == {"value": 7, "relation": "eq"}
    assert es.search(index=corpus, track_total_hits=7)["hits"]["total"] == {"value": 7, "relation": "eq"}
    assert es.search(index=corpus, track_total_hits=3)["hits"]["total"] == {"value": 3, "relation": "gte"}
    untracked = es.search(index=corpus, track_total_hits=False, size=2)
    assert "total" not in untracked["hits"]
    assert len(untracked["hits"]["hits"]) == 2
    as_int = es.search(index=corpus, rest_total_hits_as_int=True, query={"term": {"tag": "animal"}})
    assert as_int["hits"]["total"] == 3


def test_boolean_sort_values_are_longs_and_walk_back_in(es: Elasticsearch, corpus: str) -> None:
    """Elasticsearch's boolean DocValueFormat keeps the default `formatSortValue`: a boolean sort
    value is the long 0 or 1 (a missing one the long it sorts as), and `search_after` takes those
    longs, JSON booleans and "true"/"false" alike."""
    sort = [{"ok": "asc"}, {"n": "asc"}]
    full = es.search(index=corpus, sort=sort, size=10)["hits"]["hits"]
    assert [(h["_id"], h["sort"]) for h in full[:3]] == [("2", [0, 2]), ("1", [1, 1]), ("3", [2**63 - 1, 3])]
    assert all(type(h["sort"][0]) is int for h in full)
    walked: list[str] = []
    after = None
    while True:
        page = es.search(index=corpus, sort=sort, size=2, search_after=after)["hits"]["hits"]
        if not page:
            break
        walked += [h["_id"] for h in page]
        after = page[-1]["sort"]
    assert walked == [h["_id"] for h in full] == ["2", "1", "3", "4", "5", "6", "7"]
    for cursor in ([False, 2], ["false", 2], [0, 2]):
        resumed = es.search(index=corpus, sort=sort, size=2, search_after=cursor)["hits"]["hits"]
        assert [h["_id"] for h in resumed] == ["1", "3"]
    past_true = es.search(index=corpus, sort=sort, size=1, search_after=[True, 1])["hits"]["hits"]
    assert [h["_id"] for h in past_true] == ["3"]


def test_size_zero_has_no_max_score(es: Elasticsearch, corpus: str) -> None:
    response = es.search(index=corpus, size=0, query={"match": {"title": "fox"}})
    assert response["hits"] == {"total": {"value": 2, "relation": "eq"}, "max_score": None, "hits": []}
    tracked = es.search(index=corpus, size=0, track_scores=True, aggs={"n": {"max": {"field": "n"}}})
    assert tracked["hits"]["max_score"] is None
    assert tracked["aggregations"]["n"]["value"] == 7
    one = es.search(index=corpus, size=1, query={"match": {"title": "fox"}})
    assert one["hits"]["max_score"] == one["hits"]["hits"][0]["_score"] > 0


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (False, None),
        (True, {"title": "The quick brown fox", "code": "A-100", "n": 1, "tag": ["animal", "fast"]}),
        ("title", {"title": "The quick brown fox"}),
        (["title", "n"], {"title": "The quick brown fox", "n": 1}),
        ({"includes": ["t*"], "excludes": ["tag"]}, {"title": "The quick brown fox"}),
        ({"excludes": ["t*", "b*", "p*", "d*", "o*"]}, {"code": "A-100", "n": 1}),
        ({"includes": "nothing*"}, {}),
    ],
)
def test_source_filtering(es: Elasticsearch, corpus: str, source, expected) -> None:
    hit = es.search(index=corpus, query={"ids": {"values": ["1"]}}, source=source)["hits"]["hits"][0]
    if expected is None:
        assert "_source" not in hit
    elif source is True:
        assert {k: hit["_source"][k] for k in expected} == expected
    else:
        assert hit["_source"] == expected


def test_fields_and_docvalue_fields(es: Elasticsearch, corpus: str) -> None:
    hit = es.search(
        index=corpus,
        query={"ids": {"values": ["1"]}},
        source=False,
        fields=["title", "tag", {"field": "date", "format": "yyyy/MM/dd"}, "n"],
        docvalue_fields=["price", {"field": "code"}, {"field": "ok"}],
    )["hits"]["hits"][0]
    assert "_source" not in hit
    assert hit["fields"] == {
        "title": ["The quick brown fox"],
        "tag": ["animal", "fast"],
        "date": ["2024/01/01"],
        "n": [1],
        "price": [10.5],
        "code": ["A-100"],
        "ok": [True],
    }
    dates = es.search(index=corpus, query={"ids": {"values": ["2"]}}, docvalue_fields=["date"])["hits"][
        "hits"
    ][0]
    assert dates["fields"] == {"date": ["2024-01-15T00:00:00.000Z"]}
    assert "_source" in dates
    patterns = es.search(
        index=corpus,
        query={"ids": {"values": ["2"]}},
        source=False,
        fields=["t*", "c*"],
        docvalue_fields=[{"field": "date", "format": "yyyy"}],
    )["hits"]["hits"][0]
    assert patterns["fields"] == {
        "title": ["Quick brown dogs"],
        "tag": ["animal"],
        "code": ["A-200"],
        "date": ["2024"],
    }


def test_docvalue_fields_of_a_text_field_name_the_index(es: Elasticsearch, corpus: str) -> None:
    """TextFieldMapper refuses fielddata naming the field and its index, for docvalue_fields as
    for aggregations and sorting."""
    with pytest.raises(BadRequestError) as info:
        es.search(index=corpus, query={"ids": {"values": ["1"]}}, docvalue_fields=["title"])
    cause = info.value.body["error"]["root_cause"][0]
    assert cause["type"] == "illegal_argument_exception"
    assert cause["reason"] == (
        f"Fielddata is disabled on [title] in [{corpus}]. Text fields are not optimised for operations that "
        "require per-document field data like aggregations and sorting, so these operations are disabled by "
        "default. Please use a keyword field instead. Alternatively, set fielddata=true on [title] in order "
        "to load field data by uninverting the inverted index. Note that this can use significant memory."
    )


def test_stored_fields(es: Elasticsearch, corpus: str) -> None:
    hit = es.search(index=corpus, query={"ids": {"values": ["1"]}}, stored_fields=[])["hits"]["hits"][0]
    assert hit["_id"] == "1"
    assert "_source" not in hit
    with_source = es.search(
        index=corpus, query={"ids": {"values": ["1"]}}, stored_fields=["title"], source=["n"]
    )["hits"]["hits"][0]
    assert with_source["_source"] == {"n": 1}


def test_stored_fields_none_drops_metadata(es: Elasticsearch, corpus: str) -> None:
    """Elasticsearch's fetch phase loads no stored field for `_none_`: hits lose `_id`, `_routing`
    and `_source`, and keep what does not come from stored fields (index, score, sort values,
    version, doc values)."""
    hit = es.search(index=corpus, query={"ids": {"values": ["1"]}}, stored_fields="_none_")["hits"]["hits"][0]
    assert hit == {"_index": corpus, "_score": 1.0}
    es.index(index=corpus, id="9", document={"n": 9}, routing="r9", refresh=True)
    try:
        routed = es.search(
            index=corpus,
            query={"range": {"n": {"gte": 5}}},
            stored_fields="_none_",
            source=False,
            version=True,
            docvalue_fields=["n"],
            sort=[{"n": "desc"}],
            size=2,
        )["hits"]["hits"]
        assert routed == [
            {"_index": corpus, "_version": 1, "_score": None, "fields": {"n": [9]}, "sort": [9]},
            {"_index": corpus, "_version": 1, "_score": None, "fields": {"n": [7]}, "sort": [7]},
        ]
        shown = es.search(index=corpus, query={"ids": {"values": ["9"]}}, stored_fields=[])["hits"]["hits"][0]
        assert shown["_id"] == "9" and shown["_routing"] == "r9"
    finally:
        es.delete(index=corpus, id="9", routing="r9", refresh=True)


def test_version_seq_no_and_explain_false(es: Elasticsearch, corpus: str) -> None:
    es.index(index=corpus, id="8", document={"n": 8}, refresh=True)
    es.index(index=corpus, id="8", document={"n": 8, "again": True}, refresh=True)
    try:
        hit = es.search(
            index=corpus,
            query={"ids": {"values": ["8"]}},
            version=True,
            seq_no_primary_term=True,
            explain=False,
        )["hits"]["hits"][0]
        assert hit["_version"] == 2
        assert hit["_seq_no"] >= 1
        assert hit["_primary_term"] == 1
        assert "_explanation" not in hit
        plain = es.search(index=corpus, query={"ids": {"values": ["8"]}})["hits"]["hits"][0]
        assert "_version" not in plain and "_seq_no" not in plain and "_primary_term" not in plain
    finally:
        es.delete(index=corpus, id="8", refresh=True)


def test_ids_that_need_json_escaping_come_back_exactly(es: Elasticsearch, new_index) -> None:
    name = new_index()
    ids = ["plain", 'quote"inside', "back\\slash", "tab\there", "accent-é", "emoji-🙂"]
    for i, doc_id in enumerate(ids):
        es.index(index=name, id=doc_id, document={"n": i})
    es.indices.refresh(index=name)
    hits = es.search(index=name, sort=["n"], size=10)["hits"]["hits"]
    assert [h["_id"] for h in hits] == ids
    scrolled = es.search(index=name, scroll="1m", sort=["_doc"], size=10)
    assert sorted(h["_id"] for h in scrolled["hits"]["hits"]) == sorted(ids)
    es.clear_scroll(scroll_id=scrolled["_scroll_id"])


def test_index_query_string_lenient_is_the_default_leniency(
    es: Elasticsearch, http: httpx.Client, new_index
) -> None:
    """`index.query_string.lenient` (static) makes `query_string` lenient unless the query says;
    without it a value its field cannot parse is a 400."""
    properties = {"n": {"type": "long"}, "k": {"type": "keyword"}}
    lenient = new_index(
        settings={"index.query_string.lenient": True}, mappings={"properties": properties}, suffix="-l"
    )
    strict = new_index(mappings={"properties": properties}, suffix="-s")
    for index in (lenient, strict):
        es.index(index=index, id="1", document={"n": 1, "k": "a"}, refresh=True)
    query = {"query_string": {"query": "abc OR k:a", "default_field": "n"}}
    assert es.search(index=lenient, query=query)["hits"]["total"]["value"] == 1
    refused = http.post(f"/{strict}/_search", json={"query": query})
    assert refused.status_code == 400
    assert (
        refused.json()["error"]["root_cause"][0]["reason"]
        == 'failed to create query: For input string: "abc"'
    )
    explicit = http.post(
        f"/{lenient}/_search", json={"query": {"query_string": {**query["query_string"], "lenient": False}}}
    )
    assert explicit.status_code == 400
    assert es.indices.get_settings(index=lenient)[lenient]["settings"]["index"]["query_string"] == {
        "lenient": "true"
    }
    changed = http.put(f"/{lenient}/_settings", json={"index.query_string.lenient": False})
    assert changed.status_code == 400
    assert "Can't update non dynamic settings [[index.query_string.lenient]]" in error_of(changed)["reason"]
