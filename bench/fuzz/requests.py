"""The fuzzer's requests: a route of the table, its placeholders, query parameters, headers and
body, drawn from a seeded generator (bodies.py for the bodies)."""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from bench.fuzz.bodies import (
    BAD_WRITE_INDEX_NAMES,
    CONTROL,
    FUZZ_INDICES,
    READ_INDEX_NAMES,
    TIME_VALUES,
    cluster_settings_body,
    document,
    encode,
    giant_search_body,
    heavy_search_body,
    hostile,
    index_body,
    many_fields,
    mapping_body,
    mget_body,
    mutate,
    plain,
    queries,
    search_body,
    settings_body,
    update_body,
    wrong_mapping,
)
from leafsearch.rest.routes import ROUTES


def segment(value: str) -> str:
    """A path segment holding `value`; `.` and `..` encoded, or a client would remove them as dot
    segments."""
    return quote(value, safe=",*") if value not in (".", "..") else value.replace(".", "%2E")


def pit_close_body(fuzzer: Fuzzer) -> dict[str, Any]:
    return {"id": fuzzer.context_id("pit")}


def scroll_body(fuzzer: Fuzzer) -> dict[str, Any]:
    return {"scroll_id": fuzzer.context_id("scroll"), "scroll": fuzzer.rng.choice(("1m", "10s"))}


def bulk_lines(fuzzer: Fuzzer, path_index: str | None) -> bytes:
    rng = fuzzer.rng
    lines: list[bytes] = []
    for i in range(rng.randrange(1, 8)):
        op = rng.choice(("index", "create", "update", "delete"))
        meta: dict[str, Any] = {"_id": str(rng.randrange(20))}
        if path_index is None or rng.random() < 0.3:
            meta["_index"] = fuzzer.write_index()
        if rng.random() < 0.1:
            meta["routing"] = rng.choice(("r1", "r2"))
        action: Any = {op: meta}
        source: Any = (
            {"doc": {"n": i}, "doc_as_upsert": True}
            if op == "update"
            else document(rng)
            if op != "delete"
            else None
        )
        if rng.random() < 0.3:
            action = mutate(rng, action)
        if source is not None and rng.random() < 0.3:
            source = mutate(rng, source)
        lines.append(encode(rng, action) if rng.random() < 0.2 else plain(action))
        if source is not None:
            lines.append(encode(rng, source) if rng.random() < 0.2 else plain(source))
        if rng.random() < 0.05:
            lines.append(rng.choice((b"", b"{}", b"[]", b"garbage", b'{"index":{}}')))
    body = b"\n".join(lines)
    return body if rng.random() < 0.1 else body + b"\n"


# ---- the fuzzer -----------------------------------------------------------------------------------

WRITE_HANDLERS = {
    "create_index",
    "delete_index",
    "put_mapping",
    "put_settings",
    "index_doc",
    "create_doc",
    "delete_doc",
    "update_doc",
    "bulk",
    "close_index",
    "open_index",
    "delete_by_query",
    "update_by_query",
    "reindex",
}
BODIES: dict[str, Callable[[random.Random], Any]] = {
    "create_index": index_body,
    "put_mapping": mapping_body,
    "put_settings": settings_body,
    "put_cluster_settings": cluster_settings_body,
    "index_doc": document,
    "create_doc": document,
    "update_doc": update_body,
    "mget": mget_body,
    "search": search_body,
    "count": lambda rng: {"query": queries(rng)},
    "open_pit": lambda rng: {"index_filter": queries(rng)},
}
PARAM_VALUES: dict[str, tuple[str, ...]] = {
    "size": ("0", "10", "-1", "10001", "abc", "1.5", "99999999999999999999"),
    "from": ("0", "-5", "abc", "10000"),
    "scroll": TIME_VALUES,
    "keep_alive": TIME_VALUES,
    "timeout": TIME_VALUES,
    "master_timeout": TIME_VALUES,
    "refresh": ("true", "false", "wait_for", "", "maybe"),
    "routing": ("r1", "", "r1,r2", "%00"),
    "wait_for_active_shards": ("1", "all", "0", "-1", "x"),
    "if_seq_no": ("0", "-1", "x", "99999999999999999999"),
    "if_primary_term": ("1", "0", "x"),
    "version": ("true", "1", "x"),
    "op_type": ("index", "create", "delete", "x"),
    "q": ("title:fox", "*", "n:[1 TO", "tag:(red OR blue)", "title:fo~2", "a" * 5_000, "/(a+)+b/"),
    "sort": ("n:desc", "n", "tag:up", ":", "_doc"),
    "track_total_hits": ("true", "false", "5", "-1", "x"),
    "expand_wildcards": ("open", "all", "none", "closed,hidden", "x"),
    "ignore_unavailable": ("true", "false", "x"),
    "allow_no_indices": ("true", "false", "x"),
    "_source": ("false", "true", "n,title", ""),
    "terminate_after": ("1", "-1", "x"),
    "search_type": ("query_then_fetch", "dfs_query_then_fetch", "x"),
    "format": ("json", "yaml", "txt", "x"),
    "filter_path": ("hits.hits._id", "**", "-hits", ""),
    "level": ("cluster", "indices", "shards", "x"),
    "wait_for_status": ("green", "yellow", "red", "x"),
    "wait_for_nodes": ("1", ">=1", "x"),
    "h": ("index,docs.count", "x", ""),
    "s": ("index:desc", "x"),
    "bytes": ("b", "kb", "x"),
    "time": ("ms", "x"),
    "preference": ("_local", "_shards:0", "x"),
    "retry_on_conflict": ("1", "-1", "x"),
    "min_score": ("0.5", "NaN", "x"),
    "default_operator": ("AND", "OR", "x"),
    "df": ("title", ""),
    "lenient": ("true", "x"),
    "slices": ("1", "x"),
}


@dataclass
class Sent:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes

    def reproducer(self) -> str:
        data = self.body[:2_000]
        shown = data.decode("utf-8", "backslashreplace") + (
            "...(truncated)" if len(self.body) > 2_000 else ""
        )
        headers = " ".join(
            f"-H '{k}: {v if len(v) < 200 else f'<{len(v)} characters>'}'" for k, v in self.headers.items()
        )
        return f"curl -X {self.method} '$URL{self.url}' {headers} --data-binary {json.dumps(shown)}"

    def oversized_head(self) -> bool:
        """Whether the headers pass the server's `http.max_header_size` (16kb): the server answers
        400 and closes the connection, possibly before the client has sent everything."""
        return sum(len(k) + len(v) + 2 for k, v in self.headers.items()) > 16 * 1024 - 100


@dataclass
class Fuzzer:
    rng: random.Random
    contexts: dict[str, list[str]] = field(default_factory=lambda: {"scroll": [], "pit": []})

    def write_index(self) -> str:
        return (
            self.rng.choice(FUZZ_INDICES)
            if self.rng.random() < 0.8
            else self.rng.choice(BAD_WRITE_INDEX_NAMES)
        )

    def read_index(self) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            return CONTROL
        if roll < 0.75:
            return self.rng.choice(READ_INDEX_NAMES)
        return self.write_index()

    def context_id(self, kind: str) -> Any:
        """A real id of this run (open, closed or of the other kind), or a forged one."""
        rng = self.rng
        known = self.contexts[kind] + self.contexts["pit" if kind == "scroll" else "scroll"]
        roll = rng.random()
        if roll < 0.4 and known:
            real = rng.choice(known)
            return rng.choice((real, real[:-3], real + "AA", real.lower(), real[::-1]))
        forged = [
            base64.urlsafe_b64encode(
                f"leafsearch:{kind}:node:session:{rng.randrange(10**6)}".encode()
            ).decode(),
            base64.urlsafe_b64encode(b"leafsearch:" + os.urandom(rng.randrange(1, 40))).decode(),
            base64.b64encode(os.urandom(24)).decode(),
            "",
            "_all",
            "%%%",
            "a" * 5_000,
        ]
        return rng.choice(forged + [hostile(rng)])

    def remember(self, response: httpx.Response) -> None:
        try:
            body = response.json()
        except ValueError:
            return
        if isinstance(body, dict):
            if isinstance(body.get("_scroll_id"), str):
                self.contexts["scroll"].append(body["_scroll_id"])
            if isinstance(body.get("id"), str) and "pit" in str(response.request.url):
                self.contexts["pit"].append(body["id"])

    def placeholder(self, name: str, writes: bool) -> str:
        rng = self.rng
        if name == "index":
            return self.write_index() if writes else self.read_index()
        if name == "id":
            return rng.choice(("1", "2", "new", "", "a/b", "x" * 600, "é", "%00", "_all", "-1"))
        if name == "scroll_id":
            value = self.context_id("scroll")
            return (value if isinstance(value, str) else json.dumps(value))[:2_000]  # within URL limits
        if name == "name":
            return rng.choice(("index.number_of_shards", "*", "fuzz-alias", "x", "index.*"))
        if name == "node_id":
            return rng.choice(("_local", "_all", "x", "*", "_master"))
        if name in ("metric", "index_metric"):
            return rng.choice(("indices", "search", "docs", "_all", "x", "indices,jvm"))
        return "x"

    def params(self, route: Any) -> dict[str, str]:
        rng = self.rng
        params: dict[str, str] = {}
        known = sorted(route.params)
        for _ in range(rng.choice((0, 0, 1, 2, 3))):
            if known:
                name = rng.choice(known)
                params[name] = rng.choice(PARAM_VALUES.get(name, ("true", "x", "-1", "")))
        if rng.random() < 0.05:
            params[rng.choice(("unknown", "sizee", "Size", "pretty", "human", "error_trace"))] = "true"
        if route.handler.__name__ == "cluster_health" or any(p.startswith("wait_for") for p in params):
            # A wait that cannot be satisfied (the health of a missing index, too many active shards)
            # lasts its timeout, as in Elasticsearch: keep it short.
            params["timeout"] = "100ms"
        return params

    def body(self, route: Any, path_index: str | None) -> bytes:
        rng = self.rng
        handler = route.handler.__name__
        if handler == "bulk":
            return bulk_lines(self, path_index)
        if handler in ("scroll",):
            return encode(rng, mutate(rng, scroll_body(self)) if rng.random() < 0.3 else scroll_body(self))
        if handler == "clear_scroll":
            return encode(rng, {"scroll_id": self.context_id("scroll")})
        if handler == "close_pit":
            return encode(rng, pit_close_body(self))
        if handler in ("search", "count") and rng.random() < 0.05:
            return encode(rng, heavy_search_body(rng))  # never mutated: too deep to copy
        if handler == "put_mapping" and rng.random() < 0.3:
            return encode(rng, wrong_mapping(rng))
        if handler == "create_index" and rng.random() < 0.2:
            return encode(rng, {"mappings": wrong_mapping(rng)})
        if handler == "search" and rng.random() < 0.15:
            pit = {"id": self.context_id("pit"), "keep_alive": rng.choice(TIME_VALUES)}
            return encode(rng, {**search_body(rng), "pit": pit})
        if handler == "put_settings" and path_index is None:
            # `PUT /_settings` updates every index, the control index too: only settings that do not
            # exist, so that the request is refused whatever else is wrong with it.
            return encode(rng, {"index": {"fuzz_unknown_setting": hostile(rng)}})
        make = BODIES.get(handler)
        if make is None:
            return b"" if rng.random() < 0.7 else encode(rng, hostile(rng))
        valid = make(rng)
        roll = rng.random()
        if roll < 0.25:
            return encode(rng, valid)
        if roll < 0.85:
            return encode(rng, mutate(rng, valid))
        return encode(rng, hostile(rng))

    def heavy(self) -> Sent:
        """A request whose body is intact JSON (so that it reaches the limits) but heavy: a giant
        search, a document with many new fields, or a mapping with wrong-typed parameters."""
        rng = self.rng
        headers = {"content-type": "application/json"}
        roll = rng.random()
        if roll < 0.6:
            search = f"/{segment(self.read_index())}/_search"
            return Sent("POST", search, headers, plain(giant_search_body(rng)))
        index = segment(self.write_index())
        if roll < 0.8:
            return Sent("POST", f"/{index}/_doc", headers, plain(many_fields(rng)))
        return Sent("PUT", f"/{index}/_mapping", headers, plain(wrong_mapping(rng)))

    def request(self) -> Sent:
        rng = self.rng
        if rng.random() < 0.03:
            return self.heavy()
        route = rng.choice(ROUTES)
        writes = route.handler.__name__ in WRITE_HANDLERS
        method = rng.choice(sorted(route.methods))
        values = {name: self.placeholder(name, writes) for name in (p for _, p in route.placeholders)}
        path = route.path
        for name, value in values.items():
            path = path.replace("{" + name + "}", segment(value))
        params = self.params(route)
        body = b"" if method in ("HEAD",) else self.body(route, values.get("index"))
        headers = {
            "content-type": "application/x-ndjson" if route.handler.__name__ == "bulk" else "application/json"
        }
        roll = rng.random()
        if roll < 0.05:
            headers["content-type"] = rng.choice(
                ("text/plain", "application/smile", "application/cbor", "x/y", "")
            )
        elif roll < 0.08 and body:
            headers["content-encoding"] = "gzip"
            body = gzip.compress(body) if rng.random() < 0.8 else body
        if rng.random() < 0.01:  # around and far past `http.max_header_size` (16kb)
            headers["x-fuzz-padding"] = "a" * rng.choice((8_000, 16_300, 17_000, 200_000, 1 << 20))
        url = path + ("?" + urlencode(params) if params else "")
        return Sent(method, url, headers, body)


# ---- the checks -----------------------------------------------------------------------------------
