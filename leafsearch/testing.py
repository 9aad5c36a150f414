"""`Server`: a leafsearch server process for tests, with any test runner.

    from leafsearch.testing import Server

    with Server() as server:                 # a free port, a temporary data folder
        es = server.client()                 # the official Elasticsearch client (if installed)
        es.index(index="books", document={"title": "Dune"}, refresh=True)

The server runs as `python -m leafsearch serve` in a child process, from the same `leafsearch` the
caller imported; it listens on port 0 (the kernel's free port, so two test runs never race for
one) and the port is read from the line it logs once it accepts connections, so `start()`
returns as soon as the server is usable (well under a second on an empty folder). `stop()`
sends SIGTERM (a clean shutdown that flushes the node) and deletes a temporary data folder. The
pytest plugin (`pytest_leafsearch`) and this project's own tests start their servers with it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import leafsearch

STARTUP_TIMEOUT = 30.0
_ANNOUNCED = re.compile(r"leafsearch listening on (https?://\S+) ")
#: The folder holding the `leafsearch` package this process imported: the child imports the same.
PACKAGE_ROOT = Path(leafsearch.__file__).resolve().parent.parent


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child `python -m leafsearch`: this one, with the package's folder first
    on PYTHONPATH so the child runs the code the caller runs (a checkout, not another install)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


class Server:
    """A `leafsearch serve` process on `data` (a temporary folder when None), `args` added to its
    command line; its output goes to `log` (by default `<data>.log`, or inside the temporary
    folder). `popen` starts the process (`subprocess.Popen`'s arguments and result: this project's
    tests fork theirs from a process that imported the engine once, tests/server_zygote.py). Use as
    a context manager, or call `start()` and `stop()`."""

    def __init__(
        self,
        data: str | Path | None = None,
        *,
        args: Sequence[str] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        log: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        preexec_fn: Callable[[], None] | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
        popen: Callable[..., subprocess.Popen] = subprocess.Popen,
    ) -> None:
        self._temporary: str | None = None
        if data is None:
            self._temporary = tempfile.mkdtemp(prefix="leafsearch-")
            data = Path(self._temporary) / "data"
        self.data = Path(data)
        self.log = Path(log) if log is not None else self.data.with_name(self.data.name + ".log")
        self.args = list(args)
        self.host = host
        self.requested_port = port
        self.env = env
        self.preexec_fn = preexec_fn
        self.startup_timeout = startup_timeout
        self.popen = popen
        self.process: subprocess.Popen | None = None
        self.url = ""

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "leafsearch",
            "serve",
            "--host",
            self.host,
            "--port",
            str(self.requested_port),
            "--data",
            str(self.data),
            "--log-level",
            "info",  # the address is read from the start-up line
            *self.args,
        ]

    def start(self) -> Server:
        """Starts the process and returns once it accepts connections (RuntimeError if it exits or
        does not announce itself within `startup_timeout`, with its output)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as output:
            self.process = self.popen(
                self.command(),
                env=child_env(self.env),
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=self.preexec_fn,
            )
        deadline = time.monotonic() + self.startup_timeout
        while True:
            with open(self.log, "rb") as handle:
                handle.seek(offset)
                found = _ANNOUNCED.search(handle.read().decode("utf-8", "replace"))
            if found:
                self.url = found.group(1)
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"leafsearch exited with {self.process.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"leafsearch did not start within {self.startup_timeout}s:\n{self.output()}"
                )
            time.sleep(0.005)

    def output(self) -> str:
        """What the server logged so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM and wait (SIGKILL after `timeout`); a temporary data folder is then deleted."""
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None

    def client(self, **options: Any) -> Any:
        """An `elasticsearch.Elasticsearch` client of this server (the package must be installed)."""
        from elasticsearch import Elasticsearch

        options.setdefault("request_timeout", 60)
        return Elasticsearch(self.url, **options)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
