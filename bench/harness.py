"""What every workload shares: result rows, error capture per row, medians of timed requests.

A workload plans its rows first and fills them in as it measures. A step that fails marks the rows
it was meant to fill with the reason (the server does not support it yet, or a correctness check
failed) and the workload goes on with the next step, so that one missing endpoint never hides the
other figures.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from elasticsearch import ApiError, Elasticsearch, TransportError
from elasticsearch.helpers import BulkIndexError

from bench.client import Client, HttpError
from bench.generate import Dataset
from bench.server import Server
from bench.sqlite_baseline import SqliteBaseline

RUNS = 20
WARMUPS = 3
FIRSTS = 10  # first requests per figure, each on what no cache has seen (a new snapshot, a new PIT)
SAMPLING_BUDGET_S = 10.0  # per figure: a very slow server still finishes the run
#: What the fixed durations of a run (merges' quiet time, attacks, writes beside searches) are
#: multiplied by.
PACE = 1.0
WALK_BUDGET_S = 300.0  # per full walk or export


def smoke() -> None:
    """`--smoke`: a run that goes through every workload, endpoint and check with few repetitions
    (3 timed requests after 1 warm-up, 3 first requests, a quarter of each fixed duration), as
    tests/test_bench_smoke.py runs it; its figures are no measurements."""
    global RUNS, WARMUPS, FIRSTS, PACE
    RUNS, WARMUPS, FIRSTS, PACE = 3, 1, 3, 0.25


class CheckFailed(Exception):
    """What the server returned is wrong: its timing must not be reported as a figure."""


class Unsupported(Exception):
    """The benchmark cannot measure this (for example: no server process of its own to restart)."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def describe(error: BaseException) -> str:
    """The reason shown in a row instead of its figure."""
    if isinstance(error, CheckFailed):
        return f"failed check: {error}"
    if isinstance(error, Unsupported):
        return f"unsupported: {error}"
    if isinstance(error, HttpError) and (400 <= error.status < 500 or error.status == 501):
        return f"unsupported: {error}"
    if isinstance(error, ApiError) and (400 <= error.meta.status < 500 or error.meta.status == 501):
        return f"unsupported: HTTP {error.meta.status} {error.message}"
    if isinstance(error, BulkIndexError):
        return f"error: {error} first: {error.errors[0] if error.errors else None}"
    if isinstance(error, TransportError):
        return f"error: {type(error).__name__}: {error.message}"
    return f"error: {type(error).__name__}: {error}"


@dataclass
class Row:
    workload: str
    name: str
    unit: str
    goal: tuple[str, float] | None = None
    value: float | None = None
    baseline: float | None = None
    error: str | None = None
    note: str | None = None  # what a figure alone does not say (e.g. what an attack was answered)
    # Beside a figure of first requests: the median of the same request repeated, which a cache
    # of the server may answer (bench/README.md says which). Never what the goal judges.
    repeated: float | None = None

    @property
    def met(self) -> bool | None:
        if self.goal is None or self.value is None:
            return None
        op, threshold = self.goal
        return self.value <= threshold if op == "<=" else self.value >= threshold

    @property
    def ratio(self) -> float | None:
        """Figure over SQLite's; not shown for rows that are already ratios."""
        if self.value is None or not self.baseline or self.unit == "x":
            return None
        return self.value / self.baseline

    def as_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "goal": None if self.goal is None else f"{self.goal[0]} {self.goal[1]:g}",
            "met": self.met,
            "repeated": self.repeated,
            "baseline": self.baseline,
            "ratio": self.ratio,
            "error": self.error,
            "note": self.note,
        }


class Recorder:
    """The rows of one workload, in the order they were planned."""

    def __init__(self, workload: str) -> None:
        self.workload = workload
        self.rows: dict[str, Row] = {}

    def plan(self, name: str, unit: str, goal: tuple[str, float] | None = None) -> str:
        self.rows[name] = Row(self.workload, name, unit, goal)
        return name

    def plan_firsts(self, what: str, goal: tuple[str, float] | None = None) -> tuple[str, str]:
        """Rows for p50 (judged by `goal`) and p99 in ms of the first requests of `what`."""
        return self.plan(f"{what}, first, p50", "ms", goal), self.plan(f"{what}, first, p99", "ms")

    def set(self, name: str, value: float, baseline: float | None = None) -> None:
        row = self.rows[name]
        row.value = value
        if baseline is not None:
            row.baseline = baseline

    def percentiles(
        self, names: tuple[str, str], samples_ms: Iterable[float], *, baseline: bool = False
    ) -> None:
        """p50 and p99 of `samples_ms` into the rows `names` (as their SQLite figure if `baseline`)."""
        for name, value in zip(names, p50_p99(samples_ms), strict=True):
            if baseline:
                self.baseline(name, value)
            else:
                self.set(name, value)

    def repeated(self, name: str, value: float) -> None:
        """The median of the request repeated, beside the first requests' figure of `name`."""
        self.rows[name].repeated = value

    def note(self, name: str, text: str) -> None:
        self.rows[name].note = text

    def baseline(self, name: str, value: float) -> None:
        """Record SQLite's figure first, so that it shows even when the server's step fails."""
        self.rows[name].baseline = value

    def value(self, name: str) -> float:
        """A figure measured earlier in this workload; refuses when that one failed."""
        row = self.rows[name]
        if row.value is None:
            raise Unsupported(f"needs '{name}' ({row.error or 'not measured'})")
        return row.value

    def ratio(self, name: str, numerator: str, denominator: str) -> None:
        """`numerator` / `denominator` for the server; the same ratio for SQLite is the baseline."""
        top, bottom = self.rows[numerator], self.rows[denominator]
        baseline = top.baseline / bottom.baseline if top.baseline and bottom.baseline else None
        self.set(name, self.value(numerator) / self.value(denominator), baseline)

    @contextmanager
    def step(self, *names: str) -> Iterator[None]:
        """Run a step that fills `names`; on failure they show the reason and the workload goes on."""
        try:
            yield
        except Exception as error:  # any failure becomes the text of its rows
            self.fail(names, describe(error))

    def fail(self, names: tuple[str, ...] | list[str], reason: str) -> None:
        for name in names:
            row = self.rows[name]
            if row.value is None and row.error is None:
                row.error = reason

    def finish(self) -> list[Row]:
        self.fail([name for name, row in self.rows.items() if row.value is None], "not measured")
        return list(self.rows.values())


@dataclass
class Context:
    """What the workloads share for one run."""

    url: str
    index: str
    dataset: Dataset
    seed: int  # the dataset's: a client process generates the same documents from it
    sqlite: SqliteBaseline
    http: Client
    es: Elasticsearch
    server: Server | None  # None when benchmarking a server started by someone else (--url)

    @property
    def query(self) -> dict:
        """The `match` on a mid-frequency term + `term` filter query of W1 and W3."""
        return {
            "bool": {
                "must": [{"match": {"message": self.dataset.mid_term}}],
                "filter": [{"term": {"service": self.dataset.top_service}}],
            }
        }

    @property
    def match(self) -> tuple[str, str]:
        """The same query for the SQLite baseline."""
        return self.dataset.mid_term, self.dataset.top_service

    def own_server(self) -> Server:
        if self.server is None:
            raise Unsupported("needs the server process (--url given)")
        return self.server


def median_ms(request: Callable[[], Any]) -> float:
    """Median latency in ms of `request` over RUNS runs after WARMUPS warm-ups.

    Past SAMPLING_BUDGET_S, warm-ups are cut to one and samples to three, so that a slow server
    still ends the run; the median of what was sampled is still a median of complete requests.
    """
    budget_end = time.perf_counter_ns() + int(SAMPLING_BUDGET_S * 1e9)
    for _ in range(WARMUPS):
        request()
        if time.perf_counter_ns() > budget_end:
            break
    samples: list[int] = []
    while len(samples) < RUNS:
        start = time.perf_counter_ns()
        request()
        end = time.perf_counter_ns()
        samples.append(end - start)
        if end > budget_end and len(samples) >= 3:
            break
    return statistics.median(samples) / 1e6


T = TypeVar("T")


def time_each(calls: Iterable[Callable[[], T]], budget_s: float = SAMPLING_BUDGET_S) -> list[tuple[float, T]]:
    """Each call run once, in order, with its latency in ms and its result (checked afterwards).

    For distinct queries: none is repeated, so no cache of a previous answer is measured. Past
    `budget_s` the remaining calls are skipped (at least 3 are kept), so a slow server still ends.
    `calls` may be lazy: the next call is taken before the clock starts, so whatever a generator
    does to prepare it (write a new snapshot, open a new point in time) is not timed.
    """
    budget_end = time.perf_counter_ns() + int(budget_s * 1e9)
    timed: list[tuple[float, T]] = []
    for call in calls:
        start = time.perf_counter_ns()
        result = call()
        end = time.perf_counter_ns()
        timed.append(((end - start) / 1e6, result))
        if end > budget_end and len(timed) >= 3:
            break
    return timed


def each_ms(calls: Iterable[Callable[[], Any]], budget_s: float = SAMPLING_BUDGET_S) -> list[float]:
    """`time_each` without the results: for requests whose answers are checked elsewhere."""
    return [ms for ms, _ in time_each(calls, budget_s)]


def p50_p99(samples_ms: Iterable[float]) -> tuple[float, float]:
    """Median and 99th percentile (interpolated: of 100 samples, between the two slowest)."""
    values = np.fromiter(samples_ms, dtype=np.float64)
    return float(np.percentile(values, 50)), float(np.percentile(values, 99))


class Stopwatch:
    """Wall time of a long read, with a deadline checked between requests."""

    def __init__(self, budget_s: float = WALK_BUDGET_S) -> None:
        self.budget_s = budget_s
        self.start = time.perf_counter_ns()

    def check_budget(self) -> None:
        if self.seconds() > self.budget_s:
            raise TimeoutError(f"gave up after {self.budget_s:.0f} s")

    def seconds(self) -> float:
        return (time.perf_counter_ns() - self.start) / 1e9
