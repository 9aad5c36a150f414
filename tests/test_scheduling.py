"""The suite's work units (tests/scheduling.py): what must stay in one worker does, the Ray tests
are dealt out evenly to their groups, and the longest units start first."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from tests.scheduling import (
    RAY_GROUPS,
    RECORDED_SECONDS,
    REPO,
    REST_NICENESS,
    module_seconds,
    ordered,
    ray_groups,
    work_unit,
)

RAY = "tests/ray_backend"
IDS = [
    "tests/search/test_plain.py::test_a",
    "tests/search/test_plain.py::test_b",
    f"{RAY}/suite/test_pit.py::test_a",
    f"{RAY}/suite/test_scroll.py::test_a",
    f"{RAY}/test_machine_loss.py::test_a",
    f"{RAY}/test_machine_loss.py::test_b",
    f"{RAY}/test_ray_api.py::test_a",
    f"{RAY}/test_ray_api.py::test_b",
    f"{RAY}/test_channel.py::test_a",
    "tests/test_single.py::test_a",
    "tests/transfer/test_transfer.py::test_a",  # a module-scoped fixture: one unit
    "tests/transfer/test_transfer.py::test_b",
]
SECONDS = {
    "tests/search/test_plain.py": 1.0,
    f"{RAY}/suite/test_pit.py": 10.0,
    f"{RAY}/suite/test_scroll.py": 20.0,
    f"{RAY}/test_machine_loss.py": 40.0,
    f"{RAY}/test_ray_api.py": 15.0,
    f"{RAY}/test_channel.py": 5.0,
    "tests/test_single.py": 12.0,
    "tests/transfer/test_transfer.py": 30.0,
}


def test_the_ray_tests_are_dealt_evenly_and_the_suite_folder_stays_whole() -> None:
    groups = ray_groups(IDS, SECONDS)
    assert set(groups) == {
        f"{RAY}/suite/",
        f"{RAY}/test_machine_loss.py",
        f"{RAY}/test_ray_api.py",
        f"{RAY}/test_channel.py",
    }
    assert set(groups.values()) == {f"ray-{n + 1}" for n in range(RAY_GROUPS)}
    # 80 s (machine loss) against 30 + 30 + 5 (the suite folder, ray api, channel)
    assert groups[f"{RAY}/test_machine_loss.py"] != groups[f"{RAY}/suite/"]
    assert groups[f"{RAY}/suite/"] == groups[f"{RAY}/test_ray_api.py"] == groups[f"{RAY}/test_channel.py"]
    assert work_unit(f"{RAY}/suite/test_scroll.py::test_a", groups) == groups[f"{RAY}/suite/"]
    assert work_unit("tests/transfer/test_transfer.py::test_b", groups) == "tests/transfer/test_transfer.py"
    assert work_unit("tests/test_single.py::test_a", groups) is None


def test_a_module_never_timed_weighs_its_tests_and_whether_it_starts_a_cluster() -> None:
    """A fresh clone: 3 tests on a cluster (41 s assumed) outweigh 30 on fakes (30 s)."""
    on_cluster = f"{RAY}/test_ray_backend.py"
    on_fakes = f"{RAY}/test_metadata_store.py"
    ids = [f"{on_cluster}::test_{n}" for n in range(3)] + [f"{on_fakes}::test_{n}" for n in range(30)]
    ids.append(f"{RAY}/test_channel.py::test_a")
    groups = ray_groups(ids, {f"{RAY}/test_channel.py": 35.0})
    assert groups[on_cluster] != groups[on_fakes] == groups[f"{RAY}/test_channel.py"]


def test_the_ray_groups_start_first_then_the_longest_units_each_whole() -> None:
    order = [IDS[p] for p in ordered(IDS, SECONDS)]
    assert sorted(order) == sorted(IDS)
    groups = ray_groups(IDS, SECONDS)
    units = [work_unit(nodeid, groups) or nodeid for nodeid in order]
    starts = list(dict.fromkeys(units))
    # the group of machine loss (80 s) before the other (65 s)
    assert starts[:RAY_GROUPS] == [groups[f"{RAY}/test_machine_loss.py"], groups[f"{RAY}/suite/"]]
    assert starts[RAY_GROUPS:] == [
        "tests/transfer/test_transfer.py",  # 60 s
        "tests/test_single.py::test_a",
        "tests/search/test_plain.py::test_a",
        "tests/search/test_plain.py::test_b",
    ]
    # each unit's tests together, in their collection order
    assert [u for i, u in enumerate(units) if i == 0 or units[i - 1] != u] == starts
    assert order.index("tests/transfer/test_transfer.py::test_a") < order.index(
        "tests/transfer/test_transfer.py::test_b"
    )


def test_without_the_cache_only_the_ray_groups_move() -> None:
    order = [IDS[p] for p in ordered(IDS, {})]
    rest = [nodeid for nodeid in order if not nodeid.startswith(RAY)]
    assert all(nodeid.startswith(RAY) for nodeid in order[: len(order) - len(rest)])
    assert rest == [nodeid for nodeid in IDS if not nodeid.startswith(RAY)]


def test_in_a_ray_group_the_modules_on_the_shared_cluster_run_first_one_after_the_other() -> None:
    """So the worker's shared cluster starts once for them and stops before a module that starts
    its own (a process connects to one cluster at a time)."""
    ids = [
        f"{RAY}/test_ray_api.py::test_a",
        f"{RAY}/test_machine_loss.py::test_a",
        f"{RAY}/test_channel.py::test_a",
        f"{RAY}/test_channel.py::test_b",
        f"{RAY}/test_replicas.py::test_a",
    ]
    seconds = {f"{RAY}/test_replicas.py": 100.0}  # alone in its group; the other three together
    shared = [ids[0], ids[3]]  # (one test of a module on it is enough)
    order = [ids[p] for p in ordered(ids, seconds, shared)]
    assert order == [ids[4], ids[0], ids[2], ids[3], ids[1]]


def test_a_first_run_weighs_modules_by_the_recorded_seconds_and_a_later_one_by_the_cache() -> None:
    recorded = json.loads(RECORDED_SECONDS.read_text())
    assert recorded and all((REPO / module).is_file() and module.startswith("tests/") for module in recorded)
    assert module_seconds({}) == recorded
    module = "tests/ray_backend/test_machine_loss.py"
    later = module_seconds({module: recorded[module] / 10, "tests/test_new.py": 2.0})
    assert later[module] == recorded[module] / 10 and later["tests/test_new.py"] == 2.0
    assert {k: v for k, v in later.items() if k not in (module, "tests/test_new.py")} == {
        k: v for k, v in recorded.items() if k != module
    }


def test_a_worker_lowers_its_priority_once_before_its_first_test_outside_the_ray_groups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """So the Ray groups' processes get a core as soon as they wake (tests/scheduling.py)."""
    from tests import conftest

    niced: list[int] = []
    monkeypatch.setattr(os, "nice", niced.append)

    def setup(nodeid: str, config: SimpleNamespace) -> None:
        conftest.pytest_runtest_setup(SimpleNamespace(nodeid=nodeid, config=config))  # type: ignore[arg-type]

    worker = SimpleNamespace(workerinput={}, stash=pytest.Stash())
    setup(f"{RAY}/test_ray_api.py::test_a", worker)
    assert niced == []  # a Ray group's test: the worker keeps its priority
    setup("tests/search/test_plain.py::test_a", worker)
    setup("tests/search/test_plain.py::test_b", worker)
    setup(f"{RAY}/test_channel.py::test_a", worker)  # (never raised again: it cannot be)
    assert niced == [REST_NICENESS]
    serial = SimpleNamespace(stash=pytest.Stash())  # `-n 0`: no worker, nothing to give way to
    setup("tests/search/test_plain.py::test_a", serial)
    assert niced == [REST_NICENESS]
