"""docs/api-reference.md, written from the route table: every endpoint, its methods and the query
parameters it accepts, so the reference lists exactly what the server routes.

    python -m leafsearch.rest.reference > docs/api-reference.md

`tests/test_docs.py` fails when the file and the table differ."""

from __future__ import annotations

import sys
from itertools import groupby

from leafsearch.rest.exchange import RESPONSE_PARAMS
from leafsearch.rest.router import Route
from leafsearch.rest.routes import ROUTES

SECTIONS = {
    "handlers_cluster": "Cluster, nodes and aliases",
    "handlers_indices": "Indices",
    "handlers_cat": "cat APIs",
    "handlers_docs": "Documents",
    "handlers_search": "Search",
    "handlers_security": "Security",
    "handlers_templates": "Templates, data streams and cluster state",
    "handlers_snapshots": "Snapshots",
}

HEADER = f"""# API reference

Every endpoint leafsearch serves, with its methods and the query parameters it accepts. This page
is generated from the route table (`leafsearch/rest/routes.py`) by
`python -m leafsearch.rest.reference > docs/api-reference.md`, and a test checks that it is
current. Request and response bodies are Elasticsearch 8's; where leafsearch behaves differently
or leaves a feature out, [differences.md](differences.md) says so.

- Every endpoint also takes {", ".join(f"`{p}`" for p in sorted(RESPONSE_PARAMS))}.
- A query parameter not listed for an endpoint is refused with Elasticsearch's
  `illegal_argument_exception` ("request [...] contains unrecognized parameter: [...]"), as
  Elasticsearch refuses it: a typo never passes silently.
- A path or method not listed is answered as Elasticsearch answers it: 405 with the allowed
  methods for a known path, 400 "no handler found for uri" otherwise.
"""


#: What a section's bodies take beyond Elasticsearch's (leafsearch extensions), after its table.
EXTENSIONS = {
    "Search": """Search bodies also take (leafsearch extensions, see [differences.md](differences.md) and
[paging-guide.md](paging-guide.md)):

- `search_before`: sort values, as `search_after` takes them (one per sort key, with or without
  a PIT, its `_shard_doc` tiebreaker included; dates in the sort's `format`). The page is the
  `size` hits immediately before those values, in the request's own sort order; it costs what a
  `search_after` page costs at any depth. Refused with `search_after` ("[search_before] cannot
  be used with [search_after]"), with `from` above 0 ("[from] parameter must be set to 0 when
  [search_before] is used"), in a scroll, and with `collapse`.
- `collapse` with any `sort`, paged with `search_after` (with or without a PIT) or `from`: each
  collapse key once over the walk, its best hit by the sort; `inner_hits` (`name`, `from`,
  `size`, `sort`, `_source`, `version`, `seq_no_primary_term`, `explain`, `track_scores`).
  Elasticsearch takes `search_after` with `collapse` only when sorted by the collapse field.
""",
}


def _section(route: Route) -> str:
    module = route.handler.__module__.rsplit(".", 1)[-1]
    return SECTIONS.get(module, module.removeprefix("handlers_").replace("_", " ").capitalize())


def render() -> str:
    lines = [HEADER]
    order = list(dict.fromkeys(_section(route) for route in ROUTES))
    for section in order:
        lines += [f"## {section}", "", "| methods | path | query parameters |", "|---|---|---|"]
        routes = [route for route in ROUTES if _section(route) == section]
        for _, group in groupby(routes, key=lambda r: (r.handler, r.params, r.methods)):
            group = list(group)
            methods = " ".join(sorted(group[0].methods))
            paths = "<br>".join(f"`{route.path}`" for route in group)
            params = ", ".join(f"`{p}`" for p in sorted(group[0].params)) or "-"
            lines.append(f"| {methods} | {paths} | {params} |")
        lines.append("")
        if section in EXTENSIONS:
            lines += [EXTENSIONS[section]]
    lines.append(EXPORT)
    return "\n".join(lines)


EXPORT = """## leafsearch extensions

- `GET|POST /{index}/_export`, `GET|POST /_export` (with a PIT): every matching document of a
  snapshot streamed as NDJSON (`application/x-ndjson`, chunked), one line per document,
  `{"_index","_id"[,"_routing"],"_source","sort"}` (`sort`: the cursor to resume after it), then
  `{"_export": {"count", "complete": true[, "pit_id"]}}`. Body: `query`, `sort` (default
  `_shard_doc`), `_source`, `slice`, `search_after`, `pit`; any other key is a 400. An error after
  the first line ends the stream with `{"error": {...}}` and no `_export` line. Authorized as a
  search. See [paging-guide.md](paging-guide.md#streaming-export-_export-a-leafsearch-extension).
"""


if __name__ == "__main__":
    sys.stdout.write(render())
