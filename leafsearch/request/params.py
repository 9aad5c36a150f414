"""URL parameter values read as Elasticsearch's RestRequest reads them."""

from __future__ import annotations

from leafsearch.errors import IllegalArgument


def parse_bool(value: str | None, default: bool) -> bool:
    """`RestRequest.paramAsBoolean`: absent -> default, empty -> true, else only true/false."""
    if value is None:
        return default
    if value in ("", "true"):
        return True
    if value == "false":
        return False
    raise IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")
