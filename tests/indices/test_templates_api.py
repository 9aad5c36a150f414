"""Index templates over HTTP: legacy `_template`, composable `_index_template` and
`_component_template`, applied on explicit and automatic index creation, merged as Elasticsearch
merges them, kept across a restart, and put by several clients at once without one lost."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from conftest import error_of, running_server
from elasticsearch import Elasticsearch, NotFoundError

from tests import web


@pytest.fixture
def names(http: httpx.Client) -> Iterator[Callable[[str], str]]:
    """Factory of names unique to the test; templates and indices of those names go afterwards."""
    stem = uuid.uuid4().hex[:8]
    made: list[str] = []

    def name(part: str) -> str:
        made.append(f"t{stem}-{part}")
        return made[-1]

    yield name
    http.delete(f"/t{stem}-*", params={"expand_wildcards": "all"})
    for kind in ("_index_template", "_template", "_component_template"):
        http.delete(f"/{kind}/t{stem}-*")


def ok(response: httpx.Response) -> dict:
    assert response.status_code in (200, 201), response.text
    return response.json()


def test_composable_template_applies_components_own_template_then_request(
    http: httpx.Client, names: Callable[[str], str]
) -> None:
    component, template, index, alias = names("ct"), names("it"), names("logs-a"), names("alias")
    ok(
        http.put(
            f"/_component_template/{component}",
            json={
                "template": {
                    "settings": {"number_of_shards": 2, "number_of_replicas": 0},
                    "mappings": {
                        "properties": {
                            "a": {"type": "keyword"},
                            "obj": {"properties": {"x": {"type": "long"}}},
                        }
                    },
                }
            },
        )
    )
    ok(
        http.put(
            f"/_index_template/{template}",
            json={
                "index_patterns": [index.rsplit("-", 1)[0] + "-*"],
                "composed_of": [component],
                "priority": 100,
                "template": {
                    "settings": {"number_of_replicas": 1},
                    "mappings": {"properties": {"obj": {"properties": {"y": {"type": "keyword"}}}}},
                    "aliases": {alias: {}},
                },
            },
        )
    )
    ok(
        http.put(
            f"/{index}",
            json={"settings": {"number_of_replicas": 2}, "mappings": {"properties": {"b": {"type": "long"}}}},
        )
    )
    got = ok(http.get(f"/{index}"))[index]
    assert got["settings"]["index"]["number_of_shards"] == "2"  # component
    assert (
        got["settings"]["index"]["number_of_replicas"] == "2"
    )  # the request over the template over the component
    assert got["mappings"]["properties"]["obj"]["properties"] == {
        "x": {"type": "long"},
        "y": {"type": "keyword"},
    }
    assert got["mappings"]["properties"]["a"] == {"type": "keyword"}
    assert got["mappings"]["properties"]["b"] == {"type": "long"}
    assert got["aliases"] == {alias: {}}


def test_auto_created_index_takes_the_highest_priority_template(
    es: Elasticsearch, http: httpx.Client, names: Callable[[str], str]
) -> None:
    low, high, index = names("low"), names("high"), names("app-1")
    prefix, stem = index.rsplit("-", 1)[0], index.split("-")[0]
    es.indices.put_index_template(
        name=low,
        index_patterns=[f"{stem}-*"],
        priority=1,
        template={"mappings": {"properties": {"n": {"type": "keyword"}}}},
    )
    es.indices.put_index_template(
        name=high,
        index_patterns=[f"{prefix}-*"],
        priority=2,
        template={"mappings": {"properties": {"n": {"type": "long"}}}},
    )
    es.index(index=index, id="1", document={"n": 5}, refresh=True)
    assert es.indices.get_mapping(index=index)[index]["mappings"]["properties"]["n"] == {"type": "long"}
    simulated = ok(http.post(f"/_index_template/_simulate_index/{index}"))
    assert simulated["template"]["mappings"]["properties"]["n"] == {"type": "long"}
    assert simulated["overlapping"] == [{"name": low, "index_patterns": [f"{stem}-*"]}]


def test_a_template_defines_the_analyzers_its_mappings_use(
    es: Elasticsearch, http: httpx.Client, names: Callable[[str], str]
) -> None:
    """Settings and mappings of one template go together: a mapping naming an analyzer that the
    template's (or a composed component's) `analysis` defines is valid, and the index created
    from it analyses with it; one naming an analyzer nobody defines is refused."""
    template, index = names("stem"), names("app-1")
    es.indices.put_index_template(
        name=template,
        index_patterns=[index.rsplit("-", 1)[0] + "-*"],
        template={
            "settings": {
                "analysis": {
                    "analyzer": {
                        "stems": {
                            "type": "custom",
                            "tokenizer": "standard",
                            "filter": ["lowercase", "porter_stem"],
                        }
                    }
                }
            },
            "mappings": {"properties": {"msg": {"type": "text", "analyzer": "stems"}}},
        },
    )
    es.index(index=index, id="1", document={"msg": "Running dogs"}, refresh=True)
    assert es.count(index=index, query={"match": {"msg": "run"}})["count"] == 1
    tokens = es.indices.analyze(index=index, field="msg", text="Jumping")["tokens"]
    assert [t["token"] for t in tokens] == ["jump"]
    refused = http.put(
        f"/_index_template/{names('bad')}",
        json={
            "index_patterns": ["nothing-*"],
            "template": {"mappings": {"properties": {"m": {"type": "text", "analyzer": "nope"}}}},
        },
    )
    assert refused.status_code == 400


def test_legacy_templates_apply_in_order_when_no_composable_matches(
    http: httpx.Client, names: Callable[[str], str]
) -> None:
    first, second, index = names("one"), names("two"), names("old-x")
    pattern = index.rsplit("-", 1)[0] + "-*"
    ok(
        http.put(
            f"/_template/{first}",
            json={"index_patterns": [pattern], "order": 2, "settings": {"number_of_replicas": 0}},
        )
    )
    ok(
        http.put(
            f"/_template/{second}",
            params={"order": 1},
            json={"index_patterns": pattern, "settings": {"number_of_replicas": 3, "number_of_shards": 2}},
        )
    )
    ok(http.post(f"/{index}/_doc", json={"f": 1}))  # auto-created
    settings = ok(http.get(f"/{index}/_settings"))[index]["settings"]["index"]
    assert settings["number_of_replicas"] == "0"  # order 2 wins over order 1
    assert settings["number_of_shards"] == "2"
    listed = ok(http.get(f"/_template/{first},{second}"))
    assert listed[first]["order"] == 2 and listed[second]["order"] == 1
    assert listed[first]["settings"] == {"index": {"number_of_replicas": "0"}}
    assert http.head(f"/_template/{first}").status_code == 200


def test_missing_names_answer_404_as_elasticsearch(es: Elasticsearch, http: httpx.Client, names) -> None:
    missing = names("missing")
    for kind in ("_template", "_index_template"):
        response = http.delete(f"/{kind}/{missing}")
        assert response.status_code == 404
        assert error_of(response)["type"] == "index_template_missing_exception"
        assert error_of(response)["reason"] == f"index_template [{missing}] missing"
    response = http.delete(f"/_component_template/{missing}")
    assert response.status_code == 404 and error_of(response)["type"] == "resource_not_found_exception"
    assert http.get(f"/_template/{missing}").status_code == 404
    response = http.get(f"/_index_template/{missing}")
    assert response.status_code == 404
    assert error_of(response)["reason"] == f"index template matching [{missing}] not found"
    for kind in ("_template", "_index_template", "_component_template"):
        assert http.head(f"/{kind}/{missing}").status_code == 404
        assert http.delete(f"/{kind}/{missing}*").status_code == 200  # a wildcard matching none
    with pytest.raises(NotFoundError):
        es.indices.delete_index_template(name=missing)
    assert es.indices.exists_template(name=missing).body is False


@pytest.mark.parametrize(
    ("kind", "body", "kind_of_error", "reason_part"),
    [
        (
            "_index_template",
            {"index_patterns": ["x*"], "composed_of": ["nope"]},
            "invalid_index_template_exception",
            "that do not exist",
        ),
        ("_index_template", {}, "action_request_validation_exception", "index patterns are missing"),
        (
            "_index_template",
            {"index_patterns": ["x*"], "bogus": 1},
            "x_content_parse_exception",
            "unknown field [bogus]",
        ),
        (
            "_index_template",
            {"index_patterns": ["x*"], "priority": -1},
            "action_request_validation_exception",
            "priority must be >= 0",
        ),
        (
            "_index_template",
            {"index_patterns": ["x*"], "template": {"settings": {"index.nope": 1}}},
            "illegal_argument_exception",
            "unknown setting [index.nope]",
        ),
        (
            "_index_template",
            {"index_patterns": ["x*"], "template": {"mappings": {"properties": {"f": {"type": "nope"}}}}},
            "mapper_parsing_exception",
            "nope",
        ),
        ("_component_template", {"settings": {}}, "x_content_parse_exception", "unknown field [settings]"),
        ("_component_template", {}, "x_content_parse_exception", "Required [template]"),
        ("_template", {"settings": {}}, "action_request_validation_exception", "index patterns are missing"),
        (
            "_template",
            {"index_patterns": ["_x*"]},
            "invalid_index_template_exception",
            "must not start with '_'",
        ),
    ],
)
def test_malformed_templates_are_400_and_change_nothing(
    http: httpx.Client,
    names: Callable[[str], str],
    kind: str,
    body: dict,
    kind_of_error: str,
    reason_part: str,
) -> None:
    name = names("bad")
    response = http.put(f"/{kind}/{name}", json=body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == kind_of_error
    assert reason_part in error["reason"]
    assert http.head(f"/{kind}/{name}").status_code == 404


def test_overlapping_patterns_of_equal_priority_are_refused(http: httpx.Client, names) -> None:
    first, second = names("a"), names("b")
    pattern = names("ov") + "-*"
    ok(http.put(f"/_index_template/{first}", json={"index_patterns": [pattern], "priority": 7}))
    response = http.put(
        f"/_index_template/{second}", json={"index_patterns": [pattern[:-1] + "x*"], "priority": 7}
    )
    assert response.status_code == 400
    assert (
        "that have the same priority [7], multiple index templates may not match"
        in error_of(response)["reason"]
    )
    ok(http.put(f"/_index_template/{second}", json={"index_patterns": [pattern[:-1] + "x*"], "priority": 8}))
    created = http.put(
        f"/_index_template/{second}",
        params={"create": "true"},
        json={"index_patterns": ["zz*"], "priority": 9},
    )
    assert created.status_code == 400 and "already exists" in error_of(created)["reason"]


def test_a_component_in_use_cannot_be_deleted(http: httpx.Client, names) -> None:
    component, template = names("c"), names("t")
    ok(
        http.put(
            f"/_component_template/{component}", json={"template": {"settings": {"number_of_shards": 1}}}
        )
    )
    ok(
        http.put(
            f"/_index_template/{template}",
            json={"index_patterns": [names("p") + "*"], "composed_of": [component]},
        )
    )
    response = http.delete(f"/_component_template/{component}")
    assert response.status_code == 400
    assert error_of(response)["reason"] == (
        f"component templates [{component}] cannot be removed as they are still in use by index "
        f"templates [{template}]"
    )
    listed = ok(http.get(f"/_component_template/{component}"))["component_templates"]
    assert listed[0]["component_template"]["template"]["settings"] == {"index": {"number_of_shards": "1"}}


def test_simulate_a_template_body(http: httpx.Client, names) -> None:
    component = names("c")
    ok(
        http.put(
            f"/_component_template/{component}",
            json={"template": {"mappings": {"properties": {"k": {"type": "keyword"}}}}},
        )
    )
    simulated = ok(
        http.post(
            "/_index_template/_simulate",
            json={
                "index_patterns": ["never-*"],
                "composed_of": [component],
                "template": {"settings": {"number_of_shards": 3}},
            },
        )
    )
    assert simulated["template"]["settings"]["index"]["number_of_shards"] == "3"
    assert simulated["template"]["mappings"] == {"properties": {"k": {"type": "keyword"}}}


def test_templates_put_by_several_clients_at_once_are_all_kept(server: str, names) -> None:
    made = [names(f"c{i}") for i in range(16)]
    errors: list[str] = []

    def put(name: str) -> None:
        with web.Client(base_url=server, timeout=60) as client:
            response = client.put(
                f"/_index_template/{name}", json={"index_patterns": [f"{name}-*"], "priority": 1}
            )
            if response.status_code != 200:
                errors.append(response.text)

    threads = [threading.Thread(target=put, args=(name,)) for name in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with web.Client(base_url=server, timeout=60) as client:
        listed = {t["name"] for t in ok(client.get("/_index_template"))["index_templates"]}
    assert set(made) <= listed


def test_templates_survive_a_restart(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (url, _):
        ok(
            web.put(
                f"{url}/_index_template/keep",
                json={"index_patterns": ["kept-*"], "template": {"settings": {"number_of_shards": 3}}},
            )
        )
        ok(web.put(f"{url}/_template/legacy", json={"index_patterns": ["old-*"], "order": 4}))
    with running_server(tmp_path / "data") as (url, _):
        ok(web.put(f"{url}/kept-1"))
        assert (
            ok(web.get(f"{url}/kept-1/_settings"))["kept-1"]["settings"]["index"]["number_of_shards"] == "3"
        )
        assert ok(web.get(f"{url}/_template/legacy"))["legacy"]["order"] == 4


def test_cat_templates_lists_legacy_and_composable(http: httpx.Client, names) -> None:
    legacy, composable = names("cat-l"), names("cat-c")
    ok(http.put(f"/_template/{legacy}", json={"index_patterns": ["cl-*"], "order": 3, "version": 9}))
    ok(http.put(f"/_index_template/{composable}", json={"index_patterns": ["cc-*", "cd-*"], "priority": 4}))
    rows = ok(http.get(f"/_cat/templates/{legacy.rsplit('-', 2)[0]}-*", params={"format": "json"}))
    assert rows == [
        {
            "name": composable,
            "index_patterns": "[cc-*, cd-*]",
            "order": "4",
            "version": "",
            "composed_of": "[]",
        },
        {"name": legacy, "index_patterns": "[cl-*]", "order": "3", "version": "9", "composed_of": ""},
    ]


def test_simulating_a_name_no_template_matches_is_empty(http: httpx.Client) -> None:
    assert ok(http.post("/_index_template/_simulate_index/nothing-matches-this-0000")) == {}
