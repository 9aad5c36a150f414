"""Who may send what: the checks every request passes before its handler runs.

Always on, whatever the authentication:
- **Host** (DNS rebinding): a node listening on loopback answers only requests whose `Host`
  names a loopback address (`localhost`, `*.localhost`, `127.0.0.0/8`, `[::1]`), so a web page
  whose domain was re-pointed at 127.0.0.1 reaches nothing.
- **Origin**: a request carrying `Origin` (every cross-site request a browser sends but simple
  GETs) is refused unless it comes from the node's own origin (the scheme and `Host` it was sent
  to: the console at `/_ui/`) or `http.cors.enabled` and `http.cors.allow-origin` allow it;
  allowed cross-origin ones get Elasticsearch's CORS headers, and their preflights are answered.
- **`source=`** stands for the body only on the read APIs that take it in Elasticsearch (search,
  count, mget, scroll) and only with `source_content_type`; anywhere else it is an unrecognized
  parameter. Bodies that are not JSON are refused earlier (406, `media.py`).

When the data folder holds users (see `security/store.py`), every request must authenticate
(HTTP basic or an API key; 401 with `WWW-Authenticate` otherwise), and each route's action is
checked against the caller's roles (403 naming the action, the caller and the indices). Index
expressions with wildcards are narrowed to the indices the caller may read, as Elasticsearch's
security narrows them; explicit names it may not use are refused. Listings go by the same rule:
an alias is shown by its own name, an index by its own or through an alias the caller may use
(the handlers of alias listings and cluster monitoring filter with `security.narrowing`).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leafsearch.common.memo import memo
from leafsearch.common.settings import NODE_SETTINGS
from leafsearch.errors import ElasticError
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
from leafsearch.rest.media import parse_media_type
from leafsearch.security.narrowing import narrow_expression, refuse_explicit
from leafsearch.security.subject import CURRENT, SecurityException, Subject

if TYPE_CHECKING:
    from leafsearch.node.node import Node
    from leafsearch.rest.exchange import RestRequest
    from leafsearch.rest.router import Route

log = logging.getLogger("leafsearch.rest")

_CHALLENGES = ('Basic realm="security", charset="UTF-8"', "ApiKey")


@dataclass(frozen=True, slots=True)
class Action:
    """A route's Elasticsearch action name and how it names indices.

    scope: "cluster" (no index check), "monitor" (cluster monitoring, open to every user: indices
    the path names are narrowed as with "filter", and the handler shows only the index sections
    the caller may see), "filter" (wildcards narrowed to authorized indices), "strict" (every
    index the expression names must be authorized), "items" (the handler checks each item of the
    body: bulk, mget), "context" (a scroll or PIT id: its owner is checked).
    expand_wildcards: what wildcards reach when the request does not say (the handler's default),
    so that narrowing keeps what the route would list. aliases: the path's `{name}` is an alias
    expression, whose explicit names must be authorized (the handler lists only authorized ones).
    """

    name: str
    scope: str
    expand_wildcards: str = "open"
    aliases: bool = False


ACTIONS: dict[Callable[..., Any], Action] = {
    cluster.info: Action("cluster:monitor/main", "cluster"),
    indices.create_index: Action("indices:admin/create", "strict"),
    indices.get_index: Action(indices.GET_ACTION, "filter"),
    indices.index_exists: Action(indices.GET_ACTION, "filter"),
    indices.delete_index: Action("indices:admin/delete", "strict"),
    indices.get_mapping: Action("indices:admin/mappings/get", "filter"),
    indices.put_mapping: Action("indices:admin/mapping/put", "strict"),
    indices.get_settings: Action("indices:monitor/settings/get", "filter"),
    indices.put_settings: Action("indices:admin/settings/update", "strict"),
    indices.refresh: Action("indices:admin/refresh", "filter"),
    indices.flush: Action("indices:admin/flush", "filter"),
    indices.clear_cache: Action("indices:admin/cache/clear", "filter"),
    indices.field_caps: Action("indices:data/read/field_caps", "filter"),
    aliases.update_aliases: Action("indices:admin/aliases", "items"),
    aliases.put_alias: Action("indices:admin/aliases", "strict"),
    aliases.delete_alias: Action("indices:admin/aliases", "strict"),
    aliases.get_aliases: Action(aliases.GET_ACTION, "filter", expand_wildcards="all", aliases=True),
    aliases.alias_exists: Action(aliases.GET_ACTION, "filter", expand_wildcards="all", aliases=True),
    aliases.cat_aliases: Action(aliases.GET_ACTION, "cluster", aliases=True),
    analysis.analyze: Action("indices:admin/analyze", "cluster"),
    analysis.analyze_index: Action("indices:admin/analyze", "strict"),
    templates.put_template: Action("indices:admin/index_template/put", "cluster"),
    templates.get_templates: Action("indices:admin/index_template/get", "cluster"),
    templates.template_exists: Action("indices:admin/index_template/get", "cluster"),
    templates.delete_template: Action("indices:admin/index_template/delete", "cluster"),
    templates.simulate_index: Action("indices:admin/index_template/simulate_index", "cluster"),
    templates.simulate_template: Action("indices:admin/index_template/simulate", "cluster"),
    templates.get_data_streams: Action("indices:admin/data_stream/get", "cluster"),
    templates.create_data_stream: Action("indices:admin/data_stream/create", "cluster"),
    templates.delete_data_stream: Action("indices:admin/data_stream/delete", "cluster"),
    templates.data_stream_stats: Action("indices:monitor/data_stream/stats", "cluster"),
    templates.rollover: Action("indices:admin/rollover", "strict"),
    templates.cluster_state: Action("cluster:monitor/state", "cluster"),
    templates.cat_templates: Action("cluster:monitor/state", "cluster"),
    snapshots.cat_snapshots: Action("cluster:admin/snapshot/get", "cluster"),
    snapshots.put_repository: Action("cluster:admin/repository/put", "cluster"),
    snapshots.get_repositories: Action("cluster:admin/repository/get", "cluster"),
    snapshots.delete_repository: Action("cluster:admin/repository/delete", "cluster"),
    snapshots.verify_repository: Action("cluster:admin/repository/verify", "cluster"),
    snapshots.create_snapshot: Action("cluster:admin/snapshot/create", "cluster"),
    snapshots.get_snapshots: Action("cluster:admin/snapshot/get", "cluster"),
    snapshots.snapshot_status: Action("cluster:admin/snapshot/status", "cluster"),
    snapshots.delete_snapshot: Action("cluster:admin/snapshot/delete", "cluster"),
    snapshots.restore_snapshot: Action("cluster:admin/snapshot/restore", "cluster"),
    cat.cat_list: Action("cluster:monitor/main", "cluster"),
    cat.cat_indices: Action("indices:monitor/stats", "filter", expand_wildcards="all"),
    cat.cat_health: Action("cluster:monitor/health", "cluster"),
    cat.cat_count: Action("indices:data/read/search", "filter"),
    cat.cat_search_contexts: Action("cluster:monitor/search_contexts", "cluster"),
    cat.cat_tasks: Action("cluster:monitor/tasks/lists", "cluster"),
    cat.cat_shards: Action("indices:monitor/stats", "filter", expand_wildcards="all"),
    cat.cat_segments: Action("indices:monitor/segments", "filter"),
    cat.cat_recovery: Action("indices:monitor/recovery", "filter", expand_wildcards="all"),
    cat.cat_nodes: Action("cluster:monitor/nodes/stats", "cluster"),
    stats.indices_stats: Action("indices:monitor/stats", "filter"),
    stats.close_index: Action("indices:admin/close", "strict"),
    stats.open_index: Action("indices:admin/open", "strict"),
    cluster.cluster_health: Action(cluster.HEALTH_ACTION, "monitor"),
    cluster.pending_tasks: Action("cluster:monitor/task", "cluster"),
    scripts.put_script: Action("cluster:admin/script/put", "cluster"),
    scripts.get_script: Action("cluster:admin/script/get", "cluster"),
    scripts.delete_script: Action("cluster:admin/script/delete", "cluster"),
    cluster.get_cluster_settings: Action("cluster:monitor/settings", "cluster"),
    cluster.put_cluster_settings: Action("cluster:admin/settings/update", "cluster"),
    cluster.nodes_info: Action("cluster:monitor/nodes/info", "cluster"),
    cluster.nodes_stats: Action(cluster.NODES_STATS_ACTION, "monitor"),
    docs.index_doc: Action("indices:data/write/index", "strict"),
    docs.create_doc: Action("indices:data/write/index", "strict"),
    docs.get_doc: Action("indices:data/read/get", "strict"),
    docs.get_source: Action("indices:data/read/get", "strict"),
    docs.delete_doc: Action("indices:data/write/delete", "strict"),
    docs.update_doc: Action("indices:data/write/update", "strict"),
    docs.bulk: Action("indices:data/write/bulk", "items"),
    docs.mget: Action("indices:data/read/mget", "items"),
    search.search: Action("indices:data/read/search", "filter"),
    search.export: Action("indices:data/read/search", "filter"),
    search.count: Action("indices:data/read/search", "filter"),
    search.msearch: Action("indices:data/read/msearch", "items"),
    search.scroll: Action("indices:data/read/scroll", "context"),
    search.clear_scroll: Action("indices:data/read/scroll/clear", "context"),
    search.open_pit: Action("indices:data/read/open_point_in_time", "filter"),
    search.close_pit: Action("indices:data/read/close_point_in_time", "context"),
    by_query.delete_by_query: Action("indices:data/write/delete/byquery", "filter"),
    by_query.update_by_query: Action("indices:data/write/update/byquery", "filter"),
    # a reindex names its indices in the body: the handler checks the source and the destination
    by_query.reindex: Action("indices:data/write/reindex", "items"),
    by_query.rethrottle: Action("cluster:admin/reindex/rethrottle", "cluster"),
    # tasks belong to whoever started them (tasks.py): others get a 404, as for reader contexts
    by_query.get_task: Action("cluster:monitor/task/get", "cluster"),
    by_query.list_tasks: Action("cluster:monitor/tasks/lists", "cluster"),
    by_query.cancel_tasks: Action("cluster:admin/tasks/cancel", "cluster"),
    search.create_pit: Action("indices:data/read/point_in_time/create", "filter"),
    search.delete_pits: Action("indices:data/read/point_in_time/delete", "context"),
    search.all_pits: Action("indices:data/read/point_in_time/readall", "context"),
    security.authenticate: Action("cluster:admin/xpack/security/user/authenticate", "cluster"),
    security.create_api_key: Action("cluster:admin/xpack/security/api_key/create", "cluster"),
    security.get_api_keys: Action("cluster:admin/xpack/security/api_key/get", "cluster"),
    security.invalidate_api_keys: Action("cluster:admin/xpack/security/api_key/invalidate", "cluster"),
}

#: Cluster actions only a superuser may run; every other cluster action is open to any user.
#: Templates, data streams, snapshots and stored scripts change what every index gets or can be
#: rebuilt from (Elasticsearch's `manage_index_templates`, `manage`, `create_snapshot` privileges).
_SUPERUSER_CLUSTER_ACTIONS = frozenset(
    {
        "cluster:admin/settings/update",
        "cluster:admin/script/put",
        "cluster:admin/script/delete",
        "indices:admin/index_template/put",
        "indices:admin/index_template/delete",
        "indices:admin/data_stream/create",
        "indices:admin/data_stream/delete",
        "cluster:admin/repository/put",
        "cluster:admin/repository/delete",
        "cluster:admin/snapshot/create",
        "cluster:admin/snapshot/delete",
        "cluster:admin/snapshot/restore",
    }
)


class Refusal(Exception):
    """A request refused before it is read: status, error and headers to send."""

    def __init__(self, error: ElasticError, headers: dict[str, str] | None = None) -> None:
        super().__init__(error.reason)
        self.error = error
        self.headers = headers or {}


class Unauthenticated(SecurityException):
    status = 401

    def __init__(self, reason: str, **extra: Any) -> None:
        super().__init__(reason, extra={**extra, "header": {"WWW-Authenticate": list(_CHALLENGES)}})
        self.headers = {"WWW-Authenticate": ", ".join(_CHALLENGES)}


class SourceParamError(ElasticError):
    error_type = "validation_exception"
    status = 400


@dataclass(frozen=True, slots=True)
class CorsPolicy:
    """`http.cors.*`: off by default, so any request with an `Origin` header is refused."""

    enabled: bool
    allow_origin: str
    allow_methods: str
    allow_headers: str
    allow_credentials: bool
    max_age: int

    @classmethod
    def from_settings(cls, values: Mapping[str, str]) -> CorsPolicy:
        def get(key: str) -> Any:
            setting = NODE_SETTINGS[key]
            return setting.parse(values.get(key, setting.default), key)

        return cls(
            get("http.cors.enabled"),
            get("http.cors.allow-origin"),
            get("http.cors.allow-methods"),
            get("http.cors.allow-headers"),
            get("http.cors.allow-credentials"),
            get("http.cors.max-age"),
        )

    def allows(self, origin: str) -> bool:
        if not self.enabled or not self.allow_origin:
            return False
        if self.allow_origin == "*":
            return True
        pattern = self.allow_origin
        if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
            return re.fullmatch(pattern[1:-1], origin) is not None
        return origin in (o.strip() for o in self.allow_origin.split(","))

    def headers(self, origin: str) -> dict[str, str]:
        allowed = "*" if self.allow_origin == "*" else origin
        headers = {"access-control-allow-origin": allowed, "vary": "Origin"}
        if self.allow_credentials:
            headers["access-control-allow-origin"] = origin
            headers["access-control-allow-credentials"] = "true"
        return headers

    def preflight_headers(self, origin: str) -> dict[str, str]:
        return {
            **self.headers(origin),
            "access-control-allow-methods": self.allow_methods,
            "access-control-allow-headers": self.allow_headers,
            "access-control-max-age": str(self.max_age),
        }


#: The longest host name (RFC 1035) whose answer `is_loopback_host` keeps.
MAX_HOST_NAME = 255


@memo(256, MAX_HOST_NAME + 1)
def is_loopback_host(host: str) -> bool:
    """True for `localhost`, `*.localhost` and loopback IP literals (brackets allowed). Asked
    for every request's `Host`: the answers for the last 256 hosts of at most `MAX_HOST_NAME`
    characters are kept (parsing an address was 3% of a coordinator's CPU per search, py-spy --gil)."""
    host = host.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The host of a `Host` header value, without its port."""
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    name, _, port = header.rpartition(":")
    return name if name and port.isdigit() else header


class AccessControl:
    """The checks of one HTTP front, with the node whose users it authenticates."""

    def __init__(self, node: Node, *, loopback_only: bool, node_settings: Mapping[str, str]) -> None:
        self.node = node
        self.loopback_only = loopback_only
        self.cors = CorsPolicy.from_settings(node_settings)

    # ---- before the body is read --------------------------------------------------------

    def screen(self, method: str, headers: Mapping[str, str], scheme: str = "http") -> dict[str, str]:
        """The CORS headers to add to the answer; Refusal for a foreign Host or Origin.

        A request from the node's own origin (`scheme` and the `Host` it was sent to) is a
        same-origin one and needs no CORS headers. A CORS preflight that is allowed is answered
        here too (as a Refusal with status 200)."""
        host = headers.get("host")
        if self.loopback_only and host is not None and not is_loopback_host(_host_name(host)):
            raise Refusal(
                SecurityException(
                    f"the Host header [{host}] does not name a loopback address and this node "
                    "listens on loopback only"
                )
            )
        origin = headers.get("origin")
        if origin is None or (host is not None and origin == f"{scheme}://{host}"):
            return {}
        if not self.cors.allows(origin):
            raise Refusal(
                SecurityException(
                    f"cross-origin request from [{origin}] refused: the origin is not allowed by "
                    "[http.cors.enabled] and [http.cors.allow-origin]"
                )
            )
        if method == "OPTIONS" and "access-control-request-method" in headers:
            raise Refusal(ElasticError("", status=200), self.cors.preflight_headers(origin))
        return self.cors.headers(origin)

    # ---- in the worker thread, before the handler ----------------------------------------

    def admit(self, route: Route, request: RestRequest) -> None:
        """Authenticate, take `source=` as the body where allowed, authorize the route's action.

        The caller's identity is left in `security.subject.CURRENT` for the rest of the request."""
        subject = self._authenticate(request) if self.node.security.enabled else None
        CURRENT.set(subject)
        request.subject = subject
        if "source" in request.params and "source" in route.params:
            _take_source_param(request)
        if subject is not None and not subject.superuser:
            self._authorize(subject, route, request)

    def _authenticate(self, request: RestRequest) -> Subject:
        header = request.headers.get("authorization")
        if header is None:
            raise Unauthenticated(f"missing authentication credentials for REST request [{request.uri}]")
        scheme, _, credentials = header.strip().partition(" ")
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            decoded = ""
        name, colon, secret = decoded.partition(":")
        store = self.node.security
        if scheme.lower() == "basic" and colon:
            subject = store.authenticate_user(name, secret)
            if subject is None:
                raise Unauthenticated(
                    f"unable to authenticate user [{name}] for REST request [{request.uri}]"
                )
            return subject
        if scheme.lower() == "apikey" and colon:
            subject = store.authenticate_key(name, secret)
            if subject is not None:
                return subject
            detail = f"API key: unable to authenticate with API key [{name}]"
        else:
            detail = f"{scheme}: unsupported or malformed credentials"
        raise Unauthenticated(
            "unable to authenticate with provided credentials and anonymous access is not allowed for "
            "this request",
            additional_unsuccessful_credentials=detail,
        )

    def _authorize(self, subject: Subject, route: Route, request: RestRequest) -> None:
        action = ACTIONS[route.handler]
        if action.name in _SUPERUSER_CLUSTER_ACTIONS:
            raise subject.cluster_refusal(action.name)
        if action.aliases:
            refuse_explicit(subject, action.name, request.path_params.get("name"))
        if action.scope in ("cluster", "items", "context"):
            return
        # `POST /_pit?index=` names its indices in the query string; every other route in its path.
        from_query = route.handler is search.open_pit and "index" not in request.path_params
        holder = request.params if from_query else request.path_params
        expression = holder.get("index")
        if action.scope == "monitor" and expression is None:
            return  # the whole cluster's figures; its handler hides the sections of other indices
        if route.handler in (search.search, search.export) and expression is None and _opens_pit(request):
            return  # a search on a PIT reads the PIT's indices, and the PIT belongs to its opener
        narrowed = narrow_expression(
            self.node.resolve_names,
            subject,
            action.name,
            expression,
            expand_wildcards=request.indices_options(
                expand_wildcards=action.expand_wildcards
            ).expand_wildcards,
            strict=action.scope == "strict",
        )
        if narrowed is not None:
            holder["index"] = narrowed

    # ---- failures ------------------------------------------------------------------------

    def internal_error(self, exc: BaseException, request: RestRequest) -> dict[str, Any]:
        """The body of a 500: what failed, without the exception's text (it may hold paths); the
        traceback goes to the log, and to the body only with `error_trace=true` for a superuser."""
        log.error("unexpected failure for %s %s", request.method, request.uri, exc_info=exc)
        error_type = re.sub(r"(?<!^)(?=[A-Z])", "_", type(exc).__name__).lower()
        error = ElasticError(
            f"an unexpected [{type(exc).__name__}] failed this request; the node's log has the details",
            error_type=error_type,
        )
        body = error.body()
        subject = getattr(request, "subject", None)
        if request.params.get("error_trace") in ("", "true") and (subject is None or subject.superuser):
            trace = "".join(traceback.format_exception(exc))
            body["error"]["stack_trace"] = trace
            body["error"]["root_cause"][0]["stack_trace"] = trace
        return body


def _take_source_param(request: RestRequest) -> None:
    """`RestRequest.contentOrSourceParam`: the `source` parameter is the body when there is none."""
    if request.body:
        return
    content_type = request.params.get("source_content_type")
    if content_type is None:
        raise SourceParamError(
            "Validation Failed: 1: source and source_content_type parameters are required;"
        )
    parsed = parse_media_type(content_type)
    if parsed is None or not parsed.json:
        raise SourceParamError(
            f"Validation Failed: 1: Unknown value for source_content_type [{content_type}];"
        )
    request.body = request.params["source"].encode() or b" "


def _opens_pit(request: RestRequest) -> bool:
    try:
        body = request.json_object()
    except ElasticError:
        return False  # the handler refuses it with its own words
    return isinstance(body, dict) and "pit" in body
