"""leafsearch: an Elasticsearch-compatible search server in Python, built for walking large result sets."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from leafsearch.client import Client
    from leafsearch.node.node import Node

__all__ = ["Client", "Node"]


def __getattr__(name: str):
    # Imported lazily so that `leafsearch serve --help` and the CLI start without loading numpy.
    if name == "Node":
        from leafsearch.node.node import Node

        return Node
    if name == "Client":
        from leafsearch.client import Client

        return Client
    raise AttributeError(name)
