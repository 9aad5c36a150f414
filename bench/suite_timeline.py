"""Where a test run's wall time goes: each xdist worker's tests on a time line, and the machine's
busy cores beside them.

    LEAFSEARCH_TIMELINE=/tmp/tl python -m pytest -q -p bench.suite_timeline
    python -m bench.suite_timeline /tmp/tl            # the report

As a pytest plugin (loaded in the controller and in every worker) it writes, into the folder
`LEAFSEARCH_TIMELINE` names, one JSON line per test to `<worker>.jsonl`: its node id, when its
setup began and its teardown ended, whether it failed, the CPU its worker process used
meanwhile, its own and that of the children it waited for (servers a test started and stopped,
CLI runs; a child stopped later, such as a module's server, counts in the test during which it
ended), and the CPU of the worker's whole process tree (`TreeCpu`: the servers forked from the
tests' zygote, which the worker never waits for, the session server, a Ray cluster's daemons and
actors). The controller samples
`/proc/stat` every second into `machine.jsonl`. Without the variable the plugin does nothing.

The report gives each worker's first test, its end, the seconds it spent in tests and between
them; the machine's busy cores in 30-second steps beside how many workers were in a test (on a
quiet machine, the idle cores are the run's to win: tests waiting for a server, a cluster, a
kill); the idle core-seconds in all; the tests that failed (on record even when the run was
stopped before pytest's summary); the modules that took the most wall and CPU; and the tests whose
tree used the least of their wall (waiting: for a cluster, a restart, a timer), which on a loaded
machine still tell a wait from a test that only lacked a core.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

FOLDER_VARIABLE = "LEAFSEARCH_TIMELINE"
#: Seconds between the controller's samples of `/proc/stat`.
SAMPLE_SECONDS = 1.0
#: Seconds per line of the report's profile.
STEP_SECONDS = 30.0
TICKS = os.sysconf("SC_CLK_TCK")
#: Seconds a test's end waits for the zombies in its worker's tree to be reaped (`TreeCpu`).
ZOMBIE_SECONDS = 0.5


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process and of the children it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class TreeCpu:
    """The CPU seconds a process and every process below it have used, read again at each call
    (`/proc/<pid>/stat`: user, system and the waited-for children's; the children by
    `/proc/<pid>/task/<tid>/children`). A descendant that ends counts by its last reading, less
    what its parent's waited-for children's CPU grew by meanwhile (a parent that reaped it has its
    CPU in its own: one that ignores SIGCHLD, or ended first, as a Ray cluster's raylet before
    its actors, does not). What a process used after its last reading, and a process that lived
    between two readings and was not reaped in the tree, are not counted. A zombie reads as little
    or nothing until reaped (`zombies`: those of a parent in the tree, which will count once it has
    reaped them)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        # (pid, start): (its own CPU, its waited-for children's, its parent's pid)
        self.seen: dict[tuple[int, str], tuple[float, float, int]] = {}
        self.ended = 0.0  # what descendants that ended used and no one in the tree holds
        self.zombies = 0  # at the last reading

    def __call__(self) -> float:
        now: dict[tuple[int, str], tuple[float, float, int]] = {}
        pending, zombies = [self.pid], 0
        while pending:
            current = pending.pop()
            try:
                fields = Path(f"/proc/{current}/stat").read_text().rpartition(")")[2].split()
                tasks = list(Path(f"/proc/{current}/task").iterdir())
            except OSError:  # (ended meanwhile)
                continue
            for task in tasks:
                with contextlib.suppress(OSError):  # (a thread that ended meanwhile: the process counts)
                    pending += [int(child) for child in (task / "children").read_text().split()]
            own, children = (
                (int(fields[11]) + int(fields[12])) / TICKS,
                (int(fields[13]) + int(fields[14])) / TICKS,
            )
            now[(current, fields[19])] = (own, children, int(fields[1]))
            zombies += fields[0] == "Z"
        self.zombies = zombies
        by_pid = {key[0]: (key, reading) for key, reading in now.items()}
        gone: dict[int, float] = {}  # parent's pid: what its ended children had used
        for key, (own, children, parent) in self.seen.items():
            if key not in now:
                gone[parent] = gone.get(parent, 0.0) + own + children
        for parent, used in gone.items():
            held = 0.0  # what the parent's waited-for children's CPU grew by
            if parent in by_pid and by_pid[parent][0] in self.seen:
                key, (_, children, _) = by_pid[parent]
                held = children - self.seen[key][1]
            self.ended += max(0.0, used - held)
        self.seen = now
        return self.ended + sum(own + children for own, children, _ in now.values())


def machine_busy() -> tuple[float, float]:
    """(busy, all) jiffies of every CPU since boot, from `/proc/stat`'s first line (idle and
    iowait are not busy)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class Recorder:
    """A worker's (or a serial run's) lines, and in the controller the machine's samples."""

    def __init__(self, folder: Path, name: str, sample: bool) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.out = open(folder / f"{name}.jsonl", "a")  # noqa: SIM115 - closed at the session's end
        self.stop = threading.Event()
        self.failed = False  # whether a phase of the test running now failed
        self.tree_cpu = TreeCpu(os.getpid())
        self.tree: float | None = None  # the worker's tree's CPU at the last test's end
        self.sampler: threading.Thread | None = None
        if sample:
            self.sampler = threading.Thread(target=self._sample, args=(folder,), daemon=True)
            self.sampler.start()

    def _sample(self, folder: Path) -> None:
        with open(folder / "machine.jsonl", "a") as out:
            while True:
                busy, total = machine_busy()
                out.write(
                    json.dumps({"t": time.time(), "busy": busy, "all": total, "cpus": os.cpu_count()}) + "\n"
                )
                out.flush()
                if self.stop.wait(SAMPLE_SECONDS):
                    return

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed = True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Any:
        began, cpu = time.time(), _cpu()
        # (the reading at the last test's end: the tree's walk costs a few milliseconds)
        tree = self.tree if self.tree is not None else self.tree_cpu()
        self.failed = False
        try:
            return (yield)
        finally:
            own, children = _cpu()
            self.tree = self.tree_cpu()
            # A server the test stopped is its parent's zombie for a moment (the tests' zygote
            # reaps a fork once the test has its status): its CPU counts once reaped.
            settle = time.monotonic() + ZOMBIE_SECONDS
            while self.tree_cpu.zombies and time.monotonic() < settle:
                time.sleep(0.005)
                self.tree = self.tree_cpu()
            line = {
                "id": item.nodeid,
                "t0": began,
                "t1": time.time(),
                "self": own - cpu[0],
                "kids": children - cpu[1],
                "tree": self.tree - tree,
                "failed": self.failed,
            }
            self.out.write(json.dumps(line) + "\n")
            self.out.flush()

    def pytest_unconfigure(self) -> None:
        self.stop.set()
        if self.sampler is not None:
            self.sampler.join()
        self.out.close()


def pytest_configure(config: pytest.Config) -> None:
    folder = os.environ.get(FOLDER_VARIABLE)
    if not folder:
        return
    worker = getattr(config, "workerinput", {}).get("workerid")
    distributed = worker is None and config.getoption("numprocesses", None) not in (None, 0)
    # The controller of an xdist run runs no test: it only samples the machine.
    name = worker or ("controller" if distributed else "serial")
    config.pluginmanager.register(Recorder(Path(folder), name, sample=worker is None), "suite-timeline")


def load(folder: Path) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """({worker: its tests' lines by start}, the machine's samples)."""
    tests: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        if path.stem in ("machine", "controller"):
            continue
        lines = [json.loads(line) for line in path.read_text().splitlines() if line]
        tests[path.stem] = sorted(lines, key=lambda line: line["t0"])
    machine_path = folder / "machine.jsonl"
    machine = (
        [json.loads(line) for line in machine_path.read_text().splitlines()] if machine_path.exists() else []
    )
    return tests, machine


def cpu_of(line: dict[str, Any]) -> float:
    """A test's CPU: its worker's tree's where recorded, else the worker's and its waited children's."""
    return line["tree"] if "tree" in line else line["self"] + line["kids"]


def report(tests: dict[str, list[dict[str, Any]]], machine: list[dict[str, Any]], top: int = 15) -> str:
    """The report's text (see the module's docstring)."""
    starts = [lines[0]["t0"] for lines in tests.values() if lines] + [sample["t"] for sample in machine[:1]]
    if not starts:
        return "no tests recorded"
    zero = min(starts)
    out: list[str] = []
    end = max(line["t1"] for lines in tests.values() for line in lines)
    out.append(f"run: {end - zero:.1f} s from the first sample or test to the last test's end")
    for worker, lines in sorted(tests.items()):
        if not lines:
            continue
        busy = sum(line["t1"] - line["t0"] for line in lines)
        gaps = sum(max(0.0, b["t0"] - a["t1"]) for a, b in zip(lines, lines[1:], strict=False))
        cpu = sum(cpu_of(line) for line in lines)
        out.append(
            f"{worker}: {len(lines)} tests, first at {lines[0]['t0'] - zero:.1f} s, last ended at "
            f"{lines[-1]['t1'] - zero:.1f} s; in tests {busy:.1f} s, between them {gaps:.1f} s; "
            f"CPU counted {cpu:.1f} s"
        )
    if len(machine) >= 2:
        out.append(
            f"per {STEP_SECONDS:.0f} s: busy cores of {machine[0]['cpus']} (the machine's), workers in a test"
        )
        idle = 0.0
        steps: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])  # step: [busy core-seconds, seconds]
        for a, b in zip(machine, machine[1:], strict=False):
            seconds = b["t"] - a["t"]
            share = (b["busy"] - a["busy"]) / max(b["all"] - a["all"], 1)
            cores = share * a["cpus"]
            if a["t"] <= end:
                idle += (a["cpus"] - cores) * seconds
            step = steps[int((a["t"] - zero) // STEP_SECONDS)]
            step[0] += cores * seconds
            step[1] += seconds
        for step, (core_seconds, seconds) in sorted(steps.items()):
            begin = zero + step * STEP_SECONDS
            in_test = sum(
                max(0.0, min(line["t1"], begin + STEP_SECONDS) - max(line["t0"], begin))
                for lines in tests.values()
                for line in lines
            )
            out.append(
                f"  {step * STEP_SECONDS:6.0f} s: {core_seconds / max(seconds, 1e-9):4.2f} cores busy, "
                f"{in_test / STEP_SECONDS:4.2f} workers in a test"
            )
        out.append(f"idle core-seconds until the last test ended: {idle:.1f}")
    modules: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # wall, CPU, tests
    for lines in tests.values():
        for line in lines:
            module = modules[line["id"].split("::", 1)[0]]
            module[0] += line["t1"] - line["t0"]
            module[1] += cpu_of(line)
            module[2] += 1
    failed = sorted(line["id"] for lines in tests.values() for line in lines if line.get("failed"))
    out += [f"failed: {nodeid}" for nodeid in failed]
    for title, column in (("wall", 0), ("CPU counted", 1)):
        out.append(f"modules by {title}:")
        for name, (wall, cpu, count) in sorted(modules.items(), key=lambda item: -item[1][column])[:top]:
            out.append(f"  {wall:7.1f} s wall {cpu:6.1f} s CPU {int(count):4d} tests  {name}")
    out.append("tests by wall less CPU (waiting, or lacking a core):")
    everyone = [line for lines in tests.values() for line in lines]
    for line in sorted(everyone, key=lambda line: cpu_of(line) - (line["t1"] - line["t0"]))[:top]:
        wall = line["t1"] - line["t0"]
        out.append(f"  {wall - cpu_of(line):7.1f} s of {wall:7.1f} s wall  {line['id']}")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench.suite_timeline <folder of LEAFSEARCH_TIMELINE>", file=sys.stderr)
        return 2
    print(report(*load(Path(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
