"""In-process rules of index administration, settings, time values and response shaping."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from leafsearch.common.rawjson import RawJSON
from leafsearch.common.settings import (
    ClusterSettings,
    human_size,
    index_setting,
    nest,
    parse_byte_size,
    parse_index_settings,
)
from leafsearch.errors import ElasticError, IllegalArgument, IndexNotFound, InvalidIndexName, MediaTypeHeader
from leafsearch.index.shard_listing import CopyListing
from leafsearch.indices import admin
from leafsearch.indices.admin import resolve_index_expression, validate_index_name
from leafsearch.node.node import Node
from leafsearch.request.timevalue import parse_time_value
from leafsearch.rest.media import NotAcceptable, negotiate
from leafsearch.rest.render import filter_path, to_json
from leafsearch.rest.unrecognized import unrecognized

# ---- index names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("a b", 'must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
        ("a*b", 'must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
        ("a,b", 'must not contain the following characters [ , ", *, \\, <, |, ,, >, /, ?]'),
        ("a#b", "must not contain '#'"),
        ("a:b", "must not contain ':'"),
        ("_a", "must not start with '_', '-', or '+'"),
        ("-a", "must not start with '_', '-', or '+'"),
        ("+a", "must not start with '_', '-', or '+'"),
        (".", "must not be '.' or '..'"),
        ("..", "must not be '.' or '..'"),
        ("Abc", "must be lowercase"),
        ("a" * 256, "index name is too long, (256 > 255)"),
        ("é" * 128, "index name is too long, (256 > 255)"),
        # leafsearch's own rule: a NUL would vanish from the end of a name in numpy's string arrays
        ("a\0", "must not contain the NUL character ['\\u0000']"),
        ("\0a", "must not contain the NUL character ['\\u0000']"),
    ],
)
def test_invalid_index_names_are_refused_with_elasticsearch_reasons(name: str, reason: str) -> None:
    with pytest.raises(InvalidIndexName) as caught:
        validate_index_name(name)
    assert caught.value.reason == f"Invalid index name [{name}], {reason}"
    assert caught.value.status == 400
    assert caught.value.body()["error"]["index"] == name


@pytest.mark.parametrize("name", ["logs-2024.01", ".hidden-ok", "a" * 255, "é" * 127, "a_b+c"])
def test_valid_index_names_pass(name: str) -> None:
    validate_index_name(name)


# ---- index expressions ------------------------------------------------------------------------

INDICES = {
    "logs-a": SimpleNamespace(settings={}),
    "logs-b": SimpleNamespace(settings={}),
    "metrics": SimpleNamespace(settings={}),
    "secret": SimpleNamespace(settings={"index.hidden": "true"}),
}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (None, ["logs-a", "logs-b", "metrics"]),
        ("_all", ["logs-a", "logs-b", "metrics"]),
        ("*", ["logs-a", "logs-b", "metrics"]),
        ("logs-*", ["logs-a", "logs-b"]),
        ("metrics,logs-b", ["metrics", "logs-b"]),
        ("logs-*,-logs-a", ["logs-b"]),
        ("*,-logs-*", ["metrics"]),
        ("secret", ["secret"]),
        ("nothing-*", []),
        ("logs-a,logs-a", ["logs-a"]),
    ],
)
def test_index_expressions_resolve_like_elasticsearch(expr: str | None, expected: list[str]) -> None:
    assert resolve_index_expression(INDICES, expr) == expected


def test_hidden_indices_need_expand_wildcards_hidden() -> None:
    assert "secret" in resolve_index_expression(INDICES, "*", expand_wildcards="open,hidden")
    assert "secret" in resolve_index_expression(INDICES, "*", expand_wildcards="all")
    assert resolve_index_expression(INDICES, "*", expand_wildcards="none") == []


def test_missing_concrete_index_is_404_unless_ignored() -> None:
    with pytest.raises(IndexNotFound) as caught:
        resolve_index_expression(INDICES, "metrics,missing")
    assert caught.value.reason == "no such index [missing]"
    assert caught.value.status == 404
    assert resolve_index_expression(INDICES, "metrics,missing", ignore_unavailable=True) == ["metrics"]


def test_exclusion_before_any_wildcard_is_a_literal_name() -> None:
    with pytest.raises(IndexNotFound, match=r"no such index \[-metrics\]"):
        resolve_index_expression(INDICES, "-metrics")


def test_wildcard_matching_nothing_fails_only_without_allow_no_indices() -> None:
    with pytest.raises(IndexNotFound, match=r"no such index \[nothing-\*\]"):
        resolve_index_expression(INDICES, "nothing-*", allow_no_indices=False)


def test_bad_expand_wildcards_value() -> None:
    with pytest.raises(IllegalArgument, match=r"No valid expand wildcard value \[bogus\]"):
        resolve_index_expression(INDICES, "*", expand_wildcards="bogus")


# ---- index settings ---------------------------------------------------------------------------


def test_index_settings_accept_nested_flat_and_unprefixed_forms() -> None:
    body = {
        "number_of_shards": 3,
        "index": {"refresh_interval": "5s", "hidden": True},
        "index.max_result_window": 50,
    }
    assert parse_index_settings(body) == {
        "index.number_of_shards": "3",
        "index.refresh_interval": "5s",
        "index.hidden": "true",
        "index.max_result_window": "50",
    }


def test_defaults_are_not_filled_in_but_read_typed() -> None:
    assert parse_index_settings({}) == {}
    assert index_setting({}, "index.max_result_window") == 10000
    assert index_setting({}, "index.max_slices_per_scroll") == 1024
    assert index_setting({}, "index.number_of_replicas") == 1
    assert index_setting({}, "index.refresh_interval") == 1.0
    assert index_setting({"index.refresh_interval": "-1"}, "index.refresh_interval") == -1.0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"foo": 1},
            "unknown setting [index.foo] please check that any required plugins are installed, "
            "or check the breaking changes documentation for removed settings",
        ),
        ({"max_result_window": "abc"}, "Failed to parse value [abc] for setting [index.max_result_window]"),
        (
            {"number_of_shards": 0},
            "Failed to parse value [0] for setting [index.number_of_shards] must be >= 1",
        ),
        (
            {"number_of_shards": 1025},
            "Failed to parse value [1025] for setting [index.number_of_shards] must be <= 1024",
        ),
        (
            {"refresh_interval": "10"},
            "failed to parse setting [index.refresh_interval] with value [10] as a "
            "time value: unit is missing or unrecognized",
        ),
        ({"hidden": "yes"}, "Failed to parse value [yes] as only [true] or [false] are allowed."),
        ({"uuid": "x"}, "private index setting [index.uuid] can not be set explicitly"),
    ],
)
def test_bad_index_settings_are_refused(body: dict, message: str) -> None:
    with pytest.raises(IllegalArgument) as caught:
        parse_index_settings(body)
    assert caught.value.reason == message


def test_null_resets_only_in_updates() -> None:
    assert parse_index_settings({"number_of_replicas": None}) == {}
    assert parse_index_settings({"number_of_replicas": None}, for_update=True) == {
        "index.number_of_replicas": None
    }


def test_nest_builds_the_default_settings_shape() -> None:
    assert nest({"index.a.b": "1", "index.c": "2"}) == {"index": {"a": {"b": "1"}, "c": "2"}}


# ---- cluster settings -------------------------------------------------------------------------


def test_cluster_settings_update_persist_and_reset(tmp_path) -> None:
    path = tmp_path / "cluster_settings.json"
    settings = ClusterSettings(path)
    assert settings.get("search.max_open_scroll_context") == 500
    answer = settings.update(
        {
            "persistent": {"search": {"max_open_scroll_context": 42}},
            "transient": {"search.max_keep_alive": "1h"},
        }
    )
    assert answer == {
        "acknowledged": True,
        "persistent": {"search": {"max_open_scroll_context": "42"}},
        "transient": {"search": {"max_keep_alive": "1h"}},
    }
    assert settings.get("search.max_open_scroll_context") == 42
    assert settings.get("search.max_keep_alive") == 3600.0

    reopened = ClusterSettings(path)
    assert reopened.get("search.max_open_scroll_context") == 42
    assert reopened.get("search.max_keep_alive") == 86400.0  # transient settings do not survive

    reopened.update({"persistent": {"search.max_open_scroll_context": None}})
    assert reopened.get("search.max_open_scroll_context") == 500
    assert ClusterSettings(path).to_body() == {"persistent": {}, "transient": {}}


def test_cluster_settings_refusals(tmp_path) -> None:
    settings = ClusterSettings(tmp_path / "c.json")
    with pytest.raises(IllegalArgument, match=r"^persistent setting \[foo\], not recognized$"):
        settings.update({"persistent": {"foo": 1}})
    with pytest.raises(
        IllegalArgument, match=r"^transient setting \[http.max_content_length\], not dynamically"
    ):
        settings.update({"transient": {"http.max_content_length": "1mb"}})
    with pytest.raises(IllegalArgument, match="Failed to parse value"):
        settings.update({"persistent": {"search.max_open_scroll_context": "many"}})
    with pytest.raises(IllegalArgument, match=r"should be smaller than max keep alive \[1m\]"):
        settings.update({"persistent": {"search.max_keep_alive": "1m"}})
    assert settings.to_body() == {"persistent": {}, "transient": {}}  # a refused update changes nothing


def test_cluster_settings_flat_and_defaults(tmp_path) -> None:
    settings = ClusterSettings(tmp_path / "c.json")
    settings.update({"persistent": {"action.destructive_requires_name": False}})
    assert settings.to_body(flat=True)["persistent"] == {"action.destructive_requires_name": "false"}
    defaults = settings.to_body(include_defaults=True)["defaults"]
    assert defaults["search"]["max_open_scroll_context"] == "500"
    assert "destructive_requires_name" not in defaults.get("action", {})


# ---- cluster health ---------------------------------------------------------------------------


def test_a_red_index_is_answered_at_once_and_waited_for_only_with_wait_for_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Elasticsearch: the health of indices that exist is answered at once, red or not; only
    `wait_for_status` (or a missing index) waits up to `timeout`. What makes an index red here is
    a primary that does not answer: a Ray-backed shard whose actor is down (see
    tests/ray_backend/test_ray_api.py), stood in for by `copy_states`."""
    with Node(tmp_path / "node", background=False) as node:
        admin.create_index(node, "r", {"settings": {"number_of_shards": 2, "number_of_replicas": 0}})
        down = [CopyListing(0, True, "UNASSIGNED", reason="NODE_LEFT"), CopyListing(1, True, "STARTED")]
        monkeypatch.setattr(admin, "copy_states", lambda index: down)
        started = time.monotonic()
        for expr in ("r", None):
            status, body = admin.cluster_health(node, expr, level="indices", timeout=30.0)
            assert (status, body["status"], body["timed_out"]) == (200, "red", False)
            assert body["indices"]["r"]["status"] == "red" and body["unassigned_primary_shards"] == 1
        shards = admin.cluster_health(node, "r", level="shards")[1]["indices"]["r"]["shards"]
        assert [
            (s["status"], s["primary_active"], s["unassigned_primary_shards"]) for s in shards.values()
        ] == [
            ("red", False, 1),
            ("green", True, 0),
        ]
        status, body = admin.cluster_health(node, "r", wait_for_status="red", timeout=30.0)
        assert (status, body["status"], body["timed_out"]) == (200, "red", False)
        assert time.monotonic() - started < 10  # none of them waited for its 30 s
        status, body = admin.cluster_health(node, "r", wait_for_status="yellow", timeout=0.2)
        assert (status, body["status"], body["timed_out"]) == (408, "red", True)
        status, body = admin.cluster_health(node, "r,missing", timeout=0.2)
        assert (status, body["status"], body["timed_out"]) == (408, "red", True)


# ---- time values and sizes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1nanos", 1e-9),
        ("5micros", 5e-6),
        ("250ms", 0.25),
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("-1", -1.0),
        ("0", 0.0),
        (" 10S ", 10.0),
        ("000", 0.0),
    ],
)
def test_time_values(value: str, seconds: float) -> None:
    assert parse_time_value(value, "scroll") == pytest.approx(seconds)


UNIT_MISSING = "unit is missing or unrecognized"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10", f"failed to parse setting [scroll] with value [10] as a time value: {UNIT_MISSING}"),
        ("1M", f"failed to parse setting [scroll] with value [1M] as a time value: {UNIT_MISSING}"),
        ("1w", f"failed to parse setting [scroll] with value [1w] as a time value: {UNIT_MISSING}"),
        ("1.5m", "failed to parse [1.5m], fractional time values are not supported"),
        ("abcs", "failed to parse [abcs]"),
        (
            "-5s",
            "failed to parse setting [scroll] with value [-5s] as a time value: negative durations are not "
            "supported",
        ),
    ],
)
def test_bad_time_values(value: str, message: str) -> None:
    with pytest.raises(IllegalArgument) as caught:
        parse_time_value(value, "scroll")
    assert caught.value.reason == message


def test_byte_sizes() -> None:
    assert parse_byte_size("100mb", "http.max_content_length") == 100 * 1024 * 1024
    assert parse_byte_size("1k", "x") == 1024
    assert parse_byte_size("512b", "x") == 512
    with pytest.raises(IllegalArgument, match="as a size in bytes: unit is missing or unrecognized"):
        parse_byte_size("100", "http.max_content_length")


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0b"), (225, "225b"), (1024, "1kb"), (4669, "4.5kb"), (1536 * 1024, "1.5mb"), (5 * 2**30, "5gb")],
)
def test_cat_sizes_truncate_to_one_decimal(size: int, text: str) -> None:
    assert human_size(size) == text


# ---- filter_path and rendering -------------------------------------------------

RESPONSE = {
    "took": 3,
    "hits": {
        "total": {"value": 2},
        "hits": [
            {"_id": "1", "_source": RawJSON(b'{"a":{"b":1,"c":2},"d":[1,2]}')},
            {"_id": "2", "_source": RawJSON(b'{"d":3}')},
        ],
    },
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("took", {"took": 3}),
        ("hits.hits._id", {"hits": {"hits": [{"_id": "1"}, {"_id": "2"}]}}),
        ("hits.hits._source.a.b", {"hits": {"hits": [{"_source": {"a": {"b": 1}}}]}}),
        ("hits.*.value", {"hits": {"total": {"value": 2}}}),
        ("**._id", {"hits": {"hits": [{"_id": "1"}, {"_id": "2"}]}}),
        ("nothing", {}),
        ("-hits", {"took": 3}),
        ("hits.total,-hits.total.value", {"hits": {"total": {}}}),
    ],
)
def test_filter_path(expression: str, expected: dict) -> None:
    assert filter_path(RESPONSE, expression) == expected


def test_raw_source_is_spliced_unchanged() -> None:
    rendered = to_json({"_source": RawJSON(b'{"z":1,  "a":2}')})
    assert rendered == b'{"_source":{"z":1,  "a":2}}'
    assert (
        to_json({"a": 1, "b": [], "c": {}}, pretty=True) == b'{\n  "a" : 1,\n  "b" : [ ],\n  "c" : { }\n}\n'
    )


def test_unrecognized_parameter_message_suggests_close_names() -> None:
    message = unrecognized("/_search", {"sizee", "zzz"}, {"size", "sort", "q"}, "parameter")
    assert (
        message
        == "request [/_search] contains unrecognized parameters: [sizee] -> did you mean [size]?, [zzz]"
    )
    assert unrecognized("/x", {"sise"}, {"size", "site"}, "parameter") == (
        "request [/x] contains unrecognized parameter: [sise] -> did you mean any of [site, size]?"
    )


# ---- media types ------------------------------------------------------------------------------

VND = "application/vnd.elasticsearch+json; compatible-with=8"


def test_negotiation_answers_the_vendored_type_the_client_asked_for() -> None:
    assert negotiate("application/json", None, True) == "application/json"
    assert negotiate(VND, VND, True) == "application/vnd.elasticsearch+json;compatible-with=8"
    assert (
        negotiate(None, f"text/plain, {VND}", False) == "application/vnd.elasticsearch+json;compatible-with=8"
    )
    ndjson = "application/vnd.elasticsearch+x-ndjson; compatible-with=7"
    assert negotiate(ndjson, VND.replace("8", "7"), True).endswith("compatible-with=7")
    assert negotiate("application/json; charset=UTF-8", None, True) == "application/json"


def test_negotiation_refusals() -> None:
    with pytest.raises(NotAcceptable, match=r"Content-Type header \[text/plain\] is not supported"):
        negotiate("text/plain", None, True)
    with pytest.raises(NotAcceptable, match="Content-Type header is missing"):
        negotiate(None, None, True)
    with pytest.raises(MediaTypeHeader) as caught:
        negotiate(VND, "application/vnd.elasticsearch+json; compatible-with=7", True)
    assert "the compatible versions must match" in caught.value.body()["error"]["caused_by"]["reason"]
    with pytest.raises(ElasticError):
        negotiate("application/json", VND, True)
    negotiate(None, VND, False)  # without a body only Accept matters
