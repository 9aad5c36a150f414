"""`error_trace=true`: Elasticsearch's `stack_trace` beside each error of a refusal.

Elasticsearch writes the Java stack trace of the error, of each root cause and of the cause. Here
the trace of a refusal (an `ElasticError`) names frames by module, function and file name, never by
a path on the server's disk, so any caller may see it as in Elasticsearch; the reason is already in
the body. A refusal with a 5xx status follows the rule of unexpected failures (`access.py`): its
trace goes only to a superuser, or to anyone when authentication is off.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from leafsearch.errors import ElasticError
    from leafsearch.rest.exchange import RestRequest


def stack_trace(exc: BaseException) -> str:
    """`<type>: <reason>` then one `at module.function(file:line)` line per frame, innermost first
    as Java prints them."""
    lines = [f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"]
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        lines.append(
            f"\tat {_module(frame.filename)}.{frame.name}({_basename(frame.filename)}:{frame.lineno})"
        )
    return "\n".join(lines) + "\n"


def _basename(filename: str) -> str:
    return filename.replace("\\", "/").rpartition("/")[2]


def _module(filename: str) -> str:
    """`leafsearch.search.coordinator` for a file of the package, else the file's bare name."""
    path = filename.replace("\\", "/")
    head, found, tail = path.rpartition("/leafsearch/")
    name = f"leafsearch/{tail}" if found else _basename(path)
    return name.removesuffix(".py").replace("/", ".")


def with_stack_trace(exc: ElasticError, request: RestRequest) -> dict[str, Any]:
    """The error body of `exc` with `stack_trace` in the error, its root causes and its cause."""
    body = exc.body()
    subject = request.subject
    if exc.status >= 500 and subject is not None and not subject.superuser:
        return body
    error = body["error"]
    own = stack_trace(exc)
    error["stack_trace"] = own
    roots = exc.roots()
    for rendered, root in zip(error["root_cause"], roots, strict=True):
        rendered["stack_trace"] = own if root is exc else stack_trace(root)
    if exc.caused_by is not None:
        error["caused_by"]["stack_trace"] = stack_trace(exc.caused_by)
    return body
