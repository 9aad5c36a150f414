"""The `sort` option: every form Elasticsearch accepts, parsed into `SortSpec`s.

Clients send sorts in many shapes (`"field"`, `{"field": "desc"}`, `{"field": {"order": ...}}`,
lists of these, the `sort=a:desc,b` URL form), and they read Elasticsearch's refusals, so the
parser follows `SortBuilder.fromXContent` and the `field_sort` / `_score` object parsers: the same
defaults (`_score` descending, everything else ascending), the same error types, and the same
messages, including the `failed to parse field [x]` wrapping that puts the real reason in
`caused_by`. Field-dependent checks (unmapped fields, text fields, `sum` on keywords) need a mapping
and happen per shard in the coordinator.

The small XContent helpers at the end (`unsupported_token`, `field_failed`, `chain`) are shared
with `search_request.py`, which parses the rest of the search body the same way.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import ElasticError, IllegalArgument, ParsingError, XContentParseError
from leafsearch.request.geo_dsl import parse_geo_sort
from leafsearch.request.query_dsl import script_spec
from leafsearch.request.search_types import DOC, SCORE, SHARD_DOC, NestedSort, SortSpec
from leafsearch.unsupported import NotSupported

SCRIPT = "_script"
#: A `_script` sort's `type`, and the kind of values it compares as (`unmapped_type` of its spec).
_SCRIPT_TYPES = {"number": "double", "string": "keyword", "version": "version"}
#: `mode` values (Elasticsearch's `first`, of nested sorts, is not among them).
_MODES = ("min", "max", "sum", "avg", "median")
_NUMERIC_TYPES = ("long", "double", "date", "date_nanos")
_FIELD_SORT = "field_sort"


def parse_sort(value: Any) -> list[SortSpec]:
    """The sort specs of a body's `sort` value (string, object, or array of these)."""
    if isinstance(value, str):
        return [_plain(value)]
    if isinstance(value, dict):
        return _compound(value)
    if isinstance(value, list):
        specs: list[SortSpec] = []
        for item in value:
            if isinstance(item, str):
                specs.append(_plain(item))
            elif isinstance(item, dict):
                specs.extend(_compound(item))
            else:
                raise IllegalArgument(
                    "malformed sort format, within the sort array, an object, or an actual string are allowed"
                )
        return specs
    raise IllegalArgument("malformed sort format, either start with array, object, or an actual string")


def parse_url_sort(text: str) -> list[SortSpec]:
    """The `sort` URL parameter: `field:desc,other,_score`.

    As in Elasticsearch, a suffix after the last `:` that is neither `asc` nor `desc` drops that
    entry silently (`RestSearchAction` only adds sorts it understands).
    """
    specs: list[SortSpec] = []
    for item in text.split(","):
        if not item:
            continue
        name, sep, order = item.rpartition(":")
        if not sep:
            specs.append(_plain(item))
        elif order in ("asc", "desc"):
            specs.append(SortSpec(name, order))
    return specs


def reversed_sort(sort: list[SortSpec]) -> list[SortSpec]:
    """The exact reverse of a sort, for `search_before`: each order flipped, documents without a
    value moved to the other end (so they keep the same sort value: Long.MAX_VALUE sorts last
    ascending and first descending), and the multi-value mode pinned to the one the original
    order picks (min ascending, max descending), so every document keeps its sort value."""
    out = []
    for spec in sort:
        flipped = replace(spec, order="asc" if spec.descending else "desc")
        if spec.field not in (SCORE, DOC, SHARD_DOC):
            missing = {"_last": "_first", "_first": "_last", None: "_first"}.get(spec.missing, spec.missing)
            mode = spec.mode or ("max" if spec.descending else "min")
            flipped = replace(flipped, missing=missing, mode=mode)
        out.append(flipped)
    return out


def _plain(name: str) -> SortSpec:
    return SortSpec(name, "desc" if name == SCORE else "asc")


def _order(text: str) -> str:
    """`SortOrder.fromString`: case-insensitive, else Java's enum error."""
    lowered = text.lower()
    if lowered not in ("asc", "desc"):
        raise IllegalArgument(f"No enum constant org.elasticsearch.search.sort.SortOrder.{text.upper()}")
    return lowered


def _compound(body: dict[str, Any]) -> list[SortSpec]:
    specs = []
    for name, value in body.items():
        if name in ("_geo_distance", "_geoDistance"):
            specs.append(parse_geo_sort(value))
        elif name == SCRIPT:
            specs.append(_script_object(value))
        elif isinstance(value, str):
            specs.append(SortSpec(name, _order(value)))
        elif name == SCORE:
            specs.append(_score_object(value))
        else:
            specs.append(_field_object(name, value))
    return specs


def _score_object(value: Any) -> SortSpec:
    order = "desc"
    for key, option in _options(SCORE, value):
        if key != "order":
            raise XContentParseError(f"[{SCORE}] unknown field [{key}]")
        order = _string_option(SCORE, key, option, _order)
    return SortSpec(SCORE, order)


def _script_object(value: Any) -> SortSpec:
    """`{"_script": {"type": "number"|"string"|"version", "script": ..., "order", "mode"}}`: the
    values of the script for each document, compared as doubles or strings (ScriptSortBuilder).
    Its spec sorts as an unmapped field of the type's kind would, `script` giving the values."""
    opts: dict[str, Any] = {"order": "asc"}
    script = script_type = None
    for key, option in _options(SCRIPT, value):
        if key == "order":
            opts["order"] = _string_option(SCRIPT, key, option, _order)
        elif key in ("mode", "sort_mode"):
            opts["mode"] = _string_option(SCRIPT, key, option, _mode)
        elif key == "type":
            script_type = _string_option(SCRIPT, key, option, _script_type)
        elif key == "script":
            try:
                script = script_spec(SCRIPT, option)
            except ElasticError as exc:
                raise field_failed(SCRIPT, key, exc) from None
        elif key == "nested":
            raise NotSupported("[nested] sort", "it has no nested documents")
        else:
            raise XContentParseError(f"[{SCRIPT}] unknown field [{key}]")
    missing = [name for name, found in (("script", script), ("type", script_type)) if found is None]
    if missing:
        raise IllegalArgument(f"Required [{', '.join(missing)}]")
    if script_type == "version":
        raise NotSupported("[_script] sort of [type] version")
    mode = opts.get("mode")
    if script_type == "string" and mode not in (None, "min", "max"):
        raise IllegalArgument("script sort of type [string] doesn't support mode [" + str(mode) + "]")
    return SortSpec(
        SCRIPT, **opts, unmapped_type=_SCRIPT_TYPES[script_type], script=script, script_type=script_type
    )


def _script_type(text: str) -> str:
    lowered = text.lower()
    if lowered not in _SCRIPT_TYPES:
        raise IllegalArgument(f"Unknown ScriptSortType [{text}]")
    return lowered


def _field_object(name: str, value: Any) -> SortSpec:
    opts: dict[str, Any] = {"order": "asc", "missing": "_last"}
    for key, option in _options(_FIELD_SORT, value):
        if key == "order":
            opts["order"] = _string_option(_FIELD_SORT, key, option, _order)
        elif key == "missing":
            if isinstance(option, dict | list):
                raise unsupported_token(_FIELD_SORT, key, option)
            opts["missing"] = "_last" if option is None else option
        elif key == "mode":
            opts["mode"] = _string_option(_FIELD_SORT, key, option, _mode)
        elif key == "numeric_type":
            opts["numeric_type"] = _string_option(_FIELD_SORT, key, option, _numeric_type)
        elif key in ("unmapped_type", "format"):
            opts[key] = _string_option(_FIELD_SORT, key, option, str)
        elif key == "nested":
            if not isinstance(option, dict):
                raise unsupported_token(_FIELD_SORT, key, option)
            opts["nested"] = _nested(option)
        elif key in ("nested_path", "nested_filter"):
            removed = ParsingError(f"[{key}] has been removed in favour of the [nested] parameter")
            raise field_failed(_FIELD_SORT, key, removed)
        else:
            raise XContentParseError(f"[{_FIELD_SORT}] unknown field [{key}]")
    return SortSpec(name, **opts)


def _nested(body: dict) -> NestedSort:
    """A field sort's `nested` object (NestedSortBuilder's fields)."""
    from leafsearch.request.query_dsl import parse_query

    path, flt, max_children = None, None, None
    for key, value in body.items():
        if key == "path":
            path = _string_option("nested", key, value, str)
        elif key == "filter":
            flt = parse_query(value)
        elif key == "max_children":
            if isinstance(value, bool) or not isinstance(value, int):
                raise unsupported_token("nested", key, value)
            max_children = value
        elif key == "nested":
            raise NotSupported("[nested] sort inside a [nested] sort")
        else:
            raise XContentParseError(f"[nested] unknown field [{key}]")
    if path is None:
        raise IllegalArgument("[nested] requires 'path' field")
    return NestedSort(path, flt, max_children)


def _mode(text: str) -> str:
    lowered = text.lower()
    if lowered not in _MODES:
        raise IllegalArgument(f"Unknown SortMode [{text}]")
    return lowered


def _numeric_type(text: str) -> str:
    lowered = text.lower()
    if lowered not in _NUMERIC_TYPES:
        raise IllegalArgument(
            f"invalid value for [numeric_type], must be [long, double, date, date_nanos], got {lowered}"
        )
    return lowered


def _options(parser: str, value: Any) -> list[tuple[str, Any]]:
    if not isinstance(value, dict):
        raise XContentParseError(f"[{parser}] Expected START_OBJECT but was: {token_name(value)}")
    return list(value.items())


def _string_option(parser: str, key: str, value: Any, convert) -> Any:
    """A `declareString` option: only a JSON string, and conversion errors wrapped as ObjectParser does."""
    if not isinstance(value, str):
        raise unsupported_token(parser, key, value)
    try:
        return convert(value)
    except ElasticError as exc:
        raise field_failed(parser, key, exc) from None


# -- XContent helpers shared with search_request.py -----------------------------------------------


def unsupported_token(parser: str, key: str, value: Any) -> XContentParseError:
    """ObjectParser's refusal of a value whose JSON kind the option does not take."""
    return XContentParseError(f"[{parser}] {key} doesn't support values of type: {token_name(value)}")


def field_failed(parser: str, key: str, cause: ElasticError) -> XContentParseError:
    """ObjectParser's wrapping of an option's own error: the reason travels as `caused_by`."""
    return chain(XContentParseError(f"[{parser}] failed to parse field [{key}]"), cause)


#: Java exceptions that are not ElasticsearchExceptions: never reported as a root cause below
#: the exception that wraps them.
_PLAIN_JAVA = ("illegal_argument_exception", "number_format_exception", "illegal_state_exception")


def chain(error: ElasticError, cause: ElasticError) -> ElasticError:
    """`error` caused by `cause`, with the root cause `ElasticsearchException.guessRootCauses`
    picks: the cause when it is an Elasticsearch exception, else the wrapper itself."""
    error.caused_by = cause
    if cause.error_type in _PLAIN_JAVA:
        error.root_is_self = True
    return error
