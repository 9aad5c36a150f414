"""Document routing to shards, the way Elasticsearch computes it.

An id (or custom routing value) lands on the same shard number as in Elasticsearch: murmur3
(x86, 32 bit, seed 0) of the Java string's UTF-16 code units, modulo the routing shard count,
divided by the routing factor. Sliced-scroll tests compare shard placement, so this must match.
"""

from __future__ import annotations

import mmh3


def routing_hash(value: str) -> int:
    return mmh3.hash(value.encode("utf-16-le", "surrogatepass"), 0, signed=True)


def default_routing_num_shards(num_shards: int) -> int:
    """Elasticsearch 7+ default: the largest num_shards * 2^k <= 1024 (at least one split)."""
    log2_num_shards = (num_shards - 1).bit_length()
    splits = max(1, 10 - log2_num_shards)
    return num_shards << splits


def shard_for(value: str, num_shards: int, routing_num_shards: int) -> int:
    factor = routing_num_shards // num_shards
    return (routing_hash(value) % routing_num_shards) // factor
