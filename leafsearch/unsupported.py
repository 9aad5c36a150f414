"""What Elasticsearch has and leafsearch does not, refused in one wording.

A request for such a feature is a 400 whose reason says "... is not supported by leafsearch", so a
user (or a tool's error message) can tell a missing feature from a mistake in the request: a typo
still gets Elasticsearch's own error ("unknown query", "no handler found"). The same lists are the
source of `docs/unsupported.md`.
"""

from __future__ import annotations

from typing import NamedTuple

from leafsearch.errors import IllegalArgument


def reason(what: str, why: str = "") -> str:
    """The one wording: `<what> is not supported by leafsearch[: <why>]`."""
    return f"{what} is not supported by leafsearch" + (f": {why}" if why else "")


class NotSupported(IllegalArgument):
    """A feature of Elasticsearch that leafsearch lacks: illegal_argument_exception, 400."""

    def __init__(self, what: str, why: str = "") -> None:
        super().__init__(reason(what, why))


# ---------------------------------------------------------------------------------------------
# Endpoints: path patterns of Elasticsearch APIs leafsearch has no handler for. `*` is any one
# segment (an index name, an id), `**` any number of segments. A route of leafsearch's table that
# matches with as many explicit segments wins, so `GET /_security/_authenticate` is served while
# `GET /_security/user` is refused here.

# fmt: off
ENDPOINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("_slm", "**"), "snapshot lifecycle management"),
    (("_searchable_snapshots", "**"), "searchable snapshots"),
    (("*", "_searchable_snapshots", "**"), "searchable snapshots"),
    (("_ingest", "**"), "ingest pipelines"),
    (("_ml", "**"), "machine learning"),
    (("_security", "**"), "this security API (leafsearch has users, API keys and _authenticate)"),
    (("_sql", "**"), "SQL"),
    (("_eql", "**"), "EQL"),
    (("*", "_eql", "**"), "EQL"),
    (("_query", "**"), "ES|QL"),
    (("_transform", "**"), "transforms"),
    (("_ilm", "**"), "index lifecycle management"),
    (("*", "_ilm", "**"), "index lifecycle management"),
    (("_script_context",), "scripts"),
    (("_script_language",), "scripts"),
    (("_render", "**"), "search templates"),
    (("_search", "template"), "search templates"),
    (("*", "_search", "template"), "search templates"),
    (("_msearch", "template"), "search templates"),
    (("*", "_msearch", "template"), "search templates"),
    (("_watcher", "**"), "Watcher"),
    (("_license", "**"), "licensing"),
    (("_xpack", "**"), "X-Pack feature information"),
    (("*", "_graph", "**"), "Graph"),
    (("_rollup", "**"), "rollups"),
    (("*", "_rollup", "**"), "rollups"),
    (("_ccr", "**"), "cross-cluster replication"),
    (("*", "_ccr", "**"), "cross-cluster replication"),
    (("_enrich", "**"), "enrich policies"),
    (("_autoscaling", "**"), "autoscaling"),
    (("_fleet", "**"), "Fleet"),
    (("*", "_fleet", "**"), "Fleet"),
    (("_text_structure", "**"), "text structure finding"),
    (("_inference", "**"), "inference"),
    (("_connector", "**"), "connectors"),
    (("_query_rules", "**"), "query rules"),
    (("_synonyms", "**"), "synonym sets"),
    (("_application", "**"), "search applications"),
    (("_migration", "**"), "migration APIs"),
    (("_features", "**"), "feature states"),
    (("_monitoring", "**"), "monitoring collection"),
    (("_async_search", "**"), "async search"),
    (("*", "_async_search", "**"), "async search"),
    (("_logstash", "**"), "Logstash pipelines"),
    (("_health_report", "**"), "the health report"),
    (("_dangling", "**"), "dangling indices"),
    (("_resolve", "**"), "index resolution"),
    (("_nodes", "hot_threads"), "hot threads"),
    (("_nodes", "*", "hot_threads"), "hot threads"),
    (("_nodes", "usage", "**"), "node usage"),
    (("_nodes", "*", "usage", "**"), "node usage"),
    (("_nodes", "reload_secure_settings"), "secure settings"),
    (("_nodes", "*", "reload_secure_settings"), "secure settings"),
    (("_cluster", "**"), "this cluster API (leafsearch has health, settings, state and pending tasks)"),
    (("_cat", "**"), "this _cat API"),
    (("_rank_eval",), "ranking evaluation"),
    (("*", "_rank_eval"), "ranking evaluation"),
    (("_search_shards",), "search shards"),
    (("*", "_search_shards"), "search shards"),
    (("_validate", "query"), "query validation"),
    (("*", "_validate", "query"), "query validation"),
    (("*", "_explain", "**"), "explain"),
    (("*", "_termvectors", "**"), "term vectors"),
    (("_mtermvectors",), "term vectors"),
    (("*", "_mtermvectors"), "term vectors"),
    (("*", "_knn_search"), "kNN search"),
    (("*", "_terms_enum"), "terms enum"),
    (("*", "_disk_usage"), "disk usage analysis"),
    (("*", "_field_usage_stats"), "field usage statistics"),
    (("_forcemerge",), "force merge (leafsearch merges on its own)"),
    (("*", "_forcemerge"), "force merge (leafsearch merges on its own)"),
    (("_cache", "clear"), "cache clearing"),
    (("*", "_cache", "clear"), "cache clearing"),
    (("_recovery",), "recovery information"),
    (("*", "_recovery"), "recovery information"),
    (("_segments",), "segment information"),
    (("*", "_segments"), "segment information"),
    (("_shard_stores",), "shard stores"),
    (("*", "_shard_stores"), "shard stores"),
    (("*", "_shrink", "**"), "shrinking an index"),
    (("*", "_split", "**"), "splitting an index"),
    (("*", "_clone", "**"), "cloning an index"),
    (("_rollover", "**"), "rollover"),
    (("*", "_block", "**"), "index blocks"),
    (("*", "_downsample", "**"), "downsampling"),
    (("*", "_unfreeze"), "frozen indices"),
)
# fmt: on


#: Paths leafsearch serves with some methods where Elasticsearch has more: those methods only, so a
#: method leafsearch lacks on a path it has is otherwise a 405 as in Elasticsearch.
METHOD_ENDPOINTS: tuple[tuple[frozenset[str], tuple[str, ...], str], ...] = ()


class Listed(NamedTuple):
    literals: int  # explicit segments of the pattern: a route of leafsearch with more wins
    feature: str
    by_method: bool  # listed for this method on a path leafsearch serves with others


def _matches(pattern: tuple[str, ...], parts: list[str]) -> bool:
    if pattern[-1] == "**":
        fixed = pattern[:-1]
        if len(parts) < len(fixed):
            return False
    else:
        fixed = pattern
        if len(parts) != len(fixed):
            return False
    return all(p == "*" or p == part for p, part in zip(fixed, parts, strict=False))


def _literals(pattern: tuple[str, ...]) -> int:
    return sum(p not in ("*", "**") for p in pattern)


def _head(pattern: tuple[str, ...]) -> tuple[int, str]:
    """The first explicit segment of a pattern and its position: every request looks up only the
    few patterns whose head its path has (the table is checked on every request)."""
    return next((i, p) for i, p in enumerate(pattern) if p not in ("*", "**"))


_BY_HEAD: dict[tuple[int, str], list[tuple[tuple[str, ...], str]]] = {}
for _pattern, _feature in ENDPOINTS:
    _BY_HEAD.setdefault(_head(_pattern), []).append((_pattern, _feature))


def endpoint(method: str, parts: list[str]) -> Listed | None:
    """The listed Elasticsearch endpoint that `method` on the path `parts` names, if any."""
    for methods, pattern, feature in METHOD_ENDPOINTS:
        if method in methods and _matches(pattern, parts):
            return Listed(_literals(pattern), feature, True)
    for position, segment in enumerate(parts[:2]):
        for pattern, feature in _BY_HEAD.get((position, segment), ()):
            if _matches(pattern, parts):
                return Listed(_literals(pattern), feature, False)
    return None


def endpoint_error(method: str, uri: str, feature: str) -> NotSupported:
    return NotSupported(f"[{method} {uri}]", feature)


# ---------------------------------------------------------------------------------------------
# Mapping field types and aggregations of Elasticsearch that leafsearch lacks (unknown names still
# get Elasticsearch's "No handler for type" and "Unknown aggregation type").

FIELD_TYPES = frozenset(
    {
        "aggregate_metric_double",
        "alias",
        "annotated_text",
        "constant_keyword",
        "counted_keyword",
        "flattened",
        "geo_shape",
        "histogram",
        "match_only_text",
        "murmur3",
        "passthrough",
        "point",
        "search_as_you_type",
        "semantic_text",
        "shape",
        "sparse_vector",
        "token_count",
        "version",
        "wildcard",
    }
)

AGGREGATIONS = frozenset(
    {
        "adjacency_matrix",
        "auto_date_histogram",
        "avg_bucket",
        "boxplot",
        "bucket_count_ks_test",
        "bucket_correlation",
        "bucket_script",
        "bucket_selector",
        "bucket_sort",
        "categorize_text",
        "cumulative_cardinality",
        "cumulative_sum",
        "derivative",
        "diversified_sampler",
        "extended_stats_bucket",
        "frequent_item_sets",
        "geo_line",
        "geohex_grid",
        "global",
        "inference",
        "ip_prefix",
        "ip_range",
        "matrix_stats",
        "max_bucket",
        "median_absolute_deviation",
        "min_bucket",
        "missing",
        "moving_fn",
        "moving_percentiles",
        "multi_terms",
        "normalize",
        "percentile_ranks",
        "percentiles",
        "percentiles_bucket",
        "random_sampler",
        "rare_terms",
        "rate",
        "sampler",
        "scripted_metric",
        "serial_diff",
        "significant_terms",
        "significant_text",
        "stats_bucket",
        "string_stats",
        "sum_bucket",
        "t_test",
        "time_series",
        "top_metrics",
        "variable_width_histogram",
        "weighted_avg",
    }
)
