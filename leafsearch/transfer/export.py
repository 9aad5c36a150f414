"""`leafsearch export`: every document of an index (or those of a query) to NDJSON.

Each output line is `{"_index", "_id", "_source"}` (plus `_routing` when the hit has one), the
format elasticdump writes, so files go both ways between the two tools.

**How it reads.** A point in time (PIT) is opened on the index, and pages are read with
`search_after` sorted by `_shard_doc` (or the sort given, which a PIT search ends with an implicit
`_shard_doc` tiebreaker): the PIT is a frozen snapshot, so writes made meanwhile neither add nor
remove nor repeat documents, and the sort values of a page's last hit are a complete cursor. With
`--slices N` the PIT is read as N slices by N threads; pages go to one file in a fixed round-robin
order (slice 0's page, slice 1's page, ...) or to N files (`--split`).

**What resuming means.** After each page is written (and flushed), the state file next to the
output records the PIT id, each slice's cursor (its last sort values, or done) and each file's
length. `--resume` cuts the files back to those lengths (compressed files are written one
gzip member or zstd frame per page, so any recorded length ends a whole frame) and continues every
slice from its cursor in the same PIT: nothing is missed or written twice, because the cursor is
only ever read against the snapshot it came from. Continuing on a *new* PIT would not have that
guarantee: `_shard_doc` values belong to one snapshot (a refresh or merge renumbers documents), and
even a sort on a unique field would then see documents written or deleted after the export began.
So the PIT is opened with a long keep-alive (`--keep-alive`, default 1h) and a resume is possible
while it lives; once it has expired (or the server restarted) `--resume` says so and the export
must start again.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from leafsearch.transfer.client import Client, TransferError
from leafsearch.transfer.files import compress_chunk, compression_of, open_output
from leafsearch.transfer.progress import documents_bar

STATE_VERSION = 1
#: Pages a slice's reader may have ready ahead of the writer.
READ_AHEAD_PAGES = 4


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
    if raw.get("version") != STATE_VERSION:
        raise TransferError(f"[{path}] was written by another version of leafsearch export")
    raw["plan"] = ExportPlan(**raw["plan"])
    return ExportState(**raw)


def save_state(state: ExportState) -> None:
    """Written to a temporary file then renamed, so a kill leaves the old state or the new one."""
    path = state_path(state.plan.output)
    temporary = path + ".tmp"
    with open(temporary, "wb") as handle:
        handle.write(orjson.dumps(asdict(state)))
    os.replace(temporary, path)


@dataclass
class _Page:
    data: bytes
    count: int
    after: list[Any] | None
    done: bool


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


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

    @classmethod
    def start(cls, client: Client, plan: ExportPlan, *, quiet: bool = False) -> Exporter:
        """A new export: counts the documents (for the progress bar) and opens the PIT."""
        count_body = {"query": plan.query} if plan.query is not None else None
        _, counted = client.request("POST", f"/{plan.index}/_count", count_body)
        _, opened = client.request("POST", f"/{plan.index}/_pit", params={"keep_alive": plan.keep_alive})
        n = plan.slices
        state = ExportState(plan, opened["id"], counted.get("count"), [None] * n, [False] * n, [0] * n, [])
        return cls(client, state, quiet=quiet)

    # ---- reading --------------------------------------------------------------------------------

    def _page_body(self, slice_id: int) -> dict[str, Any]:
        plan = self.plan
        body: dict[str, Any] = {
            "size": plan.size,
            "pit": {"id": self.state.pit_id, "keep_alive": plan.keep_alive},
            "sort": plan.sort if plan.sort else ["_shard_doc"],
            "track_total_hits": False,
        }
        if plan.query is not None:
            body["query"] = plan.query
        if plan.source is not None:
            body["_source"] = plan.source
        if plan.slices > 1:
            body["slice"] = {"id": slice_id, "max": plan.slices}
        return body

    def _read_slice(self, slice_id: int, pages: queue.Queue) -> None:
        """Reads slice `slice_id` page after page into `pages` until it is done or the export stops."""
        after = self.state.cursors[slice_id]
        try:
            while not self._stop.is_set():
                body = self._page_body(slice_id)
                if after is not None:
                    body["search_after"] = after
                status, response = self.client.request("POST", "/_search", body, allow=(404,))
                if status == 404:
                    raise TransferError(
                        "the export's point in time is gone (expired after --keep-alive, or the server "
                        "restarted): start the export again without --resume",
                        "search_context_missing_exception",
                        404,
                    )
                with self._pit_lock:
                    self.state.pit_id = response.get("pit_id", self.state.pit_id)
                hits = response["hits"]["hits"]
                if hits:
                    after = hits[-1]["sort"]
                done = len(hits) < self.plan.size
                pages.put(_Page(compress_chunk(_records(hits), self.compression), len(hits), after, done))
                if done:
                    return
        except BaseException as exc:  # handed to the writer, which stops the export with it
            pages.put(_Failure(exc))

    # ---- writing --------------------------------------------------------------------------------

    def run(self) -> int:
        """Exports what is left; returns the number of documents written by this run."""
        state, plan = self.state, self.plan
        names = plan.files()
        resumed = bool(state.offsets)
        outputs = [open_output(name, state.offsets[i] if resumed else None) for i, name in enumerate(names)]
        if not resumed:
            state.offsets = [0] * len(names)
        if plan.output != "-":
            save_state(state)
        queues = [queue.Queue(READ_AHEAD_PAGES) for _ in range(plan.slices)]
        readers = [
            threading.Thread(target=self._read_slice, args=(i, queues[i]), daemon=True, name=f"export-{i}")
            for i in range(plan.slices)
            if not state.done[i]
        ]
        for reader in readers:
            reader.start()
        written = 0
        try:
            with documents_bar(self.quiet) as bar:
                task = bar.add_task(f"export {plan.index}", total=state.total, completed=sum(state.written))
                while not all(state.done):
                    slice_id = state.turn
                    if state.done[slice_id]:
                        state.turn = (slice_id + 1) % plan.slices
                        continue
                    item = queues[slice_id].get()
                    if isinstance(item, _Failure):
                        raise item.error
                    file_id = slice_id if len(outputs) > 1 else 0
                    out = outputs[file_id]
                    if item.data:
                        out.write(item.data)
                        out.flush()
                    state.offsets[file_id] += len(item.data)
                    state.cursors[slice_id] = item.after
                    state.written[slice_id] += item.count
                    state.done[slice_id] = item.done
                    state.turn = (slice_id + 1) % plan.slices
                    if plan.output != "-":
                        save_state(state)
                    written += item.count
                    bar.update(task, advance=item.count, docs=sum(state.written))
        finally:
            self._stop.set()
            for out in outputs:
                if out is not sys.stdout.buffer:
                    out.close()
        self.client.request("DELETE", "/_pit", {"id": state.pit_id}, allow=(404,))
        if plan.output != "-":
            os.remove(state_path(plan.output))
        return written


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
