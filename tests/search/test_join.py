"""The `join` field (parent/child) over HTTP with the official client: `has_child`, `has_parent`,
`parent_id`, `inner_hits`, the `children` and `parent` aggregations against brute force over the
sources; one snapshot for both sides while several clients write; merges, restarts and
export/import; Elasticsearch's refusals of bad mappings, documents and queries."""

from __future__ import annotations

import random
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import REPO, creating_indices, running_server, server_env
from elasticsearch import BadRequestError, Elasticsearch
from elasticsearch.helpers import bulk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import leafsearch
from tests.server_zygote import SERVER_ZYGOTE

RELATIONS = {"question": ["answer", "comment"], "answer": "vote"}
MAPPING = {
    "properties": {
        "qa": {"type": "join", "relations": RELATIONS},
        "tag": {"type": "keyword"},
        "votes": {"type": "long"},
    }
}
PARENT_OF = {"answer": "question", "comment": "question", "vote": "answer"}
CHILDREN_OF = {"question": ("answer", "comment"), "answer": ("vote",)}
TAGS = ("a", "b", "c")


class Docs:
    """The sources written, with what the join needs: relation, parent and routing of each id."""

    def __init__(self) -> None:
        self.source: dict[str, dict[str, Any]] = {}
        self.relation: dict[str, str] = {}
        self.parent: dict[str, str] = {}
        self.routing: dict[str, str] = {}

    def add(self, doc_id: str, relation: str, tag: str, votes: int, parent: str | None = None) -> dict:
        join: Any = relation if parent is None else {"name": relation, "parent": parent}
        self.source[doc_id] = {"qa": join, "tag": tag, "votes": votes}
        self.relation[doc_id] = relation
        if parent is not None:
            self.parent[doc_id] = parent
            self.routing[doc_id] = self.routing.get(parent, parent)
        action = {"_index": None, "_id": doc_id, "_source": self.source[doc_id]}
        if parent is not None:
            action["_routing"] = self.routing[doc_id]
        return action

    def of(self, relation: str) -> list[str]:
        return [i for i, r in self.relation.items() if r == relation]


def generate(seed: int = 3, questions: int = 60) -> Docs:
    rng = random.Random(seed)
    docs = Docs()
    for i in range(questions):
        docs.add(f"q{i}", "question", rng.choice(TAGS), rng.randint(0, 9))
    for j in range(questions * 3):
        relation = rng.choice(("answer", "answer", "comment"))
        docs.add(
            f"{relation[0]}{j}", relation, rng.choice(TAGS), rng.randint(0, 9), f"q{rng.randrange(questions)}"
        )
    answers = docs.of("answer")
    for k in range(questions * 2):
        docs.add(f"v{k}", "vote", rng.choice(TAGS), rng.randint(0, 9), rng.choice(answers))
    return docs


def load(es: Elasticsearch, index: str, docs: Docs) -> None:
    actions = []
    for doc_id, source in docs.source.items():
        action: dict[str, Any] = {"_index": index, "_id": doc_id, "_source": source}
        if doc_id in docs.routing:
            action["_routing"] = docs.routing[doc_id]
        actions.append(action)
    ok, errors = bulk(es, actions, refresh=True)
    assert ok == len(actions) and not errors


@pytest.fixture(scope="module")
def qa(es: Elasticsearch, http: httpx.Client) -> Iterator[tuple[str, Docs]]:
    docs = generate()
    with creating_indices(http, "join-qa") as create:
        index = create(settings={"number_of_shards": 3}, mappings=MAPPING)
        load(es, index, docs)
        yield index, docs


def votes_scored(tag: str) -> dict:
    """A query matching `tag` scored by the document's votes (exact in float32)."""
    return {"script_score": {"query": {"term": {"tag": tag}}, "script": {"source": "doc['votes'].value"}}}


def hits(es: Elasticsearch, index: str, query: dict, **kwargs: Any) -> dict[str, float]:
    found = es.search(index=index, query=query, size=1000, **kwargs)["hits"]
    assert found["total"]["value"] == len(found["hits"])
    return {h["_id"]: h["_score"] for h in found["hits"]}


def expected_has_child(docs: Docs, child: str, tag: str, mode: str, low: int, high: int) -> dict[str, float]:
    matched: dict[str, list[int]] = defaultdict(list)
    for doc_id in docs.of(child):
        if docs.source[doc_id]["tag"] == tag:
            matched[docs.parent[doc_id]].append(docs.source[doc_id]["votes"])
    out = {}
    for parent, votes in matched.items():
        if parent in docs.source and max(low, 1) <= len(votes) <= high:
            combine = {"none": lambda v: 1.0, "sum": sum, "max": max, "min": min}.get(
                mode, lambda v: sum(v) / len(v)
            )
            out[parent] = float(combine(votes))
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    child=st.sampled_from(("answer", "comment", "vote")),
    tag=st.sampled_from(TAGS),
    mode=st.sampled_from(("none", "avg", "max", "min", "sum")),
    low=st.integers(0, 3),
    span=st.integers(0, 4),
)
def test_has_child_is_brute_force(es, qa, child: str, tag: str, mode: str, low: int, span: int) -> None:
    index, docs = qa
    query = {"has_child": {"type": child, "query": votes_scored(tag), "score_mode": mode}}
    query["has_child"].update(min_children=low, max_children=low + span)
    got = hits(es, index, query)
    assert got == pytest.approx(expected_has_child(docs, child, tag, mode, low, low + span), rel=1e-6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parent=st.sampled_from(("question", "answer")), tag=st.sampled_from(TAGS), score=st.booleans())
def test_has_parent_is_brute_force(es, qa, parent: str, tag: str, score: bool) -> None:
    index, docs = qa
    query = {"has_parent": {"parent_type": parent, "query": votes_scored(tag), "score": score}}
    expected = {
        doc_id: float(docs.source[docs.parent[doc_id]]["votes"]) if score else 1.0
        for child in CHILDREN_OF[parent]
        for doc_id in docs.of(child)
        if docs.source[docs.parent[doc_id]]["tag"] == tag
    }
    assert hits(es, index, query) == pytest.approx(expected)


def test_parent_id_finds_the_children_of_one_type(es, qa) -> None:
    index, docs = qa
    parent = docs.parent[docs.of("vote")[0]]
    got = hits(es, index, {"parent_id": {"type": "vote", "id": parent}})
    assert set(got) == {d for d in docs.of("vote") if docs.parent[d] == parent}
    assert not hits(es, index, {"parent_id": {"type": "answer", "id": parent}})  # a vote's parent
    assert hits(es, index, {"parent_id": {"type": "answer", "id": "nope", "ignore_unmapped": True}}) == {}


def test_join_values_in_fields_and_docvalue_fields(es, qa) -> None:
    index, docs = qa
    vote = docs.of("vote")[0]
    answer = docs.parent[vote]
    found = es.search(
        index=index,
        query={"ids": {"values": [vote, answer]}},
        docvalue_fields=["qa", "qa#answer", "qa#question"],
        routing=docs.routing[vote],
    )["hits"]["hits"]
    fields = {h["_id"]: h["fields"] for h in found}
    assert fields[vote] == {"qa": ["vote"], "qa#answer": [answer]}
    assert fields[answer] == {"qa": ["answer"], "qa#answer": [answer], "qa#question": [docs.parent[answer]]}
    assert hits(es, index, {"term": {"qa": "comment"}}).keys() == set(docs.of("comment"))


def test_inner_hits_show_the_other_side(es, qa) -> None:
    index, docs = qa
    inner = {"size": 100, "sort": [{"votes": "desc"}, "_doc"]}
    query = {"has_child": {"type": "answer", "query": {"term": {"tag": "a"}}, "inner_hits": inner}}
    found = es.search(index=index, query=query, size=100)["hits"]["hits"]
    assert found
    for hit in found:
        children = hit["inner_hits"]["answer"]["hits"]
        expected = [
            d for d in docs.of("answer") if docs.parent[d] == hit["_id"] and docs.source[d]["tag"] == "a"
        ]
        assert children["total"]["value"] == len(expected)
        assert {h["_id"] for h in children["hits"]} == set(expected)
        assert [h["_source"]["votes"] for h in children["hits"]] == sorted(
            (docs.source[d]["votes"] for d in expected), reverse=True
        )
    query = {
        "has_parent": {"parent_type": "answer", "query": {"match_all": {}}, "inner_hits": {"name": "up"}}
    }
    for hit in es.search(index=index, query=query, size=50)["hits"]["hits"]:
        (parent,) = hit["inner_hits"]["up"]["hits"]["hits"]
        assert parent["_id"] == docs.parent[hit["_id"]]
        assert parent["_source"] == docs.source[parent["_id"]]


def test_children_and_parent_aggregations_are_brute_force(es, qa) -> None:
    index, docs = qa
    body = {
        "size": 0,
        "query": {"term": {"qa": "question"}},
        "aggs": {
            "tags": {
                "terms": {"field": "tag", "order": {"answers": "desc"}},
                "aggs": {
                    "answers": {
                        "children": {"type": "answer"},
                        "aggs": {"votes": {"sum": {"field": "votes"}}},
                    }
                },
            }
        },
    }
    buckets = es.search(index=index, **body)["aggregations"]["tags"]["buckets"]
    for bucket in buckets:
        kids = [d for d in docs.of("answer") if docs.source[docs.parent[d]]["tag"] == bucket["key"]]
        assert bucket["answers"]["doc_count"] == len(kids)
        assert bucket["answers"]["votes"]["value"] == sum(docs.source[d]["votes"] for d in kids)
    body = {
        "size": 0,
        "query": {"term": {"qa": "vote"}},
        "aggs": {
            "tags": {
                "terms": {"field": "tag", "order": {"answers": "desc"}},
                "aggs": {
                    "answers": {"parent": {"type": "vote"}, "aggs": {"votes": {"sum": {"field": "votes"}}}}
                },
            }
        },
    }
    buckets = es.search(index=index, **body)["aggregations"]["tags"]["buckets"]
    assert {b["key"] for b in buckets} == {docs.source[d]["tag"] for d in docs.of("vote")}
    for bucket in buckets:
        parents = {docs.parent[d] for d in docs.of("vote") if docs.source[d]["tag"] == bucket["key"]}
        assert bucket["answers"]["doc_count"] == len(parents)
        assert bucket["answers"]["votes"]["value"] == sum(docs.source[p]["votes"] for p in parents)
    counts = [b["answers"]["doc_count"] for b in buckets]
    assert counts == sorted(counts, reverse=True)  # ordered by the parent aggregation's count
    top = es.search(index=index, size=0, aggs={"up": {"parent": {"type": "answer"}}})["aggregations"]
    assert top["up"]["doc_count"] == len({docs.parent[d] for d in docs.of("answer")})


def test_mapping_and_field_caps(es, qa) -> None:
    index, _ = qa
    shown = es.indices.get_mapping(index=index)[index]["mappings"]["properties"]["qa"]
    assert shown == {"type": "join", "eager_global_ordinals": True, "relations": RELATIONS}
    caps = es.field_caps(index=index, fields="qa*")["fields"]
    assert caps["qa"]["join"]["aggregatable"] is True
    assert set(caps) == {"qa", "qa#question", "qa#answer"}
    assert caps["qa#question"]["parent"]["searchable"] is True


def test_relations_grow_but_never_move(es: Elasticsearch, new_index) -> None:
    index = new_index(mappings=MAPPING)
    grown = {"question": ["answer", "comment", "note"], "answer": "vote", "vote": "flag"}
    with pytest.raises(BadRequestError) as refused:  # vote is a child: it cannot become a parent
        es.indices.put_mapping(index=index, properties={"qa": {"type": "join", "relations": grown}})
    assert "Cannot create parent [vote] from an existing child" in str(refused.value.body)
    del grown["vote"]
    es.indices.put_mapping(index=index, properties={"qa": {"type": "join", "relations": grown}})
    assert es.indices.get_mapping(index=index)[index]["mappings"]["properties"]["qa"]["relations"] == grown
    with pytest.raises(BadRequestError) as refused:
        es.indices.put_mapping(
            index=index, properties={"qa": {"type": "join", "relations": {"answer": "vote"}}}
        )
    assert "Cannot remove parent [question]" in refused.value.body["error"]["reason"]


@pytest.mark.parametrize(
    ("properties", "error_type", "reason"),
    [
        (
            {"a": {"type": "join", "relations": {"x": "y"}}, "b": {"type": "join", "relations": {"p": "c"}}},
            "illegal_argument_exception",
            "Only one [parent-join] field can be defined per index, got [a, b]",
        ),
        (
            {"o": {"properties": {"j": {"type": "join"}}}},
            "mapper_parsing_exception",
            "Failed to parse mapping: join field [o.j] cannot be added inside an object or in a multi-field",
        ),
        (
            {"j": {"type": "join", "relations": {"x": "y", "z": "y"}}},
            "mapper_parsing_exception",
            "Failed to parse mapping: [y] cannot have multiple parents",
        ),
        (
            {"j": {"type": "join", "store": True}},
            "mapper_parsing_exception",
            "Failed to parse mapping: unknown parameter [store] on mapper [j] of type [join]",
        ),
    ],
)
def test_bad_mappings_are_refused(
    http: httpx.Client, index_name: str, properties, error_type, reason
) -> None:
    response = http.put(f"/{index_name}", json={"mappings": {"properties": properties}})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == error_type
    assert response.json()["error"]["reason"] == reason
    assert http.head(f"/{index_name}").status_code == 404


@pytest.mark.parametrize(
    ("source", "routing", "reason", "cause"),
    [
        ({"qa": {"name": "answer", "parent": "1"}}, None, "[routing] is missing for join field [qa]", None),
        ({"qa": "reply"}, None, "unknown join name [reply] for field [qa]", None),
        ({"qa": {"name": "answer"}}, "1", "[parent] is missing for join field [qa]", None),
        ({"qa": {"parent": "1"}}, "1", "null join name in field [qa]", None),
        (
            {"qa": {"name": "answer", "parent": "1", "x": "y"}},
            "1",
            "unknown field name [x] in join field [qa]",
            None,
        ),
        (
            {"qa": 7},
            None,
            "[qa] expected START_OBJECT or VALUE_STRING but was: VALUE_NUMBER",
            "illegal_state_exception",
        ),
    ],
)
def test_bad_documents_are_refused_and_change_nothing(
    es: Elasticsearch, http: httpx.Client, new_index, source, routing, reason, cause
) -> None:
    index = new_index(mappings=MAPPING)
    params = {"refresh": "true", **({"routing": routing} if routing else {})}
    response = http.put(f"/{index}/_doc/2", params=params, json=source)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "document_parsing_exception"
    assert error["reason"].endswith(f"failed to parse: {reason}")
    assert error["caused_by"] == {"type": cause or "illegal_argument_exception", "reason": reason}
    item = es.bulk(
        operations=[
            {"index": {"_index": index, "_id": "3", **({"routing": routing} if routing else {})}},
            source,
        ],
        refresh=True,
    )
    assert item["items"][0]["index"]["error"]["caused_by"]["reason"] == reason
    assert es.count(index=index)["count"] == 0
    assert es.indices.get_mapping(index=index)[index]["mappings"] == {
        "properties": {
            **MAPPING["properties"],
            "qa": {**MAPPING["properties"]["qa"], "eager_global_ordinals": True},
        }
    }


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        (
            {"has_child": {"type": "question", "query": {"match_all": {}}}},
            "[has_child] join field [qa] doesn't hold [question] as a child",
        ),
        (
            {"has_parent": {"parent_type": "vote", "query": {"match_all": {}}}},
            "[has_parent] join field [qa] doesn't hold [vote] as a parent",
        ),
        (
            {"parent_id": {"type": "question", "id": "1"}},
            "[parent_id] no relation found for child [question]",
        ),
    ],
)
def test_queries_on_unmapped_relations(es: Elasticsearch, qa, query: dict, reason: str) -> None:
    index, _ = qa
    with pytest.raises(BadRequestError) as refused:
        es.search(index=index, query=query)
    assert refused.value.body["error"]["root_cause"][0] == {
        "type": "query_shard_exception",
        "reason": reason,
        "index_uuid": refused.value.body["error"]["root_cause"][0]["index_uuid"],
        "index": index,
    }
    ((name, body),) = query.items()
    assert hits(es, index, {name: {**body, "ignore_unmapped": True}}) == {}


def test_join_queries_on_an_index_without_join(es: Elasticsearch, new_index) -> None:
    index = new_index(mappings={"properties": {"tag": {"type": "keyword"}}})
    with pytest.raises(BadRequestError) as refused:
        es.search(index=index, query={"has_child": {"type": "a", "query": {"match_all": {}}}})
    assert (
        refused.value.body["error"]["root_cause"][0]["reason"]
        == "[has_child] no join field has been configured"
    )
    query = {"has_parent": {"parent_type": "a", "query": {"match_all": {}}, "ignore_unmapped": True}}
    assert es.search(index=index, query=query)["hits"]["total"]["value"] == 0
    aggs = es.search(index=index, size=0, aggs={"c": {"children": {"type": "a"}}})["aggregations"]
    assert aggs == {"c": {"doc_count": 0}}


@pytest.mark.parametrize(
    ("query", "error_type", "reason"),
    [
        (
            {"has_child": {"query": {"match_all": {}}}},
            "illegal_argument_exception",
            "[has_child] requires 'type' field",
        ),
        (
            {"has_child": {"type": "answer"}},
            "illegal_argument_exception",
            "[has_child] requires 'query' field",
        ),
        (
            {"has_child": {"type": "answer", "query": {"match_all": {}}, "score_mode": "best"}},
            "illegal_argument_exception",
            "No score mode for child query [best] found",
        ),
        (
            {
                "has_child": {
                    "type": "answer",
                    "query": {"match_all": {}},
                    "min_children": 3,
                    "max_children": 2,
                }
            },
            "illegal_argument_exception",
            "[has_child] 'max_children' is less than 'min_children'",
        ),
        (
            {"has_child": {"type": "answer", "query": {"match_all": {}}, "min_children": -1}},
            "illegal_argument_exception",
            "[has_child] requires non-negative 'min_children' field",
        ),
        (
            {"has_parent": {"query": {"match_all": {}}}},
            "illegal_argument_exception",
            "[has_parent] requires 'parent_type' field",
        ),
        (
            {"has_parent": {"parent_type": "q", "query": {"match_all": {}}, "foo": 1}},
            "parsing_exception",
            "[has_parent] query does not support [foo]",
        ),
        ({"parent_id": {"type": "answer"}}, "illegal_argument_exception", "[parent_id] requires 'id' field"),
    ],
)
def test_malformed_queries(es: Elasticsearch, qa, query: dict, error_type: str, reason: str) -> None:
    index, _ = qa
    with pytest.raises(BadRequestError) as refused:
        es.search(index=index, query=query)
    assert refused.value.body["error"]["root_cause"][0]["type"] == error_type
    assert refused.value.body["error"]["root_cause"][0]["reason"] == reason


def test_aggregation_without_type_is_refused(es: Elasticsearch, qa) -> None:
    index, _ = qa
    with pytest.raises(BadRequestError) as refused:
        es.search(index=index, size=0, aggs={"kids": {"children": {}}})
    assert (
        refused.value.body["error"]["root_cause"][0]["reason"]
        == "Missing [type] field for children aggregation [kids]"
    )


def _snapshot_agrees(es: Elasticsearch, index: str) -> None:
    """In one point in time, `has_child` equals the join of the two sides read separately."""
    pit = es.open_point_in_time(index=index, keep_alive="1m")["id"]
    try:

        def read(query: dict, **kwargs: Any) -> list[dict]:
            return es.search(pit={"id": pit}, query=query, size=10_000, **kwargs)["hits"]["hits"]

        parents = {h["_id"] for h in read({"term": {"qa": "question"}})}
        children = read({"terms": {"qa": ["answer", "comment"]}}, docvalue_fields=["qa", "qa#question"])
        answers = [h for h in children if h["fields"]["qa"] == ["answer"]]
        linked = {h["fields"]["qa#question"][0] for h in answers}
        joined = {h["_id"] for h in read({"has_child": {"type": "answer", "query": {"match_all": {}}}})}
        assert joined == parents & linked
        up = {h["_id"] for h in read({"has_parent": {"parent_type": "question", "query": {"match_all": {}}}})}
        assert up == {h["_id"] for h in children if h["fields"]["qa#question"][0] in parents}
        counted = es.search(
            pit={"id": pit},
            size=0,
            query={"term": {"qa": "question"}},
            aggs={"k": {"children": {"type": "answer"}}},
        )
        assert counted["aggregations"]["k"]["doc_count"] == len(
            [h for h in answers if h["fields"]["qa#question"][0] in parents]
        )
    finally:
        es.close_point_in_time(id=pit)


def test_a_snapshot_sees_both_sides_of_one_moment_while_clients_write(
    es: Elasticsearch, server: str, new_index
) -> None:
    index = new_index(settings={"number_of_shards": 2, "refresh_interval": "50ms"}, mappings=MAPPING)
    load(es, index, generate(seed=5, questions=40))
    stop = threading.Event()
    failures: list[BaseException] = []
    written = [0, 0, 0]

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        client = Elasticsearch(server, request_timeout=60)
        try:
            while not stop.is_set():
                written[seed] += 1
                q = f"q{rng.randrange(50)}"
                roll = rng.random()
                if roll < 0.3:
                    client.index(index=index, id=q, document={"qa": "question", "tag": "a", "votes": 1})
                elif roll < 0.45:
                    client.options(ignore_status=404).delete(index=index, id=q)
                elif roll < 0.8:
                    doc = {"qa": {"name": "answer", "parent": q}, "tag": "b", "votes": 2}
                    client.index(index=index, id=f"w{seed}-{rng.randrange(40)}", document=doc, routing=q)
                else:
                    client.delete_by_query(
                        index=index,
                        query={"parent_id": {"type": "answer", "id": q}},
                        routing=q,
                        conflicts="proceed",
                    )
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(15):
            _snapshot_agrees(es, index)
            es.indices.refresh(index=index)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures
    assert min(written) > 5  # every writer wrote while the snapshots were read
    _snapshot_agrees(es, index)


def _cli(*args: str) -> None:
    done = SERVER_ZYGOTE.run(
        [sys.executable, "-m", "leafsearch", *args],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr.decode()


def _check_all(es: Elasticsearch, index: str, docs: Docs) -> None:
    for child in ("answer", "vote"):
        query = {"has_child": {"type": child, "query": votes_scored("a"), "score_mode": "sum"}}
        assert hits(es, index, query) == pytest.approx(
            expected_has_child(docs, child, "a", "sum", 0, 2**31 - 1)
        )
    query = {"has_parent": {"parent_type": "answer", "query": {"match_all": {}}}}
    assert hits(es, index, query).keys() == set(docs.of("vote"))
    # the parents of each tag's children, each once however many segments hold its children
    aggs = {
        "tags": {
            "terms": {"field": "tag"},
            "aggs": {"up": {"parent": {"type": "answer"}, "aggs": {"votes": {"sum": {"field": "votes"}}}}},
        }
    }
    buckets = es.search(index=index, size=0, query={"term": {"qa": "answer"}}, aggs=aggs)
    for bucket in buckets["aggregations"]["tags"]["buckets"]:
        parents = {docs.parent[d] for d in docs.of("answer") if docs.source[d]["tag"] == bucket["key"]}
        assert bucket["up"]["doc_count"] == len(parents)
        assert bucket["up"]["votes"]["value"] == sum(docs.source[p]["votes"] for p in parents)


def test_joins_survive_merges_restart_and_export_import(tmp_path: Path) -> None:
    """Twelve small segments a shard merged by the merge policy (in process, where the test drives
    the merges), deletes among them; then a server on the same data answers the same, and so
    does an index exported and imported from it (routing kept)."""
    docs = generate(seed=11, questions=30)
    data = tmp_path / "data"
    node = leafsearch.Node(data, background=False)
    client = leafsearch.Client(node=node)
    client.indices.create(index="qa", settings={"number_of_shards": 2}, mappings=MAPPING)
    ids = list(docs.source)
    for part in range(12):
        actions = []
        for doc_id in ids[part::12]:
            meta = {"_id": doc_id, **({"routing": docs.routing[doc_id]} if doc_id in docs.routing else {})}
            actions += [{"index": meta}, docs.source[doc_id]]
        client.bulk(actions, index="qa", refresh="true")
    for doc_id in docs.of("comment")[:5]:  # deleted children leave no trace
        client.delete(index="qa", id=doc_id, routing=docs.routing[doc_id], refresh="true")
        del docs.source[doc_id], docs.relation[doc_id]
    merged = False
    for shard in node.indices["qa"].shards:
        while shard.maybe_merge():
            merged = True
    assert merged, "the merge policy did not merge"
    node.indices["qa"].refresh()
    _check_all(client, "qa", docs)  # type: ignore[arg-type]
    node.close()
    with running_server(data) as (url, _):
        es = Elasticsearch(url, request_timeout=60)
        _check_all(es, "qa", docs)
        exported = tmp_path / "qa.ndjson"
        _cli("export", "qa", str(exported), "--url", url)
        _cli("import", str(exported), "qa-copy", "--url", url)
        es.indices.refresh(index="qa-copy")
        _check_all(es, "qa-copy", docs)
        es.close()


def test_inner_hits_window_is_bounded(es: Elasticsearch, qa) -> None:
    index, _ = qa
    inner = {"size": 101}
    query = {"has_child": {"type": "answer", "query": {"match_all": {}}, "inner_hits": inner}}
    with pytest.raises(BadRequestError) as refused:
        es.search(index=index, query=query)
    assert refused.value.body["error"]["root_cause"][0]["reason"].startswith(
        "Inner result window is too large, the inner hit definition's [answer]'s from + size must be "
        "less than or equal to: [100] but was [101]."
    )
    twice = {"bool": {"should": [query, {"has_child": {**query["has_child"], "inner_hits": {}}}]}}
    with pytest.raises(BadRequestError) as refused:
        es.search(index=index, query=twice)
    assert refused.value.body["error"]["root_cause"][0]["reason"] == (
        "[inner_hits] already contains an entry for key [answer]"
    )


def test_a_join_walked_with_a_pit_gives_each_parent_once_while_clients_write(
    es: Elasticsearch, server: str, new_index
) -> None:
    index = new_index(settings={"number_of_shards": 2, "refresh_interval": "50ms"}, mappings=MAPPING)
    docs = generate(seed=8, questions=120)
    load(es, index, docs)
    query = {"has_child": {"type": "answer", "query": votes_scored("a"), "score_mode": "sum"}}
    expected = expected_has_child(docs, "answer", "a", "sum", 0, 2**31 - 1)
    stop = threading.Event()
    failures: list[BaseException] = []
    wrote = threading.Semaphore(0)  # one release a write: each page waits for a write beside it

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        client = Elasticsearch(server, request_timeout=60)
        try:
            while not stop.is_set():
                q = f"q{rng.randrange(120)}"
                doc = {"qa": {"name": "answer", "parent": q}, "tag": "a", "votes": 5}
                client.index(index=index, id=f"n{seed}-{rng.randrange(10_000)}", document=doc, routing=q)
                client.options(ignore_status=404).delete(index=index, id=f"q{rng.randrange(120)}")
                wrote.release()
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(2)]
    pit = es.open_point_in_time(index=index, keep_alive="2m")["id"]
    for t in threads:
        t.start()
    try:
        seen: list[tuple[str, float]] = []
        after = None
        while True:
            page = es.search(
                pit={"id": pit, "keep_alive": "2m"},
                query=query,
                size=7,
                sort=[{"_score": "desc"}, {"_shard_doc": "asc"}],
                search_after=after,
            )["hits"]["hits"]
            if not page:
                break
            seen += [(h["_id"], h["_score"]) for h in page]
            after = page[-1]["sort"]
            assert wrote.acquire(timeout=60)
    finally:
        stop.set()
        for t in threads:
            t.join()
        es.close_point_in_time(id=pit)
    assert not failures
    assert len(seen) == len({i for i, _ in seen})  # exactly once
    assert dict(seen) == pytest.approx(expected)
    assert [s for _, s in seen] == sorted((s for _, s in seen), reverse=True)


def test_reindex_and_update_by_query_keep_the_routing_children_need(es: Elasticsearch, qa, new_index) -> None:
    index, docs = qa
    copy = new_index(settings={"number_of_shards": 2}, mappings=MAPPING)
    done = es.reindex(source={"index": index}, dest={"index": copy}, refresh=True)
    assert done["created"] == len(docs.source) and not done["failures"]
    query = {"has_child": {"type": "vote", "query": votes_scored("b"), "score_mode": "max"}}
    assert hits(es, copy, query) == pytest.approx(expected_has_child(docs, "vote", "b", "max", 0, 2**31 - 1))
    children = {"has_parent": {"parent_type": "question", "query": {"term": {"tag": "c"}}}}
    updated = es.update_by_query(index=copy, query=children, refresh=True)
    assert updated["updated"] == len(hits(es, index, children)) and not updated["failures"]
    assert hits(es, copy, children).keys() == hits(es, index, children).keys()


def test_a_dynamic_template_may_map_the_join_field(es: Elasticsearch, new_index) -> None:
    template = {"j": {"match": "rel", "mapping": {"type": "join", "relations": {"q": "a"}}}}
    index = new_index(mappings={"dynamic_templates": [template]})
    es.index(index=index, id="1", document={"rel": "q"})  # the first document maps it
    with pytest.raises(BadRequestError) as refused:
        es.index(index=index, id="2", document={"rel": {"name": "a", "parent": "1"}})
    assert refused.value.body["error"]["caused_by"]["reason"] == "[routing] is missing for join field [rel]"
    es.index(index=index, id="2", routing="1", document={"rel": {"name": "a", "parent": "1"}}, refresh=True)
    query = {"has_child": {"type": "a", "query": {"match_all": {}}}}
    assert hits(es, index, query) == {"1": 1.0}
    assert hits(es, index, {"parent_id": {"type": "a", "id": "1"}}).keys() == {"2"}
