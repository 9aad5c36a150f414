"""`_delete_by_query`, `_update_by_query`, `_reindex`, their `_rethrottle`, and the `_tasks` API.

The operations themselves are in `by_query.py` and the task registry in `tasks.py`; this layer
parses, authorizes a reindex's two sides, and picks the answer's status.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from leafsearch.errors import IllegalArgument
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.security.narrowing import narrow_expression
from leafsearch.write.by_query import response_status
from leafsearch.write.by_query_request import DELETE, UPDATE, BulkByQuery, parse_by_query, parse_reindex
from leafsearch.write.by_query_request import parse_requests_per_second as parse_rate

if TYPE_CHECKING:
    from leafsearch.node.node import Node

SEARCH_ACTION = "indices:data/read/search"
WRITE_ACTION = "indices:data/write/index"


def delete_by_query(node: Node, req: RestRequest) -> RestResponse:
    request = parse_by_query(DELETE, req.path_params["index"], req.json_object(), req.action_params())
    return _execute(node, req, request)


def update_by_query(node: Node, req: RestRequest) -> RestResponse:
    request = parse_by_query(UPDATE, req.path_params["index"], req.json_object(), req.action_params())
    return _execute(node, req, request)


def reindex(node: Node, req: RestRequest) -> RestResponse:
    """A reindex reads its source and writes its destination: the caller must be allowed to
    search the one (wildcards narrowed, as a search's) and to index into the other, as
    Elasticsearch authorizes the search and bulk requests a reindex sends."""
    request = parse_reindex(req.json_object(), req.action_params())
    subject = req.subject
    if subject is not None and not subject.superuser:
        options = request.search.indices_options
        expand = options.expand_wildcards if options is not None else "open"
        narrowed = narrow_expression(
            node.resolve_names, subject, SEARCH_ACTION, request.indices, expand_wildcards=expand
        )
        if narrowed is not None:
            request.search = replace(request.search, indices=narrowed)
        assert request.dest is not None
        subject.check_index(WRITE_ACTION, request.dest.index)
    return _execute(node, req, request)


def _execute(node: Node, req: RestRequest, request: BulkByQuery) -> RestResponse:
    wait = req.flag("wait_for_completion", True)
    body = node.bulk_by_query(request, wait_for_completion=wait)
    return RestResponse(body, status=response_status(body) if wait else 200)


def rethrottle(node: Node, req: RestRequest) -> RestResponse:
    """`POST /_reindex|_update_by_query|_delete_by_query/<task>/_rethrottle`: the new rate takes
    effect at once (a throttle wait in progress is recomputed)."""
    rate = parse_rate(req.param("requests_per_second"))
    if rate is None:
        raise IllegalArgument("requests_per_second is a required parameter")
    task = node.tasks.running(req.path_params["task_id"])
    if task.rethrottle is None or task.parent is not None:
        raise IllegalArgument(f"task [{task.task_id}] does not support rethrottling")
    task.rethrottle(rate)
    return RestResponse(node.tasks.nodes_body([task], detailed=True, group_by=req.param("group_by", "nodes")))


def get_task(node: Node, req: RestRequest) -> RestResponse:
    body = node.tasks.get(
        req.path_params["task_id"],
        wait=req.flag("wait_for_completion", False),
        timeout=req.time_param("timeout"),
    )
    return RestResponse(body)


def list_tasks(node: Node, req: RestRequest) -> RestResponse:
    tasks = node.tasks.matching(actions=req.param("actions"), parent=req.param("parent_task_id"))
    if req.flag("wait_for_completion", False):
        timeout = req.time_param("timeout")
        for task in tasks:
            task.done.wait(30.0 if timeout is None or timeout < 0 else timeout)
    detailed = req.flag("detailed", False)
    return RestResponse(
        node.tasks.nodes_body(tasks, detailed=detailed, group_by=req.param("group_by", "nodes"))
    )


def cancel_tasks(node: Node, req: RestRequest) -> RestResponse:
    """`POST /_tasks/<id>/_cancel` or `POST /_tasks/_cancel?actions=`: the operations stop at
    their next batch; with `wait_for_completion` the answer waits until they have."""
    tasks = node.tasks.cancel(req.path_params.get("task_id"), actions=req.param("actions"))
    if req.flag("wait_for_completion", False):
        for task in tasks:
            task.done.wait(30.0)
    group_by = req.param("group_by", "nodes")
    return RestResponse(node.tasks.nodes_body(tasks, detailed=False, group_by=group_by))
