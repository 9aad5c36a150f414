"""The field types whose classes live in modules of their own, by type name: index/mapping.py
builds a mapper of one of these types with its class."""

from __future__ import annotations

from leafsearch.index.completion import CompletionField
from leafsearch.index.feature_fields import BinaryField, RankFeatureField, RankFeaturesField
from leafsearch.index.mapping import FieldType
from leafsearch.index.percolator import PercolatorField

CLASSES: dict[str, type[FieldType]] = {
    "rank_feature": RankFeatureField,
    "rank_features": RankFeaturesField,
    "binary": BinaryField,
    "completion": CompletionField,
    "percolator": PercolatorField,
}
