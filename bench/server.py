"""The leafsearch server process under test: start, kill -9, restart, and its memory and disk use."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.client import Client, HttpError

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def disk_bytes(folder: Path) -> int:
    """Allocated bytes under `folder`, as `du` counts them (sparse and preallocated files included)."""
    total = 0
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            total += disk_bytes(Path(entry.path))
        else:
            total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it, in case the server forks workers."""
    pids = [pid]
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # ended meanwhile
        return pids
    for tid in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            pids += _descendants(int(child))
    return pids


def tree_memory_kb(pid: int, field: str) -> int:
    """`VmHWM` (peak), `VmRSS` (current) or `Pss` of process `pid` and every process below it
    (search and merge workers), in kB; processes that ended meanwhile count nothing.

    `Pss` (/proc/PID/smaps_rollup) shares each page among the processes that map it: the segment
    files every worker maps count once in the sum, where `VmRSS` counts them once per process."""
    source = "smaps_rollup" if field == "Pss" else "status"
    total = 0
    for process in _descendants(pid):
        try:
            lines = Path(f"/proc/{process}/{source}").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) for line in lines if line.startswith(field + ":"))
    return total


#: What `process_memory_kb` reads: from /proc/PID/status, then from /proc/PID/smaps_rollup.
_STATUS_FIELDS = ("VmRSS", "RssAnon", "RssFile")
_ROLLUP_FIELDS = ("Pss", "Pss_Anon", "Pss_File")


def process_memory_kb(pid: int) -> dict[str, int]:
    """One process's resident memory in kB: `VmRSS`, split into `RssAnon` (heaps and arrays) and
    `RssFile` (mapped files: segment files a search read, shared libraries: the page cache's), and
    `Pss` with its anonymous and file parts (pages shared with other processes, a zygote's with
    its forks, counted by share). Empty when the process ended meanwhile."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return {}
    memory: dict[str, int] = {}
    for lines, fields in ((status, _STATUS_FIELDS), (rollup, _ROLLUP_FIELDS)):
        for line in lines:
            name, _, value = line.partition(":")
            if name in fields:
                memory[name] = int(value.split()[0])
    return memory


def process_role(pid: int, server_pid: int) -> str:
    """What a process below a `leafsearch serve` is: the server, its zygote (the fork server its
    workers are forked from, search/workers/zygote.py), a search worker, the merge worker (the
    zygote's fork that runs at nice 10, index/merge_worker.py), or another (multiprocessing's
    resource tracker). The merge worker is told by its nice value above the server's (a bench run
    at `nice -n 5` starts every process at 5)."""
    if pid == server_pid:
        return "server"
    try:
        fields = _stat_fields(pid)
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        server_nice = int(_stat_fields(server_pid)[16])
    except OSError:
        return "ended"
    parent, nice = int(fields[1]), int(fields[16])
    if b"serve" not in command:
        return "other"
    if parent == server_pid:
        return "zygote"
    return "merge worker" if nice > server_nice else "search worker"


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (the state is [0], the parent [1])."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _by_role(process: tuple[str, dict[str, int]]) -> str:
    return process[0]


class MemorySampler:
    """The peak resident memory of a server's processes all at once (their sum at one moment, not
    the sum of each process's own peak), sampled every `interval` seconds while it runs: `VmRSS`
    and, with `pss`, `Pss` (dearer to read: the kernel walks each process's page tables) and the
    make-up of the RSS peak (`peak_processes`: each process's `process_memory_kb` by role, and
    `phase()` at that moment)."""

    def __init__(
        self,
        server: Server | None,
        interval: float = 0.02,
        pss: bool = False,
        phase: Callable[[], str] = lambda: "",
    ) -> None:
        self.server = server
        self.interval = interval
        self.pss = pss
        self.phase = phase
        self.peak_kb = 0
        self.peak_pss_kb = 0
        self.peak_phase = ""
        self.peak_processes: list[tuple[str, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.server is None:
                continue
            if not self.pss:
                self.peak_kb = max(self.peak_kb, self.server.memory_kb("VmRSS"))
                continue
            pid = self.server.pid
            processes = [(process_role(p, pid), process_memory_kb(p)) for p in _descendants(pid)]
            rss = sum(memory.get("VmRSS", 0) for _, memory in processes)
            self.peak_pss_kb = max(self.peak_pss_kb, sum(memory.get("Pss", 0) for _, memory in processes))
            if rss > self.peak_kb:
                self.peak_kb, self.peak_phase = rss, self.phase()
                held = [(role, memory) for role, memory in processes if memory]
                self.peak_processes = sorted(held, key=_by_role)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class Server:
    """A `python -m leafsearch serve` subprocess on a fixed port and data folder."""

    def __init__(
        self,
        data: Path,
        log: Path,
        args: list[str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
    ) -> None:
        """`args`: added to the `serve` command line (e.g. `--search-workers 0`); `preexec_fn` runs
        in the child before the server starts (e.g. to cap its memory)."""
        self.data = data
        self.log = log
        self.args = list(args or [])
        self.preexec_fn = preexec_fn
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None, "server not started"
        return self._proc.pid

    def spawn(self) -> None:
        """Start the process without waiting; the caller decides what 'ready' means."""
        command = [
            sys.executable,
            "-m",
            "leafsearch",
            "serve",
            "--port",
            str(self.port),
            "--data",
            str(self.data),
            *self.args,
        ]
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(
                command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=self.preexec_fn,
            )

    def start(self, timeout: float = 60.0) -> None:
        self.spawn()
        self.wait_until(lambda client: client.raw("GET", "/") is not None, timeout)

    def wait_until(self, ready, timeout: float) -> None:
        """Poll `ready(client)` until it returns true; fail early if the process dies."""
        deadline = time.monotonic() + timeout
        client = Client(self.url, timeout=5.0)
        try:
            while True:
                if self._proc is not None and self._proc.poll() is not None:
                    raise RuntimeError(f"server exited with code {self._proc.returncode}: {self.log_tail()}")
                try:
                    if ready(client):
                        return
                except (OSError, HttpError):
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"server not ready after {timeout:.0f} s: {self.log_tail()}")
                time.sleep(0.01)
        finally:
            client.close()

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        """kill -9: what a crash looks like to the data folder."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()

    def stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU seconds (user + system) used so far by the server process (all its threads, ended
        ones included) and by the processes below it (search and merge workers), from
        /proc/<pid>/stat, at the kernel's tick (10 ms): meant for runs of seconds."""
        roles = self.cpu_by_role()
        own = roles.pop("server", 0.0)
        return own, sum(roles.values())

    def cpu_by_role(self) -> dict[str, float]:
        """`cpu_seconds` of each `process_role` below the server (the server's own included);
        processes that ended meanwhile count nothing."""
        tick = os.sysconf("SC_CLK_TCK")
        roles: dict[str, float] = {}
        for pid in _descendants(self.pid):
            try:
                fields = _stat_fields(pid)
            except OSError:  # ended meanwhile
                continue
            role = process_role(pid, self.pid)
            roles[role] = roles.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        return roles

    def memory_kb(self, field: str) -> int:
        """`VmHWM` (peak), `VmRSS` (current) or `Pss` of the server's processes, in kB."""
        return tree_memory_kb(self.pid, field)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
