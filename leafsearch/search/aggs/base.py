"""The aggregation tree and the contract every aggregation keeps.

Aggregations run in three steps, as in Elasticsearch: `collect` once per segment, `merge` of the
partial results of every segment of every shard, `render` of the merged result. To stay vectorized
under nesting, every aggregation collects for many parent buckets at once: it receives parallel
arrays of (document, parent bucket) pairs and returns a partial that is columnar over the parent
buckets. A sub-aggregation of a bucket aggregation is thus collected once per segment, not once
per bucket, and merging is a re-grouping of rows (a `maps` array per partial sends each of its
parent buckets to a merged one, or to -1 to drop it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import ElasticError, IllegalArgument, SearchPhaseExecution, XContentParseError

if TYPE_CHECKING:
    from leafsearch.search.aggs.values import ValueFormat


@dataclass
class SegmentContext:
    """What a collecting aggregation may read: the segment as the snapshot sees it, the request."""

    view: Any  # SegmentView
    request: Any  # carries `mapping`, `now_millis`, `searcher`
    scores: Any = None  # float32 per document of the segment when the search scores, else None

    @property
    def segment(self) -> Any:
        return self.view.segment

    @cached_property
    def filter_context(self) -> Any:
        """The context filter queries run with: the request's, without scoring (counts only)."""
        from dataclasses import is_dataclass, replace

        ctx = self.request
        if is_dataclass(ctx) and hasattr(ctx, "needs_scores"):
            return replace(ctx, needs_scores=False)
        return ctx


@dataclass
class ParseContext:
    """What parsing resolves against: the index's mapping and name, the request's `now`."""

    mapping: Any
    index: str | None = None
    now_millis: int | None = None
    parent: str | None = None  # type of the enclosing aggregation
    depth: int = 1  # nesting level being parsed, the top level being 1
    max_depth: int | None = None  # `search.aggs.max_nested_depth`
    max_buckets: int | None = None  # `search.max_buckets`, which a composite's size may not exceed
    max_inner_result_window: int = 100  # `index.max_inner_result_window`, which bounds `top_hits`


class Agg:
    """One aggregation of the request: its name, `meta`, sub-aggregations and options."""

    type_name = ""
    key_columns = 1  # key columns of a bucket aggregation's `Buckets` partial

    def __init__(self, name: str, meta: dict | None, subs: list[Agg]) -> None:
        self.name = name
        self.meta = meta
        self.subs = subs

    def collect(self, seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n_groups: int) -> Any:
        """Partial result for `n_groups` parent buckets; `docs[i]` belongs to bucket `groups[i]`."""
        raise NotImplementedError

    def merge(self, parts: list[Any], maps: list[np.ndarray], n_out: int) -> Any:
        """One partial over `n_out` parent buckets from partials whose buckets `maps` re-number."""
        raise NotImplementedError

    def render(self, part: Any, group: int | None) -> dict:
        """The response body of one parent bucket (`None`: a bucket nothing was collected for)."""
        raise NotImplementedError

    def typed_name(self) -> str:
        """The `typed_keys` prefix Elasticsearch gives this aggregation's result."""
        return self.type_name

    def sort_values(self, part: Any, path: list[str]) -> np.ndarray:
        """Values per parent bucket for ordering the buckets of a parent by this aggregation."""
        raise invalid_order_path(
            path,
            f"Buckets can only be sorted on a sub-aggregator path that is built out of "
            f"zero or more single-bucket aggregations within the path and a final single-bucket "
            f"or a metrics aggregation at the path end. Sub-path [{self.name}] points to "
            f"non single-bucket aggregation",
        )

    def output(self, part: Any, group: int | None) -> dict:
        """`meta` first, as Elasticsearch writes it, then the body."""
        body = self.render(part, group)
        if self.meta is not None:
            return {"meta": self.meta, **body}
        return body


class AggTree(list):
    """The aggregations of one level of the request, in request order."""

    def by_name(self, name: str) -> Agg | None:
        for agg in self:
            if agg.name == name:
                return agg
        return None


def collect_subs(subs: list[Agg], seg: SegmentContext, docs: np.ndarray, groups: np.ndarray, n: int) -> dict:
    profile = getattr(seg.request, "profile", None)  # a profiled search times each sub-aggregation
    if profile is None:
        return {sub.name: sub.collect(seg, docs, groups, n) for sub in subs}
    return {
        sub.name: profile.time_aggregation(sub, lambda s=sub: s.collect(seg, docs, groups, n)) for sub in subs
    }


def merge_subs(subs: list[Agg], parts: list[dict], maps: list[np.ndarray], n_out: int) -> dict:
    return {sub.name: sub.merge([p[sub.name] for p in parts], maps, n_out) for sub in subs}


def render_subs(subs: list[Agg], parts: dict, group: int | None) -> dict:
    out: dict = {}
    for sub in subs:
        part = parts[sub.name]
        out[sub.name] = sub.output(part, group)
    return out


def remap(maps: list[np.ndarray], groups: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each partial's row groups sent through its map: (all mapped groups, per-part keep masks)."""
    mapped, keeps = [], []
    for m, g in zip(maps, groups, strict=True):
        new = np.asarray(m, dtype=np.int64)[g] if len(g) else np.empty(0, np.int64)
        keep = new >= 0
        mapped.append(new[keep])
        keeps.append(keep)
    return (np.concatenate(mapped) if mapped else np.empty(0, np.int64)), keeps


# ---- refusals, worded as Elasticsearch words them ----------------------------------------------


def shard_failure(cause: ElasticError) -> ElasticError:
    """Errors Elasticsearch raises while building aggregators on each shard ("all shards failed")."""
    return SearchPhaseExecution(cause)


def invalid_order_path(path: list[str], detail: str) -> ElasticError:
    from leafsearch.errors import AggregationExecution

    return shard_failure(AggregationExecution(f"Invalid aggregation order path [{'>'.join(path)}]. {detail}"))


def field_failed(agg_type: str, field: str, cause: ElasticError) -> ElasticError:
    """A value refused by a setter: Elasticsearch's object parser wraps it with the field name."""
    return XContentParseError(f"[{agg_type}] failed to parse field [{field}]", caused_by=cause)


def unknown_field(agg_type: str, key: str) -> ElasticError:
    return XContentParseError(f"[{agg_type}] unknown field [{key}]")


class Options:
    """Reads one aggregation's option object, refusing unknown keys and wrong value types."""

    def __init__(self, agg_type: str, name: str, body: Any, allowed: set[str]) -> None:
        if not isinstance(body, dict):
            raise XContentParseError(f"[{agg_type}] Expected START_OBJECT but was: {token_name(body)}")
        for key in body:
            if key not in allowed:
                raise unknown_field(agg_type, key)
        self.agg_type = agg_type
        self.name = name
        self.body = body

    def get(self, key: str, default: Any = None) -> Any:
        return self.body.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.body

    def integer(self, key: str, default: int) -> int:
        value = self.body.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise field_failed(self.agg_type, key, IllegalArgument(f"[{key}] must be a number"))
        try:
            return int(value)
        except ValueError:
            raise field_failed(self.agg_type, key, IllegalArgument(f'For input string: "{value}"')) from None

    def number(self, key: str, default: float | None = None) -> float | None:
        value = self.body.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise field_failed(self.agg_type, key, IllegalArgument(f"[{key}] must be a number"))
        try:
            return float(value)
        except ValueError:
            raise field_failed(self.agg_type, key, IllegalArgument(f'For input string: "{value}"')) from None

    def boolean(self, key: str, default: bool) -> bool:
        value = self.body.get(key, default)
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise field_failed(
            self.agg_type,
            key,
            IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed."),
        )

    def positive(self, key: str, default: int, label: str | None = None) -> int:
        value = self.integer(key, default)
        if value <= 0:
            raise field_failed(
                self.agg_type,
                key,
                IllegalArgument(f"[{label or key}] must be greater than 0. Found [{value}] in [{self.name}]"),
            )
        return value

    def missing(self, fmt: ValueFormat, now_millis: int | None, *, as_text: bool = False) -> Any:
        """The `missing` option parsed in the field's format (text as given for keyword fields), or
        None when absent; a value the format refuses fails as the option's parse error."""
        if "missing" not in self.body:
            return None
        value = self.body["missing"]
        if as_text:
            return str(value)
        try:
            return fmt.parse(value, now_millis)
        except IllegalArgument as err:
            raise field_failed(self.agg_type, "missing", err) from None

    def min_doc_count(self, default: int) -> int:
        value = self.integer("min_doc_count", default)
        if value < 0:
            raise field_failed(
                self.agg_type,
                "min_doc_count",
                IllegalArgument(
                    f"[minDocCount] must be greater than or equal to 0. Found [{value}] in [{self.name}]"
                ),
            )
        return value


COMMON_VALUE_OPTIONS = {"field", "script", "missing", "format", "value_type"}
