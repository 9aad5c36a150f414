"""Index expressions narrowed to what a caller may use, as Elasticsearch's security narrows them,
and the names a listing may show it.

Explicit names (of indices or aliases) the caller may not use are refused (403); wildcards and
`_all` keep only the indices and aliases it may use (none: `*,-*`, what Elasticsearch
substitutes), unless the action is strict, where every name the expression matches must be
allowed. Alias expressions (`GET /_alias/<name>`, `_cat/aliases/<name>`) are narrowed the same
way: explicit names are refused, and a listing names only the aliases the caller may use
(`permitted`), as Elasticsearch replaces an alias wildcard with the authorized aliases. The
route guard (`rest/access.py`) and the requests whose items each name indices (`_msearch`)
share it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol

from leafsearch.security.subject import Subject


class NameResolver(Protocol):
    """The index and alias names of an expression, aliases kept (the node's `resolve_names`)."""

    def __call__(
        self,
        expr: str | None,
        *,
        ignore_unavailable: bool,
        allow_no_indices: bool,
        expand_wildcards: str,
        forbid_closed: bool,
    ) -> list[str]: ...


NO_INDICES = "*,-*"


def _explicit(expression: str | None) -> list[str]:
    """The names an expression gives as they are: no wildcard, not `_all`, not an exclusion."""
    parts = [p for p in (expression or "").split(",") if p]
    return [p for p in parts if not p.startswith("-") and "*" not in p and p != "_all"]


def refuse_explicit(subject: Subject, action: str, expression: str | None) -> list[str]:
    """The explicit names of `expression`, all of which `subject` may use for `action` (else 403)."""
    explicit = _explicit(expression)
    refused = [name for name in explicit if not subject.may_on_index(action, name)]
    if refused:
        raise subject.index_refusal(action, refused)
    return explicit


def permitted(subject: Subject | None, action: str) -> Callable[[str], bool]:
    """Whether a listing may show a name to `subject` for `action`: every name without
    authentication, else those it may use (an alias by its own name)."""
    if subject is None:
        return lambda name: True
    return partial(subject.may_on_index, action)


def narrow_expression(
    resolve_names: NameResolver,
    subject: Subject,
    action: str,
    expression: str | None,
    *,
    expand_wildcards: str = "open",
    strict: bool = False,
) -> str | None:
    """The expression to run instead (None: unchanged), or the 403 for what may not be used."""
    explicit = refuse_explicit(subject, action, expression)
    # Names, not concrete indices: an alias the caller may use stands for its indices even where
    # the caller may not name them, as Elasticsearch authorizes an alias by its own name.
    matched = resolve_names(
        expression,
        ignore_unavailable=True,
        allow_no_indices=True,
        expand_wildcards=expand_wildcards,
        forbid_closed=False,
    )
    denied = [name for name in matched if not subject.may_on_index(action, name)]
    if not denied:
        return None
    if strict:
        raise subject.index_refusal(action, denied)
    allowed = list(dict.fromkeys(explicit + [n for n in matched if n not in denied]))
    return ",".join(allowed) or NO_INDICES
