"""Content-Type and Accept negotiation, including the compatibility media types of the clients.

The official clients send `application/vnd.elasticsearch+json; compatible-with=8` on both headers
and expect the same vendored type back; curl users send plain JSON. Bodies in other formats
(SMILE, CBOR, YAML, form data) are answered with Elasticsearch's 406, since leafsearch reads JSON
only. Responses are JSON, or YAML when `format=yaml` or `Accept: application/yaml` asks for it;
asking for CBOR or SMILE is a 406 saying leafsearch does not write them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from leafsearch.errors import ElasticError, MediaTypeHeader
from leafsearch.unsupported import reason

JSON = "application/json"
_VENDOR = "application/vnd.elasticsearch+"
_JSON_SUBTYPES = frozenset({"json", "x-ndjson"})
SUPPORTED_VERSIONS = frozenset({7, 8, 9})
_VERSION = re.compile(r"\d+")


class NotAcceptable(Exception):
    """Elasticsearch answers these with a bare `{"error": "...", "status": 406}` body."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class MediaType:
    """A parsed header value: JSON-family or not, and the compatible-with version if any."""

    json: bool
    version: int | None


def parse_media_type(value: str) -> MediaType | None:
    """None when the value is not a media type leafsearch can read or write."""
    essence, _, parameters = value.partition(";")
    essence = essence.strip().lower()
    version: int | None = None
    for parameter in parameters.split(";"):
        name, _, raw = parameter.partition("=")
        if name.strip().lower() == "compatible-with":
            raw = raw.strip()
            if not _VERSION.fullmatch(raw):
                return None
            version = int(raw)
    if essence.startswith(_VENDOR):
        if essence.removeprefix(_VENDOR) not in _JSON_SUBTYPES:
            return None
        return MediaType(True, version)
    if essence in (JSON, "application/x-ndjson", "application/*") and version is None:
        return MediaType(True, None)
    return None


YAML = "application/yaml"
_BINARY_FORMATS = ("cbor", "smile")


def response_format(format_param: str | None, accept: str | None) -> str | None:
    """YAML when the `format` parameter or the Accept header asks for it, else None (JSON).

    As Elasticsearch, the parameter wins over the header and a value it does not know is ignored.
    The binary formats Elasticsearch also writes are refused (NotAcceptable), never answered in
    JSON that the client would then fail to decode."""
    wanted = (format_param or "").lower()
    if wanted == "yaml":
        return YAML
    if wanted in _BINARY_FORMATS:
        raise NotAcceptable(reason(f"the response format [{wanted}]", "it answers JSON or YAML"))
    if wanted == "json":
        return None
    for entry in (accept or "").split(","):
        essence = entry.partition(";")[0].strip().lower()
        if essence in ("application/yaml", "application/x-yaml"):
            return YAML
        if essence in ("application/cbor", "application/smile", f"{_VENDOR}cbor", f"{_VENDOR}smile"):
            raise NotAcceptable(reason(f"the response format [{essence}]", "it answers JSON or YAML"))
    return None


def _accept_version(accept: str | None) -> int | None:
    """The compatible-with version asked by the first vendored entry of an Accept list."""
    for entry in (accept or "").split(","):
        parsed = parse_media_type(entry)
        if parsed is not None and parsed.version is not None:
            return parsed.version
    return None


def negotiate(content_type: str | None, accept: str | None, has_body: bool) -> str:
    """The response Content-Type, after refusing what Elasticsearch refuses.

    Raises NotAcceptable for an unreadable body type, MediaTypeHeader for versions that are
    unsupported or disagree between the two headers.
    """
    accept_version = _accept_version(accept)
    if accept_version is not None and accept_version not in SUPPORTED_VERSIONS:
        raise _version_error(
            f"Accept version must be either version 8 or 7, but found {accept_version}. Accept={accept}"
        )
    if has_body:
        if content_type is None:
            raise NotAcceptable("Content-Type header is missing")
        parsed = parse_media_type(content_type)
        if parsed is None:
            raise NotAcceptable(f"Content-Type header [{content_type}] is not supported")
        if parsed.version is not None and parsed.version not in SUPPORTED_VERSIONS:
            raise _version_error(
                f"Content-Type version must be either version 8 or 7, but found "
                f"{parsed.version}. Content-Type={content_type}"
            )
        if (parsed.version is None) != (accept_version is None):
            raise _version_error(
                "A compatible version is required on both Content-Type and Accept headers if "
                "either one has requested a compatible version. "
                f"Accept={accept}, Content-Type={content_type}"
            )
        if parsed.version != accept_version:
            raise _version_error(
                "A compatible version is required on both Content-Type and Accept headers if "
                "either one has requested a compatible version and the compatible versions "
                f"must match. Accept={accept}, Content-Type={content_type}"
            )
    if accept_version is not None:
        return f"{_VENDOR}json;compatible-with={accept_version}"
    return JSON


def _version_error(message: str) -> ElasticError:
    cause = ElasticError(message, error_type="status_exception", status=400)
    return MediaTypeHeader(
        "Invalid media-type value on headers [Accept, Content-Type]", caused_by=cause, root_causes=[cause]
    )
