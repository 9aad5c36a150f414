"""Field types kept in another type's storage: `rank_feature`, `rank_features` and `binary`.

- A `rank_feature` is one positive float per document, kept as a `double` column of the value as
  Lucene's FeatureField indexes it (its inverse when `positive_score_impact` is false); the
  `rank_feature` query scores from it (search/query/feature_queries.py).
- A `rank_features` object (feature name -> positive float) keeps each feature as the `double`
  column `<field>.<feature>`, so a query on `topics.politics` reads one column.
- A `binary` value is base64 text returned in `_source` as sent; it is checked (decoded) when the
  field is `store`d or has `doc_values`, as Elasticsearch checks it, and never searchable (such a
  kept field indexes one marker term per document, which `exists` reads).

Elasticsearch's checks and messages are Lucene's FeatureField's and the mappers' own.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

from leafsearch.common.json_tokens import not_numeric, token_name
from leafsearch.index.mapping import FieldType, _DocError, _FieldError, _flat, _Malformed, _parse_failure
from leafsearch.index.parsed import ParsedDoc

#: The one term a kept `binary` field indexes: `exists` reads it; nothing else does.
EXISTS_MARKER = "1"
#: Float.MIN_NORMAL: the least value a feature may take.
_MIN_NORMAL = float(np.finfo(np.float32).tiny)


def java_float(value: float) -> str:
    """A float32 as Java's `Float.toString` prints it (`1.0`, `-2.5`, `1.17549435E-38`)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    f = np.float32(value)
    if f == 0 or 1e-3 <= abs(f) < 1e7:
        text = np.format_float_positional(f, unique=True, trim="0")
        return text + "0" if text.endswith(".") else text
    mantissa, _, exponent = np.format_float_scientific(f, unique=True, trim="0").partition("e")
    mantissa = mantissa + "0" if mantissa.endswith(".") else mantissa
    return f"{mantissa}E{int(exponent)}"


def feature_value(value: Any) -> float:
    """A JSON value as XContent's `floatValue()` reads it (numbers, and numeric strings), float32."""
    if type(value) is bool or value is None or type(value) in (dict, list):
        raise _Malformed(not_numeric(value), "x_content_parse_exception")
    if type(value) is str:
        try:
            number = float(value.strip())
        except ValueError:
            raise _Malformed(f'For input string: "{value}"', "number_format_exception") from None
    else:
        number = float(value)
    with np.errstate(over="ignore"):
        return float(np.float32(number))


def indexed_feature(number: float, field: str, feature: str, positive: bool) -> float:
    """The value Lucene's FeatureField indexes (checked as it checks it), inverted for a negative
    score impact."""
    if not positive:
        with np.errstate(divide="ignore", over="ignore"):
            number = float(np.float32(1) / np.float32(number))
    if not math.isfinite(number):
        raise ValueError(
            f"featureValue must be finite, got: {java_float(number)} for feature {feature} on field {field}"
        )
    if number < _MIN_NORMAL:
        raise ValueError(
            f"featureValue must be a positive normal float, got: {java_float(number)} for feature {feature} "
            f"on field {field} which is less than the minimum positive normal float: "
            f"{java_float(_MIN_NORMAL)}"
        )
    return number


class RankFeatureField(FieldType):
    """A `rank_feature`: at most one positive float per document."""

    __slots__ = ("positive_score_impact",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.positive_score_impact: bool = self.params.get("positive_score_impact", True)
        self.doc_values = False  # not sortable nor aggregatable, as Elasticsearch says
        self.parse = self._parse_feature
        self.convert = feature_value  # one value as read (synthetic source shows it so)

    def _parse_feature(self, value: Any, doc: ParsedDoc) -> None:
        for v in _flat(value) if type(value) is list else (value,):
            if v is None:
                continue
            try:
                number = feature_value(v)
            except _Malformed as e:
                raise _FieldError(self, v, e) from None
            if self.path in doc.double:
                message = (
                    f"[rank_feature] fields do not support indexing multiple values for the same field "
                    f"[{self.path}] in the same document"
                )
                raise _FieldError(self, v, _Malformed(message))
            try:
                indexed = indexed_feature(number, "_feature", self.path, self.positive_score_impact)
            except ValueError as e:
                raise _FieldError(self, v, _Malformed(str(e))) from None
            doc.double[self.path] = [indexed]


class RankFeaturesField(FieldType):
    """A `rank_features` object: feature name -> positive float, one column per feature."""

    __slots__ = ("positive_score_impact",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.positive_score_impact: bool = self.params.get("positive_score_impact", True)
        self.doc_values = False
        self.index = False  # searched through its features only
        self.parse = self._parse_features

    def _parse_features(self, value: Any, doc: ParsedDoc) -> None:
        if value is None:
            return
        if type(value) is not dict:
            self._refuse(
                "[rank_features] fields must be json objects, expected a START_OBJECT but got: "
                + token_name(value)
            )
        for feature, v in value.items():
            if v is None:
                continue
            if type(v) in (dict, list) or type(v) is bool:
                self._refuse(
                    "[rank_features] fields take hashes that map a feature to a strictly positive float, "
                    f"but got unexpected token {token_name(v)}"
                )
            key = f"{self.path}.{feature}"
            try:
                number = feature_value(v)
                if key in doc.double:
                    raise ValueError(
                        "[rank_features] fields do not support indexing multiple values for the same rank "
                        f"feature [{key}] in the same document"
                    )
                doc.double[key] = [indexed_feature(number, self.path, feature, self.positive_score_impact)]
            except (_Malformed, ValueError) as e:
                self._refuse(e.message if isinstance(e, _Malformed) else str(e))

    def _refuse(self, message: str) -> None:
        raise _DocError(self.source_key, lambda location, _id: _parse_failure(location, message))


class BinaryField(FieldType):
    """A `binary` field: base64 values, kept only in `_source`; never searched."""

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index = False
        self.doc_values = self.params.get("doc_values", False)
        self.parse = self._parse_binary
        self.convert = as_sent

    def _parse_binary(self, value: Any, doc: ParsedDoc) -> None:
        if not (self.store or self.doc_values):
            return  # Elasticsearch reads nothing of a value it neither stores nor keeps
        found = False
        for v in _flat(value) if type(value) is list else (value,):
            if v is None:
                continue
            if type(v) is not str:
                raise _FieldError(self, v, _Malformed(f"Can't get binary value on a {token_name(v)}"))
            try:
                base64.b64decode(v, validate=True)
            except (binascii.Error, ValueError):
                message = f"Failed to decode VALUE_STRING as base64 (MIME-NO-LINEFEEDS): {_base64_problem(v)}"
                raise _FieldError(self, v, _Malformed(message, "json_parse_exception")) from None
            found = True
        if found:  # one marker term, so that `exists` finds the document (the values are in `_source`)
            doc.keyword[self.path] = [EXISTS_MARKER]


def as_sent(value: Any) -> str:
    """A value kept as sent (synthetic source shows it so): text, as these types take."""
    if type(value) is not str:
        raise _Malformed(f"Can't get text on a {token_name(value)}")
    return value


def _base64_problem(text: str) -> str:
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
    bad = next((c for c in text if c not in alphabet), None)
    if bad is not None:
        return f"Illegal character '{bad}' (code 0x{ord(bad):x}) in base64 content"
    return "Unexpected end of base64-encoded String: base64 variant 'MIME-NO-LINEFEEDS' expects padding"
