"""Index templates (`_template`, `_index_template`, `_component_template`, the simulate APIs),
data streams (`_data_stream`, `_rollover`) and `GET /_cluster/state`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from leafsearch.indices import cluster_state as state
from leafsearch.indices import data_streams, templates
from leafsearch.node.stats import node_header
from leafsearch.request.indices_options import IndicesOptions
from leafsearch.rest.cat import Column, render_table
from leafsearch.rest.exchange import RestRequest, RestResponse

if TYPE_CHECKING:
    from leafsearch.node.node import Node

#: The route's kind of template, by the first part of its path.
_KINDS = {"_template": "legacy", "_index_template": "composable", "_component_template": "component"}


def _kind(req: RestRequest) -> str:
    return _KINDS[req.path.strip("/").split("/")[0]]


def put_template(node: Node, req: RestRequest) -> RestResponse:
    kind = _kind(req)
    order = req.int_param("order") if kind == "legacy" else None
    return RestResponse(
        templates.put_template(
            node, kind, req.path_params["name"], req.json_object(), create=req.flag("create"), order=order
        )
    )


def get_templates(node: Node, req: RestRequest) -> RestResponse:
    kind = _kind(req)
    name = req.path_params.get("name")
    body = templates.get_templates(node, kind, name, flat=req.flag("flat_settings"))
    # A legacy template that is not there is a 404 with the (empty) body, as Elasticsearch answers.
    missing = kind == "legacy" and name is not None and not body and name not in ("_all", "*")
    return RestResponse(body, status=404 if missing else 200)


def template_exists(node: Node, req: RestRequest) -> RestResponse:
    found = templates.template_exists(node, _kind(req), req.path_params["name"])
    return RestResponse(status=200 if found else 404)


def delete_template(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(templates.delete_templates(node, _kind(req), req.path_params["name"]))


CAT_COLUMNS = [
    Column("name", "template name", ("n",)),
    Column("index_patterns", "template index patterns", ("t",)),
    Column("order", "template application order/priority number", ("o", "p"), right=True),
    Column("version", "version", ("v",), right=True),
    Column("composed_of", "component templates comprising index template", ("c",)),
]


def cat_templates(node: Node, req: RestRequest) -> RestResponse:
    return render_table(req, CAT_COLUMNS, templates.cat_rows(node, req.path_params.get("name")))


def simulate_index(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(templates.simulate_index(node, req.path_params["name"]))


def simulate_template(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(templates.simulate_template(node, req.path_params.get("name"), req.json_object()))


# ---- data streams ----------------------------------------------------------------------------


def get_data_streams(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(data_streams.get_data_streams(node, req.path_params.get("name")))


def create_data_stream(node: Node, req: RestRequest) -> RestResponse:
    data_streams.create_data_stream(node, req.path_params["name"])
    return RestResponse({"acknowledged": True})


def delete_data_stream(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(data_streams.delete_data_streams(node, req.path_params["name"]))


def data_stream_stats(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(data_streams.data_stream_stats(node, req.path_params.get("name")))


def rollover(node: Node, req: RestRequest) -> RestResponse:
    return RestResponse(
        data_streams.rollover(node, req.path_params["index"], req.json_object(), dry_run=req.flag("dry_run"))
    )


# ---- cluster state ---------------------------------------------------------------------------


def cluster_state(node: Node, req: RestRequest) -> RestResponse:
    metrics = state.parse_metrics(req.path_params.get("metric"), req.path)
    defaults = IndicesOptions(ignore_unavailable=True, allow_no_indices=True, expand_wildcards="open")
    return RestResponse(
        state.cluster_state(
            node,
            cluster_uuid=node.cluster_uuid,
            node_name=node.name,
            node_header=node_header(node.name),
            metrics=metrics,
            index_expr=req.path_params.get("index"),
            options=req.indices_options(
                ignore_unavailable=defaults.ignore_unavailable,
                allow_no_indices=defaults.allow_no_indices,
                expand_wildcards=defaults.expand_wildcards,
            ),
        )
    )
