"""Every setting leafsearch knows: its scope, default, validation and whether it may change live.

Settings travel as strings, the way Elasticsearch keeps them (`GET _settings` shows `"1"`, not `1`),
and are typed only when read through `index_setting` / `ClusterSettings.get`. Keeping one registry
lets create-index, update-settings, cluster-settings and the engine agree on defaults and on the
exact refusal messages clients see.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leafsearch.common.durable import FOLDER_MODE, private
from leafsearch.errors import IllegalArgument
from leafsearch.request.timevalue import parse_time_value
from leafsearch.services.memory import machine_memory

SettingValue = str | list[str]
Parser = Callable[[SettingValue, str], Any]


@dataclass(frozen=True, slots=True)
class Setting:
    key: str
    default: SettingValue
    parse: Parser
    dynamic: bool


_INTEGER = re.compile(r"[+-]?\d+")

# ---------------------------------------------------------------------------------------------
# value parsers: (string value, setting key) -> typed value, refusing with Elasticsearch's words


def int_setting(minimum: int, maximum: int = 2**31 - 1) -> Parser:
    def parse(value: SettingValue, key: str) -> int:
        if not isinstance(value, str) or not _INTEGER.fullmatch(value):
            raise IllegalArgument(f"Failed to parse value [{value}] for setting [{key}]")
        number = int(value)
        if number < minimum:
            raise IllegalArgument(f"Failed to parse value [{value}] for setting [{key}] must be >= {minimum}")
        if number > maximum:
            raise IllegalArgument(f"Failed to parse value [{value}] for setting [{key}] must be <= {maximum}")
        return number

    return parse


def bool_setting(value: SettingValue, key: str) -> bool:
    if value == "true":
        return True
    if value == "false":
        return False
    raise IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")


def time_setting(value: SettingValue, key: str) -> float:
    seconds = parse_time_value(str(value), key)
    if seconds < 0 and seconds != -1.0:
        raise IllegalArgument(f"failed to parse value [{value}] for setting [{key}], must be >= [-1]")
    return seconds


def positive_time_setting(value: SettingValue, key: str) -> float:
    seconds = parse_time_value(str(value), key)
    if seconds < 0:
        raise IllegalArgument(f"failed to parse value [{value}] for setting [{key}], must be >= [0ms]")
    return seconds


def slowlog_source_setting(value: SettingValue, key: str) -> int:
    """`index.indexing.slowlog.source`: characters of source logged; true = all (-1), false = none."""
    text = str(value).lower()
    if text in ("true", "false"):
        return -1 if text == "true" else 0
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise IllegalArgument(
            f"failed to parse setting [{key}] with value [{value}] as a number or a boolean"
        )
    return number


def choice_setting(*choices: str) -> Parser:
    def parse(value: SettingValue, key: str) -> str:
        if value not in choices:
            raise IllegalArgument(
                f"unknown value for [{key}] must be one of [{', '.join(choices)}] but was: {value}"
            )
        return str(value)

    return parse


def codec_setting(value: SettingValue, key: str) -> str:
    """`index.codec`: Elasticsearch's values, its error naming the two it documents."""
    if value not in ("default", "best_compression", "lucene_default"):
        raise IllegalArgument(
            f"unknown value for [{key}] must be one of [default, best_compression] but was: {value}"
        )
    return str(value)


def any_setting(value: SettingValue, key: str) -> SettingValue:
    return value


def list_values(value: SettingValue) -> list[str]:
    """A list setting's values: a list as given, a string split at commas (Elasticsearch's
    `Settings.getAsList`: each part trimmed, empty parts dropped)."""
    if isinstance(value, list):
        return value
    return [part.strip() for part in value.split(",") if part.strip()]


def string_list_setting(value: SettingValue, key: str) -> list[str]:
    return list_values(value)


_MULTI_VALUE_MODES = ("SUM", "AVG", "MEDIAN", "MIN", "MAX")


def sort_order_list_setting(value: SettingValue, key: str) -> list[str]:
    """`index.sort.order`: each `asc` or `desc`, in any case (`SortOrder.fromString`)."""
    orders = [v.lower() for v in list_values(value)]
    for raw, order in zip(list_values(value), orders, strict=True):
        if order not in ("asc", "desc"):
            raise IllegalArgument(f"Illegal sort order:{raw}")
    return orders


def sort_mode_list_setting(value: SettingValue, key: str) -> list[str]:
    """`index.sort.mode`: a `MultiValueMode` name, and of those only `min` or `max`."""
    modes = []
    for raw in list_values(value):
        mode = raw.upper()
        if mode not in _MULTI_VALUE_MODES:
            raise IllegalArgument(f"Illegal sort mode: {raw}")
        if mode not in ("MIN", "MAX"):
            raise IllegalArgument(f"Illegal index sort mode:[{mode}], must be one of [MAX, MIN]")
        modes.append(mode.lower())
    return modes


def sort_missing_list_setting(value: SettingValue, key: str) -> list[str]:
    """`index.sort.missing`: `_last` or `_first` (no custom missing values in an index sort)."""
    missing = list_values(value)
    for raw in missing:
        if raw not in ("_last", "_first"):
            raise IllegalArgument(f"Illegal missing value:[{raw}], must be one of [_last, _first]")
    return missing


@dataclass(frozen=True, slots=True)
class AutoCreate:
    """`action.auto_create_index`: `enabled` false refuses every auto-creation; otherwise the
    `(pattern, include)` expressions, when there are any, decide by the first one that matches."""

    enabled: bool
    expressions: tuple[tuple[str, bool], ...]
    text: str


def auto_create_setting(value: SettingValue, key: str) -> AutoCreate:
    """Elasticsearch's `AutoCreate`: a boolean, or comma-separated index patterns each optionally
    prefixed with `+` or `-`. A list is read as Java renders it (`[a, b]`), as Elasticsearch's
    string setting reads a list value."""
    text = value if isinstance(value, str) else "[" + ", ".join(value) + "]"
    if text in ("true", "false"):
        return AutoCreate(text == "true", (), text)
    expressions = []
    for raw in text.split(",") if text else ():
        pattern = raw.strip()
        if not pattern:
            raise IllegalArgument(
                f"Can't parse [{text}] for setting [{key}] must be either [true, false, or a comma "
                "separated list of index patterns]"
            )
        if pattern in ("-", "+"):
            raise IllegalArgument(
                f"Can't parse [{text}] for setting [{key}] must contain an index name after [{pattern}]"
            )
        include = not pattern.startswith("-")
        expressions.append((pattern[1:] if pattern[0] in "+-" else pattern, include))
    return AutoCreate(True, tuple(expressions), text)


_JAVA_INT = re.compile(r"[+-]?\d{1,10}")


def active_shard_count(value: SettingValue | None, key: str = "wait_for_active_shards") -> int | str | None:
    """`wait_for_active_shards` as Elasticsearch's `ActiveShardCount.parseString` reads it: `all`, a
    non-negative int, or None (the default) when absent."""
    if value is None:
        return None
    if value == "all":
        return "all"
    if not isinstance(value, str) or not _JAVA_INT.fullmatch(value) or not -(2**31) <= int(value) < 2**31:
        raise IllegalArgument(f"cannot parse ActiveShardCount[{value}]")
    count = int(value)
    if count < 0:
        raise IllegalArgument("shard count cannot be a negative value")
    return count


def check_active_shard_count(wait: int | str | None, replicas: int) -> None:
    """A count above the copies of a shard can never be met: refused at once (see ARCHITECTURE.md)."""
    if type(wait) is int and wait > replicas + 1:
        raise IllegalArgument(
            f"invalid wait_for_active_shards[{wait}]: cannot be greater than number of shard copies "
            f"[{replicas + 1}]"
        )


_BYTE_UNITS = (
    ("pb", 1 << 50),
    ("tb", 1 << 40),
    ("gb", 1 << 30),
    ("mb", 1 << 20),
    ("kb", 1 << 10),
    ("p", 1 << 50),
    ("t", 1 << 40),
    ("g", 1 << 30),
    ("m", 1 << 20),
    ("k", 1 << 10),
    ("b", 1),
)


_SIZE_UNITS = (("pb", 1 << 50), ("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10))


def human_size(size: int) -> str:
    """`ByteSizeValue.toString`: the largest unit, one decimal truncated, `.0` dropped."""
    for suffix, scale in _SIZE_UNITS:
        if size >= scale:
            value = f"{size / scale:.10f}"
            whole, fraction = value.split(".")
            return f"{whole}{suffix}" if fraction[0] == "0" else f"{whole}.{fraction[0]}{suffix}"
    return f"{size}b"


def parse_byte_size(value: str, key: str) -> int:
    """Bytes for a size such as "100mb" (`ByteSizeValue.parseBytesSizeValue`); -1 means unbounded."""
    normalized = value.lower().strip()
    for suffix, scale in _BYTE_UNITS:
        if normalized.endswith(suffix):
            digits = normalized[: -len(suffix)].strip()
            try:
                return int(digits) * scale
            except ValueError:
                try:
                    return int(float(digits) * scale)
                except ValueError:
                    raise IllegalArgument(f"failed to parse [{value}]") from None
    if normalized in ("-1", "0"):
        return int(normalized)
    raise IllegalArgument(
        f"failed to parse setting [{key}] with value [{value}] as a size in bytes: "
        "unit is missing or unrecognized"
    )


def byte_size_setting(value: SettingValue, key: str) -> int:
    return parse_byte_size(str(value), key)


def memory_size_setting(value: SettingValue, key: str) -> int:
    """Bytes for a size or a percentage of the memory the process may use (`memory.machine_memory`),
    as Elasticsearch's `memorySizeSetting` reads a percentage of the heap."""
    text = str(value).strip()
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            raise IllegalArgument(f"failed to parse [{text[:-1]}] as a double") from None
        if not 0.0 <= percent <= 100.0:
            raise IllegalArgument(f"percentage should be in [0-100], got [{text}]")
        return int(machine_memory() * percent / 100.0)
    return parse_byte_size(text, key)


# ---------------------------------------------------------------------------------------------
# index settings

MAX_MAPPING_DEPTH = 100

_INDEX = [
    Setting("index.number_of_shards", "1", int_setting(1, 1024), False),
    Setting("index.number_of_replicas", "1", int_setting(0), True),
    Setting("index.number_of_routing_shards", "1", int_setting(1, 1024), False),
    Setting("index.routing_partition_size", "1", int_setting(1, 1024), False),
    Setting("index.refresh_interval", "1s", time_setting, True),
    Setting("index.max_result_window", "10000", int_setting(1), True),
    Setting("index.max_inner_result_window", "100", int_setting(1), True),
    Setting("index.max_rescore_window", "10000", int_setting(1), True),
    Setting("index.max_slices_per_scroll", "1024", int_setting(1), True),
    Setting("index.max_terms_count", "65536", int_setting(1), True),
    Setting("index.max_docvalue_fields_search", "100", int_setting(0), True),
    Setting("index.max_script_fields", "32", int_setting(0), True),
    Setting("index.max_regex_length", "1000", int_setting(1), True),
    Setting("index.query_string.lenient", "false", bool_setting, False),
    Setting("index.mapping.source.mode", "stored", choice_setting("stored", "synthetic"), False),
    Setting("index.requests.cache.enable", "true", bool_setting, True),
    Setting("index.max_ngram_diff", "1", int_setting(0), True),
    Setting("index.analyze.max_token_count", "10000", int_setting(1), True),
    Setting("index.max_shingle_diff", "3", int_setting(0), True),
    Setting("index.max_refresh_listeners", "1000", int_setting(0), True),
    Setting("index.codec", "default", codec_setting, False),
    Setting("index.hidden", "false", bool_setting, True),
    Setting("index.blocks.read_only", "false", bool_setting, True),
    Setting("index.blocks.read_only_allow_delete", "false", bool_setting, True),
    Setting("index.blocks.read", "false", bool_setting, True),
    Setting("index.blocks.write", "false", bool_setting, True),
    Setting("index.blocks.metadata", "false", bool_setting, True),
    Setting("index.auto_expand_replicas", "false", any_setting, True),
    Setting("index.priority", "1", int_setting(0), True),
    Setting("index.gc_deletes", "60s", positive_time_setting, True),
    Setting("index.search.idle.after", "30s", positive_time_setting, True),
    Setting(
        "index.translog.durability", "REQUEST", choice_setting("REQUEST", "ASYNC", "request", "async"), True
    ),
    Setting("index.translog.sync_interval", "5s", positive_time_setting, False),
    Setting("index.translog.flush_threshold_size", "512mb", byte_size_setting, True),
    Setting("index.mapping.total_fields.limit", "1000", int_setting(0), True),
    # Elasticsearch sets no maximum; leafsearch's mapping and documents nest in Python and JSON
    # encoders whose depth is bounded, so the limit itself is (a deeper mapping is never useful).
    Setting("index.mapping.depth.limit", "20", int_setting(1, MAX_MAPPING_DEPTH), True),
    Setting("index.mapping.nested_fields.limit", "50", int_setting(0), True),
    Setting("index.mapping.nested_objects.limit", "10000", int_setting(0), True),
    Setting("index.mapping.field_name_length.limit", str(2**63 - 1), int_setting(1, 2**63 - 1), True),
    Setting("index.mapping.ignore_malformed", "false", bool_setting, False),
    Setting("index.mapping.coerce", "true", bool_setting, False),
    Setting("index.query.default_field", ["*"], any_setting, True),
    Setting("index.default_pipeline", "_none", any_setting, True),
    Setting("index.final_pipeline", "_none", any_setting, True),
    Setting("index.write.wait_for_active_shards", "1", active_shard_count, True),
    Setting("index.requests.cache.enable", "true", bool_setting, True),
    Setting("index.shard.check_on_startup", "false", choice_setting("false", "true", "checksum"), False),
    Setting("index.store.type", "", any_setting, False),
    Setting("index.lifecycle.name", "", any_setting, True),
    Setting("index.lifecycle.rollover_alias", "", any_setting, True),
    Setting("index.unassigned.node_left.delayed_timeout", "1m", positive_time_setting, True),
    Setting("index.creation_date", "-1", int_setting(-1, 2**63 - 1), False),
    Setting("index.highlight.max_analyzed_offset", "1000000", int_setting(1), True),
    # Slow logs (slowlog.py): thresholds per level, -1 = off.
    *(
        Setting(f"index.search.slowlog.threshold.{phase}.{level}", "-1", time_setting, True)
        for phase in ("query", "fetch")
        for level in ("warn", "info", "debug", "trace")
    ),
    *(
        Setting(f"index.indexing.slowlog.threshold.index.{level}", "-1", time_setting, True)
        for level in ("warn", "info", "debug", "trace")
    ),
    Setting("index.indexing.slowlog.source", "1000", slowlog_source_setting, True),
    Setting("index.indexing.slowlog.reformat", "true", bool_setting, True),
    Setting("index.search.slowlog.include.user", "false", bool_setting, True),
    Setting("index.indexing.slowlog.include.user", "false", bool_setting, True),
    # Index sorting (index/index_sort.py): final, checked against the mapping at creation.
    Setting("index.sort.field", [], string_list_setting, False),
    Setting("index.sort.order", [], sort_order_list_setting, False),
    Setting("index.sort.mode", [], sort_mode_list_setting, False),
    Setting("index.sort.missing", [], sort_missing_list_setting, False),
]
INDEX_SETTINGS: dict[str, Setting] = {s.key: s for s in _INDEX}

# Families accepted with any value, as a node with the default plugins accepts them; `True` = dynamic.
_INDEX_PREFIXES = {
    "index.analysis.": False,
    "index.similarity.": False,
    "index.routing.allocation.": True,
    "index.routing.rebalance.": True,
    "index.search.slowlog.": True,
    "index.indexing.slowlog.": True,
    "index.merge.": True,
}

# Set by the node when the index is created; a user may not set them.
PRIVATE_INDEX_SETTINGS = frozenset({"index.uuid", "index.version.created", "index.provided_name"})
# Fixed at creation: not even a closed index takes a new value (the `index.sort.*` family too).
FINAL_INDEX_SETTINGS = frozenset(
    {"index.number_of_shards", "index.number_of_routing_shards", "index.routing_partition_size", "index.mode"}
)


def _flatten(body: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in body.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def _as_setting_string(value: Any) -> SettingValue | None:
    """The string form Elasticsearch keeps: `true`, `3`, `1.5`; lists stay lists of strings."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        # Elasticsearch's settings parser takes lists of scalars only. It throws an
        # IllegalStateException (a 500) for anything else; a bad body is the client's error here.
        if any(v is None or isinstance(v, list | dict) for v in value):
            raise IllegalArgument("only value lists are allowed in serialized settings")
        return [str(_as_setting_string(v)) for v in value]
    return str(value)


def _index_definition(key: str) -> tuple[Parser, bool] | None:
    setting = INDEX_SETTINGS.get(key)
    if setting is not None:
        return setting.parse, setting.dynamic
    for prefix, dynamic in _INDEX_PREFIXES.items():
        if key.startswith(prefix):
            return any_setting, dynamic
    return None


def unknown_setting(key: str) -> IllegalArgument:
    return IllegalArgument(
        f"unknown setting [{key}] please check that any required plugins are installed, "
        "or check the breaking changes documentation for removed settings"
    )


def parse_index_settings(body: Mapping[str, Any] | None, *, for_update: bool = False) -> dict[str, Any]:
    """Validated flat `index.*` settings from a nested or flat body, with or without the prefix.

    Defaults are not filled in. With `for_update`, null values are kept (they reset the setting);
    otherwise they are dropped, as a create request ignores them.
    """
    if body is None:
        return {}
    if not isinstance(body, Mapping):
        raise IllegalArgument(f"malformed settings: expected an object but found [{body}]")
    result: dict[str, Any] = {}
    for raw_key, raw_value in _flatten(body).items():
        key = raw_key if raw_key.startswith("index.") else f"index.{raw_key}"
        if key in PRIVATE_INDEX_SETTINGS:
            raise IllegalArgument(f"private index setting [{key}] can not be set explicitly")
        definition = _index_definition(key)
        if definition is None:
            raise unknown_setting(key)
        value = _as_setting_string(raw_value)
        if value is None:
            if for_update:
                result[key] = None
            continue
        definition[0](value, key)
        result[key] = value
    return result


def is_dynamic_index_setting(key: str) -> bool:
    definition = _index_definition(key)
    return definition is not None and definition[1]


def index_setting(settings: Mapping[str, Any], key: str) -> Any:
    """The typed value of a registered index setting, its default when unset."""
    setting = INDEX_SETTINGS[key]
    return setting.parse(settings.get(key, setting.default), key)


def index_defaults() -> dict[str, SettingValue]:
    return {key: setting.default for key, setting in INDEX_SETTINGS.items()}


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """`{"a.b": 1}` -> `{"a": {"b": 1}}`, the default shape of every settings response."""
    nested: dict[str, Any] = {}
    for key in sorted(flat):
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[leaf] = flat[key]
    return nested


# ---------------------------------------------------------------------------------------------
# cluster (and node) settings

_CLUSTER = [
    Setting("search.max_open_scroll_context", "500", int_setting(0), True),
    Setting("search.max_open_pit_context", "300", int_setting(0), True),
    Setting("search.default_allow_partial_results", "true", bool_setting, True),
    Setting("indices.breaker.request.limit", "60%", memory_size_setting, True),
    Setting("indices.breaker.fielddata.limit", "40%", memory_size_setting, True),
    Setting("indices.breaker.total.limit", "95%", memory_size_setting, True),
    # Caches of this node's search engine (process-wide); each bounded, least recently used out.
    Setting("indices.cache.hitlist.size", "512mb", memory_size_setting, True),
    Setting("indices.requests.cache.size", "1%", memory_size_setting, True),
    Setting("indices.cache.sort_orders.size", "256mb", memory_size_setting, True),
    Setting("indices.fielddata.cache.size", "128mb", memory_size_setting, True),
    Setting("indices.cache.source_blocks.size", "32mb", memory_size_setting, True),
    Setting("search.read_ahead.max_pages", "32", int_setting(0), True),
    # What walks over reader contexts may hold (search/walks.py): lists of every match of walks
    # sorted by `_score`; a walk whose list does not fit pages from its cursor.
    Setting("search.walks.max_memory", "256mb", memory_size_setting, True),
    # A scroll or PIT walk that starts while no other search runs is served by the server process
    # rather than a search worker (search/workers/pool.py).
    Setting("search.workers.lone_walks_in_server", "true", bool_setting, True),
    # ... and so is a one-shot search or count that arrives while nothing else runs.
    Setting("search.workers.lone_requests_in_server", "true", bool_setting, True),
    # A `_bulk` body at least this large, arriving while another holds the indexing slot, is split
    # and its documents parsed in the search workers (bulk_offload.py) ...
    Setting("indices.bulk.worker_parse_min_size", "64kb", byte_size_setting, True),
    # ... and only while the machine had at least this much of a core idle (percent; 0: always).
    Setting("indices.bulk.worker_parse_min_idle_cpu", "10", int_setting(0, 10_000), True),
    # A full buffer of at least this many documents is written as a segment by a search worker
    # (index/buffer_wire.py); smaller ones by the flush thread of the server process.
    Setting("indices.segments.worker_build_min_docs", "500", int_setting(1), True),
    Setting("search.max_keep_alive", "24h", positive_time_setting, True),
    Setting("search.default_keep_alive", "5m", positive_time_setting, True),
    Setting("search.keep_alive_interval", "1m", positive_time_setting, True),
    Setting("search.default_search_timeout", "-1", time_setting, True),
    Setting("search.allow_expensive_queries", "true", bool_setting, True),
    Setting("search.max_buckets", "65536", int_setting(0), True),
    Setting("search.aggs.max_nested_depth", "50", int_setting(1), True),
    # Limits Elasticsearch does not have (docs/differences.md): what one search may ask for, checked
    # before its keys or aggregations are built.
    Setting("search.max_sort_keys", "100", int_setting(1), True),
    Setting("search.max_aggregations", "1000", int_setting(1), True),
    Setting("action.destructive_requires_name", "true", bool_setting, True),
    Setting("action.auto_create_index", "true", auto_create_setting, True),
    Setting("cluster.max_shards_per_node", "1000", int_setting(1), True),
    Setting("cluster.blocks.read_only", "false", bool_setting, True),
    Setting("cluster.blocks.read_only_allow_delete", "false", bool_setting, True),
    # A Ray cluster's failure detection (ray_backend/fault_detection.py; node settings in Elasticsearch).
    Setting("cluster.fault_detection.follower_check.interval", "1s", positive_time_setting, True),
    Setting("cluster.fault_detection.follower_check.timeout", "10s", positive_time_setting, True),
    Setting("cluster.fault_detection.follower_check.retry_count", "3", int_setting(1), True),
]
CLUSTER_SETTINGS: dict[str, Setting] = {s.key: s for s in _CLUSTER}
_CLUSTER_PREFIXES = ("cluster.routing.", "indices.", "logger.", "cluster.info.")

# Node settings are fixed at start (command line), never updated through the API. The query
# limits are Elasticsearch 8.0's node defaults; leafsearch keeps them fixed (Elasticsearch 8.1+
# derives max_clause_count from its heap and search threads, at least 1,024).
NODE_SETTINGS: dict[str, Setting] = {
    "http.max_content_length": Setting("http.max_content_length", "100mb", byte_size_setting, False),
    "http.max_header_size": Setting("http.max_header_size", "16kb", byte_size_setting, False),
    "indices.query.bool.max_clause_count": Setting(
        "indices.query.bool.max_clause_count", "4096", int_setting(1), False
    ),
    "indices.query.bool.max_nested_depth": Setting(
        "indices.query.bool.max_nested_depth", "30", int_setting(1), False
    ),
    # Cross-origin requests (rest/access.py): off, so a request with an `Origin` header is refused.
    "http.cors.enabled": Setting("http.cors.enabled", "false", bool_setting, False),
    "http.cors.allow-origin": Setting("http.cors.allow-origin", "", any_setting, False),
    "http.cors.allow-methods": Setting(
        "http.cors.allow-methods", "OPTIONS,HEAD,GET,POST,PUT,DELETE", any_setting, False
    ),
    "http.cors.allow-headers": Setting(
        "http.cors.allow-headers",
        "X-Requested-With,Content-Type,Content-Length,Authorization,Accept,User-Agent,X-Elastic-Client-Meta",
        any_setting,
        False,
    ),
    "http.cors.allow-credentials": Setting("http.cors.allow-credentials", "false", bool_setting, False),
    "http.cors.max-age": Setting("http.cors.max-age", "1728000", int_setting(0), False),
}


def node_setting(key: str) -> Any:
    """The typed value of a node setting (its default: none is set at start yet but the body size)."""
    setting = NODE_SETTINGS[key]
    return setting.parse(setting.default, key)


def _cluster_parser(key: str) -> Parser | None:
    setting = CLUSTER_SETTINGS.get(key)
    if setting is not None:
        return setting.parse
    if key.startswith(_CLUSTER_PREFIXES):
        return any_setting
    return None


#: Parsed setting values a ClusterSettings remembers (more only after many distinct updates).
_MAX_PARSED = 1024


class ClusterSettings:
    """Dynamic cluster settings: `persistent` survives restarts (a JSON file), `transient` does not."""

    def __init__(self, path: str | Path | None) -> None:
        """`path`: where `persistent` is kept; None for a copy that is not (a search worker's,
        which the server process keeps up to date)."""
        self.path = None if path is None else Path(path)
        self.persistent: dict[str, SettingValue] = {}
        self.transient: dict[str, SettingValue] = {}
        self._lock = threading.Lock()
        self._updating = threading.Lock()  # one update at a time; `_lock` only while values change
        self._parsed: dict[tuple[str, Any], Any] = {}  # see `get`
        #: Called with the settings' bytes before a change is taken, when coordinators share them
        #: (node/cluster_sync.py); returns the settings as published (merged with another's change).
        self.shared: Callable[[bytes], bytes] | None = None
        #: Called after every update, for settings applied outside the engine's reads (cache sizes).
        self.listeners: list[Callable[[], None]] = []
        if self.path is not None and self.path.exists():
            self.persistent = dict(json.loads(self.path.read_text()).get("persistent", {}))

    def get(self, key: str) -> Any:
        """Typed value: transient wins over persistent, which wins over the default.

        Parsed values are remembered per (key, raw value): a search reads both breaker limits at
        each of its reservations (about 50 on a W6 query), and parsing "60%" costs 0.6 µs, about
        0.06 ms a query. Keyed by the raw value, a remembered parse never outlives its setting."""
        setting = CLUSTER_SETTINGS[key]
        with self._lock:
            value = self.transient.get(key, self.persistent.get(key, setting.default))
        try:
            return self._parsed[(key, value)]
        except KeyError:
            pass
        except TypeError:  # a list or dict value (not hashable): parsed each time
            return setting.parse(value, key)
        parsed = setting.parse(value, key)
        if len(self._parsed) >= _MAX_PARSED:
            self._parsed.clear()
        self._parsed[(key, value)] = parsed
        return parsed

    def update(self, body: Mapping[str, Any] | None, *, flat: bool = False) -> dict[str, Any]:
        """Apply a `PUT _cluster/settings` body; the response lists what this request set."""
        body = body or {}
        for key in body:
            if key not in ("persistent", "transient"):
                raise IllegalArgument(f"request body contains unknown field [{key}]")
        changes = {scope: self._validate(scope, body.get(scope)) for scope in ("persistent", "transient")}
        with self._updating:
            with self._lock:
                merged = {"persistent": dict(self.persistent), "transient": dict(self.transient)}
            for scope, updates in changes.items():
                for key, value in updates.items():
                    if value is None:
                        for existing in fnmatch.filter(list(merged[scope]), key):
                            del merged[scope][existing]
                    else:
                        merged[scope][key] = value
            self._check_keep_alives(merged)
            if self.shared is not None:
                merged = json.loads(self.shared(json.dumps(merged, sort_keys=True).encode()))
            self._take(merged)
        applied = {
            scope: {k: v for k, v in updates.items() if v is not None} for scope, updates in changes.items()
        }
        shape: Callable[[dict[str, Any]], dict[str, Any]] = dict if flat else nest
        return {
            "acknowledged": True,
            "persistent": shape(applied["persistent"]),
            "transient": shape(applied["transient"]),
        }

    def adopt(self, data: bytes) -> None:
        """Take the settings another coordinator set (`{"persistent": ..., "transient": ...}`)."""
        with self._updating:
            self._take(json.loads(data))

    def _take(self, merged: Mapping[str, Any]) -> None:
        with self._lock:
            self.persistent = dict(merged.get("persistent", {}))
            self.transient = dict(merged.get("transient", {}))
            self._save()
        for listener in self.listeners:
            listener()

    def to_body(self, *, flat: bool = False, include_defaults: bool = False) -> dict[str, Any]:
        shape: Callable[[dict[str, Any]], dict[str, Any]] = dict if flat else nest
        with self._lock:
            body = {"persistent": shape(dict(self.persistent)), "transient": shape(dict(self.transient))}
            if include_defaults:
                unset = {
                    k: s.default
                    for k, s in CLUSTER_SETTINGS.items()
                    if k not in self.persistent and k not in self.transient
                }
                unset.update({k: s.default for k, s in NODE_SETTINGS.items()})
                body["defaults"] = shape(unset)
        return body

    def _validate(self, scope: str, section: Any) -> dict[str, SettingValue | None]:
        if section is None:
            return {}
        if not isinstance(section, Mapping):
            raise IllegalArgument(f"malformed [{scope}] section: expected an object")
        result: dict[str, SettingValue | None] = {}
        for key, raw in _flatten(section).items():
            value = _as_setting_string(raw)
            if value is None and ("*" in key or key in CLUSTER_SETTINGS or key.startswith(_CLUSTER_PREFIXES)):
                result[key] = None
                continue
            if key in NODE_SETTINGS:
                raise IllegalArgument(f"{scope} setting [{key}], not dynamically updateable")
            parser = _cluster_parser(key)
            if parser is None:
                raise IllegalArgument(f"{scope} setting [{key}], not recognized")
            parser(value, key)
            result[key] = value
        return result

    @staticmethod
    def _check_keep_alives(merged: dict[str, dict[str, SettingValue]]) -> None:
        def effective(key: str) -> SettingValue:
            return merged["transient"].get(key, merged["persistent"].get(key, CLUSTER_SETTINGS[key].default))

        default_raw, max_raw = effective("search.default_keep_alive"), effective("search.max_keep_alive")
        default_seconds = positive_time_setting(default_raw, "search.default_keep_alive")
        max_seconds = positive_time_setting(max_raw, "search.max_keep_alive")
        if default_seconds > max_seconds:
            raise IllegalArgument(
                f"Default keep alive setting for request [{default_raw}] should be smaller than max keep "
                f"alive [{max_raw}], was ({default_raw} > {max_raw})"
            )

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        with open(temporary, "w", encoding="utf-8", opener=private) as handle:
            handle.write(json.dumps({"persistent": self.persistent}, sort_keys=True))
        os.replace(temporary, self.path)
