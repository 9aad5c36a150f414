"""`_analyze` through the official client and raw HTTP: the tokens leafsearch indexes, with
Elasticsearch's offsets, positions, types, gaps between array values, refusals and limits."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from conftest import error_of
from elasticsearch import BadRequestError, Elasticsearch
from security_helpers import add_user
from starlette.testclient import TestClient

from leafsearch import Node
from leafsearch.index.analysis import analyze as index_tokens
from leafsearch.indices.analyze import analyze
from leafsearch.rest.app import create_app

FOXES = "The 2 QUICK Brown-Foxes jumped over the lazy dog's bone."


def _tokens(response: dict) -> list[tuple[str, int, int, str, int]]:
    return [
        (t["token"], t["start_offset"], t["end_offset"], t["type"], t["position"]) for t in response["tokens"]
    ]


def test_standard_analyzer_through_the_client(es: Elasticsearch) -> None:
    response = es.indices.analyze(analyzer="standard", text=FOXES)
    assert _tokens(response) == [
        ("the", 0, 3, "<ALPHANUM>", 0),
        ("2", 4, 5, "<NUM>", 1),
        ("quick", 6, 11, "<ALPHANUM>", 2),
        ("brown", 12, 17, "<ALPHANUM>", 3),
        ("foxes", 18, 23, "<ALPHANUM>", 4),
        ("jumped", 24, 30, "<ALPHANUM>", 5),
        ("over", 31, 35, "<ALPHANUM>", 6),
        ("the", 36, 39, "<ALPHANUM>", 7),
        ("lazy", 40, 44, "<ALPHANUM>", 8),
        ("dog's", 45, 50, "<ALPHANUM>", 9),
        ("bone", 51, 55, "<ALPHANUM>", 10),
    ]
    assert es.indices.analyze(text="Foo Bar")["tokens"][1]["token"] == "bar"  # the default: standard


def test_offsets_count_utf16_units_and_types_follow_lucene(http: httpx.Client) -> None:
    response = http.post("/_analyze", json={"text": "😀x 中文 3.14 ひら カタカナ 한국"}).json()
    assert _tokens(response) == [
        ("x", 2, 3, "<ALPHANUM>", 0),
        ("中", 4, 5, "<IDEOGRAPHIC>", 1),
        ("文", 5, 6, "<IDEOGRAPHIC>", 2),
        ("3.14", 7, 11, "<NUM>", 3),
        ("ひ", 12, 13, "<HIRAGANA>", 4),
        ("ら", 13, 14, "<HIRAGANA>", 5),
        ("カタカナ", 15, 19, "<KATAKANA>", 6),
        ("한국", 20, 22, "<HANGUL>", 7),
    ]


def test_tokens_are_those_indexed(http: httpx.Client) -> None:
    rng = random.Random(12)
    alphabet = "abcXYZ019 _.,:;'-!é中あİ\u0301"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(300)]
    texts.append("a" * 600)  # cut at 255 characters, as Lucene cuts it
    for text in texts:
        tokens = analyze(None, {"text": text})["tokens"]
        assert [t["token"] for t in tokens] == index_tokens(text), text
        for token in tokens:
            assert text[token["start_offset"] : token["end_offset"]].lower().startswith(token["token"][:1])


def test_text_arrays_continue_with_elasticsearchs_gaps(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    # Global analyzer: positions continue (gap 0), offsets after the value plus one.
    global_ = es.indices.analyze(analyzer="standard", text=["this is a test", "the second text"])
    assert [(t["token"], t["start_offset"], t["position"]) for t in global_["tokens"]][3:5] == [
        ("test", 10, 3),
        ("the", 15, 4),
    ]
    name = new_index(
        mappings={
            "properties": {
                "title": {"type": "text"},
                "gapped": {"type": "text", "position_increment_gap": 7},
                "tag": {"type": "keyword"},
                "code": {"type": "keyword", "normalizer": "lowercase"},
                "n": {"type": "long"},
            }
        }
    )
    field = es.indices.analyze(index=name, field="title", text=["a b", "c"])
    assert _tokens(field) == [
        ("a", 0, 1, "<ALPHANUM>", 0),
        ("b", 2, 3, "<ALPHANUM>", 1),
        ("c", 4, 5, "<ALPHANUM>", 102),
    ]
    gapped = es.indices.analyze(index=name, field="gapped", text=["a", "b"])
    assert [t["position"] for t in gapped["tokens"]] == [0, 8]
    assert _tokens(es.indices.analyze(index=name, field="tag", text="Foo Bar")) == [
        ("Foo Bar", 0, 7, "word", 0)
    ]
    assert _tokens(es.indices.analyze(index=name, field="code", text="Foo Bar")) == [
        ("foo bar", 0, 7, "word", 0)
    ]
    assert _tokens(es.indices.analyze(index=name, normalizer="lowercase", text="AB")) == [
        ("ab", 0, 2, "word", 0)
    ]
    with pytest.raises(BadRequestError) as refused:
        es.indices.analyze(index=name, field="n", text="1")
    assert refused.value.body["error"]["reason"] == (
        "Can't process field [n], Analysis requests are only supported on tokenized fields"
    )


def test_custom_chains_and_explain(http: httpx.Client) -> None:
    raw = http.post("/_analyze", json={"tokenizer": "standard", "text": "Foo Bar"}).json()
    assert [t["token"] for t in raw["tokens"]] == ["Foo", "Bar"]  # no lowercase filter asked
    lowered = http.post(
        "/_analyze", json={"tokenizer": "standard", "filter": ["lowercase"], "text": "Foo"}
    ).json()
    assert [t["token"] for t in lowered["tokens"]] == ["foo"]
    keyword = http.post("/_analyze", json={"tokenizer": {"type": "keyword"}, "text": "Foo Bar"}).json()
    assert _tokens(keyword) == [("Foo Bar", 0, 7, "word", 0)]
    normalizer = http.post("/_analyze", json={"filter": [{"type": "lowercase"}], "text": "Foo Bar"}).json()
    assert _tokens(normalizer) == [("foo bar", 0, 7, "word", 0)]
    explained = http.post(
        "/_analyze", json={"tokenizer": "standard", "filter": ["lowercase"], "text": "Hé", "explain": True}
    ).json()["detail"]
    assert explained["custom_analyzer"] is True and explained["charfilters"] == []
    assert (
        explained["tokenizer"]["name"] == "standard" and explained["tokenizer"]["tokens"][0]["token"] == "Hé"
    )
    (stage,) = explained["tokenfilters"]
    assert stage["name"] == "lowercase"
    assert stage["tokens"] == [
        {
            "token": "hé",
            "start_offset": 0,
            "end_offset": 2,
            "type": "<ALPHANUM>",
            "position": 0,
            "bytes": "[68 c3 a9]",
            "keyword": False,
            "positionLength": 1,
            "termFrequency": 1,
        }
    ]
    named = http.post(
        "/_analyze", json={"analyzer": "standard", "text": "a", "explain": True, "attributes": ["keyword"]}
    ).json()
    assert named["detail"]["custom_analyzer"] is False
    assert named["detail"]["analyzer"]["tokens"][0] == {
        "token": "a",
        "start_offset": 0,
        "end_offset": 1,
        "type": "<ALPHANUM>",
        "position": 0,
        "keyword": False,
    }


@pytest.mark.parametrize(
    ("body", "error_type", "reason"),
    [
        (
            {"analyzer": "nope", "text": "x"},
            "illegal_argument_exception",
            "failed to find global analyzer [nope]",
        ),
        (
            {"tokenizer": "nope", "text": "x"},
            "illegal_argument_exception",
            "failed to find global tokenizer under [nope]",
        ),
        (
            {"tokenizer": "standard", "filter": ["nope"], "text": "x"},
            "illegal_argument_exception",
            "failed to find global filter under [nope]",
        ),
        (
            {"tokenizer": "standard", "char_filter": ["nope"], "text": "x"},
            "illegal_argument_exception",
            "failed to find global char_filter under [nope]",
        ),
        (
            {"analyzer": "standard"},
            "action_request_validation_exception",
            "Validation Failed: 1: text is missing;",
        ),
        (
            {"normalizer": "lowercase", "tokenizer": "standard", "text": "x"},
            "action_request_validation_exception",
            "Validation Failed: 1: index is required if normalizer is specified;2: tokenizer/analyze should "
            "be null if normalizer is specified;3: cannot define extra components on a named normalizer;",
        ),
        (
            {"analyzer": "standard", "filter": ["lowercase"], "text": "x"},
            "action_request_validation_exception",
            "Validation Failed: 1: cannot define extra components on a named analyzer;",
        ),
        (
            {"field": "title", "text": "x"},
            "illegal_argument_exception",
            "analysis based on a specific field requires an index",
        ),
        (
            {"analyzer": "standard", "text": "x", "foo": 1},
            "x_content_parse_exception",
            "[analyze_request] unknown field [foo]",
        ),
        (
            {"analyzer": "standard", "text": 5},
            "x_content_parse_exception",
            "[analyze_request] text doesn't support values of type: VALUE_NUMBER",
        ),
        (
            {"filter": ["lowercase", "porter_stem"], "text": "x"},
            "illegal_argument_exception",
            "Custom normalizer may not use filter [porter_stem]",
        ),
        ({"analyzer": "thai", "text": "x"}, "illegal_argument_exception", None),
        ({"tokenizer": "standard", "filter": ["hunspell"], "text": "x"}, "illegal_argument_exception", None),
        (
            {"tokenizer": "standard", "char_filter": ["html_strip"], "text": "x"},
            "illegal_argument_exception",
            None,
        ),
    ],
)
def test_refusals(http: httpx.Client, body: dict, error_type: str, reason: str | None) -> None:
    response = http.post("/_analyze", json=body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == error_type
    if reason is not None:
        assert error["reason"] == reason
    else:  # a component Elasticsearch has and leafsearch does not
        assert error["reason"].startswith("the [") and " is not supported by leafsearch: " in error["reason"]


def test_index_names_its_own_errors_and_token_limit(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    name = new_index(settings={"index.analyze.max_token_count": 3})
    assert error_of(http.post(f"/{name}/_analyze", json={"analyzer": "nope", "text": "x"}))["reason"] == (
        "failed to find analyzer [nope]"
    )
    assert len(http.post(f"/{name}/_analyze", json={"text": ["a b", "c"]}).json()["tokens"]) == 3
    over = http.post(f"/{name}/_analyze", json={"text": ["a b", "c d"]})
    assert over.status_code == 500
    error = error_of(over)
    assert error["type"] == "illegal_state_exception"
    assert error["reason"] == (
        "The number of tokens produced by calling _analyze has exceeded the allowed maximum of [3]. This "
        "limit can be set by changing the [index.analyze.max_token_count] index level setting."
    )
    assert http.post("/_analyze", json={"text": "a " * 10_000}).status_code == 200
    assert http.post("/_analyze", json={"text": "a " * 10_001}).status_code == 500
    assert http.post("/no-such-index-analyze/_analyze", json={"text": "x"}).status_code == 404
    assert error_of(http.get("/_analyze"))["reason"] == "request body or source parameter is required"
    by_source = http.get(
        "/_analyze", params={"source": '{"text":"Ab"}', "source_content_type": "application/json"}
    )
    assert [t["token"] for t in by_source.json()["tokens"]] == ["ab"]


def test_analyze_authorization(tmp_path: Path) -> None:
    """Without an index any user may analyze; on an index it is `indices:admin/analyze`, which a
    read-only role lacks and a write role has, as Elasticsearch's `manage` privilege."""
    with Node(tmp_path / "data", background=False) as node:
        add_user(node.path, "ann", "ann-secret", "superuser")
        add_user(node.path, "vic", "vic-secret", "viewer")
        add_user(node.path, "wes", "wes-secret", "write:logs*")
        with TestClient(create_app(node), base_url="http://127.0.0.1") as http:
            assert http.put("/logs-1", auth=("ann", "ann-secret")).status_code == 200
            body = {"text": "x"}
            assert http.post("/_analyze", json=body, auth=("vic", "vic-secret")).status_code == 200
            refused = http.post("/logs-1/_analyze", json=body, auth=("vic", "vic-secret"))
            assert refused.status_code == 403
            assert (
                "action [indices:admin/analyze] is unauthorized for user [vic]" in error_of(refused)["reason"]
            )
            assert http.post("/logs-1/_analyze", json=body, auth=("wes", "wes-secret")).status_code == 200
