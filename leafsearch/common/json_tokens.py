"""The token name Elasticsearch's parsers print in their messages for a decoded JSON value.

Two parsers name tokens, each in its own words. Elasticsearch's XContent (`XContentParser.Token`:
"Unknown key for a VALUE_STRING in [foo].", "Expected [START_OBJECT] but found [START_ARRAY]")
calls every number VALUE_NUMBER and both booleans VALUE_BOOLEAN. Jackson, below it, keeps
VALUE_TRUE apart from VALUE_FALSE and VALUE_NUMBER_INT from VALUE_NUMBER_FLOAT in the messages it
raises itself ("Current token (VALUE_TRUE) not numeric, can not use numeric value accessors"),
which Elasticsearch passes on; its JsonXContentParser maps the one set onto the other.
"""

from __future__ import annotations

from typing import Any


def token_name(value: Any, *, jackson: bool = False) -> str:
    """The token `value` was read from, as XContent names it (`jackson`: as Jackson does)."""
    if isinstance(value, dict):
        return "START_OBJECT"
    if isinstance(value, list):
        return "START_ARRAY"
    if value is None:
        return "VALUE_NULL"
    if isinstance(value, bool):
        if jackson:
            return "VALUE_TRUE" if value else "VALUE_FALSE"
        return "VALUE_BOOLEAN"
    if isinstance(value, int):
        return "VALUE_NUMBER_INT" if jackson else "VALUE_NUMBER"
    if isinstance(value, float):
        return "VALUE_NUMBER_FLOAT" if jackson else "VALUE_NUMBER"
    return "VALUE_STRING"


def not_numeric(value: Any) -> str:
    """Jackson's refusal to read a number from another token (`x_content_parse_exception`)."""
    token = token_name(value, jackson=True)
    return f"Current token ({token}) not numeric, can not use numeric value accessors"


def not_boolean(value: Any) -> str:
    """Jackson's refusal to read a boolean from another token (`x_content_parse_exception`)."""
    return f"Current token ({token_name(value, jackson=True)}) not of boolean type"
