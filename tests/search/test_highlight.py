"""Highlighting through the official client and HTTP: fragments around what each kind of query
matched, every option (top-level and per field), PIT walks and scrolls, concurrent searches beside
writers, and malformed requests refused with a 400 naming the problem."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import pytest
from conftest import error_of, search_ok
from elasticsearch import Elasticsearch

TEXT = "The quick brown fox jumps over the lazy dog. Another sentence here about a fox! And a third one."
MAPPINGS = {
    "properties": {
        "message": {"type": "text"},
        "title": {"type": "text", "analyzer": "english"},
        "tag": {"type": "keyword"},
        "count": {"type": "long"},
    }
}
DOC = {"message": TEXT, "title": "Foxes are running <fast> & free", "tag": "fox", "count": 3}


@pytest.fixture
def index(http: httpx.Client, new_index: Callable) -> str:
    name = new_index(mappings=MAPPINGS)
    assert http.put(f"/{name}/_doc/1?refresh=true", json=DOC).status_code == 201
    return name


def _highlight(http: httpx.Client, index: str, query: dict, highlight: dict) -> dict | None:
    hits = search_ok(http, index, {"query": query, "highlight": highlight})["hits"]["hits"]
    assert len(hits) == 1
    return hits[0].get("highlight")


def test_match_through_the_client(es: Elasticsearch, index: str) -> None:
    response = es.search(
        index=index, query={"match": {"message": "fox"}}, highlight={"fields": {"message": {}}}
    )
    assert response["hits"]["hits"][0]["highlight"] == {
        "message": [
            "The quick brown <em>fox</em> jumps over the lazy dog.",
            "Another sentence here about a <em>fox</em>!",
        ]
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"term": {"message": "lazy"}}, ["The quick brown fox jumps over the <em>lazy</em> dog."]),
        (
            {"match_phrase": {"message": "the lazy dog"}},
            ["The quick brown fox jumps over <em>the</em> <em>lazy</em> <em>dog</em>."],
        ),
        ({"prefix": {"message": "thi"}}, ["And a <em>third</em> one."]),
        ({"wildcard": {"message": "s*nce"}}, ["Another <em>sentence</em> here about a fox!"]),
        ({"query_string": {"query": "message:third"}}, ["And a <em>third</em> one."]),
        (
            {
                "bool": {
                    "filter": [{"match": {"message": "third"}}],
                    "must_not": [{"term": {"message": "cat"}}],
                }
            },
            ["And a <em>third</em> one."],
        ),
    ],
)
def test_what_each_query_highlights(http: httpx.Client, index: str, query: dict, expected: list) -> None:
    assert _highlight(http, index, query, {"fields": {"message": {}}}) == {"message": expected}


def test_number_of_fragments_zero_gives_the_whole_value(http: httpx.Client, index: str) -> None:
    found = _highlight(
        http, index, {"match": {"message": "fox"}}, {"fields": {"message": {"number_of_fragments": 0}}}
    )
    assert found == {"message": [TEXT.replace("fox", "<em>fox</em>")]}


def test_tags_fragment_size_and_per_field_options(http: httpx.Client, index: str) -> None:
    highlight = {
        "pre_tags": ["<b>"],
        "post_tags": ["</b>"],
        "number_of_fragments": 1,
        "fields": {"message": {"fragment_size": 20}, "title": {"pre_tags": ["["], "post_tags": ["]"]}},
    }
    found = _highlight(
        http, index, {"multi_match": {"query": "fox run", "fields": ["message", "title"]}}, highlight
    )
    assert found == {
        "message": ["The quick brown <b>fox</b>"],
        "title": ["[Foxes] are [running] <fast> & free"],
    }


def test_order_by_score(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(mappings=MAPPINGS)
    http.put(f"/{index}/_doc/1?refresh=true", json={"message": "One fox. Two fox fox here. Nothing."})
    highlight = {"fields": {"message": {"order": "score", "number_of_fragments": 2}}}
    found = _highlight(http, index, {"match": {"message": "fox"}}, highlight)
    assert found == {"message": ["Two <em>fox</em> <em>fox</em> here.", "One <em>fox</em>."]}


def test_html_encoder_and_wildcard_fields(http: httpx.Client, index: str) -> None:
    found = _highlight(
        http, index, {"query_string": {"query": "fox"}}, {"encoder": "html", "fields": {"*": {}}}
    )
    assert found == {
        "message": [
            "The quick brown <em>fox</em> jumps over the lazy dog.",
            "Another sentence here about a <em>fox</em>!",
        ],
        "tag": ["<em>fox</em>"],
        "title": ["<em>Foxes</em> are running &lt;fast&gt; &amp; free"],
    }


def test_require_field_match_and_highlight_query(http: httpx.Client, index: str) -> None:
    query = {"term": {"tag": "fox"}}
    assert _highlight(http, index, query, {"fields": {"message": {}}}) is None
    loose = _highlight(http, index, query, {"require_field_match": False, "fields": {"message": {}}})
    assert loose == {
        "message": [
            "The quick brown <em>fox</em> jumps over the lazy dog.",
            "Another sentence here about a <em>fox</em>!",
        ]
    }
    own = {"fields": {"message": {"highlight_query": {"match": {"message": "dog"}}}}}
    assert _highlight(http, index, query, own) == {
        "message": ["The quick brown fox jumps over the lazy <em>dog</em>."]
    }


def test_no_match_size(http: httpx.Client, index: str) -> None:
    highlight = {"fields": {"message": {"no_match_size": 12}}}
    assert _highlight(http, index, {"term": {"tag": "fox"}}, highlight) == {"message": ["The quick brown"]}


def test_highlight_with_source_off_and_fields(http: httpx.Client, index: str) -> None:
    body = {
        "query": {"match": {"title": "run"}},
        "_source": False,
        "fields": ["tag"],
        "highlight": {"fields": {"title": {}}},
    }
    hit = search_ok(http, index, body)["hits"]["hits"][0]
    assert "_source" not in hit
    assert hit["fields"] == {"tag": ["fox"]}
    assert hit["highlight"] == {"title": ["Foxes are <em>running</em> <fast> & free"]}


def test_pit_walks_and_scrolls_highlight(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(mappings=MAPPINGS)
    lines = []
    for i in range(30):
        lines += [f'{{"index":{{"_id":"{i}"}}}}', f'{{"message":"document {i} about a fox"}}']
    http.post(
        f"/{index}/_bulk?refresh=true",
        content="\n".join(lines) + "\n",
        headers={"content-type": "application/x-ndjson"},
    )
    highlight = {"fields": {"message": {}}}
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    seen = 0
    after = None
    while True:
        body = {
            "size": 7,
            "pit": {"id": pit},
            "sort": [{"_shard_doc": "asc"}],
            "query": {"match": {"message": "fox"}},
            "highlight": highlight,
        }
        if after is not None:
            body["search_after"] = after
        response = http.post("/_search", json=body)
        assert response.status_code == 200, response.text
        hits = response.json()["hits"]["hits"]
        if not hits:
            break
        for hit in hits:
            assert hit["highlight"]["message"] == [f"document {hit['_id']} about a <em>fox</em>"]
        seen += len(hits)
        after = hits[-1]["sort"]
    assert seen == 30
    http.request("DELETE", "/_pit", json={"id": pit})
    page = http.post(
        f"/{index}/_search?scroll=1m",
        json={"size": 10, "query": {"match": {"message": "fox"}}, "highlight": highlight},
    ).json()
    scrolled = len(page["hits"]["hits"])
    while True:
        page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": page["_scroll_id"]}).json()
        if not page["hits"]["hits"]:
            break
        assert all("<em>fox</em>" in h["highlight"]["message"][0] for h in page["hits"]["hits"])
        scrolled += len(page["hits"]["hits"])
    assert scrolled == 30


def test_concurrent_highlighted_searches_beside_writers(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(mappings=MAPPINGS)
    http.put(f"/{index}/_doc/seed?refresh=true", json={"message": "a fox"})
    errors: list[str] = []

    def write(worker: int) -> None:
        for i in range(15):
            r = http.put(f"/{index}/_doc/{worker}-{i}", json={"message": f"fox number {i}"})
            if r.status_code != 201:
                errors.append(r.text)
            if i % 5 == 0:
                http.post(f"/{index}/_refresh")

    def read() -> None:
        for _ in range(15):
            r = http.post(
                f"/{index}/_search",
                json={"query": {"match": {"message": "fox"}}, "highlight": {"fields": {"message": {}}}},
            )
            if r.status_code != 200:
                errors.append(r.text)
                continue
            for hit in r.json()["hits"]["hits"]:
                if "<em>fox</em>" not in hit["highlight"]["message"][0]:
                    errors.append(str(hit))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(2)] + [
        threading.Thread(target=read) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize(
    ("highlight", "error_type", "reason"),
    [
        (
            {"fields": {"message": {}}, "bogus": 1},
            "x_content_parse_exception",
            "[highlight] unknown field [bogus]",
        ),
        (
            {"fields": {"message": {"bogus": 1}}},
            "x_content_parse_exception",
            "[highlight_field] unknown field [bogus]",
        ),
        (
            {"fields": {"message": {"type": "fancy"}}},
            "illegal_argument_exception",
            "unknown highlighter type [fancy]",
        ),
        (
            {"fields": {"message": {"order": "best"}}},
            "illegal_argument_exception",
            "No HighlightBuilder.Order enum constant for [best]",
        ),
        (
            {"fields": {"message": {"fragment_size": "big"}}},
            "x_content_parse_exception",
            "[highlight_field] failed to parse field [fragment_size]",
        ),
        (
            {"fields": {"message": {}}, "encoder": "xml"},
            "illegal_argument_exception",
            "Unknown encoder [xml]",
        ),
        (
            {"fields": [{"message": {}, "title": {}}]},
            "illegal_argument_exception",
            "If highlighter fields is an array it must contain objects containing a single field",
        ),
        ({"fields": {"message": {"highlight_query": {"nope": {}}}}}, None, None),
        ("message", "parsing_exception", "Unknown key for a VALUE_STRING in [highlight]."),
    ],
)
def test_malformed_highlight_is_refused(
    http: httpx.Client, index: str, highlight: object, error_type: str | None, reason: str | None
) -> None:
    response = http.post(
        f"/{index}/_search", json={"query": {"match": {"message": "fox"}}, "highlight": highlight}
    )
    assert response.status_code == 400, response.text
    error = error_of(response)
    if error_type is not None:
        assert error["type"] == error_type
    if reason is not None:
        assert error["reason"] == reason


def test_max_analyzed_offset(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings={"highlight.max_analyzed_offset": 20}, mappings=MAPPINGS)
    http.put(f"/{index}/_doc/1?refresh=true", json={"message": "fox " * 10})
    response = http.post(
        f"/{index}/_search",
        json={"query": {"match": {"message": "fox"}}, "highlight": {"fields": {"message": {}}}},
    )
    assert response.status_code == 400
    assert "exceeds the [index.highlight.max_analyzed_offset] limit [20]" in response.text
    tolerant = {"fields": {"message": {"max_analyzed_offset": 8}}}
    found = _highlight(http, index, {"match": {"message": "fox"}}, tolerant)
    assert found == {"message": ["<em>fox</em> <em>fox</em> fox fox fox fox fox fox fox fox"]}
