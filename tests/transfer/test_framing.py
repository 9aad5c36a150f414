"""How `leafsearch import` frames lines into `_bulk` bodies: the fast path (whole-chunk
replacements) must give the same items as parsing each line, and must step aside (to the parsed
path) for any line it cannot rewrite exactly; chunks are a function of the input only (resume)."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from leafsearch.transfer.client import TransferError
from leafsearch.transfer.importer import (
    ImportResult,
    ImportState,
    _blocks_of_lines,
    _Failures,
    _Framer,
    file_identity,
    load_import_state,
    save_import_state,
)


def framer(tmp_path: Path, run: str | None = "r1") -> _Framer:
    return _Framer(_Failures(str(tmp_path / "errors.ndjson"), ImportResult(), append=False), run)


def items(body: bytes) -> list[tuple[dict, dict]]:
    lines = body.split(b"\n")
    assert lines[-1] == b""
    return [(orjson.loads(a), orjson.loads(s)) for a, s in zip(lines[:-1:2], lines[1:-1:2], strict=True)]


RECORDS = {
    "sorted": [
        b'{"_index":"i","_id":"1","_source":{"a":{"b":1}},"sort":[1]}',
        b'{"_index":"i","_id":"2","_source":{"a":"q"},"sort":["x",2]}',
        b'{"_index":"i","_id":"a\\"b","_source":{"a":"}}\\n"},"sort":[3]}',  # escapes in id and source
    ],
    "unsorted": [
        b'{"_index":"i","_id":"1","_source":{"a":{"b":{}}}}',
        b'{"_index":"i","_id":"2","_source":{"x":"},\\"sort\\":[1]}"}}',
    ],
    "a sort key inside a source": [
        b'{"_index":"i","_id":"1","_source":{"a":{},"sort":[1]}}',
        b'{"_index":"i","_id":"2","_source":{"a":{"sort":[1]}},"sort":[7]}',
    ],
    "a _source key inside a source": [
        b'{"_index":"i","_id":"1","_source":{"a":"b","_source":{"c":1}},"sort":[1]}',
    ],
    "a bracket in a sort string": [b'{"_index":"i","_id":"2","_source":{"a":"q"},"sort":["x]",2]}'],
    "routed": [b'{"_index":"i","_id":"1","_routing":"r","_source":{"a":"b"}}'],
    "elasticdump": [b'{"_index":"i","_type":"_doc","_id":"1","_score":1,"_source":{"a":"b"}}'],
    "spaced": [b'{"_index": "i", "_id": "1", "_source": {"a": "b"}}'],
}


@pytest.mark.parametrize("case", list(RECORDS))
def test_records_frame_as_parsing_them_would(tmp_path: Path, case: str) -> None:
    lines = RECORDS[case]
    framing = framer(tmp_path)
    chunk = framing.chunk(0, 1, lines)
    assert chunk is not None
    expected = []
    for line in lines:
        record = orjson.loads(line)
        meta = {"_id": record["_id"]}
        if "_routing" in record:
            meta["routing"] = record["_routing"]
        expected.append(({"index": meta}, record["_source"]))
    assert items(chunk.body) == expected
    assert (chunk.items is None) == (case in ("sorted", "unsorted"))  # the fast path, or not


def test_plain_sources_get_derived_ids_sent_as_create(tmp_path: Path) -> None:
    lines = [b'{"n":1}', b'{"n":2}']
    chunk = framer(tmp_path, "run7").chunk(0, 41, lines)
    assert items(chunk.body) == [
        ({"create": {"_id": "run7-41"}}, {"n": 1}),
        ({"create": {"_id": "run7-42"}}, {"n": 2}),
    ]
    assert chunk.is_derived(1, "run7-42")
    piped = framer(tmp_path, None).chunk(0, 1, lines)  # standard input: the server's ids
    assert items(piped.body) == [({"index": {}}, {"n": 1}), ({"index": {}}, {"n": 2})]


def test_blank_lines_keep_their_numbers(tmp_path: Path) -> None:
    chunk = framer(tmp_path).chunk(0, 10, [b'{"n":1}', b"", b'{"n":2}'])
    assert [item[:2] for item in chunk.items] == [(10, "create"), (12, "create")]
    assert items(chunk.body)[1] == ({"create": {"_id": "r1-12"}}, {"n": 2})


@pytest.mark.parametrize("read_block", [7, 64, 1 << 20])
def test_chunks_depend_on_the_input_only(monkeypatch: pytest.MonkeyPatch, read_block: int) -> None:
    monkeypatch.setattr("leafsearch.transfer.importer.READ_BLOCK", read_block)
    data = b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * (i % 50)) for i in range(1000))
    groups = list(_blocks_of_lines(io.BytesIO(data), 64, 2000))
    assert [first for first, _ in groups][:3] == [
        1,
        groups[0][0] + len(groups[0][1]),
        groups[1][0] + len(groups[1][1]),
    ]
    assert b"\n".join(line for _, lines in groups for line in lines) + b"\n" == data
    for _, lines in groups[:-1]:
        size = sum(map(len, lines))
        assert len(lines) == 64 or (size >= 2000 and size - len(lines[-1]) < 2000)
    monkeypatch.setattr("leafsearch.transfer.importer.READ_BLOCK", 1 << 20)
    assert groups == list(_blocks_of_lines(io.BytesIO(data), 64, 2000))


def test_import_state_keeps_the_acknowledged_prefix_small() -> None:
    state = ImportState("f", "i", "run", 10, 100, [0, 0])
    for number in (1, 0, 3, 2, 5, 7):
        state.acknowledge(number)
    assert (state.done_below, state.acknowledged) == (4, [5, 7])
    assert [state.was_acknowledged(i) for i in range(9)] == [True] * 4 + [False, True, False, True, False]


def test_a_file_changed_since_the_interrupted_import_is_not_resumed(tmp_path: Path) -> None:
    source = tmp_path / "docs.ndjson"
    source.write_bytes(b'{"n": 1}\n')
    state = ImportState(str(source), "i", "run", 10, 100, file_identity(str(source)))
    save_import_state(state)
    assert load_import_state(str(source)).run == "run"
    source.write_bytes(b'{"n": 1}\n{"n": 2}\n')
    with pytest.raises(TransferError, match="changed since the interrupted import"):
        load_import_state(str(source))
