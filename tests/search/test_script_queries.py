"""`script` and `script_score` queries over HTTP: the documents a script keeps and the scores it
gives equal those computed from the documents, deleted documents are never seen, a walk of a
point in time with a script query is exactly once while clients write, and a failing script is
the search's 400 with the script's stack."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import orjson

from tests import web

DOCS = 300


def fill(http: httpx.Client, index: str) -> list[dict]:
    docs = [
        {"n": i, "tag": ("a", "b", "c")[i % 3], "price": i * 1.5, "msg": "hello" + " hello" * (i % 4)}
        for i in range(DOCS)
    ]
    lines = b"".join(
        orjson.dumps({"index": {"_index": index, "_id": str(i)}}) + b"\n" + orjson.dumps(doc) + b"\n"
        for i, doc in enumerate(docs)
    )
    response = http.post(
        "/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert not response.json()["errors"]
    return docs


def ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [hit["_id"] for hit in response.json()["hits"]["hits"]]


def test_a_script_query_keeps_what_its_script_returns_true_for(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    docs = fill(http, index)
    http.delete(f"/{index}/_doc/12?refresh=true")
    script = {
        "source": "doc['n'].value % params.m == 0 && doc['tag.keyword'].value != 'b'"
        " && doc['price'].value > params.p",
        "params": {"m": 4, "p": 30.0},
    }
    found = ids(
        http.post(
            f"/{index}/_search", json={"query": {"script": {"script": script}}, "size": 1000, "sort": ["n"]}
        )
    )
    expected = [
        str(i) for i, d in enumerate(docs) if i % 4 == 0 and d["tag"] != "b" and d["price"] > 30 and i != 12
    ]
    assert found == expected
    inside = {
        "bool": {
            "filter": [
                {"term": {"tag.keyword": "a"}},
                {"script": {"script": "doc['n'].size() == 1 && doc['n'].value < 30"}},
            ]
        }
    }
    assert ids(http.post(f"/{index}/_search", json={"query": inside, "size": 100, "sort": ["n"]})) == [
        str(i) for i in range(0, 30, 3) if i != 12
    ]


def test_script_score_scores_the_inner_matches_with_the_script(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    docs = fill(http, index)
    body = {
        "query": {
            "script_score": {
                "query": {"range": {"n": {"lt": 50}}},
                "script": {"source": "doc['price'].value * params.f + _score", "params": {"f": 2}},
                "min_score": 40,
            }
        },
        "size": 100,
    }
    hits = http.post(f"/{index}/_search", json=body).json()["hits"]["hits"]
    expected = sorted(
        ((d["price"] * 2 + 1.0, str(i)) for i, d in enumerate(docs) if i < 50 and d["price"] * 2 + 1.0 >= 40),
        key=lambda pair: (-pair[0], int(pair[1])),
    )
    assert [(hit["_id"], hit["_score"]) for hit in hits] == [(i, score) for score, i in expected]


def test_a_walk_with_a_script_query_is_exactly_once_while_clients_write(
    server: str, http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index)
    pit = http.post(f"/{index}/_pit?keep_alive=1m").json()["id"]
    stop = threading.Event()

    def writer() -> None:
        with web.Client(base_url=server, timeout=60) as client:
            i = 0
            while not stop.is_set():
                client.put(f"/{index}/_doc/new-{i}", json={"n": 2 * i, "tag": "a", "price": 1.0, "msg": "x"})
                client.delete(f"/{index}/_doc/{(7 * i) % DOCS}")
                client.post(f"/{index}/_refresh")
                i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    seen: list[str] = []
    try:
        after = None
        while True:
            body = {
                "query": {"script": {"script": "doc['n'].value % 2 == 0"}},
                "size": 17,
                "pit": {"id": pit, "keep_alive": "1m"},
                "sort": [{"n": "asc"}],
            }
            if after is not None:
                body["search_after"] = after
            hits = http.post("/_search", json=body).json()["hits"]["hits"]
            if not hits:
                break
            seen += [hit["_id"] for hit in hits]
            after = hits[-1]["sort"]
    finally:
        stop.set()
        thread.join()
        http.request("DELETE", "/_pit", json={"id": pit})
    assert seen == [str(i) for i in range(0, DOCS, 2)]


def test_a_failing_script_is_the_searchs_400_with_the_scripts_stack(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index()
    fill(http, index)
    failing = http.post(f"/{index}/_search", json={"query": {"script": {"script": "doc['n'].value / 0 > 1"}}})
    assert failing.status_code == 400
    error = failing.json()["error"]
    assert error["type"] == "search_phase_execution_exception"
    root = error["root_cause"][0]
    assert root["type"] == "script_exception" and root["reason"] == "runtime error"
    assert root["caused_by"] == {"type": "arithmetic_exception", "reason": "/ by zero"}
    assert root["script_stack"][1].endswith("^---- HERE")
    for query, kind in [
        ({"script": {"script": "doc['n'].value"}}, "query_shard_exception"),
        ({"script": {"script": "doc['nope'].value > 1"}}, "script_exception"),
        ({"script": {"script": "doc['msg'].value == 'x'"}}, "illegal_argument_exception"),
        ({"script": {"script": {"source": "true", "lang": "mustache"}}}, "illegal_argument_exception"),
        ({"script": {"script": {"id": "stored", "lang": "painless"}}}, "illegal_argument_exception"),
        ({"script": {"script": {"id": "stored", "source": "true"}}}, "illegal_argument_exception"),
        ({"script": {}}, "parsing_exception"),
        ({"script_score": {"script": "1"}}, "parsing_exception"),
        ({"script_score": {"query": {"match_all": {}}, "script": "-1"}}, "query_shard_exception"),
        ({"script_score": {"query": {"match_all": {}}, "script": "'a'"}}, "query_shard_exception"),
        ({"script": {"script": "while (true) {}"}}, "script_exception"),
        ({"script": {"script": "1 + " * 20000 + "1 > 0"}}, "illegal_argument_exception"),  # over 65,535 bytes
    ]:
        response = http.post(f"/{index}/_search", json={"query": query})
        assert response.status_code == 400, (query, response.text)
        assert response.json()["error"]["root_cause"][0]["type"] == kind, (query, response.text)


def test_script_fields_compute_each_hits_values_from_doc_values_and_source(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    index = new_index(settings={"number_of_shards": 2})
    docs = fill(http, index)
    body = {
        "query": {"range": {"n": {"lt": 6}}},
        "sort": ["n"],
        "script_fields": {
            "double": {"script": {"source": "doc['n'].value * params.f", "params": {"f": 2}}},
            "shout": {"script": "params['_source'].tag.toUpperCase() + '!'"},
            "words": {"script": "params._source.msg.splitOnToken(' ')"},
            "broken": {"script": "doc['n'].value / (doc['n'].value - 3)", "ignore_failure": True},
        },
    }
    hits = http.post(f"/{index}/_search", json=body).json()["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == [str(i) for i in range(6)]
    for hit in hits:
        i = int(hit["_id"])
        assert "_source" not in hit  # script fields alone hide the source, as in Elasticsearch
        expected = {
            "double": [2 * i],
            "shout": [docs[i]["tag"].upper() + "!"],
            "words": docs[i]["msg"].split(" "),
        }
        if i != 3:
            expected["broken"] = [int(i / (i - 3))]
        assert hit["fields"] == expected
    with_source = http.post(
        f"/{index}/_search",
        json={
            "size": 1,
            "sort": ["n"],
            "_source": ["n"],
            "script_fields": {"t": {"script": "doc['tag.keyword'].value"}},
        },
    ).json()["hits"]["hits"][0]
    assert with_source["_source"] == {"n": 0} and with_source["fields"] == {"t": ["a"]}


def test_bad_script_fields_are_400s(http: httpx.Client, new_index: Callable[..., str]) -> None:
    index = new_index(settings={"index.max_script_fields": 2})
    fill(http, index)
    cases = [
        ({"a": {"script": "1/0"}}, "script_exception"),
        ({"a": "1"}, "parsing_exception"),
        ({"a": {"source": "1"}}, "parsing_exception"),
        ({"a": {"script": "1", "ignore_failure": "yes"}}, "parsing_exception"),
        ({f"f{i}": {"script": "1"} for i in range(3)}, "illegal_argument_exception"),
    ]
    for fields, kind in cases:
        response = http.post(f"/{index}/_search", json={"script_fields": fields})
        assert response.status_code == 400, (fields, response.text)
        assert response.json()["error"]["root_cause"][0]["type"] == kind, (fields, response.text)


def test_a_script_over_a_segment_without_candidates_answers_nothing_there(
    http: httpx.Client, new_index: Callable[..., str]
) -> None:
    """A per-document script (not one column expression) where a shard's segments match nothing."""
    index = new_index(settings={"number_of_shards": 2})
    fill(http, index)
    query = {"script_score": {"query": {"term": {"n": 5}}, "script": "def x = doc['n'].value; return x * 2;"}}
    hits = http.post(f"/{index}/_search", json={"query": query}).json()["hits"]["hits"]
    assert [(hit["_id"], hit["_score"]) for hit in hits] == [("5", 10.0)]
