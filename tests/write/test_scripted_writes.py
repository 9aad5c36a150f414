"""Scripts in the write path, through HTTP with the official client: `_update` (with upserts and
`ctx.op`), bulk updates, `_update_by_query` and `_reindex`, stored scripts that outlive a
restart, scripted increments from several clients at once (none lost), and every bad script a
400 that changes nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import elasticsearch
import httpx
import pytest
from conftest import error_of, running_server
from elasticsearch import Elasticsearch
from security_helpers import add_user

from tests import web

INCREMENT = "ctx._source.counter += params.by"


def test_an_update_script_changes_the_source_with_its_params(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index()
    es.index(index=index, id="1", document={"counter": 1, "tags": ["a"]}, refresh=True)
    answer = es.update(
        index=index,
        id="1",
        script={"source": INCREMENT + "; ctx._source.tags.add(params.tag)", "params": {"by": 4, "tag": "b"}},
    )
    assert answer["result"] == "updated" and answer["_version"] == 2
    assert es.get(index=index, id="1")["_source"] == {"counter": 5, "tags": ["a", "b"]}
    assert es.update(index=index, id="1", script="ctx.op = 'noop'")["result"] == "noop"
    assert es.get(index=index, id="1")["_version"] == 2
    deleted = es.update(index=index, id="1", script="if (ctx._source.counter > 3) { ctx.op = 'delete' }")
    assert deleted["result"] == "deleted"
    assert not es.exists(index=index, id="1")


def test_upserts_insert_the_upsert_or_run_the_script_on_it(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index()
    script = {"source": INCREMENT, "params": {"by": 1}}
    assert es.update(index=index, id="plain", script=script, upsert={"counter": 10})["result"] == "created"
    assert es.get(index=index, id="plain")["_source"] == {"counter": 10}
    assert es.update(index=index, id="plain", script=script, upsert={"counter": 10})["result"] == "updated"
    assert es.get(index=index, id="plain")["_source"] == {"counter": 11}
    scripted = es.update(index=index, id="s", script=script, upsert={"counter": 10}, scripted_upsert=True)
    assert scripted["result"] == "created"
    assert es.get(index=index, id="s")["_source"] == {"counter": 11}
    with pytest.raises(elasticsearch.NotFoundError) as missing:
        es.update(index=index, id="none", script=script)
    assert missing.value.error == "document_missing_exception"


def test_bulk_updates_run_their_scripts_item_by_item(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index()
    es.index(index=index, id="1", document={"counter": 1}, refresh=True)
    answer = es.bulk(
        operations=[
            {"update": {"_index": index, "_id": "1"}},
            {"script": {"source": INCREMENT, "params": {"by": 2}}},
            {"update": {"_index": index, "_id": "1"}},
            {"script": {"source": "ctx._source.counter.nope()"}},
            {"update": {"_index": index, "_id": "2"}},
            {"script": {"source": INCREMENT, "params": {"by": 2}}, "upsert": {"counter": 0}},
        ],
        refresh=True,
    )
    items = [next(iter(item.values())) for item in answer["items"]]
    assert [item["status"] for item in items] == [200, 400, 201]
    assert items[1]["error"]["type"] == "illegal_argument_exception"
    assert items[1]["error"]["caused_by"]["type"] == "script_exception"
    assert es.get(index=index, id="1")["_source"] == {"counter": 3}


def test_update_by_query_and_reindex_run_a_script_on_every_match(
    es: Elasticsearch, new_index: Callable[..., str]
) -> None:
    index = new_index()
    es.bulk(
        operations=[x for i in range(30) for x in ({"index": {"_index": index, "_id": str(i)}}, {"n": i})],
        refresh=True,
    )
    source = (
        "if (ctx._source.n % 3 == 0) { ctx.op = 'noop' }"
        " else if (ctx._source.n == 4) { ctx.op = 'delete' } else { ctx._source.n += 100 }"
    )
    answer = es.update_by_query(index=index, script={"source": source}, refresh=True, conflicts="proceed")
    assert (answer["total"], answer["updated"], answer["deleted"], answer["noops"]) == (30, 19, 1, 10)
    values = sorted(h["_source"]["n"] for h in es.search(index=index, size=100)["hits"]["hits"])
    assert values == sorted(
        [i for i in range(30) if i % 3 == 0] + [i + 100 for i in range(30) if i % 3 and i != 4]
    )
    dest = f"{index}-copy"
    try:
        copied = es.reindex(
            source={"index": index, "query": {"range": {"n": {"gte": 100}}}},
            dest={"index": dest},
            script={
                "source": "ctx._id = 'copy-' + ctx._id; ctx._source.copied = params.flag",
                "params": {"flag": True},
            },
            refresh=True,
        )
        assert copied["created"] == 19
        hit = es.get(index=dest, id="copy-1")
        assert hit["_source"] == {"n": 101, "copied": True}
    finally:
        es.options(ignore_status=404).indices.delete(index=dest)


def test_bad_scripts_are_400s_that_change_nothing(
    es: Elasticsearch, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    es.index(index=index, id="1", document={"counter": 1}, refresh=True)
    cases = [
        ({"script": {"source": "ctx._source.counter +="}}, "script_exception", "compile error"),
        (
            {"script": {"source": "ctx._source.x.y = 1"}},
            "illegal_argument_exception",
            "failed to execute script",
        ),
        ({"script": {"source": "while (true) {}"}}, "illegal_argument_exception", "failed to execute script"),
        (
            {"script": {"source": "1", "lang": "expression"}},
            "illegal_argument_exception",
            "script_lang not supported [expression]",
        ),
        ({"script": {"source": "1", "id": "x"}}, "illegal_argument_exception", None),
        ({"script": {"sauce": "1"}}, "x_content_parse_exception", "[script] unknown field [sauce]"),
        ({"script": "ctx._source.counter++", "doc": {"a": 1}}, "action_request_validation_exception", None),
        ({"script": {"source": "ctx.op = 'explode'"}}, "illegal_argument_exception", None),
        ({"script": {"source": "x" * 70000}}, "illegal_argument_exception", None),
    ]
    for body, error_type, reason in cases:
        response = http.post(f"/{index}/_update/1", json=body)
        assert response.status_code == 400, (body, response.text)
        error = response.json()["error"]
        assert error["type"] == error_type, (body, error)
        if reason is not None:
            assert error["reason"] == reason, (body, error)
    unchanged = es.get(index=index, id="1")
    assert unchanged["_source"] == {"counter": 1} and unchanged["_version"] == 1
    stalled = http.post(f"/{index}/_update/1", json={"script": {"source": "while (true) {}"}}).json()["error"]
    assert stalled["caused_by"]["caused_by"]["type"] == "painless_error"


def test_scripted_increments_from_several_clients_are_none_lost(
    server: str, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    clients, rounds = 4, 40
    errors: list[BaseException] = []

    def increment(worker: int) -> None:
        with Elasticsearch(server, request_timeout=60) as es:
            try:
                for i in range(rounds):
                    es.update(
                        index=index,
                        id=f"c{i % 3}",
                        script={"source": INCREMENT, "params": {"by": 1}},
                        upsert={"counter": 0},
                        scripted_upsert=True,
                        refresh="true" if i % 10 == 0 else None,
                    )
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

    refreshing = threading.Event()

    def refresher() -> None:
        with web.Client(base_url=server, timeout=60) as http:
            while not refreshing.is_set():
                http.post(f"/{index}/_refresh")

    background = threading.Thread(target=refresher)
    background.start()
    threads = [threading.Thread(target=increment, args=(w,)) for w in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refreshing.set()
    background.join()
    assert not errors
    with Elasticsearch(server) as es:
        total = sum(es.get(index=index, id=f"c{k}")["_source"]["counter"] for k in range(3))
    assert total == clients * rounds


def test_stored_scripts_survive_a_restart_and_are_refused_when_bad(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, _), Elasticsearch(url) as es:
        assert es.put_script(id="inc", script={"lang": "painless", "source": INCREMENT})["acknowledged"]
        with pytest.raises(elasticsearch.BadRequestError) as bad:
            es.put_script(id="bad", script={"lang": "painless", "source": "ctx._source.n +="})
        assert bad.value.error == "script_exception"
        es.index(index="t", id="1", document={"counter": 1}, refresh=True)
        es.update(index="t", id="1", script={"id": "inc", "params": {"by": 2}})
    with running_server(data) as (url, _), Elasticsearch(url) as es:
        stored = es.get_script(id="inc")
        assert stored["found"] and stored["script"] == {"lang": "painless", "source": INCREMENT}
        assert es.options(ignore_status=404).get_script(id="bad")["found"] is False
        es.update(index="t", id="1", script={"id": "inc", "params": {"by": 3}})
        assert es.get(index="t", id="1")["_source"] == {"counter": 6}
        assert es.delete_script(id="inc")["acknowledged"]
        with pytest.raises(elasticsearch.NotFoundError):
            es.delete_script(id="inc")
        with pytest.raises(elasticsearch.NotFoundError) as gone:
            es.update(index="t", id="1", script={"id": "inc"})
        assert gone.value.error == "resource_not_found_exception"


def test_only_a_superuser_stores_scripts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data) as (url, _):
        add_user(data, "admin", "admin-secret", "superuser")
        add_user(data, "writer", "writer-secret", "write:*")
        writer = web.put(
            f"{url}/_scripts/s", json={"script": {"source": "1"}}, auth=("writer", "writer-secret")
        )
        assert writer.status_code == 403
        assert error_of(writer)["type"] == "security_exception"
        admin = web.put(f"{url}/_scripts/s", json={"script": {"source": "1"}}, auth=("admin", "admin-secret"))
        assert admin.status_code == 200
        assert web.get(f"{url}/_scripts/s", auth=("writer", "writer-secret")).json()["found"] is True
