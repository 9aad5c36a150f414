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


def chunk(framing: _Framer, first_line: int, lines: list[bytes]):
    """`lines` framed as one chunk, as `_blocks_of_lines` gives them (each ending with a newline)."""
    return framing.chunk(0, first_line, b"".join(line + b"\n" for line in lines), len(lines))


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
    "escapes in unsorted ids": [
        b'{"_index":"i","_id":"a\\\\","_source":{"a":1}}',
        b'{"_index":"i","_id":"\\",\\"_routing\\":\\"r","_source":{"a":2}}',
    ],
    "a sort on some lines only": [
        b'{"_index":"i","_id":"1","_source":{"a":1},"sort":[1]}',
        b'{"_index":"i","_id":"2","_source":{"a":2}}',
    ],
    "a key between the source and the sort": [
        b'{"_index":"i","_id":"1","_source":{"a":1},"_routing":"r","sort":[1]}'
    ],
    "CRLF line ends": [
        b'{"_index":"i","_id":"1","_source":{"a":1}}\r',
        b'{"_index":"i","_id":"2","_source":{"a":2}}\r',
    ],
    "an index name with a quote": [b'{"_index":"i\\"","_id":"1","_source":{"a":1}}'],
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


FAST = ("sorted", "unsorted", "escapes in unsorted ids")


@pytest.mark.parametrize("case", list(RECORDS))
def test_records_frame_as_parsing_them_would(tmp_path: Path, case: str) -> None:
    lines = RECORDS[case]
    framing = framer(tmp_path)
    framed = chunk(framing, 1, lines)
    assert framed is not None
    expected = []
    for line in lines:
        record = orjson.loads(line)
        meta = {"_id": record["_id"]}
        if "_routing" in record:
            meta["routing"] = record["_routing"]
        expected.append(({"index": meta}, record["_source"]))
    assert items(framed.body) == expected
    assert (framed.items is None) == (case in FAST)  # the fast path, or not


def test_plain_sources_get_derived_ids_sent_as_create(tmp_path: Path) -> None:
    lines = [b'{"n":1}', b'{"n":2}']
    framed = chunk(framer(tmp_path, "run7"), 41, lines)
    assert items(framed.body) == [
        ({"create": {"_id": "run7-41"}}, {"n": 1}),
        ({"create": {"_id": "run7-42"}}, {"n": 2}),
    ]
    assert framed.is_derived(1, "run7-42")
    piped = chunk(framer(tmp_path, None), 1, lines)  # standard input: the server's ids
    assert items(piped.body) == [({"index": {}}, {"n": 1}), ({"index": {}}, {"n": 2})]


def test_records_around_a_blank_line_keep_their_numbers(tmp_path: Path) -> None:
    lines = [
        b'{"_index":"i","_id":"1","_source":{"a":1}}',
        b"",
        b'{"_index":"i","_id":"2","_source":{"a":2}}',
    ]
    framed = chunk(framer(tmp_path), 5, lines)
    assert [item[:2] for item in framed.items] == [(5, "index"), (7, "index")]  # parsed, by line
    assert items(framed.body) == [({"index": {"_id": "1"}}, {"a": 1}), ({"index": {"_id": "2"}}, {"a": 2})]


def test_blank_lines_keep_their_numbers(tmp_path: Path) -> None:
    framed = chunk(framer(tmp_path), 10, [b'{"n":1}', b"", b'{"n":2}'])
    assert [item[:2] for item in framed.items] == [(10, "create"), (12, "create")]
    assert items(framed.body)[1] == ({"create": {"_id": "r1-12"}}, {"n": 2})


@pytest.mark.parametrize("read_block", [7, 64, 1 << 20])
def test_chunks_depend_on_the_input_only(monkeypatch: pytest.MonkeyPatch, read_block: int) -> None:
    monkeypatch.setattr("leafsearch.transfer.importer.READ_BLOCK", read_block)
    data = b"".join(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * (i % 50)) for i in range(1000))
    groups = [
        (first, text.split(b"\n")[:-1], count)
        for first, text, count in _blocks_of_lines(io.BytesIO(data), 64, 2000)
    ]
    assert all(len(lines) == count for _, lines, count in groups)
    assert [first for first, _, _ in groups][:3] == [
        1,
        groups[0][0] + len(groups[0][1]),
        groups[1][0] + len(groups[1][1]),
    ]
    assert b"\n".join(line for _, lines, _ in groups for line in lines) + b"\n" == data
    for _, lines, _ in groups[:-1]:
        size = sum(map(len, lines))
        assert len(lines) == 64 or (size >= 2000 and size - len(lines[-1]) < 2000)
    monkeypatch.setattr("leafsearch.transfer.importer.READ_BLOCK", 1 << 20)
    assert groups == [
        (first, text.split(b"\n")[:-1], count)
        for first, text, count in _blocks_of_lines(io.BytesIO(data), 64, 2000)
    ]


@pytest.mark.parametrize("read_block", [3, 1 << 20])
def test_a_last_line_without_newline_and_blank_lines_are_lines(
    monkeypatch: pytest.MonkeyPatch, read_block: int
) -> None:
    monkeypatch.setattr("leafsearch.transfer.importer.READ_BLOCK", read_block)
    data = b'{"n":1}\n\n{"n":2}\n{"n":3}\n\n{"n":4}'
    assert list(_blocks_of_lines(io.BytesIO(data), 3, 1000)) == [
        (1, b'{"n":1}\n\n{"n":2}\n', 3),
        (4, b'{"n":3}\n\n{"n":4}\n', 3),
    ]
    assert list(_blocks_of_lines(io.BytesIO(data + b"\n\n"), 10, 1000)) == [(1, data + b"\n\n", 7)]
    assert list(_blocks_of_lines(io.BytesIO(b""), 10, 1000)) == []


def test_a_line_over_the_byte_limit_is_a_chunk_of_its_own() -> None:
    data = b"%s\n%s\n%s\n" % (b"a" * 10, b"b" * 5000, b"c" * 10)
    assert [(first, count) for first, _, count in _blocks_of_lines(io.BytesIO(data), 100, 1000)] == [
        (1, 2),
        (3, 1),
    ]


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
