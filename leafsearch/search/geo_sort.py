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


def distance_values(col: Any, spec: SortSpec, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distance of each of `docs`, whether it has a point)."""
    n = len(docs)
    if not isinstance(col, NumericColumn) or not n:
        return np.zeros(n, dtype=np.float64), np.zeros(n, dtype=bool)
    counts, packed = col.doc_values.values_of(docs)
    lat, lon = geo.decode(packed)
    sort = spec.geo
    per_point = [geo.distance(sort.distance_type, p_lat, p_lon, lat, lon) for p_lat, p_lon in sort.points]
    # Each document's distances: its values' distances to every origin, side by side.
    dist = np.stack(per_point, axis=1) / sort.unit if per_point else np.empty((0, 0))
    owners = np.repeat(np.arange(n), counts)
    flat_owner = np.repeat(owners, len(sort.points))
    flat = dist.reshape(-1)
    present = counts > 0
    out = np.zeros(n, dtype=np.float64)
    if not len(flat):
        return out, present
    mode = spec.mode or ("max" if spec.descending else "min")
    if mode == "min":
        out[:] = np.inf
        np.minimum.at(out, flat_owner, flat)
    elif mode == "max":
        out[:] = -np.inf
        np.maximum.at(out, flat_owner, flat)
    elif mode == "avg":
        out = np.bincount(flat_owner, weights=flat, minlength=n) / np.maximum(
            np.bincount(flat_owner, minlength=n), 1
        )
    elif mode == "median":
        order = np.lexsort((flat, flat_owner))
        sizes = np.bincount(flat_owner, minlength=n)
        starts = np.cumsum(sizes) - sizes
        has = sizes > 0
        lo = starts[has] + (sizes[has] - 1) // 2
        hi = starts[has] + sizes[has] // 2
        out[has] = (flat[order][lo] + flat[order][hi]) / 2
    else:
        raise IllegalArgument(f"sort_mode [{mode}] isn't supported for sorting by geo distance")
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
