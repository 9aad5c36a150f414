"""Time from starting `leafsearch serve` to its first 200 to `GET /`, on an empty data folder.

    python -m bench.startup                     # 10 runs, default search workers
    python -m bench.startup --runs 20 --search-workers 0
    python -m bench.startup --python /tmp/v1/bin/python   # the leafsearch installed there
    python -m bench.startup --search-workers 1 --until-workers-ready   # a start's CPU, workers included

Each run starts `python -m leafsearch serve --port 0` on a fresh temporary folder (the child
imports the `leafsearch` this process imports, as `leafsearch.testing` arranges, unless `--python`
names another interpreter, which runs the one installed for it) and times from just before it is
started until its first 200 to `GET /`, polled over a plain socket once the server's start-up line,
which it logs as soon as the socket accepts, gave the port. The CPU time the server and its
processes used until then is read from /proc (Linux; in 10 ms ticks): a busy machine stretches the
wall time, much less the CPU time. Each run ends with SIGTERM and its stop is timed too. Prints
every run, then the median and the p90 of each figure.

The server may write its bytecode cache (`PYTHONDONTWRITEBYTECODE` is dropped from its
environment, as a user's shell has it), and one run that is not counted comes first, so the figures
are those of a user's second start, not of compiling every module. `--no-warm-up` counts that first
run too. `--no-bytecode-cache` sets `PYTHONDONTWRITEBYTECODE=1` instead: with no `__pycache__` in
the tree (`find leafsearch -name __pycache__ -exec rm -r {} +`), every start compiles the package's
modules, as it does for a user whose environment sets that variable.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from leafsearch.testing import child_env

_ANNOUNCED = re.compile(rb"listening on https?://([^:]+|\[[^\]]+\]):(\d+) ")


def _first_answer(process: subprocess.Popen, log: Path, started: float, timeout: float) -> tuple[float, int]:
    """Seconds from `started` to the first 200 of `GET /`, and the server's port."""
    deadline = started + timeout
    port = None
    while time.perf_counter() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()}")
        if port is None:
            found = _ANNOUNCED.search(log.read_bytes())
            if found is None:
                time.sleep(0.002)
                continue
            port = int(found.group(2))
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", "/")
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                return time.perf_counter() - started, port
        except OSError:
            time.sleep(0.002)
        finally:
            connection.close()
    raise RuntimeError(f"no answer within {timeout}s:\n{log.read_text()}")


def _workers_ready(port: int, deadline: float) -> None:
    """Until `_nodes/stats` says every search worker of the server is ready."""
    while time.perf_counter() < deadline:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", "/_nodes/stats/search_workers")
            node = next(iter(json.loads(connection.getresponse().read())["nodes"].values()))
        finally:
            connection.close()
        workers = node.get("search_workers")
        if workers is None or workers["ready"] == workers["count"]:
            return
        time.sleep(0.01)
    raise RuntimeError("the search workers were not ready in time")


def _cpu_seconds(pid: int) -> float:
    """CPU time (user and system) used so far by process `pid` and its live descendants."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
        children = [
            int(child)
            for task in os.listdir(f"/proc/{pid}/task")
            for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        ]
    except (OSError, IndexError, ValueError):  # gone meanwhile, or no /proc
        return 0.0
    return used + sum(_cpu_seconds(child) for child in children)


def run_once(
    python: str, extra: list[str], timeout: float, bytecode_cache: bool = True, workers_ready: bool = False
) -> tuple[float, float, float]:
    """(seconds to the first answer, CPU seconds used until then, seconds from SIGTERM to exit)
    of one server; with `workers_ready`, the CPU used until its search workers are ready too."""
    with tempfile.TemporaryDirectory(prefix="leafsearch-startup-") as folder:
        log = Path(folder) / "server.log"
        command = [python, "-m", "leafsearch", "serve", "--port", "0", "--data", f"{folder}/data", *extra]
        with open(log, "wb") as output:
            started = time.perf_counter()
            env = child_env() if python == sys.executable else dict(os.environ)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            if not bytecode_cache:
                env["PYTHONDONTWRITEBYTECODE"] = "1"
            process = subprocess.Popen(
                command,
                cwd=folder,  # not the tree: `--python` runs the leafsearch installed for it
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            first, port = _first_answer(process, log, started, timeout)
            if workers_ready:
                _workers_ready(port, started + timeout)
            cpu = _cpu_seconds(process.pid)
        finally:
            stopping = time.perf_counter()
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        stop = time.perf_counter() - stopping
        errors = [line for line in log.read_text().splitlines() if " ERROR " in line]
        if errors:
            print(f"  server logged: {errors}", file=sys.stderr)
        return first, cpu, stop


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs the server")
    parser.add_argument("--search-workers", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--no-warm-up", action="store_true", help="count the first run too")
    parser.add_argument(
        "--no-bytecode-cache", action="store_true", help="the server writes no bytecode cache"
    )
    parser.add_argument(
        "--until-workers-ready",
        action="store_true",
        help="count the CPU until the search workers are ready, not the first answer",
    )
    args = parser.parse_args(argv)
    extra = [] if args.search_workers is None else ["--search-workers", str(args.search_workers)]
    cache = not args.no_bytecode_cache
    ready = args.until_workers_ready
    if not args.no_warm_up:
        run_once(args.python, extra, args.timeout, cache, ready)
    firsts, cpus, stops = [], [], []
    for run in range(args.runs):
        first, cpu, stop = run_once(args.python, extra, args.timeout, cache, ready)
        firsts.append(first)
        cpus.append(cpu)
        stops.append(stop)
        print(
            f"run {run + 1}: first answer {first * 1000:.0f} ms (CPU {cpu * 1000:.0f} ms), "
            f"stop {stop * 1000:.0f} ms",
            flush=True,
        )
    print(
        f"first GET / answered: median {statistics.median(firsts) * 1000:.0f} ms, "
        f"p90 {_p90(firsts) * 1000:.0f} ms over {args.runs} runs ({os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f})"
    )
    until = "the search workers were ready" if ready else "then"
    print(
        f"CPU used until {until}: median {statistics.median(cpus) * 1000:.0f} ms, "
        f"p90 {_p90(cpus) * 1000:.0f} ms"
    )
    median, p90 = statistics.median(stops) * 1000, _p90(stops) * 1000
    print(f"stop after SIGTERM: median {median:.0f} ms, p90 {p90:.0f} ms")


if __name__ == "__main__":
    main()
