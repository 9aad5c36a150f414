"""Test servers forked from a process that imported the engine once, not started as new interpreters.

Each `leafsearch serve` a test starts is an interpreter that imports the engine (numpy, the index,
the search and write paths, uvicorn, click) before it answers: about 0.5 s of its 0.6 s of CPU, some
hundreds of times a run (bench/RESULTS.md "The test suite", "Session 23, `suite9`"), and each CLI
run (`users`, `export`, `import`) imports its share. Here each test process (an xdist worker) starts
one `ServerZygote` the first time it starts one of them: a child interpreter that imports what
`serve` runs, the whole package (as the server's warm-up does, common/preload.py), then waits, with
one thread, for requests. A request (`ForkedPopen`, a `subprocess.Popen`) carries the command line,
environment, folder, umask, niceness and the three standard files (file descriptors over the socket,
`SCM_RIGHTS`); the zygote forks, and the copy becomes what `python -m leafsearch ...` would have
been: standard files, signal handlers, folder, environment, `sys.argv` and `__main__` replaced, then
`runpy` runs `leafsearch.__main__` as `-m` does, to the same interpreter exit (atexit, logging's
flush, the exit code). The server is its own process: the test signals its pid itself (kill -9
trials, SIGSTOP), and its log and output go where they went. The zygote is its parent and reports
its exit status over the socket (the pid stays a zombie until the test has it, as with `Popen`).
Before its first Ray coordinator (`serve --ray`) the zygote imports Ray and the Ray backend too, so
that the coordinators forked after it start without that import (`_import_ray`). Before each fork it
freezes what it holds (`gc.freeze`, as the search workers' zygote does: search/workers/zygote.py), so
that neither a child's collections nor its interpreter's exit walk the zygote's objects and write
to the pages they share: a CLI run's exit alone copied and walked them, about 0.1 s of its 0.15 s of
CPU (bench/RESULTS.md "The suite's CPU, cut (session 26, `suite14`)").

What cannot follow a fork falls back to `subprocess.Popen` (`popen` decides): another interpreter or
flags, a `preexec_fn`, `Popen` options beyond the files, folder and environment, a higher priority
than the zygote's, and an environment that differs from the zygote's in a variable read while the
interpreter or its libraries load (`IMPORT_TIME_VARIABLES`): the command line's own variables
(`LEAFSEARCH_*`, read by click when the command runs) are honoured either way. Tests about a fresh
interpreter's start (test_cli, test_server_logs, test_worker_zygote's, the pytest plugin's) start
theirs without it.
"""

from __future__ import annotations

import errno
import gc
import os
import pickle
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leafsearch.testing import child_env

#: Prefixes of the environment variables an interpreter, numpy's BLAS, glibc or the dynamic
#: loader read as they start (the locale among them: the standard files' encoding): a request whose
#: environment differs from the zygote's in one of them gets a new interpreter.
IMPORT_TIME_VARIABLES = (
    *("PYTHON", "OPENBLAS", "OMP_", "MKL_", "NUMPY", "LD_", "MALLOC", "GLIBC"),
    *("LANG", "LC_", "TZ"),
)
#: Prefixes of the variables Ray and its gRPC read as they are imported (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`
#: among them: tests/ray_cluster.py `LOOPBACK_ENV`).
RAY_IMPORT_VARIABLES = ("RAY_", "GRPC_")
#: Of those, the ones read when used, not at the start: Ray's driver sets PYTHONBREAKPOINT in the
#: tests that connect to a cluster (read at each `breakpoint()`).
READ_WHEN_USED = frozenset(("PYTHONBREAKPOINT",))
#: The `Popen` options a forked start honours (with their defaults): any other falls back.
FORKED_OPTIONS = frozenset(
    ("stdin", "stdout", "stderr", "env", "cwd", "text", "encoding", "errors", "universal_newlines", "bufsize")
)
#: The zygote's command (`python -c`): `main`, with the socket's file descriptor as its argument.
ZYGOTE_MAIN = "from tests.server_zygote import main; main()"
#: The signals whose handlers the zygote changes or might: a child gets its start's back.
RESTORED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)
#: Largest message on the socket (a request's environment and arguments).
MESSAGE_BYTES = 1 << 20


def _uses_ray(args: Sequence[Any]) -> bool:
    """Whether a `python -m leafsearch` command line is a Ray coordinator's (`serve --ray ...`)."""
    return any(str(arg).split("=", 1)[0] == "--ray" for arg in args[3:])


def _ray_variables(env: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in env.items() if name.startswith(RAY_IMPORT_VARIABLES)}


def _umask() -> int:
    """This process's umask, read without setting it (another thread may be creating files)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise OSError(errno.ENOSYS, "no Umask in /proc/self/status")


class ServerZygote:
    """A test process's zygote of `python -m leafsearch` processes, started at the first `popen`
    that can use it; `close()` ends it (its servers are the tests' to stop, before)."""

    def __init__(self, env: Mapping[str, str], cwd: str | Path) -> None:
        self.env = dict(env)
        self.cwd = str(cwd)
        # Starts the zygote, sends requests. Reentrant: a `ForkedPopen` collected meanwhile (its
        # `__del__` polls) may ask for an exit status in the middle.
        self._lock = threading.RLock()
        self._changed = threading.Condition()  # a reply or an exit arrived
        self._process: subprocess.Popen | None = None
        self._socket: socket.socket | None = None
        self._niceness = 0
        self._replies: dict[int, tuple[str, Any]] = {}
        self._exits: dict[int, int] = {}
        self._requests = 0
        self._broken: str | None = None
        self._owner = os.getpid()  # a forked copy of the test process starts its own processes
        # The Ray variables of the first `--ray` start, with which the zygote imported Ray for it
        # and every later one (`main`): a `--ray` start with others gets a new interpreter.
        self._ray_env: dict[str, str] | None = None

    def usable(self, args: Sequence[Any], options: Mapping[str, Any]) -> bool:
        """Whether `popen(args, **options)` can be a fork (else it is a `subprocess.Popen`)."""
        if not hasattr(os, "pidfd_open") or self._broken is not None or os.getpid() != self._owner:
            return False
        if [str(arg) for arg in args[:3]] != [sys.executable, "-m", "leafsearch"]:
            return False
        if any(options.get(name) is not None for name in set(options) - FORKED_OPTIONS):
            return False
        if os.getpriority(os.PRIO_PROCESS, 0) < self._niceness:
            return False
        env = options.get("env")
        env = dict(os.environ) if env is None else env
        differ = {name for name in set(env) | set(self.env) if env.get(name) != self.env.get(name)}
        if any(name.startswith(IMPORT_TIME_VARIABLES) for name in differ - READ_WHEN_USED):
            return False
        return not _uses_ray(args) or self._ray_env in (None, _ray_variables(env))

    def popen(self, args: Sequence[Any], **options: Any) -> subprocess.Popen:
        """`subprocess.Popen(args, **options)`: a fork of the zygote where `usable`, else a new process."""
        if self.usable(args, options):
            return ForkedPopen(self, args, **options)
        return subprocess.Popen(args, **options)

    def run(
        self,
        args: Sequence[Any],
        *,
        input: Any = None,
        capture_output: bool = False,
        timeout: float | None = None,
        check: bool = False,
        **options: Any,
    ) -> subprocess.CompletedProcess:
        """`subprocess.run(args, ...)` (those arguments and `Popen`'s), its process from `popen`."""
        if input is not None:
            options["stdin"] = subprocess.PIPE
        if capture_output:
            options["stdout"] = options["stderr"] = subprocess.PIPE
        with self.popen(args, **options) as process:
            try:
                stdout, stderr = process.communicate(input, timeout=timeout)
            except BaseException:  # (a timeout among them) as subprocess.run: not left running
                process.kill()
                process.wait()
                raise
        done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        if check:
            done.check_returncode()
        return done

    def _started(self) -> socket.socket:
        """The socket to the zygote, started first if it is not yet (under `_lock`)."""
        if self._socket is None:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            with theirs:
                self._process = subprocess.Popen(
                    [sys.executable, "-c", ZYGOTE_MAIN, str(theirs.fileno())],
                    env=self.env,
                    cwd=self.cwd,
                    stdin=subprocess.DEVNULL,
                    pass_fds=[theirs.fileno()],
                )
            self._niceness = os.getpriority(os.PRIO_PROCESS, 0)
            self._socket = ours
            threading.Thread(target=self._read, args=(ours,), name="server-zygote", daemon=True).start()
        return self._socket

    def start(self, args: Sequence[str], env: Mapping[str, str], cwd: str, files: Sequence[int]) -> int:
        """Asks the zygote for a fork running `args`; its pid (OSError if the zygote could not)."""
        with self._lock:
            connection = self._started()
            if _uses_ray(args) and self._ray_env is None:
                self._ray_env = _ray_variables(env)
            self._requests += 1
            request = self._requests
            message = (
                "start",
                request,
                list(args),
                dict(env),
                cwd,
                _umask(),
                os.getpriority(os.PRIO_PROCESS, 0),
            )
            socket.send_fds(connection, [pickle.dumps(message)], list(files))
        with self._changed:
            self._changed.wait_for(lambda: request in self._replies or self._broken is not None)
            if request not in self._replies:
                raise OSError(errno.ECHILD, f"the server zygote ended: {self._broken}")
            kind, value = self._replies.pop(request)
        if kind == "error":
            raise OSError(*value)
        return value

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        """The return code of the zygote's child `pid` (as `Popen.returncode`) once it has ended,
        waiting up to `timeout` seconds (None: until it ends; 0: not at all); the zygote then
        reaps it. None if it is still running."""
        with self._changed:
            if not self._changed.wait_for(lambda: pid in self._exits or self._broken is not None, timeout):
                return None
            if pid not in self._exits:
                raise ChildProcessError(errno.ECHILD, f"the server zygote ended: {self._broken}")
            code = self._exits.pop(pid)
        with self._lock:
            if self._socket is not None:
                self._socket.send(pickle.dumps(("reap", pid)))
        return code

    def _read(self, connection: socket.socket) -> None:
        """The zygote's replies and its children's exits, until it ends (a thread's life)."""
        reason = "its socket closed"
        try:
            while message := connection.recv(MESSAGE_BYTES):
                kind, key, value = pickle.loads(message)
                with self._changed:
                    if kind == "exited":
                        self._exits[key] = value
                    else:
                        self._replies[key] = (kind, value)
                    self._changed.notify_all()
        except OSError as exc:
            reason = str(exc)
        with self._changed:
            self._broken = reason
            self._changed.notify_all()

    def close(self) -> None:
        """Ends the zygote (it exits when its socket closes) and waits for it."""
        with self._lock:
            if self._socket is not None:
                self._socket.shutdown(socket.SHUT_RDWR)
                self._socket.close()
                self._socket = None
            if self._process is not None:
                self._process.wait()
                self._process = None


class ForkedPopen(subprocess.Popen):
    """A `subprocess.Popen` whose child is a fork of `zygote`: the same pipes, `pid`, signals,
    `poll`, `wait`, `communicate` and `returncode`, the exit status read from the zygote."""

    def __init__(self, zygote: ServerZygote, args: Sequence[Any], **options: Any) -> None:
        self._zygote = zygote
        super().__init__(args, **options)

    def _execute_child(  # noqa: PLR0913 - subprocess.Popen's own signature (POSIX)
        self,
        args: Sequence[Any],
        executable: Any,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Sequence[int],
        cwd: Any,
        env: Mapping[str, str] | None,
        startupinfo: Any,
        creationflags: int,
        shell: bool,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *unused: Any,
    ) -> None:
        # -1: inherited, as a new process inherits this one's standard files.
        files = [fd if fd != -1 else number for number, fd in enumerate((p2cread, c2pwrite, errwrite))]
        folder = os.fspath(cwd) if cwd is not None else os.getcwd()
        try:
            self.pid = self._zygote.start(
                [str(arg) for arg in args], dict(os.environ) if env is None else env, folder, files
            )
            self._child_created = True
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _internal_poll(self, _deadstate: int | None = None, **unused: Any) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self._zygote.exit_status(self.pid, 0)
            except ChildProcessError:
                if _deadstate is not None:
                    self.returncode = _deadstate
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if self.returncode is None:
            self.returncode = self._zygote.exit_status(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode


#: This test process's zygote of the servers its tests start (`running_server`, `start_server` and the
#: Ray tests' coordinators in tests/conftest.py and tests/ray_cluster.py): started at the first,
#: ended at the run's end (conftest's `pytest_unconfigure`). Here, not in conftest, which the
#: tests also import as `tests.conftest`, a second module.
SERVER_ZYGOTE = ServerZygote(child_env(), Path(__file__).resolve().parent.parent)


# The zygote process.


def main() -> None:
    """The zygote's life (`ServerZygote` runs it); in a forked child, the command it was asked for."""
    connection = socket.socket(fileno=int(sys.argv[1]))
    del sys.argv[1:]
    import uvicorn  # noqa: F401 - what `serve` imports, once

    import leafsearch.cli  # noqa: F401
    from leafsearch.common.preload import preload

    preload()
    request = _serve(connection)
    if request is not None:
        _become(*request)


def _serve(connection: socket.socket) -> tuple[Any, ...] | None:
    """Forks a child per request, reports each child's exit, reaps it once told; returns in a
    forked child (its request) or once the socket closes (None)."""
    # The handlers a new interpreter has: the child gets them back before it runs the command.
    handlers = {number: signal.getsignal(number) for number in RESTORED_SIGNALS}
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the tests' servers, not this
    selector = selectors.DefaultSelector()
    selector.register(connection, selectors.EVENT_READ)
    children: dict[int, int] = {}  # pidfd: pid
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj is not connection:
                    pid = children.pop(key.fd)
                    selector.unregister(key.fd)
                    os.close(key.fd)
                    # Not reaped yet: the pid stays this process's until the test has its status.
                    ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                    code = ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status
                    connection.send(pickle.dumps(("exited", pid, code)))
                    continue
                message, files, _, _ = socket.recv_fds(connection, MESSAGE_BYTES, 3)
                if not message:
                    return None
                kind, *fields = pickle.loads(message)
                if kind == "reap":
                    os.waitpid(fields[0], 0)
                    continue
                request, args, env, cwd, umask, niceness = fields
                if _uses_ray(args) and "ray" not in sys.modules:
                    _import_ray(env)
                sys.stdout.flush()
                sys.stderr.flush()
                gc.freeze()  # (the child's collections and exit leave the shared pages alone)
                try:
                    pid = os.fork()
                except OSError as exc:
                    for fd in files:
                        os.close(fd)
                    connection.send(pickle.dumps(("error", request, (exc.errno, exc.strerror))))
                    continue
                if pid == 0:
                    selector.close()
                    connection.close()
                    for pidfd in children:
                        os.close(pidfd)
                    return args, env, cwd, umask, niceness, files, handlers
                for fd in files:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = pid
                selector.register(pidfd, selectors.EVENT_READ)
                connection.send(pickle.dumps(("started", request, pid)))
    except (BrokenPipeError, ConnectionResetError):
        return None


def _import_ray(env: Mapping[str, str]) -> None:
    """Before the zygote's first `--ray` fork: Ray and the Ray backend imported, with the request's
    Ray variables (`RAY_IMPORT_VARIABLES`, which Ray reads as it is imported), so that each
    coordinator forked from then on starts without importing them (0.4-0.5 s of CPU each, some
    forty coordinators a run). Importing Ray starts no thread and connects to nothing: each fork
    still connects as a new process (`ray.init`). Without Ray, nothing: the fork fails as a new
    interpreter would."""
    from leafsearch.common.preload import preload

    for name in [name for name in os.environ if name.startswith(RAY_IMPORT_VARIABLES)]:
        del os.environ[name]
    os.environ.update(_ray_variables(env))
    try:
        import ray  # noqa: F401
    except ImportError:
        return
    preload()  # the Ray backend's modules, now that Ray is imported


def _become(
    args: list[str],
    env: dict[str, str],
    cwd: str,
    umask: int,
    niceness: int,
    files: list[int],
    handlers: dict[int, Any],
) -> None:
    """In a forked child: becomes `python -m leafsearch <args[3:]>` run with these standard files,
    environment, folder, umask and niceness; exits as that command does."""
    import runpy

    for number, fd in enumerate(files):
        os.dup2(fd, number)
    for fd in set(files) - {0, 1, 2}:
        os.close(fd)
    for number, handler in handlers.items():
        signal.signal(number, handler)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    os.umask(umask)
    if niceness > os.getpriority(os.PRIO_PROCESS, 0):
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    sys.path[0] = cwd  # as `-m` puts the folder it starts in
    sys.orig_argv = list(args)
    sys.argv = ["-m", *args[3:]]  # runpy sets the module's file first
    runpy.run_module("leafsearch", run_name="__main__", alter_sys=True)
