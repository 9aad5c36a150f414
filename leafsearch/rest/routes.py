"""The route table: every endpoint, its methods, its handler and the query parameters it accepts.

A parameter not listed here (nor one of the response parameters every endpoint takes) is refused
with Elasticsearch's "contains unrecognized parameter" error, so a typo never passes silently.
"""

from __future__ import annotations

from leafsearch.rest import handlers_aliases as aliases
from leafsearch.rest import handlers_analyze as analysis
from leafsearch.rest import handlers_by_query as by_query
from leafsearch.rest import handlers_cat as cat
from leafsearch.rest import handlers_cluster as cluster
from leafsearch.rest import handlers_docs as docs
from leafsearch.rest import handlers_indices as indices
from leafsearch.rest import handlers_scripts as scripts
from leafsearch.rest import handlers_search as search
from leafsearch.rest import handlers_security as security
from leafsearch.rest import handlers_snapshots as snapshots
from leafsearch.rest import handlers_stats as stats
from leafsearch.rest import handlers_templates as templates
from leafsearch.rest.exchange import SOURCE_PARAMS
from leafsearch.rest.router import Route
from leafsearch.write.by_query_request import SEARCH_PARAMS as BY_QUERY_SEARCH

INDICES_OPTIONS = {"ignore_unavailable", "allow_no_indices", "expand_wildcards"}
MASTER = {"master_timeout", "timeout"}
# Elasticsearch's cat actions all take the table's parameters, `bytes` among them.
CAT = {"format", "h", "help", "s", "v", "local", "master_timeout", "bytes"}
SOURCE = {"_source", "_source_includes", "_source_excludes", "_source_exclude_vectors"}
TEMPLATE_GET = {"flat_settings", "local", "master_timeout", "include_defaults"}
SIMULATE = {"master_timeout", "include_defaults", "create", "cause"}
DATA_STREAM_GET = {"expand_wildcards", "include_defaults", "verbose", "master_timeout"}
SNAPSHOT_GET = {
    "ignore_unavailable",
    "verbose",
    "master_timeout",
    "index_details",
    "include_repository",
    "index_names",
    "sort",
    "order",
    "size",
    "offset",
    "after",
    "from_sort_value",
    "slm_policy_filter",
}
CLUSTER_STATE = INDICES_OPTIONS | {
    "local",
    "master_timeout",
    "flat_settings",
    "wait_for_metadata_version",
    "wait_for_timeout",
}

SEARCH = (
    INDICES_OPTIONS
    | SOURCE
    | SOURCE_PARAMS
    | {
        "q",
        "from",
        "size",
        "sort",
        "track_total_hits",
        "rest_total_hits_as_int",
        "scroll",
        "search_type",
        "typed_keys",
        "request_cache",
        "preference",
        "routing",
        "seq_no_primary_term",
        "version",
        "explain",
        "stored_fields",
        "docvalue_fields",
        "default_operator",
        "df",
        "analyzer",
        "analyze_wildcard",
        "lenient",
        "terminate_after",
        "timeout",
        "batched_reduce_size",
        "ccs_minimize_roundtrips",
        "max_concurrent_shard_requests",
        "pre_filter_shard_size",
        "allow_partial_search_results",
        "track_scores",
        "ignore_throttled",
        "include_named_queries_score",
        "force_synthetic_source",
        "stats",
        "suggest_field",
        "suggest_mode",
        "suggest_size",
        "suggest_text",
    }
)
COUNT = (
    INDICES_OPTIONS
    | SOURCE_PARAMS
    | {
        "q",
        "analyzer",
        "analyze_wildcard",
        "default_operator",
        "df",
        "lenient",
        "min_score",
        "preference",
        "routing",
        "terminate_after",
        "ignore_throttled",
    }
)
FIELD_CAPS = INDICES_OPTIONS | {"fields", "include_unmapped", "filters", "types"}
MSEARCH = SOURCE_PARAMS | {
    "allow_no_indices",
    "ccs_minimize_roundtrips",
    "expand_wildcards",
    "ignore_throttled",
    "ignore_unavailable",
    "include_named_queries_score",
    "max_concurrent_searches",
    "max_concurrent_shard_requests",
    "pre_filter_shard_size",
    "rest_total_hits_as_int",
    "routing",
    "search_type",
    "typed_keys",
}
PIT = {
    "keep_alive",
    "ignore_unavailable",
    "expand_wildcards",
    "preference",
    "routing",
    "allow_partial_search_results",
    "max_concurrent_shard_requests",
}
SCROLL = SOURCE_PARAMS | {"scroll", "rest_total_hits_as_int"}
WAIT = {"timeout", "wait_for_active_shards"}
WRITE_DOC = WAIT | {"routing", "refresh", "if_seq_no", "if_primary_term"}
DELETE_DOC = WRITE_DOC | {"version", "version_type"}
CREATE_DOC = DELETE_DOC | {"require_alias"}
INDEX_DOC = CREATE_DOC | {"op_type"}
UPDATE_DOC = WRITE_DOC | SOURCE | {"retry_on_conflict", "require_alias"}
GET_DOC = SOURCE | {"routing", "realtime", "refresh", "preference"}
BULK = WAIT | SOURCE | {"refresh", "routing", "require_alias"}
CACHE_CLEAR = {"fielddata", "fields", "query", "request", "index"}
GET_INDEX = INDICES_OPTIONS | {"flat_settings", "include_defaults", "local", "master_timeout", "features"}
SETTINGS = INDICES_OPTIONS | {"flat_settings", "include_defaults", "local", "master_timeout"}
PUT_SETTINGS = INDICES_OPTIONS | MASTER | {"flat_settings", "preserve_existing", "reopen"}
HEALTH = {
    "level",
    "local",
    "master_timeout",
    "timeout",
    "wait_for_active_shards",
    "wait_for_events",
    "wait_for_nodes",
    "wait_for_no_initializing_shards",
    "wait_for_no_relocating_shards",
    "wait_for_status",
    "expand_wildcards",
}
GET_ALIAS = INDICES_OPTIONS | {"local", "master_timeout"}
ALIAS_PARTS = ("_alias", "_aliases")
INDICES_STATS = INDICES_OPTIONS | {
    "completion_fields",
    "fielddata_fields",
    "fields",
    "groups",
    "level",
    "include_segment_file_sizes",
    "include_unloaded_segments",
    "forbid_closed_indices",
}
OPEN_CLOSE = INDICES_OPTIONS | MASTER | {"wait_for_active_shards"}
NODES_STATS = {
    "completion_fields",
    "fielddata_fields",
    "fields",
    "groups",
    "level",
    "types",
    "timeout",
    "include_segment_file_sizes",
    "include_unloaded_segments",
}
BY_QUERY_COMMON = {
    "refresh",
    "timeout",
    "wait_for_active_shards",
    "wait_for_completion",
    "requests_per_second",
    "scroll",
    "slices",
    "max_docs",
}
BY_QUERY = BY_QUERY_SEARCH | BY_QUERY_COMMON | {"conflicts", "scroll_size", "search_timeout", "from", "size"}
REINDEX = BY_QUERY_COMMON | {"require_alias"}
TASKS = {"actions", "detailed", "group_by", "nodes", "parent_task_id", "timeout", "wait_for_completion"}

ROUTES = [
    Route.of("GET|HEAD", "/", cluster.info),
    # index administration
    Route.of("PUT", "/{index}", indices.create_index, MASTER | {"wait_for_active_shards"}),
    Route.of("GET", "/{index}", indices.get_index, GET_INDEX),
    Route.of("HEAD", "/{index}", indices.index_exists, GET_INDEX),
    Route.of("DELETE", "/{index}", indices.delete_index, INDICES_OPTIONS | MASTER),
    Route.of("GET", "/_mapping", indices.get_mapping, INDICES_OPTIONS | {"local", "master_timeout"}),
    Route.of("GET", "/{index}/_mapping", indices.get_mapping, INDICES_OPTIONS | {"local", "master_timeout"}),
    Route.of(
        "PUT|POST", "/{index}/_mapping", indices.put_mapping, INDICES_OPTIONS | MASTER | {"write_index_only"}
    ),
    Route.of("GET", "/_settings", indices.get_settings, SETTINGS),
    Route.of("GET", "/_settings/{name}", indices.get_settings, SETTINGS),
    Route.of("GET", "/{index}/_settings", indices.get_settings, SETTINGS),
    Route.of("GET", "/{index}/_settings/{name}", indices.get_settings, SETTINGS),
    Route.of("PUT", "/_settings", indices.put_settings, PUT_SETTINGS),
    Route.of("PUT", "/{index}/_settings", indices.put_settings, PUT_SETTINGS),
    Route.of("GET|POST", "/_refresh", indices.refresh, INDICES_OPTIONS),
    Route.of("GET|POST", "/{index}/_refresh", indices.refresh, INDICES_OPTIONS),
    Route.of("POST", "/_cache/clear", indices.clear_cache, INDICES_OPTIONS | CACHE_CLEAR),
    Route.of("POST", "/{index}/_cache/clear", indices.clear_cache, INDICES_OPTIONS | CACHE_CLEAR),
    Route.of("GET|POST", "/_flush", indices.flush, INDICES_OPTIONS | {"force", "wait_if_ongoing"}),
    Route.of("GET|POST", "/{index}/_flush", indices.flush, INDICES_OPTIONS | {"force", "wait_if_ongoing"}),
    # aliases
    Route.of("POST", "/_aliases", aliases.update_aliases, MASTER),
    *[Route.of("PUT|POST", f"/{{index}}/{part}/{{name}}", aliases.put_alias, MASTER) for part in ALIAS_PARTS],
    *[
        Route.of("DELETE", f"/{{index}}/{part}/{{name}}", aliases.delete_alias, MASTER)
        for part in ALIAS_PARTS
    ],
    *[
        Route.of(method, path, handler, GET_ALIAS)
        for path in (
            "/_alias",
            "/_alias/{name}",
            "/{index}/_alias",
            "/{index}/_alias/{name}",
            "/{index}/_aliases",
        )
        for method, handler in (("GET", aliases.get_aliases), ("HEAD", aliases.alias_exists))
    ],
    Route.of("GET", "/_aliases", aliases.get_aliases, GET_ALIAS),
    # index templates, data streams
    *[
        route
        for part in ("_template", "_index_template", "_component_template")
        for route in (
            Route.of(
                "PUT|POST",
                f"/{part}/{{name}}",
                templates.put_template,
                MASTER | {"create", "cause"} | ({"order"} if part == "_template" else set()),
            ),
            Route.of("GET", f"/{part}", templates.get_templates, TEMPLATE_GET),
            Route.of("GET", f"/{part}/{{name}}", templates.get_templates, TEMPLATE_GET),
            Route.of("HEAD", f"/{part}/{{name}}", templates.template_exists, TEMPLATE_GET),
            Route.of("DELETE", f"/{part}/{{name}}", templates.delete_template, MASTER),
        )
    ],
    Route.of("POST", "/_index_template/_simulate_index/{name}", templates.simulate_index, SIMULATE),
    Route.of("POST", "/_index_template/_simulate", templates.simulate_template, SIMULATE),
    Route.of("POST", "/_index_template/_simulate/{name}", templates.simulate_template, SIMULATE),
    Route.of("GET", "/_data_stream", templates.get_data_streams, DATA_STREAM_GET),
    Route.of("GET", "/_data_stream/{name}", templates.get_data_streams, DATA_STREAM_GET),
    Route.of("PUT", "/_data_stream/{name}", templates.create_data_stream, MASTER),
    Route.of("DELETE", "/_data_stream/{name}", templates.delete_data_stream, MASTER | {"expand_wildcards"}),
    Route.of("GET", "/_data_stream/_stats", templates.data_stream_stats, {"expand_wildcards"}),
    Route.of("GET", "/_data_stream/{name}/_stats", templates.data_stream_stats, {"expand_wildcards"}),
    Route.of(
        "POST",
        "/{index}/_rollover",
        templates.rollover,
        MASTER | {"dry_run", "wait_for_active_shards", "lazy"},
    ),
    # snapshots
    Route.of("PUT|POST", "/_snapshot/{repository}", snapshots.put_repository, MASTER | {"verify"}),
    Route.of("GET", "/_snapshot", snapshots.get_repositories, {"local", "master_timeout"}),
    Route.of("GET", "/_snapshot/{repository}", snapshots.get_repositories, {"local", "master_timeout"}),
    Route.of("DELETE", "/_snapshot/{repository}", snapshots.delete_repository, MASTER),
    Route.of("POST", "/_snapshot/{repository}/_verify", snapshots.verify_repository, MASTER),
    Route.of(
        "PUT|POST",
        "/_snapshot/{repository}/{snapshot}",
        snapshots.create_snapshot,
        {"master_timeout", "wait_for_completion"},
    ),
    Route.of("GET", "/_snapshot/{repository}/{snapshot}", snapshots.get_snapshots, SNAPSHOT_GET),
    Route.of("DELETE", "/_snapshot/{repository}/{snapshot}", snapshots.delete_snapshot, {"master_timeout"}),
    Route.of(
        "POST",
        "/_snapshot/{repository}/{snapshot}/_restore",
        snapshots.restore_snapshot,
        {"master_timeout", "wait_for_completion"},
    ),
    *[
        Route.of("GET", path, snapshots.snapshot_status, {"ignore_unavailable", "master_timeout"})
        for path in (
            "/_snapshot/_status",
            "/_snapshot/{repository}/_status",
            "/_snapshot/{repository}/{snapshot}/_status",
        )
    ],
    # cat: every endpoint answers POST as well (client 9 sends `POST /_cat/count`)
    Route.of("GET|POST", "/_cat", cat.cat_list),
    Route.of(
        "GET|POST",
        "/_cat/indices",
        cat.cat_indices,
        CAT | {"health", "pri", "time", "expand_wildcards", "include_unloaded_segments"},
    ),
    Route.of(
        "GET|POST",
        "/_cat/indices/{index}",
        cat.cat_indices,
        CAT | {"health", "pri", "time", "expand_wildcards", "include_unloaded_segments"},
    ),
    Route.of("GET|POST", "/_cat/aliases", aliases.cat_aliases, CAT | {"expand_wildcards"}),
    Route.of("GET|POST", "/_cat/aliases/{name}", aliases.cat_aliases, CAT | {"expand_wildcards"}),
    Route.of("GET|POST", "/_cat/health", cat.cat_health, CAT | {"time", "ts"}),
    Route.of("GET|POST", "/_cat/count", cat.cat_count, CAT),
    Route.of("GET|POST", "/_cat/count/{index}", cat.cat_count, CAT),
    Route.of("GET|POST", "/_cat/search_contexts", cat.cat_search_contexts, CAT),
    Route.of(
        "GET|POST",
        "/_cat/tasks",
        cat.cat_tasks,
        CAT | {"actions", "detailed", "full_id", "nodes", "parent_task_id", "time"},
    ),
    Route.of("GET|POST", "/_cat/templates", templates.cat_templates, CAT),
    Route.of("GET|POST", "/_cat/templates/{name}", templates.cat_templates, CAT),
    Route.of(
        "GET|POST",
        "/_cat/snapshots/{repository}",
        snapshots.cat_snapshots,
        CAT | {"ignore_unavailable", "time"},
    ),
    Route.of("GET|POST", "/_cat/shards", cat.cat_shards, CAT | {"time"}),
    Route.of("GET|POST", "/_cat/shards/{index}", cat.cat_shards, CAT | {"time"}),
    Route.of("GET|POST", "/_cat/recovery", cat.cat_recovery, CAT | {"time", "active_only", "detailed"}),
    Route.of(
        "GET|POST", "/_cat/recovery/{index}", cat.cat_recovery, CAT | {"time", "active_only", "detailed"}
    ),
    Route.of("GET|POST", "/_cat/segments", cat.cat_segments, CAT),
    Route.of("GET|POST", "/_cat/segments/{index}", cat.cat_segments, CAT),
    Route.of(
        "GET|POST", "/_cat/nodes", cat.cat_nodes, CAT | {"full_id", "include_unloaded_segments", "time"}
    ),
    # statistics, close and open
    Route.of("GET", "/_stats", stats.indices_stats, INDICES_STATS),
    Route.of("GET", "/_stats/{metric}", stats.indices_stats, INDICES_STATS),
    Route.of("GET", "/{index}/_stats", stats.indices_stats, INDICES_STATS),
    Route.of("GET", "/{index}/_stats/{metric}", stats.indices_stats, INDICES_STATS),
    Route.of("POST", "/{index}/_close", stats.close_index, OPEN_CLOSE),
    Route.of("POST", "/{index}/_open", stats.open_index, OPEN_CLOSE),
    # cluster and nodes
    Route.of("GET", "/_cluster/health", cluster.cluster_health, HEALTH),
    Route.of("GET", "/_cluster/state", templates.cluster_state, CLUSTER_STATE),
    Route.of("GET", "/_cluster/state/{metric}", templates.cluster_state, CLUSTER_STATE),
    Route.of("GET", "/_cluster/state/{metric}/{index}", templates.cluster_state, CLUSTER_STATE),
    Route.of("GET", "/_cluster/pending_tasks", cluster.pending_tasks, {"local", "master_timeout"}),
    Route.of("PUT|POST", "/_scripts/{id}", scripts.put_script, {"timeout", "master_timeout", "context"}),
    Route.of("GET", "/_scripts/{id}", scripts.get_script, {"master_timeout"}),
    Route.of("DELETE", "/_scripts/{id}", scripts.delete_script, {"timeout", "master_timeout"}),
    Route.of("GET", "/_cluster/health/{index}", cluster.cluster_health, HEALTH),
    Route.of(
        "GET",
        "/_cluster/settings",
        cluster.get_cluster_settings,
        {"flat_settings", "include_defaults", "master_timeout", "timeout"},
    ),
    Route.of(
        "PUT",
        "/_cluster/settings",
        cluster.put_cluster_settings,
        {"flat_settings", "master_timeout", "timeout"},
    ),
    Route.of("GET", "/_nodes", cluster.nodes_info, {"flat_settings", "timeout"}),
    Route.of("GET", "/_nodes/{node_id}", cluster.nodes_info, {"flat_settings", "timeout"}),
    Route.of("GET", "/_nodes/stats", cluster.nodes_stats, NODES_STATS),
    Route.of("GET", "/_nodes/stats/{metric}", cluster.nodes_stats, NODES_STATS),
    Route.of("GET", "/_nodes/stats/{metric}/{index_metric}", cluster.nodes_stats, NODES_STATS),
    Route.of("GET", "/_nodes/{node_id}/stats", cluster.nodes_stats, NODES_STATS),
    Route.of("GET", "/_nodes/{node_id}/stats/{metric}", cluster.nodes_stats, NODES_STATS),
    Route.of("GET", "/_nodes/{node_id}/stats/{metric}/{index_metric}", cluster.nodes_stats, NODES_STATS),
    # documents
    Route.of("PUT|POST", "/{index}/_doc/{id}", docs.index_doc, INDEX_DOC),
    Route.of("POST", "/{index}/_doc", docs.index_doc, INDEX_DOC),
    Route.of("PUT|POST", "/{index}/_create/{id}", docs.create_doc, CREATE_DOC),
    Route.of(
        "GET|HEAD", "/{index}/_doc/{id}", docs.get_doc, GET_DOC | {"stored_fields", "version", "version_type"}
    ),
    Route.of("DELETE", "/{index}/_doc/{id}", docs.delete_doc, DELETE_DOC),
    Route.of("GET|HEAD", "/{index}/_source/{id}", docs.get_source, GET_DOC | {"version", "version_type"}),
    Route.of("POST", "/{index}/_update/{id}", docs.update_doc, UPDATE_DOC),
    Route.of("POST|PUT", "/_bulk", docs.bulk, BULK),
    Route.of("POST|PUT", "/{index}/_bulk", docs.bulk, BULK),
    Route.of("GET|POST", "/_mget", docs.mget, GET_DOC | SOURCE_PARAMS | {"stored_fields"}),
    Route.of("GET|POST", "/{index}/_mget", docs.mget, GET_DOC | SOURCE_PARAMS | {"stored_fields"}),
    # by-query writes, reindex and tasks
    Route.of("POST", "/{index}/_delete_by_query", by_query.delete_by_query, BY_QUERY),
    Route.of("POST", "/{index}/_update_by_query", by_query.update_by_query, BY_QUERY),
    Route.of("POST", "/_reindex", by_query.reindex, REINDEX),
    Route.of(
        "POST", "/_reindex/{task_id}/_rethrottle", by_query.rethrottle, {"requests_per_second", "group_by"}
    ),
    Route.of(
        "POST",
        "/_update_by_query/{task_id}/_rethrottle",
        by_query.rethrottle,
        {"requests_per_second", "group_by"},
    ),
    Route.of(
        "POST",
        "/_delete_by_query/{task_id}/_rethrottle",
        by_query.rethrottle,
        {"requests_per_second", "group_by"},
    ),
    Route.of("GET", "/_tasks", by_query.list_tasks, TASKS),
    Route.of("GET", "/_tasks/{task_id}", by_query.get_task, {"timeout", "wait_for_completion"}),
    Route.of("POST", "/_tasks/_cancel", by_query.cancel_tasks, TASKS),
    Route.of("POST", "/_tasks/{task_id}/_cancel", by_query.cancel_tasks, TASKS),
    # search
    Route.of("GET|POST", "/_search", search.search, SEARCH),
    Route.of("GET|POST", "/{index}/_search", search.search, SEARCH),
    Route.of("GET|POST", "/_analyze", analysis.analyze, SOURCE_PARAMS),
    Route.of("GET|POST", "/{index}/_analyze", analysis.analyze_index, SOURCE_PARAMS),
    Route.of("GET|POST", "/_field_caps", indices.field_caps, FIELD_CAPS),
    Route.of("GET|POST", "/{index}/_field_caps", indices.field_caps, FIELD_CAPS),
    Route.of("GET|POST", "/_msearch", search.msearch, MSEARCH),
    Route.of("GET|POST", "/{index}/_msearch", search.msearch, MSEARCH),
    Route.of("GET|POST", "/_count", search.count, COUNT),
    Route.of("GET|POST", "/{index}/_count", search.count, COUNT),
    Route.of("GET|POST", "/_search/scroll", search.scroll, SCROLL | {"scroll_id"}),
    Route.of("GET|POST", "/_search/scroll/{scroll_id}", search.scroll, SCROLL),
    Route.of("DELETE", "/_search/scroll", search.clear_scroll, {"scroll_id"}),
    Route.of("DELETE", "/_search/scroll/{scroll_id}", search.clear_scroll),
    Route.of("GET|POST", "/_export", search.export),
    Route.of("GET|POST", "/{index}/_export", search.export, INDICES_OPTIONS),
    Route.of("POST", "/{index}/_pit", search.open_pit, PIT),
    Route.of("POST", "/_pit", search.open_pit, PIT | {"index"}),
    Route.of("DELETE", "/_pit", search.close_pit),
    Route.of("DELETE", "/{index}/_pit", search.close_pit),
    # OpenSearch's point-in-time API, over the same contexts
    Route.of(
        "POST", "/{index}/_search/point_in_time", search.create_pit, PIT | {"allow_partial_pit_creation"}
    ),
    Route.of("DELETE", "/_search/point_in_time", search.delete_pits),
    Route.of("DELETE", "/_search/point_in_time/_all", search.delete_pits),
    Route.of("GET", "/_search/point_in_time/_all", search.all_pits),
    # security
    Route.of("GET", "/_security/_authenticate", security.authenticate),
    Route.of("POST|PUT", "/_security/api_key", security.create_api_key, {"refresh"}),
    Route.of(
        "GET",
        "/_security/api_key",
        security.get_api_keys,
        {"id", "name", "owner", "username", "realm_name", "active_only", "with_limited_by"},
    ),
    Route.of("DELETE", "/_security/api_key", security.invalidate_api_keys),
]

#: The handlers whose response a search worker may write to the client's socket itself
#: (search/socket_sink.py): the HTTP layer lends it only to their requests.
LENDS_SOCKET = frozenset({search.search, search.scroll})
#: Handlers whose request's connection a worker may keep when the body names the scroll to go on.
CONTINUED_BY_BODY = frozenset({search.scroll})
