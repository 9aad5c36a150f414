"""Language analyzers, custom analyzers, tokenizers and token filters through HTTP and the official
client: in `_analyze`, in mappings (indexing and searching with them, `search_analyzer`), across
a restart, with writers and searchers at once, and every bad definition a 400 naming it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
import pytest
from conftest import error_of, running_server, search_ok
from elasticsearch import Elasticsearch

from tests import web


def _terms(response: dict) -> list[str]:
    return [t["token"] for t in response["tokens"]]


def _analyze(http: httpx.Client, body: dict, index: str | None = None) -> dict:
    response = http.post(f"/{index}/_analyze" if index else "/_analyze", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_english_analyzer_stems_and_drops_stop_words(es: Elasticsearch) -> None:
    response = es.indices.analyze(analyzer="english", text="The quick brown fox's jumping over the lazy dogs")
    assert [(t["token"], t["position"], t["start_offset"], t["end_offset"]) for t in response["tokens"]] == [
        ("quick", 1, 4, 9),
        ("brown", 2, 10, 15),
        ("fox", 3, 16, 21),
        ("jump", 4, 22, 29),
        ("over", 5, 30, 34),
        ("lazi", 7, 39, 43),
        ("dog", 8, 44, 48),
    ]


@pytest.mark.parametrize(
    ("analyzer", "text", "expected"),
    [
        ("french", "L'avion et les chevaux", ["avion", "cheval"]),
        ("german", "Die Häuser und die Bäume", ["haus", "baum"]),
        ("spanish", "Los niños corriendo", ["niñ", "corr"]),
        ("simple", "Hello-World 42", ["hello", "world"]),
        ("whitespace", "Hello-World 42", ["Hello-World", "42"]),
        ("stop", "The end of it", ["end"]),
    ],
)
def test_builtin_analyzers(http: httpx.Client, analyzer: str, text: str, expected: list[str]) -> None:
    assert _terms(_analyze(http, {"analyzer": analyzer, "text": text})) == expected


def test_path_hierarchy_tokens_share_a_position(http: httpx.Client) -> None:
    tokens = _analyze(http, {"tokenizer": "path_hierarchy", "text": "/one/two/three"})["tokens"]
    assert [(t["token"], t["start_offset"], t["end_offset"], t["position"]) for t in tokens] == [
        ("/one", 0, 4, 0),
        ("/one/two", 0, 8, 0),
        ("/one/two/three", 0, 14, 0),
    ]
    reverse = {"type": "path_hierarchy", "delimiter": "-", "replacement": "/", "reverse": True}
    assert _terms(_analyze(http, {"tokenizer": reverse, "text": "a-b-c"})) == ["a/b/c", "b/c", "c"]


def test_pattern_tokenizers(http: httpx.Client) -> None:
    split = {"type": "pattern", "pattern": ","}
    assert _terms(_analyze(http, {"tokenizer": split, "text": "a,b,,c"})) == ["a", "b", "c"]
    keep = {"type": "pattern", "pattern": '"((?:\\\\"|[^"])+)"', "group": 1}
    assert _terms(_analyze(http, {"tokenizer": keep, "text": 'x "value" y "other"'})) == ["value", "other"]
    matches = {"type": "simple_pattern", "pattern": "[0-9]{3}"}
    assert _terms(_analyze(http, {"tokenizer": matches, "text": "fd-786-335-514-x"})) == ["786", "335", "514"]
    splits = {"type": "simple_pattern_split", "pattern": "_"}
    tokens = _analyze(http, {"tokenizer": splits, "text": "an_under_score"})["tokens"]
    assert [(t["token"], t["start_offset"], t["position"]) for t in tokens] == [
        ("an", 0, 0),
        ("under", 3, 1),
        ("score", 9, 2),
    ]
    group = {"type": "char_group", "tokenize_on_chars": ["whitespace", "-", "\n"]}
    assert _terms(_analyze(http, {"tokenizer": group, "text": "The QUICK brown-fox"})) == [
        "The",
        "QUICK",
        "brown",
        "fox",
    ]


def test_token_filters(http: httpx.Client) -> None:
    def run(filters: list, text: str, tokenizer: object = "standard") -> list[tuple[str, int]]:
        tokens = _analyze(http, {"tokenizer": tokenizer, "filter": filters, "text": text})["tokens"]
        return [(t["token"], t["position"]) for t in tokens]

    assert run(["lowercase", {"type": "stemmer", "language": "english"}], "running dogs") == [
        ("run", 0),
        ("dog", 1),
    ]
    assert run([{"type": "snowball", "language": "English"}], "generously") == [("generous", 0)]
    assert run(["lowercase", {"type": "stop", "stopwords": ["a", "b"]}], "a x b y") == [("x", 1), ("y", 3)]
    assert run(["asciifolding"], "açaí à la carte") == [("acai", 0), ("a", 1), ("la", 2), ("carte", 3)]
    assert run(["shingle"], "quick brown fox") == [
        ("quick", 0),
        ("quick brown", 0),
        ("brown", 1),
        ("brown fox", 1),
        ("fox", 2),
    ]
    assert run([{"type": "edge_ngram", "min_gram": 1, "max_gram": 3}], "quick") == [
        ("q", 0),
        ("qu", 0),
        ("qui", 0),
    ]
    assert run(["ngram"], "fox") == [("f", 0), ("fo", 0), ("o", 0), ("ox", 0), ("x", 0)]
    synonyms = {"type": "synonym", "synonyms": ["quick, fast", "ny => new york"]}
    assert run(["lowercase", synonyms], "Quick ny") == [("quick", 0), ("fast", 0), ("new", 1), ("york", 2)]
    assert run(["word_delimiter_graph"], "Wi-Fi PowerShot500", "whitespace") == [
        ("Wi", 0),
        ("Fi", 1),
        ("Power", 2),
        ("Shot", 3),
        ("500", 4),
    ]


def test_explain_names_each_stage(http: httpx.Client) -> None:
    body = {
        "tokenizer": "standard",
        "filter": ["lowercase", "porter_stem"],
        "text": "Running",
        "explain": True,
    }
    detail = _analyze(http, body)["detail"]
    assert detail["tokenizer"]["tokens"][0]["token"] == "Running"
    assert [(s["name"], s["tokens"][0]["token"]) for s in detail["tokenfilters"]] == [
        ("lowercase", "running"),
        ("porter_stem", "run"),
    ]


ANALYSIS = {
    "analysis": {
        "filter": {
            "my_stop": {"type": "stop", "stopwords": "_english_"},
            "my_syn": {"type": "synonym_graph", "synonyms": ["laptop, notebook"]},
        },
        "tokenizer": {"paths": {"type": "path_hierarchy"}},
        "analyzer": {
            "folding": {"type": "custom", "tokenizer": "standard", "filter": ["lowercase", "asciifolding"]},
            "syn": {"tokenizer": "standard", "filter": ["lowercase", "my_syn"]},
            "paths": {"tokenizer": "paths"},
        },
    }
}
MAPPINGS = {
    "properties": {
        "body": {"type": "text", "analyzer": "english"},
        "name": {"type": "text", "analyzer": "folding"},
        "product": {"type": "text", "analyzer": "standard", "search_analyzer": "syn"},
        "path": {"type": "text", "analyzer": "paths", "search_analyzer": "keyword"},
    }
}
DOCS = [
    {
        "body": "The foxes were running quickly",
        "name": "Crème Brûlée",
        "product": "notebook",
        "path": "/usr/bin/ls",
    },
    {"body": "A dog sleeps", "name": "creme", "product": "laptop stand", "path": "/usr/lib"},
]


def _ids(result: dict) -> list[str]:
    return sorted(h["_id"] for h in result["hits"]["hits"])


def _load(http: httpx.Client, index: str) -> None:
    for i, doc in enumerate(DOCS):
        response = http.put(f"/{index}/_doc/{i}", json=doc)
        assert response.status_code == 201, response.text
    http.post(f"/{index}/_refresh")


def _check_searches(http: httpx.Client, index: str) -> None:
    assert _ids(search_ok(http, index, {"query": {"match": {"body": "fox run"}}})) == ["0"]
    assert _ids(search_ok(http, index, {"query": {"match_phrase": {"body": "foxes were running"}}})) == ["0"]
    assert _ids(search_ok(http, index, {"query": {"match": {"name": "CREME"}}})) == ["0", "1"]
    assert _ids(search_ok(http, index, {"query": {"match": {"product": "laptop"}}})) == ["0", "1"]
    assert _ids(search_ok(http, index, {"query": {"match": {"path": "/usr"}}})) == ["0", "1"]
    assert _ids(search_ok(http, index, {"query": {"match": {"path": "/usr/bin"}}})) == ["0"]
    query = {"query": {"match": {"body": {"query": "sleeping", "analyzer": "english"}}}}
    assert _ids(search_ok(http, index, query)) == ["1"]


def test_mappings_index_and_search_with_their_analyzers(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings=ANALYSIS, mappings=MAPPINGS)
    _load(http, index)
    _check_searches(http, index)
    tokens = _analyze(http, {"field": "name", "text": "Brûlée"}, index)
    assert _terms(tokens) == ["brulee"]
    assert _terms(_analyze(http, {"analyzer": "syn", "text": "laptop"}, index)) == ["laptop", "notebook"]


def test_bulk_indexing_uses_the_field_analyzer(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings=ANALYSIS, mappings=MAPPINGS)
    lines = []
    for i in range(50):
        lines += [orjson.dumps({"index": {"_id": str(i)}}).decode(), f'{{"body":"jumping foxes {i}"}}']
    response = http.post(
        f"/{index}/_bulk?refresh=true",
        content="\n".join(lines) + "\n",
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200 and not response.json()["errors"]
    result = search_ok(http, index, {"query": {"term": {"body": "jump"}}, "track_total_hits": True})
    assert result["hits"]["total"]["value"] == 50


def test_analysis_survives_a_restart(tmp_path: Path) -> None:
    with running_server(tmp_path) as (url, _), web.Client(base_url=url, timeout=60) as http:
        assert http.put("/kept", json={"settings": ANALYSIS, "mappings": MAPPINGS}).status_code == 200
        _load(http, "kept")
    with running_server(tmp_path) as (url, _), web.Client(base_url=url, timeout=60) as http:
        _check_searches(http, "kept")


def test_concurrent_writers_and_searchers(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings=ANALYSIS, mappings=MAPPINGS)
    errors: list[str] = []

    def write(worker: int) -> None:
        for i in range(20):
            r = http.put(f"/{index}/_doc/{worker}-{i}", json={"body": f"running foxes {i}"})
            if r.status_code != 201:
                errors.append(r.text)
            if i % 5 == 0:
                http.post(f"/{index}/_refresh")

    def read() -> None:
        for _ in range(20):
            r = http.post(f"/{index}/_search", json={"query": {"match": {"body": "run"}}})
            if r.status_code != 200:
                errors.append(r.text)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)] + [
        threading.Thread(target=read) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    http.post(f"/{index}/_refresh")
    result = search_ok(http, index, {"query": {"match": {"body": "fox"}}, "track_total_hits": True})
    assert result["hits"]["total"]["value"] == 60


@pytest.mark.parametrize(
    ("settings", "mappings", "reason"),
    [
        (
            {},
            {"properties": {"t": {"type": "text", "analyzer": "nope"}}},
            "Failed to parse mapping: analyzer [nope] has not been configured in mappings",
        ),
        ({"analysis": {"analyzer": {"a": {"type": "nope"}}}}, None, "Unknown analyzer type [nope] for [a]"),
        (
            {"analysis": {"analyzer": {"a": {"filter": ["lowercase"]}}}},
            None,
            "analyzer [a] must specify either an analyzer type, or a tokenizer",
        ),
        (
            {"analysis": {"analyzer": {"a": {"tokenizer": "nope"}}}},
            None,
            "Custom Analyzer [a] failed to find tokenizer under name [nope]",
        ),
        (
            {"analysis": {"analyzer": {"a": {"tokenizer": "standard", "filter": ["nope"]}}}},
            None,
            "Custom Analyzer [a] failed to find filter under name [nope]",
        ),
        (
            {
                "analysis": {
                    "filter": {"g": {"type": "ngram", "min_gram": 1, "max_gram": 5}},
                    "analyzer": {"a": {"tokenizer": "standard", "filter": ["g"]}},
                }
            },
            None,
            "The difference between max_gram and min_gram in NGram Tokenizer must be less than or equal "
            "to: [1] but was [4]. This limit can be set by changing the [index.max_ngram_diff] index level "
            "setting.",
        ),
        (
            {
                "analysis": {
                    "filter": {"s": {"type": "shingle", "max_shingle_size": 6}},
                    "analyzer": {"a": {"tokenizer": "standard", "filter": ["s"]}},
                }
            },
            None,
            "In Shingle TokenFilter the difference between max_shingle_size and min_shingle_size (and +1 if "
            "outputting unigrams) must be less than or equal to: [3] but was [5]. This limit can be set by "
            "changing the [index.max_shingle_diff] index level setting.",
        ),
        ({"analysis": {"tokenizer": {"p": {"type": "pattern", "pattern": "("}}}}, None, None),
        (
            {
                "analysis": {
                    "filter": {"s": {"type": "synonym", "synonyms": ["a => b => c"]}},
                    "analyzer": {"a": {"tokenizer": "standard", "filter": ["s"]}},
                }
            },
            None,
            None,
        ),
        (
            {
                "analysis": {
                    "filter": {"s": {"type": "stemmer", "language": "klingon"}},
                    "analyzer": {"a": {"tokenizer": "standard", "filter": ["s"]}},
                }
            },
            None,
            "Unknown stemmer language [klingon] for [s]",
        ),
    ],
)
def test_bad_analysis_is_refused_and_creates_nothing(
    http: httpx.Client, index_name: str, settings: dict, mappings: dict | None, reason: str | None
) -> None:
    body: dict = {"settings": settings}
    if mappings is not None:
        body["mappings"] = mappings
    response = http.put(f"/{index_name}", json=body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    if reason is not None:
        assert error["reason"] == reason
    assert http.head(f"/{index_name}").status_code == 404


def test_ngram_limit_follows_the_index_setting(http: httpx.Client, new_index: Callable) -> None:
    analysis = {
        "max_ngram_diff": 3,
        "analysis": {
            "tokenizer": {"g": {"type": "ngram", "min_gram": 2, "max_gram": 5, "token_chars": ["letter"]}},
            "analyzer": {"a": {"tokenizer": "g"}},
        },
    }
    index = new_index(settings=analysis, mappings={"properties": {"t": {"type": "text", "analyzer": "a"}}})
    http.put(f"/{index}/_doc/1?refresh=true", json={"t": "searching"})
    assert _ids(search_ok(http, index, {"query": {"term": {"t": "arch"}}})) == ["1"]


def test_put_mapping_names_the_index_analyzers(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings=ANALYSIS)
    response = http.put(
        f"/{index}/_mapping", json={"properties": {"n": {"type": "text", "analyzer": "folding"}}}
    )
    assert response.status_code == 200, response.text
    refused = http.put(f"/{index}/_mapping", json={"properties": {"m": {"type": "text", "analyzer": "nope"}}})
    assert refused.status_code == 400
    assert (
        error_of(refused)["reason"]
        == "Failed to parse mapping: analyzer [nope] has not been configured in mappings"
    )
    http.put(f"/{index}/_doc/1?refresh=true", json={"n": "Ünïcödé"})
    assert _ids(search_ok(http, index, {"query": {"match": {"n": "unicode"}}})) == ["1"]
    tokens = _analyze(http, {"tokenizer": "paths", "filter": ["my_stop"], "text": "/a/b"}, index)
    assert _terms(tokens) == ["/a", "/a/b"]


def test_dynamic_templates_name_the_index_analyzers(http: httpx.Client, new_index: Callable) -> None:
    template = {"en": {"match": "*_en", "mapping": {"type": "text", "analyzer": "english"}}}
    index = new_index(settings=ANALYSIS, mappings={"dynamic_templates": [template]})
    http.put(f"/{index}/_doc/1?refresh=true", json={"title_en": "Running foxes"})
    assert _ids(search_ok(http, index, {"query": {"term": {"title_en": "fox"}}})) == ["1"]


def test_too_many_synonym_rules_are_refused(http: httpx.Client, index_name: str) -> None:
    rules = [f"w{i}, v{i}" for i in range(10_001)]
    settings = {
        "analysis": {
            "filter": {"s": {"type": "synonym", "synonyms": rules}},
            "analyzer": {"a": {"tokenizer": "standard", "filter": ["s"]}},
        }
    }
    response = http.put(f"/{index_name}", json={"settings": settings})
    assert response.status_code == 400
    assert (
        error_of(response)["reason"] == "synonym filter [s] has [10001] rules, more than the [10000] allowed"
    )


def test_explain_of_an_index_custom_analyzer(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings=ANALYSIS)
    detail = _analyze(http, {"analyzer": "syn", "text": "Laptop", "explain": True}, index)["detail"]
    assert detail["custom_analyzer"] is True
    assert detail["tokenizer"] == {
        "name": "standard",
        "tokens": [
            {
                "token": "Laptop",
                "start_offset": 0,
                "end_offset": 6,
                "type": "<ALPHANUM>",
                "position": 0,
                "bytes": "[4c 61 70 74 6f 70]",
                "keyword": False,
                "positionLength": 1,
                "termFrequency": 1,
            }
        ],
    }
    assert [s["name"] for s in detail["tokenfilters"]] == ["lowercase", "my_syn"]
    assert [(t["token"], t["type"]) for t in detail["tokenfilters"][1]["tokens"]] == [
        ("laptop", "<ALPHANUM>"),
        ("notebook", "SYNONYM"),
    ]
    builtin = _analyze(http, {"analyzer": "english", "text": "dogs", "explain": True}, index)["detail"]
    assert builtin["custom_analyzer"] is False
    assert builtin["analyzer"]["name"] == "english"
    assert [t["token"] for t in builtin["analyzer"]["tokens"]] == ["dog"]


@pytest.mark.parametrize(
    ("analysis", "what"),
    [
        ({"char_filter": {"h": {"type": "html_strip"}}}, "the char_filter [h]"),
        (
            {
                "filter": {"h": {"type": "hunspell"}},
                "analyzer": {"a": {"tokenizer": "standard", "filter": ["h"]}},
            },
            "the [hunspell] filter",
        ),
        ({"analyzer": {"a": {"type": "fingerprint"}}}, "the [fingerprint] analyzer"),
        ({"tokenizer": {"t": {"type": "thai"}}}, "the [thai] tokenizer"),
        (
            {
                "filter": {"s": {"type": "synonym", "synonyms_path": "s.txt"}},
                "analyzer": {"a": {"tokenizer": "standard", "filter": ["s"]}},
            },
            "[synonyms_path] and [synonyms_set] of [s]",
        ),
        (
            {
                "filter": {"s": {"type": "stop", "stopwords_path": "s.txt"}},
                "analyzer": {"a": {"tokenizer": "standard", "filter": ["s"]}},
            },
            "[stopwords_path] of [s]",
        ),
    ],
)
def test_components_leafsearch_lacks_are_refused_as_not_supported(
    http: httpx.Client, index_name: str, analysis: dict, what: str
) -> None:
    response = http.put(f"/{index_name}", json={"settings": {"analysis": analysis}})
    assert response.status_code == 400
    reason = error_of(response)["reason"]
    assert reason.startswith(f"{what} is not supported by leafsearch"), reason
    assert http.head(f"/{index_name}").status_code == 404


@pytest.mark.parametrize(
    ("field", "reason"),
    [
        (
            {"type": "text", "search_analyzer": "english"},
            "analyzer on field [t] must be set when search_analyzer is set",
        ),
        (
            {"type": "text", "analyzer": "english", "search_quote_analyzer": "standard"},
            "analyzer and search_analyzer on field [t] must be set when search_quote_analyzer is set",
        ),
    ],
)
def test_search_analyzers_need_an_analyzer(
    http: httpx.Client, index_name: str, field: dict, reason: str
) -> None:
    response = http.put(f"/{index_name}", json={"mappings": {"properties": {"t": field}}})
    assert response.status_code == 400
    assert error_of(response)["reason"] == f"Failed to parse mapping: {reason}"


def test_match_with_and_takes_synonyms_as_alternatives(http: httpx.Client, new_index: Callable) -> None:
    index = new_index(settings=ANALYSIS, mappings=MAPPINGS)
    _load(http, index)
    query = {"match": {"product": {"query": "laptop stand", "operator": "and"}}}
    assert _ids(search_ok(http, index, {"query": query})) == ["1"]  # "laptop" or "notebook", and "stand"
    query = {"match": {"product": {"query": "laptop", "operator": "and"}}}
    assert _ids(search_ok(http, index, {"query": query})) == ["0", "1"]


def test_graph_filters_as_elasticsearch_documents_them(http: httpx.Client) -> None:
    def run(body: dict) -> list[tuple[str, int, int]]:
        body = {**body, "explain": True}
        stages = _analyze(http, body)["detail"]["tokenfilters"]
        return [(t["token"], t["position"], t["positionLength"]) for t in stages[-1]["tokens"]]

    text = "Neil's-Super-Duper-XL500--42+AutoCoder"
    assert [
        t for t, _, _ in run({"tokenizer": "keyword", "filter": ["word_delimiter_graph"], "text": text})
    ] == [
        "Neil",
        "Super",
        "Duper",
        "XL",
        "500",
        "42",
        "Auto",
        "Coder",
    ]
    synonyms = {"type": "synonym_graph", "synonyms": ["dns, domain name system"]}
    assert run({"tokenizer": "standard", "filter": [synonyms], "text": "dns is fragile"}) == [
        ("dns", 0, 3),
        ("domain", 0, 1),
        ("name", 1, 1),
        ("system", 2, 1),
        ("is", 3, 1),
        ("fragile", 4, 1),
    ]


def test_an_analyzer_position_gap_separates_array_values(http: httpx.Client, new_index: Callable) -> None:
    settings = {"analysis": {"analyzer": {"near": {"tokenizer": "standard", "position_increment_gap": 0}}}}
    mappings = {"properties": {"near": {"type": "text", "analyzer": "near"}, "far": {"type": "text"}}}
    index = new_index(settings=settings, mappings=mappings)
    http.put(f"/{index}/_doc/1?refresh=true", json={"near": ["a b", "c d"], "far": ["a b", "c d"]})
    assert _ids(search_ok(http, index, {"query": {"match_phrase": {"near": "b c"}}})) == ["1"]
    assert _ids(search_ok(http, index, {"query": {"match_phrase": {"far": "b c"}}})) == []


def test_custom_normalizers_on_keywords(http: httpx.Client, new_index: Callable, index_name: str) -> None:
    settings = {
        "analysis": {"normalizer": {"folded": {"type": "custom", "filter": ["lowercase", "asciifolding"]}}}
    }
    mappings = {"properties": {"k": {"type": "keyword", "normalizer": "folded"}}}
    index = new_index(settings=settings, mappings=mappings)
    http.put(f"/{index}/_doc/1?refresh=true", json={"k": "Crème BRÛLÉE"})
    assert _ids(search_ok(http, index, {"query": {"term": {"k": "CREME brulee"}}})) == ["1"]
    aggs = search_ok(http, index, {"size": 0, "aggs": {"k": {"terms": {"field": "k"}}}})["aggregations"]
    assert [b["key"] for b in aggs["k"]["buckets"]] == ["creme brulee"]
    assert _terms(_analyze(http, {"normalizer": "folded", "text": "Ça Va"}, index)) == ["ca va"]
    refused = http.put(
        f"/{index_name}", json={"mappings": {"properties": {"k": {"type": "keyword", "normalizer": "nope"}}}}
    )
    assert refused.status_code == 400
    assert error_of(refused)["reason"] == "Failed to parse mapping: normalizer [nope] not found for field [k]"
    bad = {"analysis": {"normalizer": {"n": {"type": "custom", "filter": ["porter_stem"]}}}}
    refused = http.put(f"/{index_name}", json={"settings": bad})
    assert refused.status_code == 400
    assert error_of(refused)["reason"] == "Custom normalizer [n] may not use filter [porter_stem]"
