"""Data streams over HTTP: created by a write matching a `data_stream` template (or by
`PUT /_data_stream`), append-only, `@timestamp` required, rolled over, searched and walked (PIT,
scroll, `search_after`) as an alias, deleted; several clients creating one stream at once get
one stream with one first backing index."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import error_of, running_server
from elasticsearch import Elasticsearch, helpers

from tests import web


@pytest.fixture
def stream(http: httpx.Client) -> Iterator[str]:
    """A stream name a `data_stream` template matches (the template and streams go afterwards)."""
    stem = f"ds{uuid.uuid4().hex[:8]}"
    response = http.put(
        f"/_index_template/{stem}",
        json={
            "index_patterns": [f"{stem}-*"],
            "data_stream": {},
            "priority": 500,
            "template": {"mappings": {"properties": {"n": {"type": "long"}}}},
        },
    )
    assert response.status_code == 200, response.text
    yield f"{stem}-app"
    http.delete(f"/_data_stream/{stem}-*")
    http.delete(f"/_index_template/{stem}")


def doc(n: int) -> dict:
    return {"@timestamp": f"2024-01-01T00:00:{n % 60:02d}Z", "n": n}


def test_a_write_creates_the_stream_and_its_first_backing_index(http: httpx.Client, stream: str) -> None:
    response = http.post(f"/{stream}/_doc", json=doc(1), params={"refresh": "true"})
    assert response.status_code == 201, response.text
    backing = response.json()["_index"]
    assert re.fullmatch(rf"\.ds-{stream}-\d{{4}}\.\d{{2}}\.\d{{2}}-000001", backing)
    listed = http.get(f"/_data_stream/{stream}").json()["data_streams"]
    assert [s["name"] for s in listed] == [stream]
    assert [i["index_name"] for i in listed[0]["indices"]] == [backing]
    assert listed[0]["generation"] == 1 and listed[0]["timestamp_field"] == {"name": "@timestamp"}
    mapping = http.get(f"/{backing}/_mapping").json()[backing]["mappings"]["properties"]
    assert mapping["@timestamp"] == {"type": "date"} and mapping["n"] == {"type": "long"}
    settings = http.get(f"/{backing}/_settings").json()[backing]["settings"]["index"]
    assert settings["hidden"] == "true"


def test_only_creates_are_taken(http: httpx.Client, stream: str) -> None:
    assert http.put(f"/{stream}/_create/1", json=doc(1)).status_code == 201
    for response in (
        http.put(f"/{stream}/_doc/2", json=doc(2)),
        http.post(f"/{stream}/_update/1", json={"doc": {"n": 3}}),
        http.delete(f"/{stream}/_doc/1"),
    ):
        assert response.status_code == 400
        assert (
            error_of(response)["reason"]
            == "only write ops with an op_type of create are allowed in data streams"
        )
    body = (
        f'{{"index":{{"_index":"{stream}","_id":"3"}}}}\n{{"@timestamp":"2024-01-01T00:00:00Z"}}\n'
        f'{{"create":{{"_index":"{stream}","_id":"4"}}}}\n{{"@timestamp":"2024-01-01T00:00:00Z"}}\n'
    )
    items = http.post("/_bulk", content=body, headers={"content-type": "application/x-ndjson"}).json()[
        "items"
    ]
    assert items[0]["index"]["status"] == 400
    assert items[1]["create"]["status"] == 201


def test_a_document_without_timestamp_is_refused(http: httpx.Client, stream: str) -> None:
    assert http.post(f"/{stream}/_doc", json=doc(0)).status_code == 201
    response = http.post(f"/{stream}/_doc", json={"n": 1})
    assert response.status_code == 400
    assert error_of(response)["type"] == "document_parsing_exception"
    assert error_of(response)["reason"] == "data stream timestamp field [@timestamp] is missing"
    lines = "".join(
        f'{{"create":{{"_index":"{stream}"}}}}\n{line}\n'
        for line in (
            '{"@timestamp":"2024-01-01T00:00:00Z","n":1}',
            '{"n":2}',
            '{"@timestamp":"2024-01-02T00:00:00Z"}',
        )
    )
    items = http.post(
        "/_bulk", content=lines, params={"refresh": "true"}, headers={"content-type": "application/x-ndjson"}
    ).json()["items"]
    assert [item["create"]["status"] for item in items] == [201, 400, 201]
    assert http.get(f"/{stream}/_count").json()["count"] == 3


def test_rollover_search_and_walks_over_the_stream(
    es: Elasticsearch, http: httpx.Client, stream: str
) -> None:
    helpers.bulk(es, ({"_op_type": "create", "_index": stream, **doc(n)} for n in range(30)), refresh=True)
    rolled = http.post(f"/{stream}/_rollover").json()
    assert rolled["rolled_over"] is True and rolled["old_index"].endswith("-000001")
    assert rolled["new_index"].endswith("-000002")
    helpers.bulk(
        es, ({"_op_type": "create", "_index": stream, **doc(n)} for n in range(30, 50)), refresh=True
    )
    listed = http.get(f"/_data_stream/{stream}").json()["data_streams"][0]
    assert listed["generation"] == 2 and len(listed["indices"]) == 2
    assert es.count(index=stream)["count"] == 50
    page = es.search(index=stream, size=5, sort=[{"n": "desc"}])
    assert [h["_source"]["n"] for h in page["hits"]["hits"]] == [49, 48, 47, 46, 45]
    assert page["hits"]["hits"][0]["_index"] == rolled["new_index"]
    # a PIT with search_after, and a scroll, read every document once
    pit = es.open_point_in_time(index=stream, keep_alive="1m")["id"]
    seen: list[int] = []
    after = None
    while True:
        extra = {"search_after": after} if after else {}
        hits = es.search(pit={"id": pit, "keep_alive": "1m"}, size=7, sort=[{"n": "asc"}], **extra)["hits"][
            "hits"
        ]
        if not hits:
            break
        seen += [h["_source"]["n"] for h in hits]
        after = hits[-1]["sort"]
    es.close_point_in_time(id=pit)
    assert seen == list(range(50))
    scrolled = [h["_source"]["n"] for h in helpers.scan(es, index=stream, size=9)]
    assert sorted(scrolled) == list(range(50))
    # the write index cannot be deleted; an older backing index can, and leaves the stream
    refused = http.delete(f"/{rolled['new_index']}")
    assert refused.status_code == 400 and "is the write index for data stream" in error_of(refused)["reason"]
    assert http.delete(f"/{rolled['old_index']}").status_code == 200
    assert [
        i["index_name"] for i in http.get(f"/_data_stream/{stream}").json()["data_streams"][0]["indices"]
    ] == [rolled["new_index"]]
    assert es.count(index=stream)["count"] == 20


def test_put_get_delete_and_stats(http: httpx.Client, stream: str) -> None:
    assert http.put(f"/_data_stream/{stream}").json() == {"acknowledged": True}
    again = http.put(f"/_data_stream/{stream}")
    assert again.status_code == 400 and error_of(again)["type"] == "resource_already_exists_exception"
    name = f"nomatch-{uuid.uuid4().hex[:6]}"
    no_template = http.put(f"/_data_stream/{name}")
    assert no_template.status_code == 400
    assert error_of(no_template)["reason"] == f"no matching index template found for data stream [{name}]"
    stats = http.get(f"/_data_stream/{stream}/_stats").json()
    assert stats["data_stream_count"] == 1 and stats["backing_indices"] == 1
    assert http.delete(f"/_data_stream/{stream}").json() == {"acknowledged": True}
    assert http.get(f"/_data_stream/{stream}").status_code == 404
    assert http.delete(f"/_data_stream/{stream}").status_code == 404
    assert http.delete(f"/_data_stream/{stream}*").status_code == 200  # none left: fine
    created = http.put(f"/{stream}")
    assert created.status_code == 400
    assert "that creates data streams only, use create data stream api instead" in error_of(created)["reason"]


def test_several_clients_creating_one_stream_get_one_backing_index(server: str, stream: str) -> None:
    statuses: list[int] = []
    indices: set[str] = set()

    def write(n: int) -> None:
        with web.Client(base_url=server, timeout=60) as client:
            for i in range(5):
                response = client.post(f"/{stream}/_doc", json=doc(n * 10 + i))
                statuses.append(response.status_code)
                indices.add(response.json().get("_index", ""))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(statuses) == {201}
    assert len(indices) == 1
    with web.Client(base_url=server, timeout=60) as client:
        listed = client.get(f"/_data_stream/{stream}").json()["data_streams"][0]
        assert [i["index_name"] for i in listed["indices"]] == list(indices)
        client.post(f"/{stream}/_refresh")
        assert client.get(f"/{stream}/_count").json()["count"] == 40


def test_a_stream_survives_a_restart(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (url, _):
        web.put(f"{url}/_index_template/t", json={"index_patterns": ["s-*"], "data_stream": {}})
        assert web.post(f"{url}/s-one/_doc", json=doc(1)).status_code == 201
        assert web.post(f"{url}/s-one/_rollover").json()["rolled_over"]
    with running_server(tmp_path / "data") as (url, _):
        listed = web.get(f"{url}/_data_stream/s-one").json()["data_streams"][0]
        assert listed["generation"] == 2
        created = web.post(f"{url}/s-one/_doc", json=doc(2), params={"refresh": "true"})
        assert created.json()["_index"] == listed["indices"][-1]["index_name"]
        assert web.get(f"{url}/s-one/_count").json()["count"] == 2


def test_a_backing_index_a_crash_left_unnamed_is_taken_by_the_next_attempt(tmp_path: Path) -> None:
    """In process: the backing index of generation 2 exists but the stream table does not name it
    (a crash between the two steps of a rollover); the next rollover takes it."""
    from leafsearch.client import Client
    from leafsearch.index.mapping import Mapping
    from leafsearch.indices.data_streams import backing_index_name

    with Client(tmp_path / "data", background=False) as client:
        client.perform_request(
            "PUT", "/_index_template/t", body={"index_patterns": ["c-*"], "data_stream": {}}
        )
        client.perform_request("PUT", "/_data_stream/c-one")
        orphan = backing_index_name("c-one", 2)
        client.node.create_index(
            orphan, {"index.hidden": "true"}, Mapping.from_body(None), data_stream="c-one"
        )
        rolled = client.perform_request("POST", "/c-one/_rollover")
        assert rolled["new_index"] == orphan
        listed = client.perform_request("GET", "/_data_stream/c-one")["data_streams"][0]
        assert [i["index_name"] for i in listed["indices"]][-1] == orphan


def test_rollovers_by_several_clients_at_once_make_one_index_per_generation(server: str, stream: str) -> None:
    with web.Client(base_url=server, timeout=60) as client:
        assert client.put(f"/_data_stream/{stream}").status_code == 200
    answers: list[dict] = []

    def roll() -> None:
        with web.Client(base_url=server, timeout=60) as client:
            answers.append(client.post(f"/{stream}/_rollover").json())

    threads = [threading.Thread(target=roll) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    new = sorted(a["new_index"] for a in answers)
    assert len(set(new)) == 6 and all(a["rolled_over"] for a in answers)
    assert [n[-6:] for n in new] == [f"{g:06d}" for g in range(2, 8)]
    with web.Client(base_url=server, timeout=60) as client:
        listed = client.get(f"/_data_stream/{stream}").json()["data_streams"][0]
    assert listed["generation"] == 7 and len(listed["indices"]) == 7
