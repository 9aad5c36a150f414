"""The console in the browser, served by the node at `/_ui/` (docs/console.md).

Static files only (`static/`): an HTML page, its script and its style, shipped in the wheel. The
page talks to the node through the same REST API as any client, from the same origin, with the
credentials the user typed kept in the page's memory. Nothing is fetched from another host and
nothing is built at install time. The files are read once, at import, into a fixed table: a
request names one of them or gets a 404; no part of a path becomes a file name."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

PREFIX = "/_ui"


@dataclass(frozen=True)
class Asset:
    body: bytes
    media: str


_MEDIA = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}

#: What every answer of the console carries: the page may load only its own files and talk only
#: to its own origin, may not be framed, and is not cached past a restart of the node.
HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


def _load() -> dict[str, Asset]:
    folder = resources.files(__package__) / "static"
    return {name: Asset(folder.joinpath(name).read_bytes(), media) for name, media in _MEDIA.items()}


ASSETS = _load()


def asset(path: str) -> Asset | None:
    """The file a path below `PREFIX` names (`/_ui/` is the page), or None."""
    name = path[len(PREFIX) + 1 :] or "index.html"
    return ASSETS.get(name)
