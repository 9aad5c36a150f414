"""`_delete_by_query`, `_update_by_query` and `_reindex`: a search over one snapshot, then bulk
writes in batches, each checked against the version that was read.

- **One snapshot**: the source's shard snapshots are acquired once, as a PIT would hold them, and
  every slice and batch reads them; documents written after the operation started are never
  touched, and documents changed meanwhile are found out by the write.
- **Optimistic writes**: each delete or re-index carries `if_seq_no`/`if_primary_term` of what
  was read, so a document changed since the snapshot is a version conflict: counted in
  `version_conflicts`, and with `conflicts=abort` (the default) listed in `failures` and the end of
  the operation (409). A reindex overwrites its destination (`version_type: internal`), or with
  `op_type: create` counts existing documents as conflicts.
- **Writes go through `Node.bulk`**: the same parsing, version checks, group commit and fsync as
  a client's `_bulk`, one request per batch.
- **Slices** (`slices=N|auto`) are sliced walks of the same snapshot (`_id` hashed, or shards
  first when there are enough of them, as a sliced scroll), each on its own thread and child task;
  `max_docs` is shared out among them as Elasticsearch shares it.
- **Throttling** (`requests_per_second`) waits after each batch until `batch size / rate` seconds
  have passed since the batch started; the wait ends early on cancel or a rethrottle.
- **Cancellation** is checked between batches; the answer then says `canceled`.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.errors import ActionRequestValidation
from leafsearch.request.search_types import SliceSpec
from leafsearch.scripts.service import Script
from leafsearch.search import phases, top_hits
from leafsearch.search.shard_api import ShardContextId
from leafsearch.search.stored_scripts import resolve_stored_scripts
from leafsearch.search.targets import Target, release_targets
from leafsearch.search.terms_lookup import resolve_lookups
from leafsearch.write import by_query_source, documents
from leafsearch.write.by_query_request import DELETE, REINDEX, UPDATE, BulkByQuery

if TYPE_CHECKING:
    from leafsearch.services.tasks import Task
    from leafsearch.write.services import WriteServices


@dataclass
class Progress:
    """The counts of one slice (or of an unsliced operation), as its task status shows them."""

    slice_id: int | None
    requests_per_second: float
    total: int = 0
    updated: int = 0
    created: int = 0
    deleted: int = 0
    batches: int = 0
    version_conflicts: int = 0
    noops: int = 0
    throttled: float = 0.0  # seconds spent waiting
    throttled_until: float = 0.0  # monotonic end of the wait in progress, 0 when not waiting
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def successful(self) -> int:
        return self.updated + self.created + self.deleted

    def status(self, *, created: bool = True, updated: bool = True) -> dict[str, Any]:
        body: dict[str, Any] = {} if self.slice_id is None else {"slice_id": self.slice_id}
        body["total"] = self.total
        if updated:
            body["updated"] = self.updated
        if created:
            body["created"] = self.created
        body |= {
            "deleted": self.deleted,
            "batches": self.batches,
            "version_conflicts": self.version_conflicts,
            "noops": self.noops,
            "retries": {"bulk": 0, "search": 0},
            "throttled_millis": int(self.throttled * 1000),
            "requests_per_second": _rate(self.requests_per_second),
            "throttled_until_millis": max(0, int((self.throttled_until - time.monotonic()) * 1000))
            if self.throttled_until
            else 0,
        }
        return body


def _rate(value: float) -> float:
    return -1.0 if math.isinf(value) else float(value)


@dataclass
class Operation:
    """A running operation: its request, its task and the progress of each slice."""

    request: BulkByQuery
    task: Task
    slices: list[Progress] = field(default_factory=list)
    #: The request's script, compiled before the operation starts (a compile error is its 400).
    script: Script | None = None

    def status(self, *, created: bool = True, updated: bool = True) -> dict[str, Any]:
        """The task status: one slice's counts, or the sum of the slices and each of them."""
        if len(self.slices) == 1 and self.slices[0].slice_id is None:
            body = self.slices[0].status(created=created, updated=updated)
        else:
            body = _merged(self.slices, created=created, updated=updated)
        if self.task.cancel_reason is not None:
            body = _with_canceled(body, self.task.cancel_reason)
        return body

    def rethrottle(self, rate: float) -> None:
        """A new rate, shared among the slices; waits in progress are woken to recompute."""
        self.request.requests_per_second = rate
        share = rate / max(1, len(self.slices))
        for progress in self.slices:
            progress.requests_per_second = share
        for task in [self.task, *self.task.children]:
            with task.wakeup:
                task.wakeup.notify_all()


def _with_canceled(body: dict[str, Any], reason: str) -> dict[str, Any]:
    """`canceled` comes right after `requests_per_second`, where Elasticsearch writes it."""
    out: dict[str, Any] = {}
    for key, value in body.items():
        out[key] = value
        if key == "requests_per_second":
            out["canceled"] = reason
    return out


def _merged(slices: list[Progress], *, created: bool, updated: bool) -> dict[str, Any]:
    parts = [p.status(created=created, updated=updated) for p in slices]
    body: dict[str, Any] = {}
    for key in parts[0]:
        if key == "slice_id":
            continue
        if key == "retries":
            body[key] = {"bulk": 0, "search": 0}
        elif key == "requests_per_second":
            rates = [p.requests_per_second for p in slices]
            body[key] = _rate(sum(rates))
        elif key == "throttled_until_millis":
            body[key] = min((p[key] for p in parts), default=0)
        else:
            body[key] = sum(p[key] for p in parts)
    body["slices"] = parts
    return body


def start(services: WriteServices, request: BulkByQuery) -> Operation:
    """Register the operation's task (running from now on, visible in `GET /_tasks`)."""
    script = services.scripts.parse(request.script) if request.script is not None else None
    operation = Operation(request, None, [Progress(None, request.requests_per_second)], script)  # type: ignore[arg-type]
    operation.task = services.tasks.register(request.action, request.description(), status=operation.status)
    operation.task.rethrottle = operation.rethrottle
    return operation


def run(services: WriteServices, operation: Operation) -> dict[str, Any]:
    """Run the operation to its end (or its cancellation) and answer its response body."""
    started = time.perf_counter()
    request = operation.request
    targets = phases.resolve_targets(services.search, request.search)
    contexts = None
    try:
        if request.dest is not None:
            _check_dest(targets, request)
        slices = request.slices or _auto_slices(targets)
        if request.max_docs is not None and request.max_docs < slices:
            raise ActionRequestValidation("[max_docs] should be >= [slices]")
        rate = request.requests_per_second / slices
        if by_query_source.walks_on_contexts(targets):
            contexts = top_hits.open_shard_contexts(services.search, targets)
        if slices == 1:
            operation.slices = [Progress(None, rate)]
            _run_slice(
                services,
                operation,
                targets,
                contexts,
                operation.slices[0],
                None,
                request.max_docs,
                operation.task,
            )
        else:
            operation.slices = [Progress(i, rate) for i in range(slices)]
            _run_slices(services, operation, targets, contexts, slices)
    finally:
        if contexts is not None:
            top_hits.free_shard_contexts(services.search, targets, contexts)
        release_targets(targets)
    if request.refresh:
        _refresh(services, request, targets)
    created = request.kind == REINDEX
    updated = request.kind != DELETE
    # The walk is a scroll's, which has no timeout (`search_timeout` is accepted, as a scroll's is)
    body = {"took": int((time.perf_counter() - started) * 1000), "timed_out": False}
    body |= operation.status(created=created, updated=updated)
    body["failures"] = [f for p in operation.slices for f in p.failures]
    return body


def response_status(body: dict[str, Any]) -> int:
    """The HTTP status of a finished operation: the highest of its failures' (409 for a version
    conflict), 200 when none, as Elasticsearch's BulkIndexByScrollResponseContentListener."""
    return max([200] + [f.get("status", 500) for f in body["failures"]])


def _auto_slices(targets: list[Target]) -> int:
    """`slices=auto`: one per shard of the source index, the fewest shards among several."""
    shards: dict[str, int] = {}
    for t in targets:
        shards[t.index.uuid] = len(t.index.shards)
    return min(shards.values(), default=1)


def _check_dest(targets: list[Target], request: BulkByQuery) -> None:
    assert request.dest is not None
    if any(t.index.name == request.dest.index for t in targets):
        raise ActionRequestValidation(
            f"reindex cannot write into an index its reading from [{request.dest.index}]"
        )


def _run_slices(
    services: WriteServices,
    operation: Operation,
    targets: list[Target],
    contexts: list[ShardContextId] | None,
    slices: int,
) -> None:
    """Each slice on its own thread, as a child task of the operation's task."""
    request = operation.request
    children = [
        services.tasks.register(request.action, request.description(), parent=operation.task, status=p.status)
        for p in operation.slices
    ]
    with ThreadPoolExecutor(slices, thread_name_prefix="leafsearch-slice") as pool:
        futures = []
        for i, (progress, child) in enumerate(zip(operation.slices, children, strict=True)):
            limit = None
            if request.max_docs is not None:
                limit = request.max_docs // slices + (1 if i < request.max_docs % slices else 0)
            futures.append(
                pool.submit(
                    services.tasks.run,
                    child,
                    lambda p=progress, c=child, s=SliceSpec(i, slices), n=limit: _slice_result(
                        services, operation, targets, contexts, p, s, n, c
                    ),
                    store=False,
                )
            )
        for future in futures:
            future.result()


def _slice_result(
    services: WriteServices,
    operation: Operation,
    targets: list[Target],
    contexts: list[ShardContextId] | None,
    progress: Progress,
    spec: SliceSpec,
    limit: int | None,
    task: Task,
) -> dict[str, Any]:
    _run_slice(services, operation, targets, contexts, progress, spec, limit, task)
    return progress.status()


def _run_slice(
    services: WriteServices,
    operation: Operation,
    targets: list[Target],
    contexts: list[ShardContextId] | None,
    progress: Progress,
    spec: SliceSpec | None,
    limit: int | None,
    task: Task,
) -> None:
    """Walk one slice's matches in batches (by_query_source.py: on `contexts`, the shard contexts
    pinned for the operation, when its source has shard actors) and write each batch; stop at
    `limit` successful writes, at the first failure with `conflicts=abort`, at a shard's search
    failure, or when the task is cancelled."""
    request = operation.request
    search = replace(request.search, slice=spec, size=request.batch_size)
    source = by_query_source.batches(services, targets, contexts, search, task.cancelled)
    progress.total = source.total if limit is None else min(source.total, limit)
    while not source.exhausted and not task.cancelled.is_set():
        wanted = request.batch_size if limit is None else min(request.batch_size, limit - progress.successful)
        if wanted <= 0:
            break
        batch_started = time.monotonic()
        page = source.next(wanted)
        if source.failures:  # a shard failed: the operation ends with its search failures
            progress.failures.extend(source.failures)
            break
        if not page:
            break
        progress.batches += 1
        if _write_batch(services, request, page, progress, operation.script):
            break
        if not source.exhausted:
            _throttle(progress, task, batch_started, len(page))


def _throttle(progress: Progress, task: Task, batch_started: float, batch_docs: int) -> None:
    """Wait until the batch's share of time at `requests_per_second` has passed since it started;
    a cancel or a rethrottle wakes the wait, which then recomputes its end."""
    with task.wakeup:
        while not task.cancelled.is_set():
            rate = progress.requests_per_second
            if math.isinf(rate):
                break
            until = batch_started + batch_docs / rate
            now = time.monotonic()
            if now >= until:
                break
            progress.throttled_until = until
            task.wakeup.wait(until - now)
            progress.throttled += time.monotonic() - now
        progress.throttled_until = 0.0


def _write_batch(
    services: WriteServices,
    request: BulkByQuery,
    page: list[dict[str, Any]],
    progress: Progress,
    script: Script | None = None,
) -> bool:
    """One bulk request for the batch; counts its items. True when the operation must stop."""
    if not page:
        return False
    lines = []
    dumps = orjson.dumps
    for hit in page:
        action, source = (
            _bulk_action(request, hit) if script is None else _scripted_action(request, hit, script)
        )
        if action is None:  # the script chose `noop`
            progress.noops += 1
            continue
        lines.append(dumps(action))
        if source is not None:
            lines.append(source)
    if not lines:
        return False
    result = documents.bulk(
        services, b"\n".join(lines) + b"\n", wait_for_active_shards=request.wait_for_active_shards
    )
    stop = False
    for item in result["items"]:
        ((kind, outcome),) = item.items()
        error = outcome.get("error")
        if error is None:
            answer = outcome["result"]
            if answer == "deleted":
                progress.deleted += 1
            elif answer == "created":
                progress.created += 1
            elif answer == "updated":
                progress.updated += 1
            else:
                progress.noops += 1
            continue
        conflict = outcome["status"] == 409
        if conflict:
            progress.version_conflicts += 1
            if not request.abort_on_conflict:
                continue
        progress.failures.append(
            {
                "index": outcome.get("_index"),
                "id": outcome.get("_id"),
                "cause": error,
                "status": outcome["status"],
            }
        )
        stop = True
    return stop


def _bulk_action(request: BulkByQuery, hit: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    """The bulk action line of one read document, and the source line to write (none to delete)."""
    meta: dict[str, Any] = {"_index": hit["_index"], "_id": hit["_id"]}
    routing = hit.get("_routing")
    if request.kind == REINDEX:
        assert request.dest is not None
        meta["_index"] = request.dest.index
        rule = request.dest.routing
        routing = None if rule == "discard" else rule[1:] if rule.startswith("=") else routing
        kind = request.dest.op_type
    else:
        meta["if_seq_no"] = hit["_seq_no"]
        meta["if_primary_term"] = hit["_primary_term"]
        kind = "delete" if request.kind == DELETE else "index"
    if routing is not None:
        meta["routing"] = routing
    if kind == "delete":
        return {kind: meta}, None
    source = hit["_source"].data
    if b"\n" in source or b"\r" in source:  # a bulk body holds each source on one line
        source = orjson.dumps(orjson.loads(source))
    return {kind: meta}, source


def _scripted_action(
    request: BulkByQuery, hit: dict[str, Any], script: Script
) -> tuple[dict[str, Any] | None, bytes | None]:
    """`_bulk_action` after the script ran on the document's `ctx`: `ctx._source` is what is
    written, `ctx.op` may be `noop` (nothing: None) or `delete`; in a reindex the script may also
    change `ctx._index`, `ctx._id` and `ctx._routing`."""
    action, source = _bulk_action(request, hit)
    ((kind, meta),) = action.items()
    ctx = {
        "_source": orjson.loads(hit["_source"].data),
        "op": "index" if request.kind == UPDATE else kind,
        "_index": meta["_index"],  # a reindex's destination, as the request being built has it
        "_id": hit["_id"],
        "_routing": meta.get("routing"),
        "_version": hit.get("_version"),
        "_now": int(time.time() * 1000),
    }
    op = script.update(ctx)
    if op in ("noop", "none"):
        return None, None
    if request.kind == REINDEX:
        meta = {**meta, "_index": ctx["_index"], "_id": ctx["_id"]}
        meta.pop("routing", None)
        if ctx.get("_routing") is not None:
            meta["routing"] = ctx["_routing"]
    if op == "delete":
        return {"delete": meta}, None
    return {kind: meta}, orjson.dumps(ctx["_source"])


def _refresh(services: WriteServices, request: BulkByQuery, targets: list[Target]) -> None:
    """`refresh=true`: every index written is refreshed once the operation ends."""
    if request.kind == REINDEX:
        assert request.dest is not None
        index = services.indices.get(request.dest.index)
        indices = [index] if index is not None else []
    else:
        indices = list({id(t.index): t.index for t in targets}.values())
    for index in indices:
        index.refresh()


def execute(
    services: WriteServices, request: BulkByQuery, *, wait_for_completion: bool = True
) -> dict[str, Any]:
    """Run a parsed by-query operation as a task: to its end (its response body), or in the
        background (`{"task": "<node>:<n>"}`, its result kept for `GET /_tasks/<id>`). A terms lookup
        of its query is read here, as the caller, before the task runs (search/terms_lookup.py), and so
    are the stored scripts its query names (search/stored_scripts.py)."""
    search = resolve_stored_scripts(services.search.stored_script, request.search)
    request.search = resolve_lookups(services.search, search)
    operation = start(services, request)
    if not wait_for_completion:
        services.tasks.start(operation.task, lambda: run(services, operation))
        return {"task": operation.task.task_id}
    return services.tasks.run(operation.task, lambda: run(services, operation), store=False)
