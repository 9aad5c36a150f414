"""The token names Elasticsearch's parsers print: one helper for every message that names one."""

from __future__ import annotations

import orjson
import pytest

from leafsearch.common.json_tokens import not_boolean, not_numeric, token_name

#: JSON text -> (XContentParser.Token, Jackson's JsonToken) of its first token.
TOKENS = {
    b'{"a": 1}': ("START_OBJECT", "START_OBJECT"),
    b"[1]": ("START_ARRAY", "START_ARRAY"),
    b"null": ("VALUE_NULL", "VALUE_NULL"),
    b"true": ("VALUE_BOOLEAN", "VALUE_TRUE"),
    b"false": ("VALUE_BOOLEAN", "VALUE_FALSE"),
    b"-7": ("VALUE_NUMBER", "VALUE_NUMBER_INT"),
    b"12345678901234567890": ("VALUE_NUMBER", "VALUE_NUMBER_INT"),
    b"0.5": ("VALUE_NUMBER", "VALUE_NUMBER_FLOAT"),
    b"1e3": ("VALUE_NUMBER", "VALUE_NUMBER_FLOAT"),
    b'"text"': ("VALUE_STRING", "VALUE_STRING"),
    b'""': ("VALUE_STRING", "VALUE_STRING"),
}


@pytest.mark.parametrize(("text", "names"), TOKENS.items(), ids=[t.decode() for t in TOKENS])
def test_each_json_value_has_the_token_name_of_each_parser(text: bytes, names: tuple[str, str]) -> None:
    value = orjson.loads(text)
    assert (token_name(value), token_name(value, jackson=True)) == names


def test_jacksons_refusals_name_the_token_they_found() -> None:
    assert not_numeric(True) == "Current token (VALUE_TRUE) not numeric, can not use numeric value accessors"
    assert not_numeric("1") == "Current token (VALUE_STRING) not numeric, can not use numeric value accessors"
    assert not_boolean(2.5) == "Current token (VALUE_NUMBER_FLOAT) not of boolean type"
    assert not_boolean({}) == "Current token (START_OBJECT) not of boolean type"
