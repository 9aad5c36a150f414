"""How the suite's tests are cut into work units for pytest-xdist and in which order they start
(tests/conftest.py's hooks call these).

- **Ray groups.** The tests on local Ray clusters (tests/ray_cluster.py) mostly wait: for a cluster
  or a coordinator to start, a node to be found dead, an actor to restart (the whole folder took
  520 s of wall for 174 s of CPU, bench/RESULTS.md "The test suite"). They are cut into
  `RAY_GROUPS` groups, each run in one worker, one module after the other, so that each worker
  runs one cluster at a time and two clusters at most run at once; each module (and the re-run
  suite folder, whose coordinator is package-scoped) stays whole in one group. In a group, the
  modules on the worker's shared cluster (tests/ray_cluster.py `SharedCluster`) run first, one
  after the other, so that it starts once for them all; then those with a cluster of their own.
  The modules are dealt out longest first, each to the group with the fewest seconds so far, by
  their seconds in the last run (pytest's cache) or, before one, by how many tests they have and
  whether they start a cluster.
- **Modules with a module-scoped fixture** (a server of its own, users, a loaded index) are a
  unit, so that the fixture is made once, not once in each worker.
- Every other test is a unit of its own, handed to the next free worker.
- **Order**: the Ray groups first (they are the run's longest path), then the units slowest in
  the last run, so that the run ends on short ones on every worker.
- **Priority**: a worker lowers its CPU priority by `REST_NICENESS` before its first test outside
  the Ray groups (tests/conftest.py), and so do the servers it starts after. The Ray groups mostly
  wait, for their clusters' processes, coordinators and actors, each a third of a core on
  average; beside the rest's CPU-bound tests those waits stretched (each group's tests took 323 s
  in a full run, about 190 s alone), and the groups are the run's longest path. A lower priority
  costs the rest nothing while the cores are free, and the Ray groups' processes (started from
  their workers before they run anything else; the shared clusters' actors at `nice` 0, not
  Ray's 15: tests/ray_cluster.py) get a core as soon as they wake.

A module's seconds are those of the last run that ran it (pytest's cache), else those recorded in
`RECORDED_SECONDS` from a full run on the 2-core machine, so that a first run (a fresh clone: CI,
`-p no:cacheprovider`) is cut as evenly as later ones: by the test counts alone, one Ray group of
such a run took 632 s and the other 245 s. Copy the cache's `leafsearch/module-seconds` entry there
after a quiet full run when modules were added or became much slower; a module it lacks is
estimated (`UNKNOWN_RAY_*`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: The tests on local Ray clusters, as node ids start (relative to the repository root).
RAY_TESTS = "tests/ray_backend/"
#: The re-run suite on Ray: one cluster and one coordinator for the folder (package scope).
RAY_SUITE = "tests/ray_backend/suite/"
#: Groups the Ray tests are cut into, each held by one of the (three) workers while it runs.
RAY_GROUPS = 2
#: How much lower the priority (`nice`) of a worker's tests outside the Ray groups is.
REST_NICENESS = 10
#: Seconds assumed, before the cache knows a Ray module (a first run, a fresh clone), for each of
#: its tests, and once for the cluster and coordinators of a unit that starts them; a test of a
#: module that starts neither (fakes, a child process) counts `UNKNOWN_RAY_LIGHT_TEST_SECONDS`.
#: About what they took in the runs of bench/RESULTS.md "The test suite".
UNKNOWN_RAY_TEST_SECONDS = 7.0
UNKNOWN_RAY_CLUSTER_SECONDS = 20.0
UNKNOWN_RAY_LIGHT_TEST_SECONDS = 1.0

#: pytest's cache key of the seconds each test module's tests took on average in the last run
#: that ran it (setup, call and teardown; {module path: seconds}).
MODULE_SECONDS = "leafsearch/module-seconds"
#: {module path: seconds per test} of a full run, for the modules pytest's cache has not timed.
RECORDED_SECONDS = REPO / "tests" / "module_seconds.json"


def module_seconds(cached: Mapping[str, float]) -> dict[str, float]:
    """Each module's seconds per test: the cache's (`cached`), else the recorded ones."""
    return {**json.loads(RECORDED_SECONDS.read_text()), **cached}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def ray_unit(nodeid: str) -> str:
    """What of the Ray tests must run whole in one worker: the suite folder, else the module."""
    return RAY_SUITE if nodeid.startswith(RAY_SUITE) else module_of(nodeid)


def ray_groups(nodeids: Iterable[str], seconds: Mapping[str, float]) -> dict[str, str]:
    """{Ray unit: its group's name}: the units dealt out longest first (the seconds of their tests
    in the last run, or the `UNKNOWN_RAY_*` estimates for a module never timed), each to the group
    with the fewest seconds so far."""
    tests: dict[str, dict[str, int]] = {}  # unit: {module: its tests}
    for nodeid in nodeids:
        if nodeid.startswith(RAY_TESTS):
            modules = tests.setdefault(ray_unit(nodeid), {})
            modules[module_of(nodeid)] = modules.get(module_of(nodeid), 0) + 1
    totals: dict[str, float] = {}
    for unit, modules in tests.items():
        untimed = [module for module in modules if module not in seconds]
        totals[unit] = sum(seconds[m] * n for m, n in modules.items() if m in seconds) + sum(
            modules[m] * (UNKNOWN_RAY_TEST_SECONDS if starts_a_cluster(m) else UNKNOWN_RAY_LIGHT_TEST_SECONDS)
            for m in untimed
        )
        if any(starts_a_cluster(m) for m in untimed):
            totals[unit] += UNKNOWN_RAY_CLUSTER_SECONDS
    loads = [0.0] * RAY_GROUPS
    groups: dict[str, str] = {}
    for unit in sorted(totals, key=lambda u: (-totals[u], u)):
        group = loads.index(min(loads))
        loads[group] += totals[unit]
        groups[unit] = f"ray-{group + 1}"
    return groups


def work_unit(nodeid: str, groups: Mapping[str, str]) -> str | None:
    """The unit a test belongs to (a Ray group, or a module with a module-scoped fixture), None
    for a test that is a unit of its own."""
    if nodeid.startswith(RAY_TESTS):
        return groups[ray_unit(nodeid)]
    module = module_of(nodeid)
    return module if has_module_fixture(module) else None


def ordered(
    nodeids: list[str], seconds: Mapping[str, float], on_shared_cluster: Collection[str] = ()
) -> list[int]:
    """The positions of `nodeids` in the order their units should start: the Ray groups, then the
    units by their seconds in the last run, longest first; each unit's tests together and in
    their order, and each module's tests together. In a Ray group, the modules with a test in
    `on_shared_cluster` (node ids: those on the worker's shared cluster, tests/ray_cluster.py
    `SharedCluster`) first, so that it starts once for them all and stops before the others."""
    groups = ray_groups(nodeids, seconds)
    units: dict[str, list[int]] = {}
    for position, nodeid in enumerate(nodeids):
        units.setdefault(work_unit(nodeid, groups) or nodeid, []).append(position)
    first_of_module: dict[str, int] = {}
    for position, nodeid in enumerate(nodeids):
        first_of_module.setdefault(module_of(nodeid), position)
    shared_modules = {module_of(nodeid) for nodeid in on_shared_cluster}

    def in_unit(position: int) -> tuple[bool, int, int]:
        module = module_of(nodeids[position])
        return (module not in shared_modules, first_of_module[module], position)

    def key(unit: str) -> tuple[bool, float, int]:
        positions = units[unit]
        estimate = sum(seconds.get(module_of(nodeids[p]), 0.0) for p in positions)
        return (not unit.startswith("ray-"), -estimate, first_of_module[module_of(nodeids[positions[0]])])

    return [position for unit in sorted(units, key=key) for position in sorted(units[unit], key=in_unit)]


@functools.cache
def starts_a_cluster(module: str) -> bool:
    """Whether a Ray test module (a path from the repository root) starts a local cluster or a
    coordinator on one: the suite folder's do (its conftest), others name the fixture or helper."""
    if module.startswith(RAY_SUITE):
        return True
    try:
        source = (REPO / module).read_text()
    except OSError:
        return False
    return re.search(r"\b(ray_cluster|start_cluster|ray_server)\b", source) is not None


@functools.cache
def has_module_fixture(module: str) -> bool:
    """Whether the test module (a path from the repository root) defines a module-scoped fixture."""
    try:
        source = (REPO / module).read_text()
    except OSError:
        return False
    return re.search(r"""@pytest\.fixture\([^)]*scope=["']module["']""", source) is not None
