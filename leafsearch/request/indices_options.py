"""How an index expression resolves: the `ignore_unavailable`, `allow_no_indices` and
`expand_wildcards` options of a request (`indices.admin.indices_of` applies them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IndicesOptions:
    """How an expression resolves; each API has Elasticsearch's own defaults."""

    ignore_unavailable: bool = False
    allow_no_indices: bool = True
    expand_wildcards: str = "open"
    #: APIs that read or write documents refuse closed indices; administration does not.
    forbid_closed: bool = False
