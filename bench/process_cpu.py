"""The CPU a command's process tree used, by kind of process: `python -m bench.process_cpu <command...>`.

`bench.tree_cpu` counts a tree's CPU as the processes are waited for, in one sum. A test run on
Ray needs it split: its machine actors, coordinators, merge workers and Ray's own daemons (GCS,
raylets, agents) are processes nobody in the run waits for until its cluster stops. Here the
command runs below this process, made their child subreaper (orphans stay in the tree), and every
`SAMPLE_SECONDS` each process of the tree is read from /proc (its own user + sys ticks, and its
command line when it has one: a zombie's is empty), until the command has ended and every process
left below it has too; each process's last reading then counts for its kind (`kind`). What a
process used after its last reading, or in a life shorter than one interval, is counted apart
(`UNREAD`), from the CPU of every process waited for (each one, by its parent or here). Linux
only. Prints the wall seconds and each kind's CPU seconds on stderr; exits with the command's
status.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench.tree_cpu import become_subreaper, reap_orphans

#: Seconds between two readings of the tree.
SAMPLE_SECONDS = 0.5
TICKS = os.sysconf("SC_CLK_TCK")
#: (what the command line holds, its kind), the first match wins.
KINDS = (
    ("/raylet ", "raylet"),
    ("gcs_server", "gcs_server"),
    ("log_monitor", "log_monitor"),
    ("multiprocessing.spawn", "spawned (multiprocessing)"),
    ("multiprocessing.forkserver", "fork server (multiprocessing)"),
    ("leafsearch serve", "leafsearch serve"),
    # (the tests' servers forked from it keep its command line: tests/server_zygote.py)
    ("tests.server_zygote", "leafsearch serve (the tests' zygote and its forks)"),
    # (the CLI's other commands: their arguments often name a folder of pytest's)
    ("-m leafsearch ", "leafsearch (other commands)"),
    ("-m pytest", "pytest"),
    ("exec(eval(sys.stdin.readline()))", "pytest (an xdist worker)"),
)

#: The kind of what the tree used that no reading saw (`main`).
UNREAD = "(not read: after a process's last reading, or between two)"
#: A process's reading: (command line, CPU seconds, parent pid, whether it has ended: a zombie).
Reading = tuple[str, float, int, bool]


def kind(command: str) -> str:
    """What a process is, from its command line: a Ray worker by the title Ray gives it
    (`ray::MachineActor`, `ray::IDLE`), a coordinator as `leafsearch serve --ray`, else by `KINDS`,
    else its first 60 characters."""
    if not command:
        return "(exited)"
    if command.startswith("ray::"):
        return command.split()[0]
    for part, name in KINDS:
        if part in command:
            return f"{name} --ray" if name == "leafsearch serve" and " --ray" in command else name
    return command[:60]


def readings() -> dict[tuple[int, str], Reading]:
    """Every process's reading, by (pid, start time): a pid used again is another process."""
    out: dict[tuple[int, str], Reading] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # (ended meanwhile)
            continue
        fields = stat.rpartition(")")[2].split()  # "pid (name) state ppid ...": the name may hold spaces
        cpu = (int(fields[11]) + int(fields[12])) / TICKS
        out[(int(entry.name), fields[19])] = (command, cpu, int(fields[1]), fields[0] in ("Z", "X"))
    return out


def in_tree(found: dict[tuple[int, str], Reading], tree: set[tuple[int, str]], root: int) -> None:
    """Adds to `tree` (processes by (pid, start time)) every process of `found` below `root` or
    below one of `tree` that `found` still holds. By start time, not pid: a pid of the tree used
    again by a process of another user of the machine (and that process's children) is not the
    tree's."""
    while True:
        size = len(tree)
        parents = {root} | {key[0] for key in tree if key in found}
        tree.update(key for key, (_, _, parent, _) in found.items() if parent in parents)
        if len(tree) == size:
            return


def by_kind(last: dict[tuple[int, str], Reading]) -> dict[str, float]:
    """CPU seconds per kind: the sum of its processes' last readings."""
    totals: dict[str, float] = defaultdict(float)
    for command, cpu, _, _ in last.values():
        totals[kind(command)] += cpu
    return dict(totals)


def main(command: list[str]) -> int:
    if not command:
        print("usage: python -m bench.process_cpu <command> [arguments...]", file=sys.stderr)
        return 2
    become_subreaper()
    tree: set[tuple[int, str]] = set()
    last: dict[tuple[int, str], Reading] = {}
    began = time.monotonic()
    child = subprocess.Popen(command)
    while True:
        done = child.poll() is not None
        found = readings()
        in_tree(found, tree, os.getpid())
        running = False
        for key, reading in found.items():
            if key in tree:
                command = reading[0] or last.get(key, reading)[0]  # (a zombie's is empty)
                last[key] = (command, *reading[1:])
                running |= not reading[3]
        if done and not running:
            break
        time.sleep(SAMPLE_SECONDS)
    reap_orphans()
    totals = by_kind(last)
    # Every process of the tree has been waited for by now, by its parent or (an orphan) here:
    # the whole tree's CPU, of which the readings miss what processes used after their last one
    # (or in a life between two: the tests' servers forked from a zygote can be that short).
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    unread = waited.ru_utime + waited.ru_stime - sum(totals.values())
    if unread > 0:
        totals[UNREAD] = unread
    print(f"wall {time.monotonic() - began:.1f} s, CPU {sum(totals.values()):.2f} s", file=sys.stderr)
    for name, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {seconds:8.2f} s  {name}", file=sys.stderr)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
