"""A fuzz run against a server: the control index that must not change, the shape every error
must have, and the loop that sends the requests and sorts the answers."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import yaml

from bench.fuzz.bodies import CONTROL, MAPPING, TAGS, WORDS
from bench.fuzz.requests import Fuzzer, Sent


def control_docs() -> dict[str, dict[str, Any]]:
    return {
        str(i): {
            "title": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(3)),
            "tag": TAGS[i % 3],
            "n": i,
            "f": i / 4,
            "ts": f"2024-01-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
            "ok": i % 2 == 0,
            "obj": {"k": f"k{i % 5}"},
        }
        for i in range(40)
    }


#: Answers that Elasticsearch itself gives without its error envelope.
PLAIN_ERRORS = ("Incorrect HTTP method for uri", "no handler found for uri")


def shape_problem(response: httpx.Response, method: str) -> str | None:
    """Why a 4xx answer is not Elasticsearch's, or None."""
    status = response.status_code
    if method == "HEAD":
        return None if not response.content else "a HEAD answer with a body"
    if response.headers.get("content-type") == "application/yaml":  # `format=yaml` was asked
        body = yaml.safe_load(response.text)
    else:
        try:
            body = response.json()
        except ValueError:
            return f"not JSON: {response.text[:200]!r}"
    if not isinstance(body, dict):
        return f"not an object: {response.text[:200]!r}"
    error = body.get("error")
    if error is None:
        # Not-found answers that are results, not errors, as in Elasticsearch.
        if status == 404 and (
            body.get("found") is False or body.get("result") == "not_found" or "num_freed" in body
        ):
            return None
        if status == 404 and body == {} and response.request.url.path.startswith("/_template"):
            return None  # GET of a legacy template that matches nothing: Elasticsearch's `{}`
        if status == 408 and body.get("timed_out") is True:  # cluster health waited in vain
            return None
        if "failures" in body and "batches" in body:  # a by-query answer: its failures' status
            return None
        return f"no error object: {response.text[:300]!r}"
    if isinstance(error, str):
        if error.startswith(PLAIN_ERRORS) or status == 406:
            return None
        if status == 404 and re.fullmatch(r"alias(es)? \[.*\] missing", error) and body.get("status") == 404:
            return None  # GET _alias of a missing alias, in Elasticsearch's own words and shape
        return f"a plain error string: {error[:200]!r}"
    if body.get("status") != status:
        return f"status {body.get('status')!r} in the body, {status} on the wire"
    if not (isinstance(error.get("type"), str) and isinstance(error.get("reason"), str | None)):
        return f"error without type or reason: {str(error)[:300]}"
    roots = error.get("root_cause")
    if not (isinstance(roots, list) and roots and all(isinstance(r, dict) and "type" in r for r in roots)):
        return f"error without root_cause: {str(error)[:300]}"
    return None


def snapshot(http: httpx.Client) -> dict[str, Any]:
    """What must not change in the control index: its documents, mapping and settings."""
    found = http.post(f"/{CONTROL}/_search", json={"size": 1000, "sort": ["n"], "seq_no_primary_term": True})
    hits = found.json()["hits"]["hits"] if found.status_code == 200 else found.text
    return {
        "docs": [(h["_id"], h["_source"], h["_seq_no"]) for h in hits] if isinstance(hits, list) else hits,
        "count": http.get(f"/{CONTROL}/_count").json()["count"],
        "mapping": http.get(f"/{CONTROL}/_mapping").json(),
        "settings": http.get(f"/{CONTROL}/_settings").json(),
    }


def load_control(http: httpx.Client) -> dict[str, Any]:
    """Create the control index (2 shards, `control_docs`) and answer its `snapshot`."""
    created = http.put(f"/{CONTROL}", json={"settings": {"number_of_shards": 2}, "mappings": MAPPING})
    assert created.status_code == 200, created.text
    lines = b"".join(
        b'{"index":{"_id":"%s"}}\n%s\n' % (i.encode(), json.dumps(doc).encode())
        for i, doc in control_docs().items()
    )
    loaded = http.post(
        f"/{CONTROL}/_bulk",
        params={"refresh": "true"},
        content=lines,
        headers={"content-type": "application/x-ndjson"},
    ).json()
    assert not loaded["errors"], loaded
    before = snapshot(http)
    assert before["count"] == len(control_docs())
    return before


@dataclass
class Findings:
    """What a run found wrong: each distinct 5xx (its first request and answer), answers without
    Elasticsearch's error shape, requests without an answer in time, and an oversized head answered
    otherwise than with a 400 or a closed connection."""

    server_errors: dict[str, tuple[Sent, str]] = field(default_factory=dict)
    bad_shapes: list[tuple[Sent, str]] = field(default_factory=list)
    stalled: list[Sent] = field(default_factory=list)

    def problems(self, timeout: float) -> list[str]:
        """One line (with a reproducer) per problem; none for a clean run."""
        lines = []
        for signature, (sent, text) in self.server_errors.items():
            lines.append(f"5xx {signature}\n    {sent.reproducer()}\n    -> {text}")
        for sent, problem in self.bad_shapes[:20]:
            lines.append(f"shape {problem}\n    {sent.reproducer()}")
        for sent in self.stalled:
            lines.append(f"no answer within {timeout}s\n    {sent.reproducer()}")
        return lines


def run(
    http: httpx.Client,
    fuzzer: Fuzzer,
    requests: int,
    observe: Callable[[Sent, httpx.Response | None, float], None] | None = None,
) -> Findings:
    """Send `requests` requests of `fuzzer` and sort the answers (`observe` sees each request, its
    response, None when the server closed the connection of an oversized head, and its seconds).
    Three requests without an answer in time end the run early."""
    findings = Findings()
    for _ in range(requests):
        sent = fuzzer.request()
        started = time.perf_counter()
        try:
            response: httpx.Response | None = http.request(
                sent.method, sent.url, headers=sent.headers, content=sent.body
            )
        except httpx.TimeoutException:
            findings.stalled.append(sent)
            if len(findings.stalled) >= 3:
                break
            continue
        except httpx.TransportError:
            # The server may close the connection of an oversized head before the client has sent
            # it all (Elasticsearch's netty does too): the answer is then lost with it.
            if not sent.oversized_head():
                raise
            response = None
        if observe is not None:
            observe(sent, response, time.perf_counter() - started)
        if response is None:
            continue
        if sent.oversized_head() and response.status_code != 400:
            findings.bad_shapes.append((sent, f"{response.status_code} for an oversized head"))
        elif response.status_code >= 500:
            try:
                error = response.json()["error"]
                signature = f"{response.status_code} {error['type']}: {str(error['reason'])[:120]}"
            except (ValueError, KeyError, TypeError):
                signature = f"{response.status_code} {response.text[:120]}"
            findings.server_errors.setdefault(signature, (sent, response.text[:500]))
        elif response.status_code >= 400:
            problem = shape_problem(response, sent.method)
            if problem is not None:
                findings.bad_shapes.append((sent, f"{response.status_code}: {problem}"))
        else:
            fuzzer.remember(response)
    return findings
