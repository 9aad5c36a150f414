"""The `script` option of a request, compiled once per source, and the node's stored scripts.

A request names a script inline (`"script": "ctx._source.n++"` or `{"source", "params", "lang"}`)
or by the id of a stored one (`{"id", "params"}`); `parse` gives a `Script` ready to run. Stored
scripts live in the data folder's `scripts.json`, replaced atomically and fsynced before a `PUT`
is acknowledged, and are compiled when stored, so a script that does not compile is refused then."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from leafsearch.common.durable import write_private
from leafsearch.common.memo import memo
from leafsearch.errors import ElasticError, IllegalArgument
from leafsearch.scripts.painless import CompiledScript
from leafsearch.scripts.runtime import ScriptError

#: Elasticsearch's `script.max_size_in_bytes`.
MAX_SOURCE_BYTES = 65535
SCRIPTS_FILE = "scripts.json"
_EITHER = "must specify either [source] for an inline script or [id] for a stored script"
_WRITE_OPS = frozenset({"index", "create", "noop", "none", "delete"})
_SCRIPT_KEYS = {"source", "id", "params", "lang", "options", "inline"}


@memo(256)
def compile_source(source: str) -> CompiledScript:
    """A source compiled once (sources up to memo's 4 KB are kept; longer ones compile each time)."""
    return CompiledScript(source)


@dataclass(frozen=True)
class Script:
    compiled: CompiledScript
    params: dict[str, Any] = field(default_factory=dict)

    def run(self, variables: Mapping[str, Any]) -> Any:
        return self.compiled.run({"params": self.params, **variables})

    def update(self, ctx: dict[str, Any]) -> str:
        """Run a write script (an update's, a by-query operation's) on `ctx` and answer the
        `ctx.op` it left: `index`/`create` (with `ctx._source` a map), `noop`/`none` or `delete`.
        Its failure is Elasticsearch's "failed to execute script" caused by the script's error."""
        try:
            self.run({"ctx": ctx})
        except ScriptError as exc:
            raise IllegalArgument("failed to execute script", caused_by=exc) from None
        op = ctx.get("op")
        if op not in _WRITE_OPS:
            raise IllegalArgument(f"Invalid op [{op}] for script, expected one of [noop, index, delete]")
        if op in ("index", "create") and not isinstance(ctx.get("_source"), dict):
            raise IllegalArgument("failed to execute script: [ctx._source] must be a map")
        return op


def check_size(source: str, kind: str, name: str) -> None:
    size = len(source.encode())
    if size > MAX_SOURCE_BYTES:
        raise IllegalArgument(
            f"exceeded max allowed {kind} script size in bytes [{MAX_SOURCE_BYTES}] with size [{size}] "
            f"for script [{name}]"
        )


def _parse_error(reason: str) -> ElasticError:
    return ElasticError(reason, status=400, error_type="x_content_parse_exception")


def _check_lang(lang: Any) -> None:
    if lang not in (None, "painless"):
        raise IllegalArgument(f"script_lang not supported [{lang}]")


class StoredScripts:
    """The node's stored scripts, by id."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / SCRIPTS_FILE
        self._lock = threading.Lock()
        self._scripts: dict[str, dict[str, Any]] = (
            orjson.loads(self.path.read_bytes())["scripts"] if self.path.exists() else {}
        )
        #: Called with the table's bytes before a change is written, when coordinators share it
        #: (node/cluster_sync.py); returns the table as published (merged with another's change).
        self.shared: Callable[[bytes], bytes] | None = None

    def put(self, script_id: str, body: Any) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("script"), dict):
            raise IllegalArgument(
                "must specify either [source] for an inline script or [id] for a stored script"
            )
        script = body["script"]
        unknown = next((key for key in script if key not in ("source", "lang", "options", "params")), None)
        if unknown is not None:
            raise _parse_error(f"[script] unknown field [{unknown}]")
        _check_lang(script.get("lang", "painless"))
        source = script.get("source")
        if not isinstance(source, str) or not source:
            raise IllegalArgument("must specify source for stored script")
        check_size(source, "stored", script_id)
        compile_source(source)  # a compile error is the PUT's 400
        with self._lock:
            self._write({**self._scripts, script_id: {"lang": "painless", "source": source}})

    def get(self, script_id: str) -> dict[str, Any] | None:
        return self._scripts.get(script_id)

    def delete(self, script_id: str) -> bool:
        with self._lock:
            if script_id not in self._scripts:
                return False
            self._write({k: v for k, v in self._scripts.items() if k != script_id})
            return True

    def _write(self, scripts: dict[str, dict[str, Any]]) -> None:
        data = orjson.dumps({"scripts": scripts})
        self._take(data if self.shared is None else self.shared(data))

    def adopt(self, data: bytes) -> None:
        """Take the table `data` another coordinator wrote."""
        with self._lock:
            self._take(data)

    def _take(self, data: bytes) -> None:
        write_private(self.path, data)
        self._scripts = orjson.loads(data).get("scripts", {})

    def parse(self, value: Any) -> Script:
        """The `script` option of a request."""
        if isinstance(value, str):
            value = {"source": value}
        if not isinstance(value, dict):
            raise ElasticError(
                "[script] script must be a string or an object",
                status=400,
                error_type="x_content_parse_exception",
            )
        unknown = next((key for key in value if key not in _SCRIPT_KEYS), None)
        if unknown is not None:
            raise _parse_error(f"[script] unknown field [{unknown}]")
        params = value.get("params", {})
        if not isinstance(params, dict):
            raise _parse_error("[script] failed to parse field [params]")
        source = value.get("source", value.get("inline"))
        if ("id" in value) == (source is not None):
            raise IllegalArgument(
                "must specify either [source] for an inline script or [id] for a stored script"
            )
        if "id" in value:
            if "lang" in value:
                raise IllegalArgument("illegally specified <lang> for a stored script")
            stored = self.get(str(value["id"]))
            if stored is None:
                raise ElasticError(
                    f"unable to find script [{value['id']}] in cluster state",
                    status=404,
                    error_type="resource_not_found_exception",
                )
            source = stored["source"]
        else:
            _check_lang(value.get("lang"))
            if not isinstance(source, str):
                raise IllegalArgument("[script] source must be a string")
            check_size(source, "inline", "<inline>")
        return Script(compile_source(source), params)
