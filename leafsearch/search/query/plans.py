"""Plan nodes: queries resolved against one shard's mapping (field types looked up, values parsed,
text analyzed), which the executors run over each segment. `boost` is the node's own weight;
executors multiply it into the boost passed down from the parents, as Lucene's weights do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class AllDocs:
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class NoDocs:
    pass


@dataclass(frozen=True, slots=True)
class ScoredTerm:
    """One term scored with BM25. kind: text, keyword, boolean (term is then 0 or 1)."""

    field: str
    kind: str
    term: str | int
    boost: float = 1.0
    doc_freq: int | None = None  # blended document frequency of a fuzzy expansion


@dataclass(frozen=True, slots=True)
class ValueSet:
    """Documents holding any of the values, constant score. kind: text, keyword, long, double."""

    field: str
    kind: str
    values: tuple
    boost: float = 1.0
    case_insensitive: bool = False
    precision: str | None = None  # float or half_float: compare at the field's precision


@dataclass(frozen=True, slots=True)
class NumRange:
    """lo <= value <= hi on a numeric column (None: unbounded), constant score."""

    field: str
    lo: int | float | None
    hi: int | float | None
    precision: str | None = None
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class TermRange:
    """A lexicographic range over the terms of a text or keyword field, constant score."""

    field: str
    kind: str
    lo: bytes | None
    hi: bytes | None
    include_lo: bool
    include_hi: bool
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class PatternPlan:
    """Terms matching a prefix, wildcard or regular expression. kind: text, keyword, _id."""

    field: str
    kind: str
    mode: str
    pattern: str
    case_insensitive: bool = False
    boost: float = 1.0
    flags: int = 0xFFFF  # regexp syntax flags (lucene_regexp.ALL)
    max_states: int = 10_000  # max_determinized_states


@dataclass(frozen=True, slots=True)
class ExistsPlan:
    fields: tuple[str, ...]
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class IdsPlan:
    ids: tuple[str, ...]
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class Phrase:
    """Terms at relative positions (each slot: alternative terms, for phrase prefixes)."""

    field: str
    slots: tuple[tuple[str, ...], ...]
    positions: tuple[int, ...]
    slop: int = 0
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class BoolPlan:
    must: tuple = ()
    should: tuple = ()
    filter: tuple = ()
    must_not: tuple = ()
    min_should: int = 0
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class DisMaxPlan:
    queries: tuple
    tie_breaker: float = 0.0
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class ConstPlan:
    inner: Any
    boost: float = 1.0


@dataclass(frozen=True, slots=True)
class ScriptPlan:
    """A `script` query (`inner` None: the script filters the live documents) or a `script_score`
    (the script scores `inner`'s matches)."""

    inner: Any
    source: str
    params_json: bytes
    min_score: float | None = None
    boost: float = 1.0
