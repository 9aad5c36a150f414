"""`ip` values: IPv4 and IPv6 addresses stored as keyword terms that sort in address order.

Why a keyword column of fixed-width hex terms: Lucene's InetAddressPoint encodes every address as
16 bytes (IPv4 as the IPv4-mapped IPv6 address `::ffff:a.b.c.d`) compared as unsigned bytes; the
32 lowercase hex digits of those bytes compare the same way as text, so the keyword column's
sorted term dictionary, its ordinals and global ordinals give address order for free: a sort, a
`search_after` cursor, `terms` and `cardinality` aggregations work as on keywords, a term query is
one term, and a range or CIDR block is one term range. Text (not raw bytes) also keeps the term
dictionary free of NUL bytes, which numpy's fixed-width byte strings would drop. Only the edges
convert: document and query values in (`encode`), sort values, doc values and bucket keys out
(`decode`), printed as Elasticsearch prints them (dotted IPv4, compressed IPv6).
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

_V4_MAPPED = bytes(10) + b"\xff\xff"


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"'{text}' is not an IP string literal.") from None


def _packed(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bytes:
    return _V4_MAPPED + address.packed if address.version == 4 else address.packed


def encode(value: object) -> str:
    """The stored term of an address given as text; ValueError with Elasticsearch's message."""
    return _packed(_address(str(value))).hex()


@lru_cache(maxsize=65536)
def decode(term: str) -> str:
    """An address as Elasticsearch prints it (InetAddresses.toAddrString): IPv4-mapped addresses as
    dotted IPv4, others as compressed IPv6."""
    raw = bytes.fromhex(term)
    if raw[:12] == _V4_MAPPED:
        return str(ipaddress.IPv4Address(raw[12:]))
    return str(ipaddress.IPv6Address(raw))


def cidr_bounds(text: str) -> tuple[str, str]:
    """The first and last stored terms of a CIDR block (`10.0.0.0/8`, `2001:db8::/32`)."""
    address, _, prefix = text.partition("/")
    try:
        network = ipaddress.ip_network(f"{_address(address)}/{prefix}", strict=False)
    except ValueError:
        raise ValueError(f"Expected [ip/prefix] but was [{text}]") from None
    return _packed(network.network_address).hex(), _packed(network.broadcast_address).hex()
