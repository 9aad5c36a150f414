"""`_geo_distance` sort keys: each document's distance from the sort's points, in its unit.

A document with several points (or a sort with several origins) takes the `mode` of all its
distances (min ascending, max descending by default), as Elasticsearch's GeoDistanceSortBuilder
does. Vectorized over the values of the documents asked for: O(values x origins). Documents
without a point are not `present` (they sort as +/-Infinity, by `missing_sort_key`).

Distances depend on the request, so no segment order is kept for them: the shard sorts its
matches (`SortPlan.uniform` is false for such a sort).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leafsearch.errors import IllegalArgument
from leafsearch.index import geo
from leafsearch.index.columns import NumericColumn
from leafsearch.request.search_types import SortSpec

#: Distances a `median` over several origins may hold at once (8 bytes each): values x origins.
MAX_MEDIAN_DISTANCES = 1 << 24


def distance_values(col: Any, spec: SortSpec, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distance of each of `docs`, whether it has a point). Memory O(values) for `min`, `max`
    and `avg` (one origin at a time); a `median` over several origins holds every distance,
    refused past `MAX_MEDIAN_DISTANCES` before it is built."""
    n = len(docs)
    if not isinstance(col, NumericColumn) or not n:
        return np.zeros(n, dtype=np.float64), np.zeros(n, dtype=bool)
    sort = spec.geo
    mode = spec.mode or ("max" if spec.descending else "min")
    counts, packed = col.doc_values.values_of(docs)
    present = counts > 0
    if mode == "median" and len(packed) * len(sort.points) > MAX_MEDIAN_DISTANCES:
        raise IllegalArgument(
            f"a [median] geo distance sort over {len(sort.points)} points would compare "
            f"{len(packed) * len(sort.points)} distances, more than {MAX_MEDIAN_DISTANCES}"
        )
    lat, lon = geo.decode(packed)
    owners = np.repeat(np.arange(n), counts)
    out = np.full(n, np.inf if mode == "min" else -np.inf if mode == "max" else 0.0)
    parts = []
    for p_lat, p_lon in sort.points:
        dist = geo.distance(sort.distance_type, p_lat, p_lon, lat, lon) / sort.unit
        if mode == "min":
            np.minimum.at(out, owners, dist)
        elif mode == "max":
            np.maximum.at(out, owners, dist)
        elif mode == "avg":
            out += np.bincount(owners, weights=dist, minlength=n)
        else:
            parts.append(dist)
    if mode == "avg":
        out /= np.maximum(counts * len(sort.points), 1)
    elif mode == "median":
        flat, flat_owner = np.concatenate(parts), np.tile(owners, len(parts))
        order = np.lexsort((flat, flat_owner))
        sizes = counts * len(parts)
        starts = np.cumsum(sizes) - sizes
        lo = starts[present] + (sizes[present] - 1) // 2
        hi = starts[present] + sizes[present] // 2
        out[present] = (flat[order][lo] + flat[order][hi]) / 2
    return np.where(present, out, 0.0), present


def resolve_kind(spec: SortSpec, field_types: list) -> str:
    """The kind of a `_geo_distance` sort (double), its field checked in every target."""
    for ft in field_types:
        if ft is None:
            if not spec.geo.ignore_unmapped:
                raise IllegalArgument(f"failed to find mapper for [{spec.field}] for geo distance based sort")
        elif ft.type != "geo_point":
            raise IllegalArgument(
                f"unable to apply geo distance sort to field [{spec.field}] of type [{ft.type}]"
            )
        elif not ft.doc_values:
            raise IllegalArgument(
                f"Can't load fielddata on [{spec.field}] because fielddata is unsupported on fields of type "
                "[geo_point]. Use doc values instead."
            )
    return "double"
