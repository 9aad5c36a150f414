"""`leafsearch import`: NDJSON into an index through parallel `_bulk` requests.

The file holds either Elasticsearch's `_bulk` format (action lines, each but `delete` followed by
its source) or one document per line: a plain source, or a record as `leafsearch export` and
elasticdump write it (`{"_id", "_source", ...}`: indexed under its `_id`, with its `_routing`). The
first line decides which. Documents go to INDEX whatever `_index` the file names.

Every item the server refuses (and every line that is not JSON) is counted by error type, written
to the errors file with its line number, and makes the command exit with status 1. A whole bulk
request refused with 429 is retried with a growing pause, as the official clients' helpers do."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from leafsearch.transfer.client import Client, TransferError
from leafsearch.transfer.files import open_input
from leafsearch.transfer.progress import bytes_bar

ACTIONS = ("index", "create", "update", "delete")
RECORD_KEYS = frozenset({"_index", "_id", "_source", "_routing", "_type", "_score", "sort"})
RETRIES_ON_429 = 5
_PLAIN_ACTION = b'{"index":{}}'


@dataclass
class _Chunk:
    """One bulk request's body and, for each of its items, the file line and action it came from."""

    lines: list[bytes] = field(default_factory=list)
    items: list[tuple[int, str, Any]] = field(default_factory=list)
    size: int = 0

    def add(self, line_no: int, kind: str, doc_id: Any, action: bytes, source: bytes | None) -> None:
        self.lines.append(action)
        self.size += len(action) + 1
        if source is not None:
            self.lines.append(source)
            self.size += len(source) + 1
        self.items.append((line_no, kind, doc_id))


@dataclass
class ImportResult:
    """What an import did: items indexed, items failed, failures by error type (count, first reason)."""

    succeeded: int = 0
    failed: int = 0
    by_type: dict[str, list[Any]] = field(default_factory=dict)
    errors_file: str | None = None

    def summary(self) -> str:
        lines = [f"{self.succeeded:,} items imported, {self.failed:,} failed"]
        for error_type, (count, reason) in sorted(self.by_type.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"  {count:,} x {error_type}: {reason}")
        if self.errors_file and self.failed:
            lines.append(f"each failure is in {self.errors_file}")
        return "\n".join(lines)


class _Failures:
    """Failed items, counted and written to the errors file (opened at the first failure)."""

    def __init__(self, path: str, result: ImportResult) -> None:
        self.path = path
        self.result = result
        self.lock = threading.Lock()
        self.handle: IO[bytes] | None = None

    def add(self, line_no: int, kind: str, doc_id: Any, status: int, error: Any) -> None:
        error_type = error.get("type", "error") if isinstance(error, dict) else "error"
        reason = error.get("reason") if isinstance(error, dict) else str(error)
        with self.lock:
            if self.handle is None:
                self.handle = open(self.path, "wb")  # noqa: SIM115 - closed by close()
                self.result.errors_file = self.path
            record = {"line": line_no, "action": kind, "_id": doc_id, "status": status, "error": error}
            self.handle.write(orjson.dumps(record) + b"\n")
            self.result.failed += 1
            entry = self.result.by_type.setdefault(error_type, [0, reason])
            entry[0] += 1

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


def _chunks(reader: IO[bytes], failures: _Failures, chunk_docs: int, chunk_bytes: int) -> Iterator[_Chunk]:
    """The file's items grouped into bulk bodies of at most `chunk_docs` items / ~`chunk_bytes`."""
    chunk = _Chunk()
    bulk_format: bool | None = None
    pending: tuple[int, str, Any, bytes] | None = None  # an action line waiting for its source
    for line_no, raw in enumerate(reader, 1):
        line = raw.strip()
        if not line:
            continue
        if pending is not None:
            chunk.add(pending[0], pending[1], pending[2], pending[3], line)
            pending = None
        else:
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                failures.add(line_no, "index", None, 400, {"type": "parse_exception", "reason": str(exc)})
                continue
            if bulk_format is None:
                bulk_format = _is_action(obj)
            if bulk_format:
                if not _is_action(obj):
                    reason = f"line [{line_no}] is not a bulk action ({', '.join(ACTIONS)})"
                    failures.add(
                        line_no, "index", None, 400, {"type": "illegal_argument_exception", "reason": reason}
                    )
                    continue
                ((kind, meta),) = obj.items()
                meta.pop("_index", None)
                action = orjson.dumps({kind: meta})
                if kind == "delete":
                    chunk.add(line_no, kind, meta.get("_id"), action, None)
                else:
                    pending = (line_no, kind, meta.get("_id"), action)
                    continue
            elif isinstance(obj, dict) and "_source" in obj and obj.keys() <= RECORD_KEYS:
                meta = {}
                if "_id" in obj:
                    meta["_id"] = obj["_id"]
                if obj.get("_routing") is not None:
                    meta["routing"] = obj["_routing"]
                chunk.add(
                    line_no,
                    "index",
                    meta.get("_id"),
                    orjson.dumps({"index": meta}),
                    orjson.dumps(obj["_source"]),
                )
            else:
                chunk.add(line_no, "index", None, _PLAIN_ACTION, line)
        if len(chunk.items) >= chunk_docs or chunk.size >= chunk_bytes:
            yield chunk
            chunk = _Chunk()
    if pending is not None:
        reason = f"the action on line [{pending[0]}] has no source line"
        failures.add(
            pending[0], pending[1], pending[2], 400, {"type": "illegal_argument_exception", "reason": reason}
        )
    if chunk.items:
        yield chunk


def _is_action(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and len(obj) == 1
        and next(iter(obj)) in ACTIONS
        and isinstance(next(iter(obj.values())), dict)
    )


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

    def run(self, path: str) -> ImportResult:
        result = ImportResult()
        failures = _Failures(self.errors_path, result)
        reader, counter, size = open_input(path)
        in_flight = threading.BoundedSemaphore(self.workers * 2)
        lock = threading.Lock()
        broken: list[BaseException] = []  # a request that failed as a whole (transport, bad answer)
        try:
            with bytes_bar(self.quiet) as bar, ThreadPoolExecutor(self.workers) as pool:
                task = bar.add_task(f"import {self.index}", total=size, docs=0)

                def sent(future: Future) -> None:
                    in_flight.release()
                    if future.exception() is not None:
                        broken.append(future.exception())  # type: ignore[arg-type]
                        return
                    with lock:
                        result.succeeded += future.result()
                        done = result.succeeded + result.failed
                    bar.update(task, completed=counter.consumed, docs=done)

                for chunk in _chunks(reader, failures, self.chunk_docs, self.chunk_bytes):
                    in_flight.acquire()
                    if broken:
                        break
                    pool.submit(self._send, chunk, failures).add_done_callback(sent)
            if broken:
                raise broken[0]
        finally:
            failures.close()
            reader.close()
        self.client.request("POST", f"/{self.index}/_refresh", allow=(404,))
        return result

    def _send(self, chunk: _Chunk, failures: _Failures) -> int:
        """One bulk request; failed items go to `failures`. Returns the items that succeeded."""
        body = b"\n".join(chunk.lines) + b"\n"
        for attempt in range(RETRIES_ON_429 + 1):
            status, response = self.client.request(
                "POST", f"/{self.index}/_bulk", ndjson=body, allow=(400, 403, 404, 413, 429, 500, 503)
            )
            if status != 429 or attempt == RETRIES_ON_429:
                break
            time.sleep(0.5 * 2**attempt)
        if status >= 400:
            error = response.get("error") if isinstance(response, dict) else response
            for line_no, kind, doc_id in chunk.items:
                failures.add(line_no, kind, doc_id, status, error)
            return 0
        if not response.get("errors"):
            return len(chunk.items)
        ok = 0
        for (line_no, kind, doc_id), item in zip(chunk.items, response["items"], strict=True):
            ((_, outcome),) = item.items()
            if "error" in outcome:
                failures.add(
                    line_no, kind, outcome.get("_id", doc_id), outcome.get("status", 0), outcome["error"]
                )
            else:
                ok += 1
        return ok


def load_definition(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            definition = orjson.loads(handle.read())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TransferError(f"--mapping {path}: {exc}") from None
    if not isinstance(definition, dict):
        raise TransferError(f"--mapping {path}: expected a JSON object")
    return definition
