"""A search's `suggest` section into typed suggestions: `completion` (prefix, fuzzy, regex,
contexts) and `term`, as Elasticsearch's SuggestBuilder reads them. search/suggest.py runs them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leafsearch.common.json_tokens import token_name
from leafsearch.errors import IllegalArgument, ParsingError
from leafsearch.index import geo
from leafsearch.request import lucene_regexp
from leafsearch.request.query_dsl import regexp_flags
from leafsearch.unsupported import NotSupported

#: Elasticsearch's suggesters; `phrase` is not here.
SUGGESTERS = ("completion", "term")


@dataclass(frozen=True, slots=True)
class Fuzzy:
    fuzziness: str = "AUTO"
    transpositions: bool = True
    min_length: int = 3
    prefix_length: int = 1
    unicode_aware: bool = False


@dataclass(frozen=True, slots=True)
class ContextQuery:
    """A category context's value (`prefix`: of values starting with it), or a geo context's
    point (`point`, or `value` read as one: "lat,lon" or a geohash), `precision` and the
    geohash lengths whose `neighbours` count too."""

    name: str
    value: str
    boost: float = 1.0
    prefix: bool = False
    point: tuple[float, float] | None = None
    precision: int | None = None
    neighbours: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class CompletionSuggestion:
    name: str
    field: str
    text: str  # the prefix, or the regex
    regex: bool = False
    size: int = 5
    skip_duplicates: bool = False
    fuzzy: Fuzzy | None = None
    contexts: tuple[ContextQuery, ...] = ()
    analyzer: str | None = None
    regex_flags: int = lucene_regexp.ALL
    max_determinized_states: int = lucene_regexp.DEFAULT_MAX_STATES


@dataclass(frozen=True, slots=True)
class TermSuggestion:
    name: str
    field: str
    text: str
    size: int = 5
    suggest_mode: str = "missing"
    max_edits: int = 2
    prefix_length: int = 1
    min_word_length: int = 4
    min_doc_freq: float = 0.0
    accuracy: float = 0.5
    sort: str = "score"
    analyzer: str | None = None


Suggestion = CompletionSuggestion | TermSuggestion


def parse_suggest(body: Any) -> tuple[Suggestion, ...]:
    if not isinstance(body, dict):
        raise ParsingError(f"Expected [START_OBJECT] in [suggest] but found [{token_name(body)}]")
    global_text = body.get("text")
    if global_text is not None and not isinstance(global_text, str):
        raise ParsingError("[suggest] text must be a string")
    out = []
    for name, entry in body.items():
        if name == "text":
            continue
        if not isinstance(entry, dict):
            raise ParsingError(f"suggestion [{name}] must be an object")
        out.append(_suggestion(name, entry, global_text))
    return tuple(out)


def _suggestion(name: str, entry: dict, global_text: str | None) -> Suggestion:
    text: str | None = global_text
    regex = False
    kind: str | None = None
    options: dict = {}
    for key, value in entry.items():
        if key in ("text", "prefix", "regex"):
            if not isinstance(value, str):
                raise ParsingError(f"suggestion [{name}] [{key}] must be a string")
            text, regex = value, key == "regex"
        elif key in SUGGESTERS or key == "phrase":
            if kind is not None:
                raise ParsingError(f"suggestion [{name}] holds more than one suggester")
            if key == "phrase":
                raise NotSupported("the [phrase] suggester")
            if not isinstance(value, dict):
                raise ParsingError(f"suggester [{key}] must be an object")
            kind, options = key, value
        else:
            raise ParsingError(f"suggestion does not support [{key}]")
    if kind is None:
        raise ParsingError(f"suggestion [{name}] is missing a suggester")
    if text is None:
        raise IllegalArgument("The required text option is missing")
    if "field" not in options:
        raise ParsingError("the required field option [field] is missing")
    if not isinstance(options["field"], str):
        raise ParsingError("[field] must be a string")
    if kind == "completion":
        return _completion(name, text, regex, options)
    if regex:
        raise IllegalArgument("[regex] is for the [completion] suggester only")
    return _term(name, text, options)


def _int(key: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ParsingError(f"[{key}] must be an integer")
    try:
        number = int(value)
    except ValueError:
        raise ParsingError(f"[{key}] must be an integer") from None
    if number < least:
        raise IllegalArgument(f"[{key}] must be {'positive' if least > 0 else 'non-negative'}")
    return number


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ParsingError(f"[{key}] must be a boolean")


def _completion(name: str, text: str, regex: bool, options: dict) -> CompletionSuggestion:
    values: dict[str, Any] = {}
    for key, value in options.items():
        if key == "field":
            values["field"] = value
        elif key == "size":
            values["size"] = _int(key, value, 1)
        elif key == "skip_duplicates":
            values["skip_duplicates"] = _bool(key, value)
        elif key == "analyzer":
            values["analyzer"] = str(value)
        elif key == "fuzzy":
            values["fuzzy"] = _fuzzy(value)
        elif key == "contexts":
            values["contexts"] = _contexts(value)
        elif key == "regex" and regex:
            if not isinstance(value, dict) or any(
                k not in ("flags", "max_determinized_states") for k in value
            ):
                raise ParsingError("[regex] takes [flags] and [max_determinized_states]")
            if "flags" in value:
                values["regex_flags"] = regexp_flags(str(value["flags"]))
            if "max_determinized_states" in value:
                states = _int("max_determinized_states", value["max_determinized_states"], 1)
                values["max_determinized_states"] = states
        elif key == "shard_size":
            _int(key, value, 1)
        else:
            raise ParsingError(f"[completion] unknown field [{key}]")
    if regex and "fuzzy" in values:
        raise IllegalArgument("[fuzzy] and [regex] cannot be used together")
    return CompletionSuggestion(name, text=text, regex=regex, **values)


def _fuzzy(value: Any) -> Fuzzy:
    if value is True or value == "true":
        return Fuzzy()
    if not isinstance(value, dict):
        raise ParsingError("[fuzzy] must be an object or true")
    fields: dict[str, Any] = {}
    for key, v in value.items():
        if key == "fuzziness":
            fields[key] = str(v).upper() if isinstance(v, str) else str(int(v))
        elif key in ("transpositions", "unicode_aware"):
            fields[key] = _bool(key, v)
        elif key in ("min_length", "prefix_length"):
            fields[key] = _int(key, v, 0)
        else:
            raise ParsingError(f"[fuzzy] unknown field [{key}]")
    return Fuzzy(**fields)


def _contexts(value: Any) -> tuple[ContextQuery, ...]:
    if not isinstance(value, dict):
        raise ParsingError("[contexts] must be an object")
    out = []
    for name, queries in value.items():
        for query in queries if isinstance(queries, list) else [queries]:
            if isinstance(query, dict) and _is_geo(query):
                out.append(_geo_context(name, query))
            elif isinstance(query, dict):
                unknown = next((k for k in query if k not in ("context", "boost", "prefix")), None)
                if unknown is not None:
                    raise ParsingError(f"[category] unknown field [{unknown}]")
                if "context" not in query:
                    raise ParsingError("category context must have a [context]")
                boost = query.get("boost", 1)
                if isinstance(boost, bool) or not isinstance(boost, int | float) or boost < 0:
                    raise IllegalArgument("[boost] must be a non-negative number")
                prefix = _bool("prefix", query.get("prefix", False))
                out.append(ContextQuery(name, _context_text(query["context"]), float(boost), prefix))
            else:
                out.append(ContextQuery(name, _context_text(query)))
    return tuple(out)


def _is_geo(query: dict) -> bool:
    """Whether a context query is a geo context's: a point, or a `context` that is one (an
    object or an array), or `precision`/`neighbours` beside it."""
    if "context" not in query:
        return any(k in query for k in ("lat", "lon", "type", "coordinates", "geohash"))
    return isinstance(query["context"], dict | list) or "precision" in query or "neighbours" in query


def _geo_context(name: str, query: dict) -> ContextQuery:
    """A geo context query (GeoQueryContext): `{"lat", "lon"}`, or `{"context": point, "boost",
    "precision", "neighbours"}`, a point in any geo_point form."""
    if "context" not in query:
        query = {"context": query}
    unknown = next((k for k in query if k not in ("context", "boost", "precision", "neighbours")), None)
    if unknown is not None:
        raise ParsingError(f"[geo] unknown field [{unknown}]")
    try:
        point = geo.parse_point(query["context"])
        problem = geo.point_problem(*point, name)
        if problem is not None:
            raise geo.GeoError(problem)
        precision = geo.geohash_precision(query.get("precision", geo.MAX_GEOHASH_PRECISION))
        listed = query.get("neighbours", [])
        listed = listed if isinstance(listed, list) else [listed]
        neighbours = tuple(geo.geohash_precision(n) for n in listed)
    except geo.GeoError as e:
        raise ParsingError(f"[geo] failed to parse field [context]: {e}") from None
    boost = query.get("boost", 1)
    if isinstance(boost, bool) or not isinstance(boost, int | float) or boost < 0:
        raise IllegalArgument("[boost] must be a non-negative number")
    return ContextQuery(name, "", float(boost), point=point, precision=precision, neighbours=neighbours)


def _context_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ParsingError(f"category context must be a string, number or boolean, not [{token_name(value)}]")


def url_suggestion(field: str, text: str | None, mode: str, size: int | None) -> TermSuggestion:
    """The term suggestion of a search's `suggest_field`, `suggest_text` (else `q`),
    `suggest_mode` and `suggest_size` parameters, named after its field."""
    if text is None:
        raise IllegalArgument("The required text option is missing")
    options: dict[str, Any] = {"field": field, "suggest_mode": mode}
    if size is not None:
        options["size"] = size
    return _term(field, text, options)


def _term(name: str, text: str, options: dict) -> TermSuggestion:
    values: dict[str, Any] = {}
    for key, value in options.items():
        if key == "field":
            values["field"] = value
        elif key == "size":
            values["size"] = _int(key, value, 1)
        elif key in ("max_edits", "prefix_length", "min_word_length"):
            values[key] = _int(key, value, 0)
        elif key in ("min_doc_freq", "accuracy"):
            values[key] = float(value)
        elif key == "suggest_mode":
            if value not in ("missing", "popular", "always"):
                raise IllegalArgument(f"Illegal suggest mode {value}")
            values[key] = value
        elif key == "sort":
            if value not in ("score", "frequency"):
                raise IllegalArgument(f"Illegal sort mode {value}")
            values[key] = value
        elif key == "analyzer":
            values[key] = str(value)
        elif key in ("shard_size", "max_inspections", "max_term_freq", "string_distance", "lowercase_terms"):
            continue
        else:
            raise ParsingError(f"[term] unknown field [{key}]")
    if not 1 <= values.get("max_edits", 2) <= 2:
        raise IllegalArgument("maxEdits must be between 1 and 2")
    return TermSuggestion(name, text=text, **values)
