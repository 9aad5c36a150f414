"""The CPU a command and every process below it used: `python -m bench.tree_cpu <command...>`.

`time` counts only the children each process waited for: the search workers of a server killed
with `kill -9`, or clients forked by a fork server that exits without waiting, are never counted.
Here the command runs under a child subreaper (Linux's `PR_SET_CHILD_SUBREAPER`): every orphan
of its tree is handed to this process, which waits for all of them before it reads what its
children used. Prints wall, user and sys seconds on stderr; exits with the command's status.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """The orphans of every process this one starts from now on are handed to it, not to init."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def reap_orphans() -> None:
    """Wait for the orphans handed over, until none is left."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def main(command: list[str]) -> int:
    if not command:
        print("usage: python -m bench.tree_cpu <command> [arguments...]", file=sys.stderr)
        return 2
    become_subreaper()
    began = time.monotonic()
    status = subprocess.run(command, check=False).returncode
    reap_orphans()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"wall {time.monotonic() - began:.2f} s, user {used.ru_utime:.2f} s, sys {used.ru_stime:.2f} s, "
        f"CPU {used.ru_utime + used.ru_stime:.2f} s",
        file=sys.stderr,
    )
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
