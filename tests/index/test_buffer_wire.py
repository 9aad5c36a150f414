"""Full buffers written as segments by another process (index/buffer_wire.py): the packed buffer
gives the very segment the server process would write, a shard hands its full buffers to its
owner's builder, falls back to writing them itself when no worker takes them, and a refresh hands
over what arrived meanwhile instead of writing it under the shard lock."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import orjson
import pytest

import leafsearch.index.shard as shard_module
from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.buffer_wire import BuildJob, BuildUnavailable, PackedBuffer, PackedStrings, build_packed
from leafsearch.index.index_sort import index_sort_of
from leafsearch.index.interning import intern
from leafsearch.index.mapping import Mapping
from leafsearch.index.segment_build import segment_from_buffer
from leafsearch.index.shard import REFRESH_HAND_OVERS, Shard
from leafsearch.index.shard_services import ShardServices
from tests.index.test_engine_shard import parse, put, visible_ids

MAPPING = {
    "properties": {
        "msg": {"type": "text"},
        "tag": {"type": "keyword"},
        "n": {"type": "long"},
        "x": {"type": "double"},
        "at": {"type": "date"},
    }
}

DOCS = [
    {"msg": "the quick brown fox", "tag": "a", "n": 3, "x": 1.5, "at": "2024-01-01T00:00:00Z"},
    {"msg": "Ünïcödé wörds and the fox again the", "tag": ["b", "a", "b"], "n": [7, -2]},
    {"tag": "zeta \x00 nul", "x": -0.0},
    {"msg": "", "n": 2**62},
    {},
    {"msg": "😀 emoji 😀 text", "tag": "ü", "at": "1999-12-31T23:59:59.999Z"},
]


def _buffer(count: int, id_format: str = "id-{}") -> IndexBuffer:
    mapping = Mapping.from_body(MAPPING)
    buffer = IndexBuffer()
    for i in range(count):
        source = orjson.dumps(DOCS[i % len(DOCS)])
        routing = f"r{i % 3}" if i % 4 == 0 else None
        doc_id = id_format.format(i)
        buffer.add(doc_id, mapping.parse_document(source, doc_id), i, 1 + i % 2, routing)
    return buffer


def _files(folder: Path) -> dict[str, bytes]:
    """Every file of a segment folder, those of its nested child segments by their folder."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_a_packed_buffer_with_nested_documents_is_the_segment_written_here(tmp_path: Path) -> None:
    mapping = Mapping.from_body(
        {"properties": {"c": {"type": "nested", "properties": {"r": {"type": "nested"}}}}}
    )
    buffers = []
    for _ in range(2):
        buffer = IndexBuffer()
        for i in range(30):
            doc = {"c": [{"a": f"v{i}", "r": [{"z": j} for j in range(i % 3)]} for _ in range(i % 4)]}
            buffer.add(f"id-{i}", mapping.parse_document(orjson.dumps(doc), f"id-{i}"), i, 1, None)
        buffers.append(buffer)
    segment_from_buffer(buffers[0], tmp_path / "here")
    packed = pickle.loads(pickle.dumps(PackedBuffer.pack(buffers[1]), protocol=5))
    build_packed(packed, str(tmp_path / "there"), None)
    here = _files(tmp_path / "here")
    assert "n0/n0/meta.json" in here
    assert _files(tmp_path / "there") == here


@pytest.mark.parametrize("id_format", ["id-{}", "{:09d}"])  # widths apart; one width (a log's)
@pytest.mark.parametrize("sorted_by", [None, "n", "tag"])
@pytest.mark.parametrize("count", [1, 40, 1500])
def test_a_packed_buffer_written_elsewhere_is_the_segment_written_here(
    tmp_path: Path, sorted_by: str | None, count: int, id_format: str
) -> None:
    settings = {"index.sort.field": [sorted_by], "index.sort.order": ["desc"]} if sorted_by else {}
    index_sort = index_sort_of(settings, Mapping.from_body(MAPPING), "i")
    here = _buffer(count, id_format)
    segment_from_buffer(here, tmp_path / "here", index_sort)
    # Across a pickle, as it crosses to a worker (ids of one width as the segment's 'S' array).
    packed = pickle.loads(pickle.dumps(PackedBuffer.pack(_buffer(count, id_format)), protocol=5))
    crossed = packed.ids.terms(count)
    assert isinstance(crossed, np.ndarray) == (count == 1 or id_format == "{:09d}")
    segment_docs = build_packed(packed, str(tmp_path / "there"), index_sort)
    assert _files(tmp_path / "there") == _files(tmp_path / "here")
    if index_sort is None:
        assert segment_docs is None
    else:
        assert segment_docs is not None and np.array_equal(segment_docs, here.segment_docs)


@pytest.mark.parametrize(
    "values", [["a"], [""], ["", "b", ""], ["ü", "日本", "a", "ü"], ["zeta \x00 nul", "a"], ["x" * 100, "y"]]
)
def test_a_keyword_column_crossing_as_spans_interns_as_its_list(values: list[str]) -> None:
    """A worker's keyword values are spans of their joined encoding (no string a value), unless
    one holds a NUL (then the list, as `intern` takes either): the same terms and ordinals."""
    packed = pickle.loads(pickle.dumps(PackedStrings.pack(values), protocol=5))
    spans = packed.spans(len(values))
    assert isinstance(spans, list) == any("\x00" in v for v in values)
    (terms, ords), (want_terms, want_ords) = intern(spans), intern(list(values))
    assert terms.dtype == want_terms.dtype and np.array_equal(terms, want_terms)
    assert np.array_equal(ords, want_ords)


#: Run in a fresh interpreter (tracemalloc counts every thread's allocations, and the test process
#: has others'): a build job as a worker runs it, its callable held by the worker's thread while
#: it runs and after (search/workers/process.py); prints the traced bytes of the job as it arrived
#: and after the build, and the build's traced peak. A first build beforehand takes what a
#: process keeps once (imports, caches).
JOB_MEMORY = """
import pickle, sys, tempfile, tracemalloc
from pathlib import Path
from leafsearch.index.buffer_wire import BuildJob, PackedBuffer
from tests.index.test_buffer_wire import _buffer
folder = Path(tempfile.mkdtemp(dir=sys.argv[1]))
jobs = [BuildJob(PackedBuffer.pack(_buffer(6000)), str(folder / f"s{n}"), None) for n in range(2)]
sent = [pickle.dumps(job, protocol=5) for job in jobs]
del jobs
pickle.loads(sent[0]).bind(None)()
tracemalloc.start()
job = pickle.loads(sent[1])
work = job.bind(None)
del job
arrived = tracemalloc.get_traced_memory()[0]
work()
left, peak = tracemalloc.get_traced_memory()
print(arrived, left, peak)
"""


def test_a_build_job_leaves_nothing_behind_while_its_callable_is_still_held(tmp_path: Path) -> None:
    """What a worker's build job brought (the packed buffer) and built goes when the build
    returns, although the worker's thread still holds the job's callable: a worker holds no
    earlier build's buffer beside the next one."""
    ran = subprocess.run(
        [sys.executable, "-c", JOB_MEMORY, str(tmp_path)], capture_output=True, text=True, check=True
    )
    arrived, left, peak = map(int, ran.stdout.split())
    assert arrived > 1 << 20  # the packed buffer of 6,000 documents
    assert peak > arrived
    assert left < arrived // 20


class Builder:
    """A builder as the node's (a search worker), run on the calling thread: the job pickled
    and built by `build_packed`; `before` runs first, on the first call."""

    def __init__(self, before=None, unavailable: bool = False) -> None:
        self.calls: list[int] = []
        self.before, self.unavailable = before, unavailable

    def __call__(self, job: BuildJob) -> np.ndarray | None:
        self.calls.append(len(job.packed.ids.unpack()))
        if self.before is not None and len(self.calls) == 1:
            self.before()
        if self.unavailable:  # a worker that died half way: a partial folder is left
            half = Path(job.folder).with_name(Path(job.folder).name + ".tmp")
            half.mkdir()
            (half / "_id.terms.npy").write_bytes(b"\x93NUMPY")
            raise BuildUnavailable
        job = pickle.loads(pickle.dumps(job, protocol=5))
        return job.bind(None)()


def _shard(folder: Path, builder: Builder, min_docs: int) -> Shard:
    services = ShardServices()
    services.builder, services.builder_min_docs = builder, min_docs
    return Shard(folder, 0, parse, services=services)


def test_a_refresh_hands_a_buffer_of_the_minimum_size_to_the_builder(tmp_path: Path) -> None:
    builder = Builder()
    shard = _shard(tmp_path / "s", builder, 5)
    try:
        for i in range(4):
            put(shard, f"d{i}", {"msg": f"doc {i}", "n": i})
        shard.refresh()
        assert builder.calls == []  # under the minimum: written by the flush thread
        for i in range(4, 12):
            put(shard, f"d{i}", {"msg": f"doc {i}", "n": i})
        shard.refresh()
        assert builder.calls == [8]
        assert visible_ids(shard) == {f"d{i}" for i in range(12)}
    finally:
        shard.close()
    reopened = Shard(tmp_path / "s", 0, parse)
    try:
        assert visible_ids(reopened) == {f"d{i}" for i in range(12)}
    finally:
        reopened.close()


def test_a_buffer_no_worker_takes_is_written_here_and_the_partial_folder_goes(tmp_path: Path) -> None:
    builder = Builder(unavailable=True)
    shard = _shard(tmp_path / "s", builder, 1)
    try:
        for i in range(6):
            put(shard, f"d{i}", {"msg": f"doc {i}", "n": i})
        shard.refresh()
        assert builder.calls == [6]
        assert visible_ids(shard) == {f"d{i}" for i in range(6)}
        assert not [p for p in (tmp_path / "s").iterdir() if p.name.endswith(".tmp")]
    finally:
        shard.close()


def test_writes_arriving_while_a_worker_builds_are_handed_over_too_not_written_under_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that arrive (from other threads, the shard lock free) while the worker writes the
    refresh's buffer are many: the refresh hands them over too, and publishes everything."""

    def more_writes() -> None:
        writer = threading.Thread(
            target=lambda: [put(shard, f"late{i}", {"msg": "late", "n": i}) for i in range(7)]
        )
        writer.start()
        writer.join()

    builder = Builder(before=more_writes)
    shard = _shard(tmp_path / "s", builder, 5)

    def not_here(*args, **kwargs):
        raise AssertionError("a buffer of the minimum size was written in this process")

    monkeypatch.setattr(shard_module, "segment_from_buffer", not_here)
    try:
        for i in range(5):
            put(shard, f"d{i}", {"msg": f"doc {i}", "n": i})
        shard.refresh()
        assert builder.calls == [5, 7]
        assert visible_ids(shard) == {f"d{i}" for i in range(5)} | {f"late{i}" for i in range(7)}
    finally:
        monkeypatch.undo()
        shard.close()


def test_what_still_arrives_after_the_last_hand_over_is_written_by_the_worker_under_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes keep arriving while the worker writes each hand-over: what remains after the last
    one is written under the shard lock, by the worker too (the server process meanwhile serves
    other requests), and the refresh publishes every document."""
    shard: Shard

    def more_writes() -> None:
        n = len(builder.calls)
        if n > REFRESH_HAND_OVERS:
            return  # the last build: under the lock, no writer gets in
        writer = threading.Thread(
            target=lambda: [put(shard, f"late{n}-{i}", {"msg": "late", "n": i}) for i in range(7)]
        )
        writer.start()
        writer.join()

    class EveryCall(Builder):
        def __call__(self, job: BuildJob) -> np.ndarray | None:
            answer = super().__call__(job)
            more_writes()
            return answer

    builder = EveryCall()
    shard = _shard(tmp_path / "s", builder, 5)

    def not_here(*args, **kwargs):
        raise AssertionError("a buffer of the minimum size was written in this process")

    monkeypatch.setattr(shard_module, "segment_from_buffer", not_here)
    try:
        for i in range(5):
            put(shard, f"d{i}", {"msg": f"doc {i}", "n": i})
        shard.refresh()
        assert builder.calls == [5] + [7] * REFRESH_HAND_OVERS
        late = {f"late{n}-{i}" for n in range(1, REFRESH_HAND_OVERS + 1) for i in range(7)}
        assert visible_ids(shard) == {f"d{i}" for i in range(5)} | late
    finally:
        monkeypatch.undo()
        shard.close()
