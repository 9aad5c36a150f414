"""The benchmark suite keeps working: a small run measures every figure, and its data is reproducible.

The full run (a million documents) is too long for CI; 2,000 documents with few repetitions
(`--smoke`, `--queries`, `--tries`) still go through every workload, every endpoint and every
correctness check, against a real server process.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench import process_cpu, suite_timeline
from bench.bulk_thread import BODY_DOCS
from bench.generate import MAPPING, generate
from bench.sqlite_baseline import SqliteBaseline
from leafsearch.client import Client
from tests.concurrency import wait_for

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def bench_folders(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bench's temporary folders (its server's data, SQLite's baseline) among the tests' (which
    tests/conftest.py keeps in RAM where it can: the bench's writes fsync), in one with a short
    name: multiprocessing's sockets are made there, and a socket's path has at most 107 bytes."""
    monkeypatch.setenv("TMPDIR", str(tmp_path_factory.mktemp("b")))


def bench_run(module: str, *options: str, timeout: float = 280) -> subprocess.CompletedProcess:
    """`python -m <module> <options>`, once it exited cleanly."""
    result = subprocess.run(
        [sys.executable, "-m", module, *options], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def small_run(module: str, out: Path, *options: str) -> Any:
    """`python -m <module> --docs 2000 --json <out> <options>`: what it wrote, once it exited
    cleanly."""
    bench_run(module, "--docs", "2000", "--json", str(out), *options)
    return orjson.loads(out.read_bytes())


def test_small_run_measures_every_figure(tmp_path: Path) -> None:
    rows = small_run("bench", tmp_path / "bench.json", "--smoke")["rows"]
    assert {row["workload"] for row in rows} == {f"W{i}" for i in (0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12)}
    missing = [
        f"{row['workload']} {row['name']}: {row['error']}"
        for row in rows
        if row["error"] is not None or not isinstance(row["value"], int | float)
    ]
    assert not missing, "\n".join(missing)
    check_first_requests(rows)
    # Sliced exports are compared with as many SQLite readers: each has its own baseline.
    sliced = [row for row in rows if row["workload"] == "W4" and "slices" in row["name"]]
    assert sliced and all(row["baseline"] > 0 for row in sliced), sliced


#: The workloads that also time a repeated request, which a cache of the server may answer.
REPEATING = {"W1", "W2", "W3", "W12"}


def check_first_requests(rows: list[dict[str, Any]]) -> None:
    """Their goals judge first requests (p50, a p99 beside it), never the repeated figure, which is
    measured beside every first p50."""
    by_name = {(row["workload"], row["name"]): row for row in rows}
    firsts = [row for row in rows if row["name"].endswith(", first, p50")]
    assert {row["workload"] for row in firsts} >= REPEATING
    for row in firsts:
        assert row["unit"] == "ms" and row["value"] > 0 and row["repeated"] > 0, row
        p99 = by_name[(row["workload"], row["name"].replace(", first, p50", ", first, p99"))]
        assert p99["value"] >= row["value"], (row, p99)
    judged = [row for row in rows if row["workload"] in REPEATING and row["goal"] is not None]
    assert judged
    for row in judged:
        assert row["name"].endswith((", first, p50", ", first p50s")) or row["unit"] == "docs/s", row
    assert all(row["repeated"] is None for row in rows if row not in firsts)


def test_small_run_of_the_search_workers_bench_measures_both_modes(tmp_path: Path) -> None:
    """`python -m bench.workers` starts the server with its default search workers and with
    `--search-workers 0` on the same data, and checks every scroll and walk exactly once."""
    figures = small_run("bench.workers", tmp_path / "workers.json", "--queries", "20")
    assert set(figures["workers"]) == set(figures["inline"])
    for mode in ("workers", "inline"):
        figures_of = figures[mode]
        # CPU is counted in 10 ms ticks, too coarse for so small a run to be more than >= 0; and
        # search workers may do none of a walk's work (a walk alone runs in the server process).
        assert all(value >= 0 for key, value in figures_of.items() if "CPU" in key), figures_of
        assert all(value > 0 for key, value in figures_of.items() if "CPU" not in key), figures_of


def test_small_run_of_the_walk_start_bench_measures_every_figure(tmp_path: Path) -> None:
    """`python -m bench.walk_start` times the first request of each kind of new walk, checks
    every page it times and every walk exactly once, and measures memory under 4 walks."""
    rows = small_run("bench.walk_start", tmp_path / "walk.json", "--tries", "2")["rows"]
    assert len(rows) == 16
    assert all(row["value"] > 0 for row in rows), rows
    walks = [row for row in rows if row["name"].startswith("whole _score PIT walk")]
    assert len(walks) == 2  # as the node serves it, and from its cursor


def test_generator_is_deterministic_and_matches_the_mapping() -> None:
    first, again, other = generate(3000, seed=7), generate(3000, seed=7), generate(3000, seed=8)
    assert first.sources == again.sources
    assert first.sources != other.sources
    docs = [orjson.loads(source) for source in first.sources]
    assert all(set(doc) == set(MAPPING["properties"]) for doc in docs)
    assert len({doc["id"] for doc in docs}) == 3000
    # Many documents share a millisecond, so paging by @timestamp alone cannot be stable.
    assert len(set(first.timestamps)) < 0.7 * len(first)
    # The NDJSON bodies carry the same documents, each under its own id.
    lines = b"".join(first.bulk_bodies(1000)).splitlines()
    assert [orjson.loads(line)["index"]["_id"] for line in lines[::2]] == first.ids
    assert [orjson.loads(line) for line in lines[1::2]] == docs


def test_sqlite_keyset_pages_join_into_the_offset_order(tmp_path: Path) -> None:
    """The baseline is also the oracle of the checks: its two paging methods must agree."""
    dataset = generate(1500, seed=3)
    sqlite = SqliteBaseline(tmp_path / "baseline.db")
    sqlite.load(dataset)
    walked = []
    after = sqlite.keyset_after(0)
    while page := sqlite.keyset_page(after, 100):
        walked += page
        after = page[-1][:2]
    assert [row[0] for row in walked] == [row[0] for row in sqlite.offset_page(0, 1500)]
    assert sorted(row[1] for row in walked) == dataset.ids
    assert sqlite.keyset_page(sqlite.keyset_after(700), 100) == walked[700:800]
    match = (dataset.mid_term, dataset.top_service)
    expected = sum(
        1
        for message, service in zip(dataset.messages, dataset.services, strict=True)
        if service == match[1] and match[0] in message.split()
    )
    assert sqlite.count(match) == sqlite.walk(100, match) == expected > 0
    sqlite.close()


def test_the_start_up_bench_runs(tmp_path: Path) -> None:
    """`python -m bench.startup` keeps working (its figures are the bench's, not a test's); no
    server it starts logs an error; with `--until-workers-ready` it counts the CPU until then."""
    result = bench_run("bench.startup", "--runs", "2", "--no-warm-up", timeout=120)
    assert "first GET / answered: median" in result.stdout and "stop after SIGTERM" in result.stdout
    assert "server logged" not in result.stderr, result.stderr
    args = ("--runs", "1", "--no-warm-up", "--search-workers", "1", "--until-workers-ready")
    result = bench_run("bench.startup", *args, timeout=120)
    assert "CPU used until the search workers were ready: median" in result.stdout, result.stdout
    assert "server logged" not in result.stderr, result.stderr


def test_the_scripts_bench_runs() -> None:
    """`python -m bench.scripts` keeps working: its scripted update_by_query updates every document
    (it asserts so) and every row prints."""
    result = bench_run("bench.scripts", "--docs", "2000", "--tries", "1", timeout=300)
    for row in ("_update_by_query with a script", "_bulk partial updates", "script_score"):
        assert row in result.stdout, result.stdout


def test_small_transfer_run_measures_every_row(tmp_path: Path) -> None:
    measured = small_run("bench.transfer", tmp_path / "transfer.json", "--no-elasticdump", "--smoke")
    rows = {row["name"]: row for row in measured["rows"]}
    assert {"raw stream (_export, bytes received)", "leafsearch export to .ndjson.zst"} <= rows.keys()
    assert all(row["seconds"] > 0 for row in rows.values())
    assert rows["leafsearch export to .ndjson"]["reference"] == "raw stream (_export, bytes received)"
    assert rows["leafsearch import of the export, --workers 4"]["ratio"] > 0
    # the memory peak's make-up: each process of the sum by role, split into anonymous and mapped
    memory = measured["memory_kb"]
    processes = memory["peak_processes"]
    assert sum(kb["VmRSS"] for _, kb in processes) == memory["rss_peak"]
    assert {"server", "zygote"} <= {role for role, _ in processes}
    assert all(kb["RssAnon"] + kb["RssFile"] <= kb["VmRSS"] + 1 for _, kb in processes)
    assert memory["peak_phase"] in {*rows, "loading bench"}


def test_transfer_import_only_runs_the_import_rows_in_rounds(tmp_path: Path) -> None:
    """`--import-only --rounds 2`: no export row, the raw `_bulk` and import rows twice, each import
    a ratio of the raw `_bulk` of its own round."""
    args = ("--no-elasticdump", "--smoke", "--import-only", "--rounds", "2")
    rows = {row["name"]: row for row in small_run("bench.transfer", tmp_path / "t.json", *args)["rows"]}
    raw, leafsearch = "raw _bulk, 4 clients, then _refresh", "leafsearch import of the export, --workers 4"
    assert set(rows) == {raw, leafsearch, f"{raw} (round 2)", f"{leafsearch} (round 2)"}
    assert rows[leafsearch]["reference"] == raw
    assert rows[f"{leafsearch} (round 2)"]["reference"] == f"{raw} (round 2)"
    assert all(row["seconds"] > 0 for row in rows.values())


def test_the_highlight_bench_runs(tmp_path: Path) -> None:
    """`python -m bench.highlight` keeps working: both kinds of page timed, every highlighted hit
    checked to hold the word between the tags."""
    result = bench_run("bench.highlight", "--docs", "25000", "--tries", "2")
    assert "without highlight: p50" in result.stdout and "with highlight:" in result.stdout
    assert "server CPU per page" in result.stdout


def test_the_context_restart_bench_runs() -> None:
    """`python -m bench.context_restart` keeps working: a PIT and a scroll go on across its
    `kill -9` (each scroll batch is checked), and a closed PIT leaves no disk held."""
    result = bench_run("bench.context_restart", "--docs", "2000", "--pages", "3")
    assert "PIT page: median before" in result.stdout and "scroll batch: median before" in result.stdout
    assert "after closing the PIT: store" in result.stdout and "held by contexts 0.00 MB" in result.stdout


def test_the_join_bench_runs() -> None:
    """`python -m bench.join` keeps working: every search's hit count is checked against the
    generator (it asserts so) and each row prints."""
    result = bench_run("bench.join", "--parents", "2000", "--queries", "3")
    assert "has_child score_mode=max: p50=" in result.stdout and "has_parent: p50=" in result.stdout


def test_the_geo_bench_runs() -> None:
    """`python -m bench.geo` keeps working: every geo and range answer checked against numpy."""
    result = bench_run("bench.geo", "--docs", "5000", "--queries", "3", "--km", "300")
    assert "geo+sort: p50" in result.stdout and "range+sort: p50" in result.stdout


def test_the_knn_benches_run() -> None:
    served = bench_run("bench.knn", "--docs", "300", "--dims", "8", "--queries", "5").stdout
    assert "recall@10=1.000" in served and "vector graphs" in served
    graphs = bench_run("bench.knn_graph", "--docs", "2000", "--dims", "8", "--queries", "5").stdout
    assert "usearch i8: build" in graphs and "usearch f32: build" in graphs


def test_the_walk_depth_bench_runs() -> None:
    """`python -m bench.walk_depth` keeps working: both walks print their two medians."""
    result = bench_run("bench.walk_depth", "--parents", "3000")
    assert "nested: 2 pages, depth 0" in result.stdout and "ranges: 3 pages, depth 0" in result.stdout


def test_the_scroll_batches_bench_runs(tmp_path: Path) -> None:
    """`python -m bench.scroll_batches` and `bench.walk_pages` keep working on a folder holding
    index `bench`, the scroll's end included."""
    client = Client(tmp_path / "data", background=False)
    try:
        client.indices.create(index="bench", mappings=MAPPING)
        for body in generate(2500).bulk_bodies(BODY_DOCS):
            assert not client.bulk(body, index="bench")["errors"]
        client.indices.refresh(index="bench")
    finally:
        client.close()
    data = str(tmp_path / "data")
    result = bench_run("bench.scroll_batches", "--data", data, "--batches", "5", "--repeat", "1")
    assert "_doc scroll batch:" in result.stdout and "ms CPU per 1,000 docs" in result.stdout
    walked = bench_run("bench.walk_pages", "--data", data, "--pages", "2", "--repeat", "1")
    assert "PIT walk page of 1,000:" in walked.stdout and "ms CPU" in walked.stdout


def test_the_source_codecs_bench_prints_a_row_per_codec_and_block() -> None:
    """`python -m bench.source_codecs` keeps working: zstd's row and LZ4's, each with its four
    figures, LZ4's blocks larger on disk than zstd's with its dictionary."""
    result = bench_run("bench.source_codecs", "--docs", "12000")
    rows = {line[:24].strip(): line[24:].split() for line in result.stdout.splitlines()[2:]}
    assert list(rows) == [
        "zstd + dictionary, 16",
        *(f"lz4, {n}" for n in (16, 32, 64, 128)),
        *(f"lz4 HC {level}, {n}" for n in (32, 64) for level in (4, 9)),
    ]
    assert all(len(figures) == 4 for figures in rows.values())
    assert float(rows["lz4, 32"][0]) > float(rows["zstd + dictionary, 16"][0]) > 0


def test_the_suite_timeline_reports_each_worker_and_the_idle_cores() -> None:
    """`bench.suite_timeline`'s report of recorded lines: a worker's time in tests and between
    them, the machine's busy cores per step and the idle core-seconds, the failed tests, the modules'
    totals."""
    tests = {
        "gw0": [
            {"id": "tests/a.py::t1", "t0": 100.0, "t1": 110.0, "self": 1.0, "kids": 2.0},
            {"id": "tests/a.py::t2", "t0": 115.0, "t1": 120.0, "self": 0.5, "kids": 0.0},
        ],
        "gw1": [{"id": "tests/b.py::t", "t0": 100.0, "t1": 130.0, "self": 4.0, "kids": 0.0, "failed": True}],
    }
    # 2 CPUs, 100 jiffies each a second: both busy for 10 s, then one for 20 s.
    machine = [
        {"t": 100.0 + s, "busy": 200 * min(s, 10) + 100 * max(s - 10, 0), "all": 200 * s, "cpus": 2}
        for s in range(31)
    ]
    text = suite_timeline.report(tests, machine)
    lines = text.splitlines()
    in_tests = "in tests 15.0 s, between them 5.0 s; CPU counted 3.5 s"
    assert f"gw0: 2 tests, first at 0.0 s, last ended at 20.0 s; {in_tests}" in lines
    in_tests = "in tests 30.0 s, between them 0.0 s; CPU counted 4.0 s"
    assert f"gw1: 1 tests, first at 0.0 s, last ended at 30.0 s; {in_tests}" in lines
    assert "       0 s: 1.33 cores busy, 1.50 workers in a test" in text
    assert "idle core-seconds until the last test ended: 20.0" in text
    assert [line for line in lines if line.startswith("failed")] == ["failed: tests/b.py::t"]
    assert "     15.0 s wall    3.5 s CPU    2 tests  tests/a.py" in text


def test_the_suite_timeline_reports_the_trees_cpu_and_the_tests_by_wall_less_cpu() -> None:
    """A test's line with its worker's whole tree's CPU (`tree`) counts that, not the worker's and
    its waited children's; the report lists the tests by their wall less their CPU."""
    tests = {
        "gw0": [
            {"id": "tests/a.py::t1", "t0": 100.0, "t1": 110.0, "self": 1.0, "kids": 2.0},
            {"id": "tests/a.py::t2", "t0": 110.0, "t1": 114.0, "self": 0.5, "kids": 0.0, "tree": 3.0},
        ],
        "gw1": [{"id": "tests/b.py::t", "t0": 100.0, "t1": 130.0, "self": 4.0, "kids": 0.0}],
    }
    lines = suite_timeline.report(tests, []).splitlines()
    in_tests = "in tests 14.0 s, between them 0.0 s; CPU counted 6.0 s"
    assert f"gw0: 2 tests, first at 0.0 s, last ended at 14.0 s; {in_tests}" in lines
    waiting = lines[lines.index("tests by wall less CPU (waiting, or lacking a core):") + 1 :]
    assert waiting == [
        "     26.0 s of    30.0 s wall  tests/b.py::t",
        "      7.0 s of    10.0 s wall  tests/a.py::t1",
        "      1.0 s of     4.0 s wall  tests/a.py::t2",
    ]


def test_the_suite_timeline_counts_a_workers_whole_tree() -> None:
    """`suite_timeline.TreeCpu`: a process's CPU with its children's and theirs, alive (a
    grandchild nobody has waited for among them) or ended: reaped by its parent, or left to init
    (its parent gone first, as a Ray actor's raylet)."""
    burn = "import sys; sum(range(3 * 10**7)); "
    grandchild = burn + "print('burnt', flush=True); sys.stdin.read()"
    # The child never waits for the grandchild: init reaps that one.
    child = (
        burn
        + f"import subprocess; subprocess.Popen([sys.executable, '-c', {grandchild!r}]); sys.stdin.read()"
    )
    tree = suite_timeline.TreeCpu(os.getpid())
    before = tree()
    with subprocess.Popen(
        [sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout.readline() == "burnt\n"  # both have burnt their CPU
        (grandchild_pid,) = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        grandchild = int(grandchild_pid)
        alive = round(tree() - before, 2)  # (clock ticks: hundredths)
        assert alive >= round(_cpu_seconds(process.pid) + _cpu_seconds(grandchild), 2)
        assert _cpu_seconds(grandchild) > 0.1
        process.stdin.close()  # both read it: both end
    wait_for(lambda: not Path(f"/proc/{grandchild}").exists(), attempts=1200)
    assert round(tree() - before, 2) >= alive  # the child reaped here, the grandchild by init


def test_the_suite_timeline_tree_keeps_a_process_whose_thread_ends_while_it_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reading of `TreeCpu` counts a process one of whose threads ends while the tree is walked
    (its `children` file gone after the thread was listed: a server's request threads come and go)."""
    second_thread = "threading.Thread(target=sys.stdin.read).start(); print(flush=True)"
    busy = f"import sys, threading; sum(range(3 * 10**7)); {second_thread}; sys.stdin.read()"
    with subprocess.Popen(
        [sys.executable, "-c", busy], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout.readline() == "\n"  # its CPU burnt, its second thread started
        second = max(int(task) for task in os.listdir(f"/proc/{process.pid}/task"))
        ended = Path(f"/proc/{process.pid}/task/{second}/children")
        read_text = Path.read_text

        def read(path: Path, *args: Any, **kwargs: Any) -> str:
            if path == ended:
                raise FileNotFoundError(path)
            return read_text(path, *args, **kwargs)

        monkeypatch.setattr(Path, "read_text", read)
        counted = suite_timeline.TreeCpu(process.pid)()
        monkeypatch.undo()
        assert round(counted, 2) >= _cpu_seconds(process.pid) > 0.1
        process.stdin.close()


def test_the_suite_timeline_tree_keeps_a_child_its_parent_did_not_wait_for() -> None:
    """A descendant that ended still counts in `TreeCpu` when its parent, alive, never waited for
    it (SIGCHLD ignored: the kernel reaped it, and its CPU is in no one's)."""
    grandchild = "import sys; sum(range(3 * 10**7)); print('burnt', flush=True); sys.stdin.read()"
    child = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
        f"g = subprocess.Popen([sys.executable, '-c', {grandchild!r}], stdin=subprocess.PIPE)\n"
        "sys.stdin.readline()\n"
        "g.stdin.close()\n"
        "while os.path.exists(f'/proc/{g.pid}'):\n"
        "    time.sleep(0.005)\n"
        "print('gone', flush=True)\n"
        "sys.stdin.read()\n"
    )
    tree = suite_timeline.TreeCpu(os.getpid())
    before = tree()
    with subprocess.Popen(
        [sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout.readline() == "burnt\n"
        alive = round(tree() - before, 2)
        assert alive > 0.1
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.stdout.readline() == "gone\n"  # the grandchild ended, its parent still runs
        assert round(tree() - before, 2) >= alive
        process.stdin.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _process_cpu(command: str, timeout: float) -> subprocess.CompletedProcess:
    """`python -m bench.process_cpu python -c <command>`, its report on stderr."""
    return subprocess.run(
        [sys.executable, "-m", "bench.process_cpu", sys.executable, "-c", command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_process_cpu_bench_splits_a_tree_by_kind_and_counts_its_orphans() -> None:
    """`bench.process_cpu` exits with its command's status and lists each kind of process of the
    tree, one its parent left running (an orphan nobody waits for, as Ray's actors) among them."""
    # (alive over more than one reading, so that its command line is read before it ends)
    orphan = "orphan = 1; import time; time.sleep(2 * SAMPLE_SECONDS); sum(range(10**6))"
    orphan = orphan.replace("SAMPLE_SECONDS", str(process_cpu.SAMPLE_SECONDS))
    command = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {orphan!r}]); sys.exit(3)"
    result = _process_cpu(command, timeout=60)
    assert result.returncode == 3, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("wall ") and ", CPU " in lines[0]
    assert any("orphan = 1" in line for line in lines[1:]), result.stderr
    assert process_cpu.kind("ray::MachineActor.batch()") == "ray::MachineActor.batch()"
    assert process_cpu.kind("ray::IDLE") == "ray::IDLE"
    assert (
        process_cpu.kind("/venv/bin/python -m leafsearch serve --ray 127.0.0.1:6379")
        == "leafsearch serve --ray"
    )
    assert process_cpu.kind("python -m leafsearch serve --port 0") == "leafsearch serve"
    cli = "python -m leafsearch import a.ndjson local --data /dev/shm/pytest-of-root/pytest-1/a0/data"
    assert process_cpu.kind(cli) == "leafsearch (other commands)"
    assert process_cpu.kind("python -m pytest -q -p bench.suite_timeline") == "pytest"
    spawned = "python -B -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=7)"
    assert process_cpu.kind(spawned) == "spawned (multiprocessing)"
    assert process_cpu.kind("") == "(exited)"


def test_the_process_cpu_bench_counts_processes_no_reading_saw() -> None:
    """A process that starts and ends between two readings still counts, apart: the tree's CPU is
    what every process waited for used (forty short children here, 0.05 s of CPU each)."""
    child = "sum(range(2 * 10**6))"
    command = f"import subprocess, sys\nfor _ in range(40): subprocess.run([sys.executable, '-c', {child!r}])"
    result = _process_cpu(command, timeout=120)
    assert result.returncode == 0, result.stderr
    total = float(result.stderr.splitlines()[0].split(", CPU ")[1].split()[0])
    unread = [line for line in result.stderr.splitlines() if process_cpu.UNREAD in line]
    (line,) = unread
    assert float(line.split()[0]) > 0
    # Each child alone, as the tree counts it, times forty: the total is at least most of that.
    alone = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", child], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    one = after.ru_utime + after.ru_stime - alone.ru_utime - alone.ru_stime
    assert total >= 40 * one * 0.5, (total, one, result.stderr)


def test_the_process_cpu_tree_is_by_start_time_not_by_pid() -> None:
    """A pid of the tree used again by another process of the machine (its process ended: it is
    no longer read) makes neither that process nor its children the tree's; a child of a process
    of the tree that is still read is."""
    root, ended, reused = 100, (200, "5"), (200, "90")
    tree = {ended, (300, "7")}
    found = {
        reused: ("python other.py", 1.0, 1, False),  # pid 200 again, another user's
        (201, "91"): ("python its-child.py", 1.0, 200, False),
        (300, "7"): ("leafsearch serve", 1.0, root, False),
        (301, "92"): ("search worker", 1.0, 300, False),
        (302, "93"): ("an orphan the root adopted", 1.0, root, False),
    }
    process_cpu.in_tree(found, tree, root)
    assert tree == {ended, (300, "7"), (301, "92"), (302, "93")}
