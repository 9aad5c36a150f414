"""`leafsearch export`: every document of an index (or those of a query) to NDJSON.

Each output line is `{"_index", "_id", "_source"}` (plus `_routing` when the hit has one, and
`sort` when the server streamed it), the format elasticdump writes, so files go both ways between
the two tools. Beside FILE, `FILE.index.json` holds the index's settings and mappings as a
create-index body, which `leafsearch import` applies to a new index.

**How it reads.** A point in time (PIT) is opened on the index. When the server has the streaming
export endpoint (`POST /_export` with the PIT, a leafsearch extension), each slice is one chunked
response whose lines are written to the file as they arrive: bytes, never decoded (only the last
line of each ~1 MB piece is, for its `sort`, the cursor). Otherwise (Elasticsearch, an older
leafsearch: the path answers 400, 404 or 405) pages are read with `search_after` sorted by
`_shard_doc` (or the sort given, which a PIT search ends with an implicit `_shard_doc`
tiebreaker), decoded and written as records. Either way the PIT is a frozen snapshot, so writes
made meanwhile neither add nor remove nor repeat documents, and the sort values of the last
document written are a complete cursor. With `--slices N` the PIT is read as N slices by N
threads; pieces go to one file in a fixed round-robin order (slice 0's, slice 1's, ...) or to N
files (`--split`). Compression runs on a pool of threads (zlib and zstd release the GIL), never on
a thread that reads from the server.

**What resuming means.** After each piece is written (and flushed), the state file next to the
output records the PIT id, each slice's cursor (its last sort values, or done) and each file's
length. `--resume` cuts the files back to those lengths (compressed files are written one
gzip member or zstd frame per piece, so any recorded length ends a whole frame) and continues every
slice from its cursor in the same PIT: nothing is missed or written twice, because the cursor is
only ever read against the snapshot it came from. Continuing on a *new* PIT would not have that
guarantee: `_shard_doc` values belong to one snapshot (a refresh or merge renumbers documents), and
even a sort on a unique field would then see documents written or deleted after the export began.
So the PIT is opened with a long keep-alive (`--keep-alive`, default 1h) and a resume is possible
while it lives; once it has expired (or the server restarted) `--resume` says so and the export
must start again. A new export to the same FILE closes the PIT of the interrupted one; an export to
standard output (which cannot be resumed) closes its PIT however it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import orjson

from leafsearch.transfer.client import NDJSON, Client, TransferError, error_of
from leafsearch.transfer.files import (
    compress_chunk,
    compression_of,
    definition_path,
    open_output,
    replace_file,
)
from leafsearch.transfer.progress import documents_bar

STATE_VERSION = 1
#: Pieces a slice's reader may have ready ahead of the writer.
READ_AHEAD_PIECES = 4
#: The size of a piece of a streamed response written (and compressed) at once.
PIECE_BYTES = 1 << 20
#: Responses a streamed slice may take when its connection breaks (each resumes at its cursor).
STREAM_ATTEMPTS = 3
READER_JOIN_SECONDS = 2.0


@dataclass
class ExportPlan:
    """What to export and how; stored in the state file so that a resume reads the same way."""

    index: str
    output: str
    query: dict[str, Any] | None = None
    sort: list[Any] | None = None
    source: Any = None
    size: int = 1000
    slices: int = 1
    split: bool = False
    keep_alive: str = "1h"

    def files(self) -> list[str]:
        """The output file names: one, or one per slice with the slice number before the extensions."""
        if not self.split or self.slices == 1:
            return [self.output]
        return [split_name(self.output, i) for i in range(self.slices)]


@dataclass
class ExportState:
    """Where an export stands after the last page written: see the module docstring."""

    plan: ExportPlan
    pit_id: str
    total: int | None
    cursors: list[list[Any] | None]
    done: list[bool]
    written: list[int]
    offsets: list[int]
    turn: int = 0
    version: int = STATE_VERSION


def split_name(path: str, number: int) -> str:
    """`logs.ndjson.gz` -> `logs.3.ndjson.gz`: the slice number before the known extensions."""
    head, tail = os.path.split(path)
    suffix = ""
    for ext in (".gz", ".zst", ".ndjson", ".jsonl", ".json"):
        if tail.endswith(ext) and len(tail) > len(ext):
            tail, suffix = tail[: -len(ext)], ext + suffix
    return os.path.join(head, f"{tail}.{number}{suffix}")


def state_path(output: str) -> str:
    return output + ".export-state.json"


def load_state(output: str) -> ExportState:
    path = state_path(output)
    try:
        with open(path, "rb") as handle:
            raw = orjson.loads(handle.read())
    except FileNotFoundError:
        raise TransferError(f"nothing to resume: no state file [{path}]") from None
    except orjson.JSONDecodeError as exc:
        raise TransferError(f"[{path}] is not an export state file: {exc}") from None
    if raw.get("version") != STATE_VERSION:
        raise TransferError(f"[{path}] was written by another version of leafsearch export")
    raw["plan"] = ExportPlan(**raw["plan"])
    return ExportState(**raw)


def save_state(state: ExportState) -> None:
    replace_file(state_path(state.plan.output), orjson.dumps(asdict(state)))


def close_interrupted(client: Client, output: str) -> None:
    """A new export to `output`: the point in time of an interrupted export to it is closed (it would
    otherwise live out its keep-alive on the server) and its state file removed."""
    try:
        state = load_state(output)
    except TransferError:
        return
    with contextlib.suppress(TransferError):
        client.request("DELETE", "/_pit", {"id": state.pit_id}, allow=(400, 404))
    with contextlib.suppress(FileNotFoundError):
        os.remove(state_path(output))


@dataclass
class _Piece:
    """Some lines of one slice: their bytes (or the future of their compressed bytes), how many
    documents, the cursor after them and whether the slice is done."""

    data: bytes | Future
    count: int
    after: list[Any] | None
    done: bool


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class _NoEndpoint(Exception):
    """The server has no streaming export endpoint: read pages instead."""


class Exporter:
    """One export run (fresh or resumed) through `client`."""

    def __init__(self, client: Client, state: ExportState, *, quiet: bool = False) -> None:
        self.client = client
        self.state = state
        self.plan = state.plan
        self.quiet = quiet
        self.compression = compression_of(self.plan.output)
        self._pit_lock = threading.Lock()
        self._stop = threading.Event()
        self.streaming: bool | None = None  # None until the first answer says whether the endpoint exists
        self._compressors: ThreadPoolExecutor | None = None

    @classmethod
    def start(cls, client: Client, plan: ExportPlan, *, quiet: bool = False) -> Exporter:
        """A new export: counts the documents (for the progress bar), writes the index's definition
        beside the file and opens the PIT."""
        count_body = {"query": plan.query} if plan.query is not None else None
        _, counted = client.request("POST", f"/{plan.index}/_count", count_body)
        if plan.output != "-":
            close_interrupted(client, plan.output)
            write_definition(client, plan.index, definition_path(plan.output))
        _, opened = client.request("POST", f"/{plan.index}/_pit", params={"keep_alive": plan.keep_alive})
        n = plan.slices
        state = ExportState(plan, opened["id"], counted.get("count"), [None] * n, [False] * n, [0] * n, [])
        return cls(client, state, quiet=quiet)

    # ---- reading --------------------------------------------------------------------------------

    def _body(self, slice_id: int, after: list[Any] | None) -> dict[str, Any]:
        plan = self.plan
        body: dict[str, Any] = {
            "pit": {"id": self.state.pit_id, "keep_alive": plan.keep_alive},
            "sort": plan.sort if plan.sort else ["_shard_doc"],
        }
        if plan.query is not None:
            body["query"] = plan.query
        if plan.source is not None:
            body["_source"] = plan.source
        if plan.slices > 1:
            body["slice"] = {"id": slice_id, "max": plan.slices}
        if after is not None:
            body["search_after"] = after
        return body

    def _read_slice(self, slice_id: int, pieces: queue.Queue) -> None:
        """Reads slice `slice_id` into `pieces` until it is done or the export stops."""
        after = self.state.cursors[slice_id]
        try:
            if self.streaming is not False:
                try:
                    self._stream_slice(slice_id, after, pieces)
                    return
                except _NoEndpoint:
                    self.streaming = False
            self._page_slice(slice_id, after, pieces)
        except BaseException as exc:  # handed to the writer, which stops the export with it
            self._put(pieces, _Failure(exc))

    def _put(self, pieces: queue.Queue, item: _Piece | _Failure) -> bool:
        """`item` queued for the writer; False when the export stopped meanwhile."""
        while not self._stop.is_set():
            try:
                pieces.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _piece(self, data: bytes, count: int, after: list[Any] | None, done: bool) -> _Piece:
        if self.compression is None:
            return _Piece(data, count, after, done)
        assert self._compressors is not None
        return _Piece(self._compressors.submit(compress_chunk, data, self.compression), count, after, done)

    def _stream_slice(self, slice_id: int, after: list[Any] | None, pieces: queue.Queue) -> None:
        """The slice as one streamed response (several if the connection breaks: each continues from
        the cursor of the last whole line received)."""
        for attempt in range(STREAM_ATTEMPTS):
            content = orjson.dumps(self._body(slice_id, after))
            headers = {"content-type": "application/json", "accept": NDJSON}
            try:
                with self.client.http.stream(
                    "POST", "/_export", content=content, headers=headers
                ) as response:
                    if response.status_code != 200:
                        body = response.read()
                        if not self.streaming and response.status_code in (400, 404, 405):
                            raise _NoEndpoint
                        raise self._error_of(response.status_code, body)
                    self.streaming = True
                    after, complete = self._relay(response, after, pieces)
                    if complete or self._stop.is_set():
                        return
            except httpx.TransportError as exc:
                if not self.streaming or attempt == STREAM_ATTEMPTS - 1:
                    raise TransferError(f"POST {self.client.url}/_export: {exc}") from None
        raise TransferError(f"the export stream of slice {slice_id} ended early {STREAM_ATTEMPTS} times")

    def _relay(
        self, response: httpx.Response, after: list[Any] | None, pieces: queue.Queue
    ) -> tuple[list[Any] | None, bool]:
        """The lines of a streamed response, in pieces of about `PIECE_BYTES`, to the writer; the
        last line (maybe the trailer) is held back until the stream ends. Returns the cursor after
        the last line relayed and whether the stream ended complete."""
        buffer = bytearray()
        try:
            for data in response.iter_raw(PIECE_BYTES):
                buffer += data
                last = buffer.rfind(b"\n") if len(buffer) >= PIECE_BYTES else -1
                if last <= 0 or (cut := buffer.rfind(b"\n", 0, last) + 1) == 0:
                    continue
                piece = bytes(buffer[:cut])
                del buffer[:cut]
                after = _cursor_of(piece, after)
                if not self._put(pieces, self._piece(piece, piece.count(b"\n"), after, False)):
                    return after, False
        except httpx.TransportError:
            pass  # what arrived whole is relayed below; the caller continues from its cursor
        text = bytes(buffer)
        stripped = text[:-1] if text.endswith(b"\n") else text
        cut = stripped.rfind(b"\n") + 1
        piece, last = text[:cut], stripped[cut:]
        try:
            trailer = orjson.loads(last)
        except orjson.JSONDecodeError:  # the stream stopped inside a line: a broken connection
            trailer = None
        if not isinstance(trailer, dict) or not ({"_export", "error"} & trailer.keys()):
            if trailer is not None and text.endswith(b"\n"):
                piece = text  # a whole record, then the end of the stream without its trailer
            if piece:
                after = _cursor_of(piece, after)
                self._put(pieces, self._piece(piece, piece.count(b"\n"), after, False))
            return after, False
        if piece:
            after = _cursor_of(piece, after)
        if "error" in trailer:
            if piece:
                self._put(pieces, self._piece(piece, piece.count(b"\n"), after, False))
            raise _error_of_trailer(trailer)
        if trailer["_export"].get("pit_id"):
            with self._pit_lock:
                self.state.pit_id = trailer["_export"]["pit_id"]
        self._put(pieces, self._piece(piece, piece.count(b"\n"), after, True))
        return after, True

    def _error_of(self, status: int, body: bytes) -> TransferError:
        try:
            decoded = orjson.loads(body)
        except orjson.JSONDecodeError:
            decoded = body[:500].decode(errors="replace")
        if (
            status == 404
            and isinstance(decoded, dict)
            and "search_context_missing" in str(decoded.get("error"))
        ):
            return _pit_gone()
        return error_of("POST", "/_export", status, decoded)

    def _page_slice(self, slice_id: int, after: list[Any] | None, pieces: queue.Queue) -> None:
        """The slice as `search_after` pages of the PIT (a server without the streaming endpoint)."""
        while not self._stop.is_set():
            body = self._body(slice_id, after)
            body["size"] = self.plan.size
            body["track_total_hits"] = False
            status, response = self.client.request("POST", "/_search", body, allow=(404,))
            if status == 404:
                raise _pit_gone()
            with self._pit_lock:
                self.state.pit_id = response.get("pit_id", self.state.pit_id)
            hits = response["hits"]["hits"]
            if hits:
                after = hits[-1]["sort"]
            done = len(hits) < self.plan.size
            if not self._put(pieces, self._piece(_records(hits), len(hits), after, done)) or done:
                return

    # ---- writing --------------------------------------------------------------------------------

    def run(self) -> int:
        """Exports what is left; returns the number of documents written by this run. However it
        ends, no thread of it is left reading; the PIT is closed when the export is complete, or
        when it cannot be resumed (standard output)."""
        state, plan = self.state, self.plan
        names = plan.files()
        resumed = bool(state.offsets)
        outputs = [open_output(name, state.offsets[i] if resumed else None) for i, name in enumerate(names)]
        if not resumed:
            state.offsets = [0] * len(names)
        if plan.output != "-":
            save_state(state)
        queues: list[queue.Queue] = [queue.Queue(READ_AHEAD_PIECES) for _ in range(plan.slices)]
        self._compressors = ThreadPoolExecutor(os.cpu_count() or 1, "compress")  # pieces are independent
        readers = [
            threading.Thread(target=self._read_slice, args=(i, queues[i]), daemon=True, name=f"export-{i}")
            for i in range(plan.slices)
            if not state.done[i]
        ]
        for reader in readers:
            reader.start()
        written = 0
        complete = False
        try:
            with documents_bar(self.quiet) as bar:
                task = bar.add_task(
                    f"export {plan.index}",
                    total=state.total,
                    completed=sum(state.written),
                    base=sum(state.written),
                )
                while not all(state.done):
                    slice_id = state.turn
                    if state.done[slice_id]:
                        state.turn = (slice_id + 1) % plan.slices
                        continue
                    item = queues[slice_id].get()
                    if isinstance(item, _Failure):
                        raise item.error
                    data = item.data.result() if isinstance(item.data, Future) else item.data
                    file_id = slice_id if len(outputs) > 1 else 0
                    out = outputs[file_id]
                    if data:
                        out.write(data)
                        out.flush()
                    state.offsets[file_id] += len(data)
                    state.cursors[slice_id] = item.after
                    state.written[slice_id] += item.count
                    state.done[slice_id] = item.done
                    state.turn = (slice_id + 1) % plan.slices
                    if plan.output != "-":
                        save_state(state)
                    written += item.count
                    bar.update(task, advance=item.count, docs=sum(state.written))
            complete = True
        finally:
            self._stop.set()
            for reader in readers:
                reader.join(timeout=READER_JOIN_SECONDS)
            self._compressors.shutdown(wait=True, cancel_futures=True)
            for out in outputs:
                if out is not sys.stdout.buffer:
                    out.close()
            if complete or plan.output == "-":
                with contextlib.suppress(TransferError):
                    self.client.request("DELETE", "/_pit", {"id": state.pit_id}, allow=(400, 404))
        if plan.output != "-":
            os.remove(state_path(plan.output))
        return written


def _pit_gone() -> TransferError:
    return TransferError(
        "the export's point in time is gone (expired after --keep-alive, or the server "
        "restarted): start the export again without --resume",
        "search_context_missing_exception",
        404,
    )


def _cursor_of(piece: bytes, after: list[Any] | None) -> list[Any] | None:
    """The `sort` of a piece's last line (a streamed record), or `after` if it has none."""
    last = piece[piece.rfind(b"\n", 0, len(piece) - 1) + 1 :]
    return orjson.loads(last).get("sort", after)


def _error_of_trailer(trailer: Any) -> TransferError:
    error = trailer.get("error") if isinstance(trailer, dict) else None
    if isinstance(error, dict):
        if error.get("type") == "search_context_missing_exception":
            return _pit_gone()
        return TransferError(f"POST /_export: {error.get('type')}: {error.get('reason')}", error.get("type"))
    return TransferError(f"POST /_export: the stream ended with {str(trailer)[:300]}")


#: Index settings that describe one index's life, not how to build a copy of it.
_PRIVATE_SETTINGS = frozenset(
    {"uuid", "creation_date", "provided_name", "version", "history", "resize", "blocks"}
)


def write_definition(client: Client, index: str, path: str) -> None:
    """The index's settings and mappings as a create-index body in `path` (when INDEX names exactly
    one index: a pattern or a list has no single definition to copy)."""
    status, answer = client.request("GET", f"/{index}", allow=(404,))
    if status != 200 or not isinstance(answer, dict) or len(answer) != 1:
        return
    ((_, definition),) = answer.items()
    settings = dict((definition.get("settings") or {}).get("index") or {})
    for name in _PRIVATE_SETTINGS:
        settings.pop(name, None)
    body = {"settings": {"index": settings}, "mappings": definition.get("mappings") or {}}
    replace_file(path, orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")


def _records(hits: list[dict[str, Any]]) -> bytes:
    """A page of hits as NDJSON lines of `_index`, `_id`, `_routing` (if any) and `_source`."""
    lines = []
    for hit in hits:
        record = {"_index": hit["_index"], "_id": hit["_id"]}
        if "_routing" in hit:
            record["_routing"] = hit["_routing"]
        if "_source" in hit:
            record["_source"] = hit["_source"]
        lines.append(orjson.dumps(record))
    lines.append(b"")
    return b"\n".join(lines)


def parse_sort(text: str | None) -> list[Any] | None:
    """`--sort "@timestamp:desc,id"` as a search body's sort list (a JSON list is taken as is)."""
    if not text:
        return None
    if text.lstrip().startswith("["):
        return json.loads(text)
    sort: list[Any] = []
    for part in text.split(","):
        name, _, order = part.strip().rpartition(":") if ":" in part else (part.strip(), "", "")
        sort.append({name: order} if order else name)
    return sort


def parse_source(includes: str | None, excludes: str | None) -> Any:
    """`--source` / `--source-excludes` as a `_source` value (None: the whole source)."""
    if includes is not None and includes.lower() == "false":
        return False
    if includes is None and excludes is None:
        return None
    value: dict[str, list[str]] = {}
    if includes:
        value["includes"] = [f.strip() for f in includes.split(",") if f.strip()]
    if excludes:
        value["excludes"] = [f.strip() for f in excludes.split(",") if f.strip()]
    return value
