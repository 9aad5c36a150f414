"""The node's task registry: long operations that can be listed, followed, cancelled and awaited.

`_delete_by_query`, `_update_by_query` and `_reindex` run as tasks (their slices as child tasks).
With `wait_for_completion=false` the REST layer answers `{"task": "<node>:<n>"}` at once and the
operation runs on its own thread; `GET /_tasks/<id>` reports its status while it runs and its
response (or error) once it is done. Elasticsearch stores finished results in the `.tasks` index;
leafsearch keeps them in memory, at most `MAX_RESULTS` of them and each for `RESULT_TTL` seconds
of the node's clock (oldest dropped first), so a node that runs many tasks holds a bounded amount.
Results do not survive a restart.
"""

from __future__ import annotations

import fnmatch
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leafsearch.errors import ElasticError, IllegalArgument, ResourceNotFound
from leafsearch.security.subject import current

_log = logging.getLogger("leafsearch.services.tasks")

#: How many finished task results the node keeps, and for how long (seconds).
MAX_RESULTS = 1000
RESULT_TTL = 24 * 3600.0
#: The reason a `_cancel` request gives, as Elasticsearch's REST layer gives it.
USER_CANCEL = "by user request"


@dataclass(eq=False)
class Task:
    """One running operation. `status` is a callable so that listing a task reads its progress
    at that moment; `cancelled` is what the operation checks between batches."""

    node_id: str
    id: int
    action: str
    description: str
    status: Callable[[], dict[str, Any]] | None = None
    parent: Task | None = None
    start_millis: int = field(default_factory=lambda: int(time.time() * 1000))
    start_ns: int = field(default_factory=time.monotonic_ns)
    cancelled: threading.Event = field(default_factory=threading.Event)
    cancel_reason: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    children: list[Task] = field(default_factory=list)
    #: Woken when the task is cancelled or rethrottled, so a throttle wait ends early.
    wakeup: threading.Condition = field(default_factory=threading.Condition)
    rethrottle: Callable[[float], None] | None = None
    #: Who started it (`Subject.owner_key`); only they and superusers see or cancel it.
    owner: str | None = None

    @property
    def task_id(self) -> str:
        return f"{self.node_id}:{self.id}"

    def cancel(self, reason: str) -> None:
        """Mark the task and its children cancelled; the operation stops at its next check."""
        if self.cancel_reason is None:
            self.cancel_reason = reason
        self.cancelled.set()
        with self.wakeup:
            self.wakeup.notify_all()
        for child in list(self.children):
            child.cancel(reason)

    def info(self, *, detailed: bool = True) -> dict[str, Any]:
        """Elasticsearch's TaskInfo; `status` and `description` only when detailed."""
        body: dict[str, Any] = {
            "node": self.node_id,
            "id": self.id,
            "type": "transport",
            "action": self.action,
        }
        if detailed:
            if self.status is not None:
                body["status"] = self.status()
            body["description"] = self.description
        body["start_time_in_millis"] = self.start_millis
        body["running_time_in_nanos"] = time.monotonic_ns() - self.start_ns
        body["cancellable"] = True
        body["cancelled"] = self.cancelled.is_set()
        if self.parent is not None:
            body["parent_task_id"] = self.parent.task_id
        body["headers"] = {}
        return body


@dataclass
class _Result:
    """A finished task: its last info and its response or error body, kept until `expires`."""

    info: dict[str, Any]
    response: dict[str, Any] | None
    error: dict[str, Any] | None
    expires: float
    owner: str | None


def _visible(owner: str | None) -> bool:
    """Whether the caller of the request in progress may see a task: a task belongs to whoever
    started it, as a reader context belongs to its opener; superusers (and in-process callers,
    and everyone when security is off) see all."""
    subject = current()
    return subject is None or subject.superuser or owner == subject.owner_key


class TaskManager:
    """The node's running tasks and its finished results (bounded, in memory)."""

    def __init__(self, node_id: str, clock: Callable[[], float], node_header: dict[str, Any]) -> None:
        """`clock`: the node's monotonic seconds (finished results expire on it); `node_header`:
        the node's identity as `GET /_tasks?group_by=nodes` shows it (node/stats.py)."""
        self._node_id = node_id
        self._clock = clock
        self._node_header = node_header
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._running: dict[int, Task] = {}
        self._results: OrderedDict[int, _Result] = OrderedDict()

    def register(
        self,
        action: str,
        description: str,
        *,
        parent: Task | None = None,
        status: Callable[[], dict[str, Any]] | None = None,
    ) -> Task:
        task = Task(self._node_id, next(self._ids), action, description, status, parent)
        subject = current()
        task.owner = subject.owner_key if subject is not None else None
        with self._lock:
            self._running[task.id] = task
        if parent is not None:
            parent.children.append(task)
            if parent.cancelled.is_set():
                task.cancel(parent.cancel_reason or USER_CANCEL)
        return task

    def unregister(self, task: Task) -> None:
        with self._lock:
            self._running.pop(task.id, None)
        task.done.set()

    def run(self, task: Task, work: Callable[[], dict[str, Any]], *, store: bool) -> dict[str, Any]:
        """Run `work` as `task` on this thread; with `store` keep its response or error for
        `GET /_tasks/<id>`. The task leaves the running list when `work` ends, either way."""
        try:
            response = work()
        except ElasticError as exc:
            if store:
                self._store(task, None, exc.body()["error"])
            raise
        except Exception as exc:
            if store:
                error = ElasticError(f"an unexpected [{type(exc).__name__}] failed this task")
                self._store(task, None, error.body()["error"])
            raise
        else:
            if store:
                self._store(task, response, None)
            return response
        finally:
            self.unregister(task)

    def start(self, task: Task, work: Callable[[], dict[str, Any]]) -> None:
        """Run `work` on its own thread; its result is stored (`wait_for_completion=false`)."""

        def body() -> None:
            try:
                self.run(task, work, store=True)
            except ElasticError:
                pass  # stored as the task's error: nobody else is waiting for it
            except Exception:  # stored too, without its text; the log has the details
                _log.exception("task [%s] failed", task.task_id)

        threading.Thread(target=body, name=f"leafsearch-task-{task.id}", daemon=True).start()

    def close(self, timeout: float = 60.0) -> None:
        """Cancel every running task and wait (at most `timeout` seconds) for them to stop, so
        none writes into an index the node is closing."""
        with self._lock:
            tasks = list(self._running.values())
        for task in tasks:
            task.cancel("node is closing")
        deadline = time.monotonic() + timeout
        for task in tasks:
            task.done.wait(max(0.0, deadline - time.monotonic()))

    def _store(self, task: Task, response: dict[str, Any] | None, error: dict[str, Any] | None) -> None:
        now = self._clock()
        with self._lock:
            self._results[task.id] = _Result(task.info(), response, error, now + RESULT_TTL, task.owner)
            self._expire(now)

    def _expire(self, now: float) -> None:
        while self._results and (
            len(self._results) > MAX_RESULTS or next(iter(self._results.values())).expires <= now
        ):
            self._results.popitem(last=False)

    # ---- the _tasks API ------------------------------------------------------------------

    def _parse_id(self, task_id: str) -> tuple[str, int]:
        node_id, colon, number = task_id.partition(":")
        if not colon or not node_id or not number.lstrip("-").isdigit():
            raise IllegalArgument(f"malformed task id {task_id}")
        return node_id, int(number)

    def running(self, task_id: str) -> Task:
        """A running task by id, or Elasticsearch's 404 for an id that is not running."""
        node_id, number = self._parse_id(task_id)
        with self._lock:
            task = self._running.get(number) if node_id == self._node_id else None
        if task is None or not _visible(task.owner):
            raise ResourceNotFound(f"task [{task_id}] is not found")
        return task

    def get(self, task_id: str, *, wait: bool, timeout: float | None) -> dict[str, Any]:
        """`GET /_tasks/<id>`: a running task's info, or a finished one's stored result.
        `wait` blocks until the task ends (at most `timeout` seconds, default 30)."""
        node_id, number = self._parse_id(task_id)
        if node_id != self._node_id:
            raise ResourceNotFound(
                f"task [{task_id}] belongs to the node [{node_id}] which isn't part of the cluster and there "
                "is no record of the task"
            )
        with self._lock:
            task = self._running.get(number)
        if task is not None and not _visible(task.owner):
            task = None
        if task is not None and wait:
            seconds = 30.0 if timeout is None or timeout < 0 else timeout
            if not task.done.wait(seconds):
                raise ElasticError(
                    f"Timed out waiting for completion of [{task_id}]",
                    status=500,
                    error_type="elasticsearch_timeout_exception",
                )
            task = None
        if task is not None:
            return {"completed": False, "task": task.info()}
        with self._lock:
            self._expire(self._clock())
            result = self._results.get(number)
        if result is None or not _visible(result.owner):
            raise ResourceNotFound(f"task [{task_id}] isn't running and hasn't stored its results")
        body: dict[str, Any] = {"completed": True, "task": result.info}
        if result.error is not None:
            body["error"] = result.error
        else:
            body["response"] = result.response
        return body

    def matching(self, *, actions: str | None, parent: str | None = None) -> list[Task]:
        """Running tasks whose action matches one of the comma-separated `actions` patterns."""
        patterns = [p for p in (actions or "").split(",") if p]
        with self._lock:
            tasks = sorted((t for t in self._running.values() if _visible(t.owner)), key=lambda t: t.id)
        if patterns:
            tasks = [t for t in tasks if any(_action_matches(p, t.action) for p in patterns)]
        if parent is not None:
            tasks = [t for t in tasks if t.parent is not None and t.parent.task_id == parent]
        return tasks

    def cancel(self, task_id: str | None, *, actions: str | None, reason: str = USER_CANCEL) -> list[Task]:
        """Cancel one task by id, or every running task whose action matches `actions`."""
        tasks = [self.running(task_id)] if task_id else self.matching(actions=actions)
        for task in tasks:
            task.cancel(reason)
        return tasks

    def nodes_body(self, tasks: list[Task], *, detailed: bool, group_by: str) -> dict[str, Any]:
        """A list of tasks as `GET /_tasks` renders it (`group_by`: nodes, parents or none)."""
        if group_by == "none":
            return {"tasks": [t.info(detailed=detailed) for t in tasks]}
        if group_by == "parents":
            top = [t for t in tasks if t.parent is None or t.parent not in tasks]
            body = {}
            for t in top:
                info = t.info(detailed=detailed)
                kids = [c.info(detailed=detailed) for c in t.children if c in tasks]
                if kids:
                    info["children"] = kids
                body[t.task_id] = info
            return {"tasks": body}
        if group_by != "nodes":
            raise IllegalArgument(f"unknown group_by [{group_by}]: expected [nodes], [parents] or [none]")
        if not tasks:
            return {"nodes": {}}
        return {
            "nodes": {
                self._node_id: {
                    **self._node_header,
                    "tasks": {t.task_id: t.info(detailed=detailed) for t in tasks},
                }
            }
        }


def _action_matches(pattern: str, action: str) -> bool:
    """Elasticsearch's simple match: `*` anywhere in the pattern stands for any characters."""
    return fnmatch.fnmatchcase(action, pattern.replace("[", "[[]"))
