"""External versioning of writes (`version` with `version_type=external|external_gte`).

A system that keeps its own version numbers (a database's row versions, a timestamp) writes with
them: the write is applied only when its version is above the document's (`external`) or not
below it (`external_gte`), and the document then carries that version. Deletes keep their
version in the shard's tombstones for `gc_deletes`, so a late write with an older version is
refused after a delete too. Internal `version` checks are refused as Elasticsearch 8 refuses them
(`if_seq_no` replaced them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leafsearch.errors import ActionRequestValidation, IllegalArgument

#: Elasticsearch's Versions.MATCH_ANY, what a missing `version` is in its messages.
_MATCH_ANY = -3
_TYPES = ("internal", "external", "external_gte")


@dataclass(frozen=True)
class ExternalVersion:
    version: int
    gte: bool  # external_gte: an equal version is accepted

    def next_version(self, doc_id: str, current: int | None) -> int:
        """The version the write gives the document, given the current one (None: never seen);
        the conflict's reason when it must be refused."""
        if current is not None and (current > self.version if self.gte else current >= self.version):
            relation = "higher than" if self.gte else "higher or equal to"
            raise VersionRefused(
                f"[{doc_id}]: version conflict, current version [{current}] is {relation} the one provided "
                f"[{self.version}]"
            )
        return self.version


class VersionRefused(Exception):
    """A refused external version; the caller raises it as its shard's version conflict."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def parse_versioning(version: Any, version_type: Any, if_seq_no: int | None) -> ExternalVersion | None:
    """The write's external version, None for internal versioning; refused as DocWriteRequest's
    validation refuses it."""
    kind = "internal" if version_type is None else str(version_type)
    if kind not in _TYPES:
        raise IllegalArgument(f"No version type match [{kind}]")
    if kind == "internal":
        if version is not None:
            raise ActionRequestValidation(
                "internal versioning can not be used for optimistic concurrency control. "
                "Please use `if_seq_no` and `if_primary_term` instead"
            )
        return None
    if version is None or version < 0:
        shown = _MATCH_ANY if version is None else version
        raise ActionRequestValidation(f"illegal version value [{shown}] for version type [{kind.upper()}]")
    if if_seq_no is not None:
        raise ActionRequestValidation("compare and write operations can not use versioning")
    return ExternalVersion(int(version), kind == "external_gte")
