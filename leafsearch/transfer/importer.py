"""`leafsearch import`: NDJSON into an index through parallel `_bulk` requests, resumable.

The file holds either Elasticsearch's `_bulk` format (action lines, each but `delete` followed by
its source) or one document per line: a plain source, or a record as `leafsearch export` and
elasticdump write it (`{"_id", "_source", ...}`: indexed under its `_id`, with its `_routing`). The
first line decides which. Documents go to INDEX whatever `_index` the file names.

**Bytes, not objects.** The input is read in blocks whose newlines numpy finds; a chunk is a slice
of a block (its lines are not cut apart) and becomes a bulk body without decoding a document where
the format allows it: plain sources are framed as they are (an action line, then the line), and
records in the exact shape `leafsearch export` writes (`{"_index":..,"_id":..,"_source":{..}
[,"sort":[..]]}`, compact, without `_routing`) are rewritten into action + source by two passes
over the whole chunk (C speed, no Python per line): one regular expression whose every match is a
record's end and the next one's head up to its `_id`'s value, replaced by constant text, then
`bytes.replace` of the `","_source":` after each id. A chunk whose every line does not fit that
shape (an elasticdump file, a file with blank lines or CRLF endings, the `_bulk` format) is parsed
line by line with orjson, as before.

**Resuming.** An import of a file (not standard input) records in `FILE.import-state.json`, after
each bulk answer, which chunks the server acknowledged (chunk numbers: the chunking is a function
of the file and of `--chunk`, which the state keeps, so a resumed run cuts the same chunks). With
`--resume`, acknowledged chunks are skipped and the others sent again. Sending a chunk again is
harmless: a document with an `_id` is written again under the same id, and a document *without*
one is given an id derived from the run and its line (`<run>-<line>`) and sent as `create`, so a
copy the server already holds answers 409, counted as imported, never written twice. Failed items
of earlier runs stay in the errors file (it is appended to) and in the counts.

Every item the server refuses (and every line that is not JSON) is counted by error type, written
to the errors file with its line number, and makes the command exit with status 1. A whole bulk
request refused with 429 is retried with a growing pause, as the official clients' helpers do."""

from __future__ import annotations

import functools
import itertools
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import numpy as np
import orjson
import zstandard

from leafsearch.transfer.client import Client, InputError, TransferError, decode
from leafsearch.transfer.files import open_input, replace_file
from leafsearch.transfer.progress import bytes_bar

ACTIONS = ("index", "create", "update", "delete")
RECORD_KEYS = frozenset({"_index", "_id", "_source", "_routing", "_type", "_score", "sort"})
RETRIES_ON_429 = 5
STATE_VERSION = 1
READ_BLOCK = 4 << 20
_PLAIN_ACTION = b'{"index":{}}'
_CONFLICT = "version_conflict_engine_exception"
_NO_ERRORS = b'"errors":false'

# The fast path's two rewrites of a chunk of record lines. A seam is a record's end (its source's
# closing brace, then the sort or nothing, then the record's brace) and the next record's head up
# to its `_id`'s value, which must be followed by `","_source":` (a `_routing` there is not); it
# becomes the source's brace, a newline and an action's head (a constant: no Python per match; the
# expressions start with a literal, which `re` finds with a fast scan). Then each `","_source":`
# closes an action line.
_HEAD = rb'\{"_index":"[^"\\\n]*","_id":"(?=[^"\\\n]*(?:\\.[^"\\\n]*)*","_source":)'
_SORTED_SEAM = re.compile(rb'\},"sort":\[[^\]\n]*\]\}\n' + _HEAD)
_UNSORTED_SEAM = re.compile(rb"\}\}\n" + _HEAD)
_SEAM = b'}\n{"index":{"_id":"'
# Around a chunk, so that its first head and last end are seams too: a record's end before it, a
# head and source key after it (cut from the body again: `_CUT_BEFORE` and `_CUT_AFTER` bytes).
_SORTED_BEFORE = b'},"sort":[]}\n'
_UNSORTED_BEFORE = b"}}\n"
_AFTER = b'{"_index":"","_id":"","_source":'
_CUT_BEFORE = 2  # "}\n"
_CUT_AFTER = len(b'{"index":{"_id":""}}\n')
_SOURCE_KEY = b'","_source":'
_ACTION_END = b'"}}\n'


@dataclass
class _Chunk:
    """One bulk request: its number in the file, its body, and what its items came from: items are
    the lines `first_line`, `first_line + 1`, ... unless `items` lists (line, action, id) each."""

    number: int
    body: bytes
    first_line: int
    count: int
    items: list[tuple[int, str, Any]] | None = None
    run: str | None = None
    derived: bool = False  # the items' ids are derived ones (`<run>-<line>`): a 409 means "already there"

    def item(self, i: int) -> tuple[int, str, Any]:
        if self.items is not None:
            return self.items[i]
        return self.first_line + i, "create" if self.derived else "index", None

    def is_derived(self, i: int, doc_id: Any) -> bool:
        """Whether item `i` (answered with `doc_id`) has an id this import derived."""
        if self.items is None:
            return self.derived
        line_no, kind, _ = self.items[i]
        return self.run is not None and kind == "create" and doc_id == f"{self.run}-{line_no}"


@dataclass
class ImportState:
    """What a resumable import has done: see the module docstring."""

    file: str
    index: str
    run: str
    chunk_docs: int
    chunk_bytes: int
    identity: list[int]  # the file's size and modification time: a changed file is not resumed
    done_below: int = 0  # every chunk numbered below was acknowledged
    acknowledged: list[int] = field(default_factory=list)  # and these, above it
    succeeded: int = 0
    failed: int = 0
    version: int = STATE_VERSION

    def acknowledge(self, number: int) -> None:
        """Chunk `number` acknowledged; the list keeps only those above the acknowledged prefix, so
        the state stays small however long the file."""
        self.acknowledged.append(number)
        if number == self.done_below:
            above = set(self.acknowledged)
            while self.done_below in above:
                above.discard(self.done_below)
                self.done_below += 1
            self.acknowledged = sorted(above)

    def was_acknowledged(self, number: int) -> bool:
        return number < self.done_below or number in self.acknowledged


@dataclass
class ImportResult:
    """What an import did: items indexed, items failed, failures by error type (count, first reason)."""

    succeeded: int = 0
    failed: int = 0
    by_type: dict[str, list[Any]] = field(default_factory=dict)
    errors_file: str | None = None
    this_run: int = 0

    def summary(self) -> str:
        lines = [f"{self.succeeded:,} {_items(self.succeeded)} imported, {self.failed:,} failed"]
        for error_type, (count, reason) in sorted(self.by_type.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"  {count:,} x {error_type}: {reason}")
        if self.errors_file and self.failed:
            lines.append(f"each failure is in {self.errors_file}")
        return "\n".join(lines)


def _items(n: int) -> str:
    return "item" if n == 1 else "items"


def state_path(path: str) -> str:
    return path + ".import-state.json"


def load_import_state(path: str) -> ImportState:
    try:
        with open(state_path(path), "rb") as handle:
            raw = orjson.loads(handle.read())
    except FileNotFoundError:
        raise TransferError(f"nothing to resume: no state file [{state_path(path)}]") from None
    except orjson.JSONDecodeError as exc:
        raise TransferError(f"[{state_path(path)}] is not a state file: {exc}") from None
    if raw.get("version") != STATE_VERSION:
        raise TransferError(f"[{state_path(path)}] was written by another version of leafsearch import")
    state = ImportState(**raw)
    if state.identity != file_identity(path):
        raise TransferError(
            f"[{path}] changed since the interrupted import (its size or modification time): "
            "import it again without --resume"
        )
    return state


def file_identity(path: str) -> list[int]:
    info = os.stat(path)
    return [info.st_size, info.st_mtime_ns]


class _Failures:
    """Failed items, counted and written to the errors file (opened at the first failure; appended
    to by a resumed run)."""

    def __init__(self, path: str, result: ImportResult, append: bool) -> None:
        self.path = path
        self.result = result
        self.append = append
        self.lock = threading.Lock()
        self.handle: IO[bytes] | None = None

    def add(self, line_no: int, kind: str, doc_id: Any, status: int, error: Any) -> None:
        error_type = error.get("type", "error") if isinstance(error, dict) else "error"
        reason = error.get("reason") if isinstance(error, dict) else str(error)
        with self.lock:
            if self.handle is None:
                self.handle = open(self.path, "ab" if self.append else "wb")  # noqa: SIM115 - close()
                self.result.errors_file = self.path
            record = {"line": line_no, "action": kind, "_id": doc_id, "status": status, "error": error}
            self.handle.write(orjson.dumps(record) + b"\n")
            self.result.failed += 1
            entry = self.result.by_type.setdefault(error_type, [0, reason])
            entry[0] += 1

    def flush(self) -> None:
        with self.lock:
            if self.handle is not None:
                self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


class _Muted:
    def add(self, *_: Any) -> None:
        pass


def _blocks_of_lines(
    reader: IO[bytes], chunk_docs: int, chunk_bytes: int
) -> Iterator[tuple[int, bytes, int]]:
    """The input's lines in groups: the number of a group's first line, its lines (each ending with a
    newline, one added after a last line without) and how many. A group ends after `chunk_docs`
    lines or at the line that brings it to `chunk_bytes` (newlines not counted), so the groups are a
    function of the input and the two limits only (what resuming relies on). numpy finds a block's
    newlines; a group is a slice of the blocks read, never a Python step per line."""
    line_no = 1
    buffer = b""  # the lines read and not yielded yet, and the start of the next one
    ends = np.empty(0, np.int64)  # the offsets of `buffer`'s newlines
    eof = False
    while not eof:
        block = reader.read(READ_BLOCK)
        eof = not block
        if eof and buffer and not buffer.endswith(b"\n"):
            block = b"\n"
        if block:
            found = np.flatnonzero(np.frombuffer(block, np.uint8) == ord("\n"))
            ends = np.concatenate((ends, found + len(buffer)))
            buffer += block
        start = 0  # of the first line not yielded
        done = 0  # lines yielded from `buffer`
        while done < len(ends):
            pending = len(ends) - done
            if not (eof or pending >= chunk_docs or ends[-1] + 1 - start - pending >= chunk_bytes):
                break
            first = ends[done : done + chunk_docs]
            sizes = first + 1 - start - np.arange(1, len(first) + 1)  # of the first 1, 2, ... lines
            n = min(int(np.searchsorted(sizes, chunk_bytes)) + 1, len(first))
            end = int(first[n - 1]) + 1
            yield line_no, buffer[start:end], n
            line_no += n
            done += n
            start = end
        buffer = buffer[start:]
        ends = ends[done:] - start


class _Framer:
    """Turns groups of lines into bulk chunks (see the module docstring for the fast and slow paths)."""

    def __init__(self, failures: _Failures, run: str | None) -> None:
        self.failures = failures
        self.run = run  # None: documents without an `_id` get the server's ids (standard input)
        self.format: str | None = None  # "bulk", "record" or "plain", from the first line
        self.pending: tuple[int, str, Any, bytes] | None = None  # a bulk action waiting for its source

    def decide(self, first: bytes) -> None:
        try:
            obj = orjson.loads(first)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"the input is not NDJSON: line 1 is not JSON ({exc})") from None
        if _is_action(obj):
            self.format = "bulk"
        elif _is_record(obj):
            self.format = "record"
        elif isinstance(obj, dict):
            self.format = "plain"
        else:
            raise InputError("the input is not NDJSON documents: line 1 is not a JSON object")

    def chunk(self, number: int, first_line: int, text: bytes, count: int) -> _Chunk | None:
        """The bulk chunk of `count` lines (`text`, each ending with a newline), or None when no line
        holds an item."""
        self.decide_once(text)
        if self.format == "record":
            fast = self._records(number, first_line, text, count)
            if fast is not None:
                return fast
        lines = text.split(b"\n")[:-1]
        if self.format == "plain" and b"" not in lines:  # a blank line has no item: parsed, by line
            return self._plain(number, first_line, lines)
        return self._parsed(number, first_line, lines)

    def skip(self, number: int, first_line: int, text: bytes) -> None:
        """An acknowledged chunk, not sent again: its first line still decides the format, and a
        `_bulk` file's chunk is read again for the action it may leave waiting for its source in
        the next chunk (its failures are on record)."""
        self.decide_once(text)
        if self.format != "bulk":
            return
        failures, self.failures = self.failures, _Muted()  # type: ignore[assignment]
        try:
            self._parsed(number, first_line, text.split(b"\n")[:-1])
        finally:
            self.failures = failures

    def decide_once(self, text: bytes) -> None:
        """The format, from the input's first line that is not blank (in the first chunk)."""
        if self.format is None:
            self.decide(text.lstrip().partition(b"\n")[0].strip() or b"{}")

    def _plain(self, number: int, first_line: int, lines: list[bytes]) -> _Chunk:
        if self.run is None:
            body = _PLAIN_ACTION + b"\n" + (b"\n" + _PLAIN_ACTION + b"\n").join(lines) + b"\n"
            return _Chunk(number, body, first_line, len(lines))
        prefix = self.run.encode()
        actions = [
            b'{"create":{"_id":"%s-%d"}}' % (prefix, n) for n in range(first_line, first_line + len(lines))
        ]
        body = b"\n".join(itertools.chain.from_iterable(zip(actions, lines, strict=True))) + b"\n"
        return _Chunk(number, body, first_line, len(lines), derived=True)

    def _records(self, number: int, first_line: int, text: bytes, count: int) -> _Chunk | None:
        """The chunk's records as bulk items by two whole-chunk rewrites, or None when a line is not
        exactly `{"_index":"..","_id":"..","_source":{..}[,"sort":[..]]}`, all with a sort or all
        without (each rewrite's count must be one per line and one for the ends put around the
        chunk: a source holding a `","_source":`, a routing, a blank line, ... fail it, and the
        chunk is parsed line by line)."""
        first_end = text.index(b"\n")
        if text[first_end - 2 : first_end] == b"}}":
            seam, before = _UNSORTED_SEAM, _UNSORTED_BEFORE
        else:
            seam, before = _SORTED_SEAM, _SORTED_BEFORE
        body, seams = seam.subn(_SEAM, before + text + _AFTER)
        if seams != count + 1:
            return None
        seamed = len(body)
        body = body.replace(_SOURCE_KEY, _ACTION_END)
        if seamed - len(body) != (count + 1) * (len(_SOURCE_KEY) - len(_ACTION_END)):
            return None
        return _Chunk(number, body[_CUT_BEFORE : len(body) - _CUT_AFTER], first_line, count)

    def _parsed(self, number: int, first_line: int, lines: list[bytes]) -> _Chunk | None:
        out: list[bytes] = []
        items: list[tuple[int, str, Any]] = []
        for line_no, raw in enumerate(lines, first_line):
            line = raw.strip()
            if not line:
                continue
            if self.pending is not None:
                p_line, kind, doc_id, action = self.pending
                out += (action, line)
                items.append((p_line, kind, doc_id))
                self.pending = None
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                self.failures.add(
                    line_no, "index", None, 400, {"type": "parse_exception", "reason": str(exc)}
                )
                continue
            if self.format == "bulk":
                if not _is_action(obj):
                    reason = f"line [{line_no}] is not a bulk action ({', '.join(ACTIONS)})"
                    self.failures.add(
                        line_no, "index", None, 400, {"type": "illegal_argument_exception", "reason": reason}
                    )
                    continue
                ((kind, meta),) = obj.items()
                meta.pop("_index", None)
                if kind == "index" and "_id" not in meta and self.run is not None:
                    kind, meta["_id"] = "create", f"{self.run}-{line_no}"
                action = orjson.dumps({kind: meta})
                if kind == "delete":
                    out.append(action)
                    items.append((line_no, kind, meta.get("_id")))
                else:
                    self.pending = (line_no, kind, meta.get("_id"), action)
            elif _is_record(obj):
                meta = {}
                kind = "index"
                if "_id" in obj:
                    meta["_id"] = obj["_id"]
                elif self.run is not None:
                    kind, meta["_id"] = "create", f"{self.run}-{line_no}"
                if obj.get("_routing") is not None:
                    meta["routing"] = obj["_routing"]
                out += (orjson.dumps({kind: meta}), orjson.dumps(obj["_source"]))
                items.append((line_no, kind, meta.get("_id")))
            elif self.run is not None:
                out += (b'{"create":{"_id":"%s-%d"}}' % (self.run.encode(), line_no), line)
                items.append((line_no, "create", f"{self.run}-{line_no}"))
            else:
                out += (_PLAIN_ACTION, line)
                items.append((line_no, "index", None))
        if not items:
            return None
        return _Chunk(number, b"\n".join(out) + b"\n", first_line, len(items), items, run=self.run)

    def finish(self) -> None:
        if self.pending is not None:
            line_no, kind, doc_id, _ = self.pending
            reason = f"the action on line [{line_no}] has no source line"
            self.failures.add(
                line_no, kind, doc_id, 400, {"type": "illegal_argument_exception", "reason": reason}
            )


def _is_action(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and len(obj) == 1
        and next(iter(obj)) in ACTIONS
        and isinstance(next(iter(obj.values())), dict)
    )


def _is_record(obj: Any) -> bool:
    return isinstance(obj, dict) and "_source" in obj and obj.keys() <= RECORD_KEYS


def create_index(client: Client, index: str, definition: dict[str, Any]) -> None:
    """`--mapping FILE`: the index created from a mapping (`{"properties": ...}`) or a whole create
    body (`{"settings": ..., "mappings": ...}`)."""
    body = definition if {"mappings", "settings", "aliases"} & definition.keys() else {"mappings": definition}
    client.request("PUT", f"/{index}", body)


class Importer:
    def __init__(
        self,
        client: Client,
        index: str,
        *,
        workers: int = 2,
        chunk_docs: int = 5000,
        chunk_bytes: int = 10 << 20,
        errors_path: str,
        quiet: bool = False,
    ) -> None:
        self.client = client
        self.index = index
        self.workers = workers
        self.chunk_docs = chunk_docs
        self.chunk_bytes = chunk_bytes
        self.errors_path = errors_path
        self.quiet = quiet

    def new_state(self, path: str) -> ImportState:
        return ImportState(
            os.path.abspath(path),
            self.index,
            secrets.token_hex(4),
            self.chunk_docs,
            self.chunk_bytes,
            file_identity(path),
        )

    def run(self, path: str, state: ImportState | None) -> ImportResult:
        """Imports `path`; with a `state` (any file but standard input) records progress in the state
        file and skips the chunks it says were acknowledged."""
        result = ImportResult()
        if state is not None:
            self.chunk_docs, self.chunk_bytes = state.chunk_docs, state.chunk_bytes
            result.succeeded, result.failed = state.succeeded, state.failed
        resumed = state is not None and (state.done_below > 0 or bool(state.acknowledged))
        failures = _Failures(self.errors_path, result, append=resumed)
        framer = _Framer(failures, state.run if state is not None else None)
        reader, counter, size = open_input(path)
        if state is not None:  # before anything is sent: a rerun must reuse this run's derived ids
            save_import_state(state)
        in_flight = threading.BoundedSemaphore(self.workers * 2)
        lock = threading.Lock()
        broken: list[BaseException] = []  # a request that failed as a whole (transport, bad answer)
        try:
            with bytes_bar(self.quiet) as bar, ThreadPoolExecutor(self.workers) as pool:
                task = bar.add_task(f"import {self.index}", total=size, docs=0)

                def sent(chunk: _Chunk, future: Future) -> None:
                    in_flight.release()
                    if future.exception() is not None:
                        broken.append(future.exception())  # type: ignore[arg-type]
                        return
                    with lock:
                        ok = future.result()
                        result.succeeded += ok
                        result.this_run += chunk.count
                        if state is not None:
                            failures.flush()
                            state.acknowledge(chunk.number)
                            state.succeeded, state.failed = result.succeeded, result.failed
                            save_import_state(state)
                    bar.update(task, completed=counter.consumed, docs=result.this_run)

                groups = _read_groups(reader, path, self.chunk_docs, self.chunk_bytes)
                for number, (first_line, text, count) in enumerate(groups):
                    if state is not None and state.was_acknowledged(number):
                        framer.skip(number, first_line, text)
                        continue
                    chunk = framer.chunk(number, first_line, text, count)
                    if chunk is None:
                        continue
                    in_flight.acquire()
                    if broken:
                        break
                    pool.submit(self._send, chunk, failures).add_done_callback(functools.partial(sent, chunk))
                framer.finish()
            if broken:
                raise broken[0]
        finally:
            failures.close()
            reader.close()
        self.client.request("POST", f"/{self.index}/_refresh", allow=(404,))
        if state is not None:
            os.remove(state_path(state.file))
        return result

    def _send(self, chunk: _Chunk, failures: _Failures) -> int:
        """One bulk request; failed items go to `failures`. Returns the items that succeeded."""
        for attempt in range(RETRIES_ON_429 + 1):
            status, content = self.client.request_bytes("POST", f"/{self.index}/_bulk", ndjson=chunk.body)
            if status != 429 or attempt == RETRIES_ON_429:
                break
            time.sleep(0.5 * 2**attempt)
        if status == 200 and _NO_ERRORS in content[:64]:
            return chunk.count  # the answer's items are not read (nor decoded) when none failed
        response = decode(content)
        if status >= 400 or not isinstance(response, dict) or "items" not in response:
            error = response.get("error") if isinstance(response, dict) else response
            for i in range(chunk.count):
                line_no, kind, doc_id = chunk.item(i)
                failures.add(line_no, kind, doc_id, status, error)
            return 0
        ok = 0
        for i, item in enumerate(response["items"]):
            line_no, kind, doc_id = chunk.item(i)
            ((_, outcome),) = item.items()
            error = outcome.get("error")
            if error is None:
                ok += 1
            elif (
                isinstance(error, dict)
                and error.get("type") == _CONFLICT
                and chunk.is_derived(i, outcome.get("_id"))
            ):
                ok += 1  # a derived id already there: this line was written by an earlier attempt
            else:
                failures.add(line_no, kind, outcome.get("_id", doc_id), outcome.get("status", 0), error)
        return ok


def _read_groups(
    reader: IO[bytes], path: str, chunk_docs: int, chunk_bytes: int
) -> Iterator[tuple[int, bytes, int]]:
    """`_blocks_of_lines`, with a file that cannot be decompressed reported as such."""
    try:
        yield from _blocks_of_lines(reader, chunk_docs, chunk_bytes)
    except (OSError, EOFError, zstandard.ZstdError) as exc:
        raise InputError(f"cannot read [{path}]: {exc}") from None


def save_import_state(state: ImportState) -> None:
    replace_file(state_path(state.file), orjson.dumps(asdict(state)))


def load_definition(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            definition = orjson.loads(handle.read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TransferError(f"--mapping {path}: {exc}") from None
    if not isinstance(definition, dict):
        raise TransferError(f"--mapping {path}: expected a JSON object")
    return definition
