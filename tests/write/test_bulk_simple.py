"""A bulk body of simple index/create lines is typed by column and resolved once per index name
(leafsearch/write/bulk_columns.py): a client must get the same items, errors and documents as
from the per-operation parser (`parse_bulk`), which takes every other body, whatever the names
lead to (aliases and their routing, several names of one index, date math, refused names,
closed indices, data streams, several shards, documents the mapping cannot take together)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from inprocess import search

from leafsearch.indices import admin
from leafsearch.indices.open_close import close_indices
from leafsearch.node.node import Node
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.security.subject import SecurityException
from leafsearch.write import documents
from leafsearch.write.bulk_columns import _plain_ids, parse_simple
from leafsearch.write.bulk_request import parse_bulk

MAPPING = {"properties": {"status": {"type": "integer"}, "service": {"type": "keyword"}}}


def ndjson(*items: Any) -> bytes:
    return b"".join(orjson.dumps(item) + b"\n" for item in items)


def docs(start: int, count: int, **meta: Any) -> list[Any]:
    lines: list[Any] = []
    for i in range(start, start + count):
        lines.append({"index": {**meta, "_id": str(i)}})
        lines.append({"status": 200 + i % 5, "service": f"svc-{i % 3}"})
    return lines


@pytest.fixture
def nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Node, Node]]:
    """A node, and one whose bulks all take the per-operation parser (`parse_simple` finds no
    body simple while the `per_op` flag is set)."""
    per_op = threading.local()

    def simple_unless_per_op(body: bytes, index: str | None, routing: str | None):
        return None if getattr(per_op, "on", False) else parse_simple(body, index, routing)

    monkeypatch.setattr(documents, "parse_simple", simple_unless_per_op)
    with (
        Node(tmp_path / "columns", background=False) as columns,
        Node(tmp_path / "ops", background=False) as ops,
    ):
        original = ops.bulk

        def bulk_per_op(*args: Any, **kwargs: Any) -> Any:
            per_op.on = True
            try:
                return original(*args, **kwargs)
            finally:
                per_op.on = False

        ops.bulk = bulk_per_op  # type: ignore[method-assign]
        for node in (columns, ops):
            admin.create_index(node, "logs", {"mappings": MAPPING, "settings": {"number_of_shards": 3}})
            admin.create_index(node, "one", {"mappings": MAPPING, "aliases": {"w": {"is_write_index": True}}})
            admin.create_index(
                node, "routed", {"mappings": MAPPING, "aliases": {"r": {"index_routing": "k"}}}
            )
            admin.create_index(node, "shut", {"mappings": MAPPING})
            close_indices(node, "shut", IndicesOptions())
        yield columns, ops


def comparable(response: dict[str, Any]) -> list[Any]:
    items = []
    for item in response["items"]:
        ((kind, result),) = item.items()
        result = dict(result)
        if len(str(result.get("_id"))) == 20:  # generated: differs between the nodes
            result["_id"] = "<generated>"
        if "error" in result:
            result["error"] = {k: v for k, v in result["error"].items() if k != "index_uuid"}
        items.append({kind: result})
    return [response["errors"], items]


def contents(node: Node, index: str) -> list[Any]:
    node.indices[index].refresh()
    hits = search(node, index, {"size": 1000, "sort": ["_doc"], "seq_no_primary_term": True, "version": True})
    return sorted(
        (h["_id"] if len(h["_id"]) != 20 else "<generated>", h.get("_routing"), h["_version"], h["_seq_no"])
        for h in hits["hits"]["hits"]
    )


BODIES = [
    ndjson(*docs(0, 40)),  # plain, over 3 shards
    # overwrites, a conflict, a generated id (on one shard: its seq_no is known)
    ndjson(
        *docs(0, 10), {"create": {"_id": "5"}}, {"status": 1}, {"index": {"_index": "one"}}, {"status": 2}
    ),
    # an alias and its index interleaved
    ndjson(*docs(100, 5, _index="w"), *docs(105, 5, _index="one"), *docs(110, 5, _index="w")),
    ndjson(*docs(200, 4, _index="r"), *docs(204, 4, _index="routed")),  # the alias's routing, and none
    ndjson(*docs(300, 3, _index="shut"), *docs(303, 3)),  # a closed index fails its items alone
    ndjson(*docs(400, 3, _index="<dm-{now/d}>")),  # date math: auto-created
    ndjson(*docs(500, 3), {"index": {"_id": "x" * 513}}, {"status": 1}),  # an id too long
    ndjson(*docs(600, 3), {"index": {"_id": "new-field"}}, {"brand_new": "v"}),  # a mapping update
    ndjson(*docs(700, 3), {"index": {"_id": "bad"}}, {"status": "not a number"}),  # a refused value
    ndjson(*docs(800, 3), {"index": {"_id": "arr"}}, {"service": ["a", "b"]}),
    # nulls, empty and non-ASCII strings, a term over the limit, between plain documents
    ndjson(
        *docs(1000, 2),
        *[{"index": {"_id": "null"}}, {"status": None}, {"index": {"_id": "empty"}}, {"service": ""}],
        *[{"index": {"_id": "uni"}}, {"service": "日本 😀 \u0000 é"}, {"index": {"_id": "none"}}, {}],
        *[{"index": {"_id": "immense"}}, {"service": "x" * 40_000}, *docs(1002, 2)],
    ),
    # `_id` before `_index`, as the official clients' helpers write them
    ndjson(
        *[x for i in range(900, 905) for x in ({"create": {"_id": str(i), "_index": "w"}}, {"status": i})]
    ),
]


@pytest.mark.parametrize("require_alias", [False, True])
def test_simple_bodies_answer_and_store_what_the_per_operation_parser_does(
    nodes: tuple[Node, Node], require_alias: bool
) -> None:
    columns, ops = nodes
    for body in BODIES:
        got = columns.bulk(body, index="logs", raw_items=False, require_alias=require_alias)
        expected = ops.bulk(body, index="logs", raw_items=False, require_alias=require_alias)
        assert comparable(got) == comparable(expected), body[:200]
    names = [name for name in columns.indices if name != "shut"]
    assert sorted(names) == sorted(name for name in ops.indices if name != "shut")
    for name in names:
        assert contents(columns, name) == contents(ops, name), name
    if not require_alias:
        assert ("200", "k", 1, 0) in contents(columns, "routed")  # the alias's routing
        assert any(name.startswith("dm-") for name in names)


def test_each_name_is_authorized_once_and_refused_items_fail_alone(nodes: tuple[Node, Node]) -> None:
    columns, ops = nodes
    asked: list[str] = []

    def authorize(name: str) -> None:
        asked.append(name)
        if name == "one":
            raise SecurityException("action [indices:data/write/bulk[s]] is unauthorized for user [u]")

    body = ndjson(*docs(0, 30), *docs(30, 2, _index="one"), *docs(32, 30), *docs(62, 2, _index="w"))
    got = columns.bulk(body, index="logs", raw_items=False, authorize=authorize)
    assert sorted(asked) == ["logs", "one", "w"]  # once per name, not per operation
    asked.clear()
    expected = ops.bulk(body, index="logs", raw_items=False, authorize=authorize)
    assert comparable(got) == comparable(expected)
    statuses = [next(iter(item.values()))["status"] for item in got["items"]]
    assert statuses == [201] * 30 + [403] * 2 + [201] * 32
    assert contents(columns, "one") == contents(ops, "one")


@pytest.mark.parametrize(
    "body",
    [
        b'{"index":{}}\n{"a":1} \n',  # whitespace after a document
        b'{"index":{}}\r\n{"a":1}\r\n',
        b'{"index":{}}\n\n{"a":1}\n',  # a blank line
        b'{"index":{}}\n{"a":1}',  # no final newline
        b'{"index":{"_id":"\xc3\xbc"}}\n{"a":1}\n',  # not ASCII
        b'{"index":{"_id":"a\\"b"}}\n{"a":1}\n',  # escaped
        b'{"index":{"_id":""}}\n{"a":1}\n',
        b'{"index":{"_index":""}}\n{"a":1}\n',
        b'{"index":{"_index":"a""_id":"1"}}\n{"a":1}\n',  # the comma missing
        b'{"index":{"_index":"a",}}\n{"a":1}\n',  # left over
        b'{"index":{"_id":"1","_index":"a","_id":"2"}}\n{"a":1}\n',
        b'{"index":{"_index":"a","_id":"1","_index":"b"}}\n{"a":1}\n',
        b'{"index":{"_id":"1""_index":"a"}}\n{"a":1}\n',
        b'{"index":{"routing":"1"}}\n{"a":1}\n',
        # lines all `{"index":{"_id":...}}` but for one thing, which the ids' split must not take
        b'{"index":{"_id":"1"}}\n{"a":1}\n{"index":{"_id":"a\x01b"}}\n{"a":1}\n',  # a control character
        b'{"index":{"_id":"1"}}\n{"a":1}\n{"index":{"_id":"a\tb"}}\n{"a":1}\n',
        b'{"index":{"_id":"1"}}\n{"a":1}\n{"index":{"_id":""}}\n{"a":1}\n',
        b'{"index":{"_id":"a"}}{"_id":"b"}}\n{"a":1}\n',  # what lies between two ids, in one line
        b'{"index":{"_id":"a"}}\n{"a":1}\n{"index":{"_id":"b"},"_id":"c"}}\n{"a":1}\n',
        b'{"index":{"_id":"a"}}\n{"a":1}\n{"index":{"_id":"b\\"}}\n{"a":1}\n',  # a backslash
        b'{"delete":{"_id":"1"}}\n{"index":{}}\n',
        b'{"index":{}}\n"a document"\n',
        b'{"index":{}}\n',
        b"\n",
        b"",
    ],
)
def test_every_other_body_is_left_to_the_per_operation_parser(body: bytes) -> None:
    assert parse_simple(body, "d", None) is None


@pytest.mark.parametrize(
    "body",
    [
        ndjson(
            {"index": {"_id": "1"}},
            {"a": 1},
            {"create": {"_index": "x"}},
            {"b": [1, {"c": 2}]},
            {"index": {"_index": "y", "_id": "a/b:c d"}},
            {},
            {"create": {"_id": "2", "_index": "z"}},  # as the official clients' helpers write it
            {"c": 3},
        ),
        # every line an index with an id (read by the ids alone), then one without among them
        ndjson({"index": {"_id": "1"}}, {"a": 1}, {"index": {"_id": "x:y z"}}, {"_id": "in a source"}),
        ndjson({"index": {"_id": "1"}}, {"a": 1}, {"index": {}}, {"_id": "in a source"}),
        # every line an index with an id, read by one split of the lines (`_plain_ids`): ids that
        # look like the lines around them, a source that holds an action line
        ndjson(
            {"index": {"_id": "}}"}},
            {"a": 1},
            {"index": {"_id": "{index:{_id:x}}"}},
            {"index": {"_id": "in a source"}},
            {"index": {"_id": "x \x7f,y"}},
            {},
        ),
        ndjson({"index": {"_id": "only"}}, {"a": 1}),
    ],
)
def test_a_simple_body_types_its_operations_as_the_per_operation_parser(body: bytes) -> None:
    simple = parse_simple(body, "d", "r")
    assert simple is not None
    expected = parse_bulk(body, "d", "r")
    assert [(op.kind, op.index, op.meta.get("_id"), op.line, op.routing, op.source) for op in simple] == [
        (op.kind, op.index, op.meta.get("_id"), op.line, op.routing, op.source) for op in expected
    ]


def test_bodies_of_index_lines_with_ids_are_read_by_their_split() -> None:
    """The quick reading of `{"index":{"_id":...}}` lines takes the bodies above it is meant for,
    so the comparison above covers it, and no body that the per-operation parser must take."""
    plain = ndjson(*docs(0, 3))
    actions = b"\n".join(plain.split(b"\n")[0:-1:2])
    assert _plain_ids(actions.decode(), actions, 3) == ["0", "1", "2"]
    for body in [b'{"index":{"_id":"a"}}{"_id":"b"}}\n{"a":1}\n', b'{"index":{"_id":"a\x01b"}}\n{}\n']:
        action = body.split(b"\n")[0]
        assert _plain_ids(action.decode(), action, 1) is None


def test_concurrent_simple_bulks_beside_refreshes_and_merges_lose_nothing(tmp_path: Path) -> None:
    """Four clients' simple bodies (their ids overlapping: overwrites) with refreshes and force
    merges beside: every acknowledged write is found with the version its item gave."""
    with Node(tmp_path / "n", background=False) as node:
        admin.create_index(node, "logs", {"mappings": MAPPING, "settings": {"number_of_shards": 2}})
        acknowledged: dict[str, int] = {}
        lock = threading.Lock()
        failures: list[BaseException] = []
        done = threading.Event()

        def client(c: int) -> None:
            try:
                for round_ in range(6):
                    answer = node.bulk(
                        ndjson(*docs(c * 50 + round_ * 10, 100)), index="logs", raw_items=False
                    )
                    assert answer["errors"] is False
                    with lock:
                        for item in answer["items"]:
                            result = item["index"]
                            key = result["_id"]
                            acknowledged[key] = max(acknowledged.get(key, 0), result["_version"])
            except BaseException as exc:  # handed to the test thread
                failures.append(exc)

        def maintenance() -> None:
            try:
                while not done.is_set():
                    node.indices["logs"].refresh()
                    for shard in node.indices["logs"].shards:
                        while shard.maybe_merge():
                            pass
            except BaseException as exc:
                failures.append(exc)

        beside = threading.Thread(target=maintenance)
        beside.start()
        clients = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
        done.set()
        beside.join()
        assert not failures, failures
        found = {doc_id: version for doc_id, _, version, _ in contents(node, "logs")}
        assert found == acknowledged
