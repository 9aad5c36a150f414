"""The shard map's edits (ray_backend/replication.py), as compare-and-sets on a store that another
coordinator changes in between: no Ray needed."""

from __future__ import annotations

from typing import Any

from leafsearch.index.shared_meta import ABSENT
from leafsearch.ray_backend.replication import (
    RECOVERY_LEASE_SECONDS,
    RECOVERY_RENEW_SECONDS,
    ShardMaps,
    claim_recovery,
    drop_from_in_sync,
    initial_map,
    promote,
    recovery_stage,
    remove_copies,
    renew_recovery,
    resize,
)


class Store:
    """The metadata actor's versioned entries (`get`, `put` with compare-and-set)."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[int, bytes | None]] = {}
        self.version = 0

    def get(self, key: str) -> tuple[int, bytes | None]:
        return self.entries.get(key, (0, None))

    def put(self, key: str, value: bytes | None, expect: int | None) -> tuple[bool, int, bytes | None]:
        version, current = self.entries.get(key, (0, None))
        if (current is not None) if expect == ABSENT else (expect is not None and version != expect):
            return False, version, current
        self.version += 1
        self.entries[key] = (self.version, value)
        return True, self.version, value


#: A wall-clock time for the recoveries' claims.
NOW = 1_000_000.0


def placed() -> list[dict[str, Any]]:
    copies = [{"id": f"r{n}", "node": f"n{n}", "folder": f"/f{n}"} for n in (1, 2)]
    return [{"node": "n0", "folder": "/f0", "allocation_id": "p", "replicas": copies}]


def test_a_new_index_has_every_copy_in_sync_and_the_first_claim_wins() -> None:
    maps = ShardMaps(Store())
    mine = maps.claim("u", initial_map(placed()))
    assert mine.shards[0]["in_sync"] == ["p", "r1", "r2"] and mine.term(0) == 1
    assert mine.primary(0)["node"] == "n0" and [c["id"] for c in mine.replicas(0)] == ["r1", "r2"]
    theirs = maps.claim("u", initial_map([{"node": "n9", "folder": "/x"}]))
    assert theirs.version == mine.version and theirs.primary(0)["node"] == "n0"
    replication = mine.replication(0)
    assert replication is not None and replication.targets == (("n1", "r1"), ("n2", "r2"))
    assert initial_map([{"node": "n0", "folder": "/f"}]).replication(0) is None  # replicas 0


def test_a_stale_coordinator_applies_its_edit_to_the_newest_map() -> None:
    store = Store()
    maps = ShardMaps(store)
    first = maps.claim("u", initial_map(placed()))
    other, done = maps.change("u", first, drop_from_in_sync(0, ("r1",), 1))  # another coordinator
    assert done and other.shards[0]["in_sync"] == ["p", "r2"]
    # Working from the older map, this one promotes: r1 is not in sync any more, r2 is chosen.
    promoted, done = maps.change("u", first, promote(0, "p"))
    assert done and promoted.shards[0]["primary"] == "r2" and promoted.term(0) == 2
    assert promoted.shards[0]["in_sync"] == ["r2"]
    # A failure reported under the old term no longer applies: that write fails.
    after, done = maps.change("u", first, drop_from_in_sync(0, ("r2",), 1))
    assert not done and after.shards[0]["in_sync"] == ["r2"]
    # A second promotion of the same lost primary does nothing.
    assert not maps.change("u", first, promote(0, "p"))[1]
    # A copy recovered from the old primary does not join; from the new one it does.
    claimed, done = maps.change("u", after, claim_recovery(0, "p", "c1", NOW))
    assert done and claimed.recovery(0, "p")["term"] == 2
    moved = claimed.copy()
    moved.shards[0]["term"] = 3  # (another coordinator's promotion meanwhile)
    store.put("shards/u", moved.encode(), claimed.version)
    stale, done = maps.change("u", claimed, recovery_stage(0, "p", "c1", "finalize", NOW))
    assert not done and stale.shards[0]["in_sync"] == ["r2"]
    ended, done = maps.change("u", stale, recovery_stage(0, "p", "c1", "failed", NOW))
    assert done and ended.recovery(0, "p")["stage"] == "failed"
    again, done = maps.change("u", ended, claim_recovery(0, "p", "c1", NOW))
    assert done and again.recovery(0, "p")["term"] == 3
    joined, done = maps.change("u", again, recovery_stage(0, "p", "c1", "finalize", NOW))
    assert done and sorted(joined.shards[0]["in_sync"]) == ["p", "r2"]
    assert maps.read("u").shards == joined.shards


def test_no_promotion_without_a_replica_in_sync() -> None:
    maps = ShardMaps(Store())
    first = maps.claim("u", initial_map(placed()))
    alone, _ = maps.change("u", first, drop_from_in_sync(0, ("r1", "r2"), 1))
    assert not maps.change("u", alone, promote(0, "p"))[1]
    assert alone.shards[0]["in_sync"] == ["p"]  # the primary never leaves it this way


def test_resize_adds_copies_on_machines_without_one_and_removes_those_not_in_sync_first() -> None:
    maps = ShardMaps(Store())
    first = maps.claim("u", initial_map(placed()))
    first, _ = maps.change("u", first, drop_from_in_sync(0, ("r1",), 1))
    fewer, done = maps.change("u", first, resize(0, 1, ["n0", "n1", "n2"], lambda node: f"/{node}"))
    assert done and [c["id"] for c in fewer.replicas(0)] == ["r2"]  # r1, out of sync, went
    more, done = maps.change("u", fewer, resize(0, 3, ["n0", "n1", "n2", "n3"], lambda node: f"/{node}"))
    assert done and sorted(fewer.nodes(0)) == ["n0", "n2"]
    added = [c for c in more.replicas(0) if c["id"] != "r2"]
    assert sorted(c["node"] for c in added) == ["n1", "n3"] and all(
        c["folder"] == "/" + c["node"] for c in added
    )
    assert more.shards[0]["in_sync"] == ["p", "r2"]  # new copies join once recovered
    assert not maps.change("u", more, resize(0, 3, ["n0", "n1", "n2", "n3"], str))[1]


def test_one_claim_on_a_recovery_holds_until_it_ends_or_expires() -> None:
    """Two coordinators reacting to one machine's return: the first claim wins, the second (from
    the same map, or the newest) does not apply while it holds; only its owner moves it on, and
    the copy joins the in-sync set with it; a claim whose owner died is taken over once expired."""
    maps = ShardMaps(Store())
    first = maps.claim("u", initial_map(placed()))
    first, _ = maps.change("u", first, drop_from_in_sync(0, ("r1", "r2"), 1))
    mine, done = maps.change("u", first, claim_recovery(0, "r1", "c1", NOW))
    assert done and mine.recovering(0, "r1", NOW) and mine.recovery(0, "r1")["attempt"] == 1
    assert mine.recovery(0, "r1")["source_node"] == "n0" and mine.recovery(0, "r1")["target_node"] == "n1"
    theirs, done = maps.change("u", first, claim_recovery(0, "r1", "c2", NOW + 1))  # (from the old map)
    assert not done and theirs.recovery(0, "r1")["owner"] == "c1"
    assert not maps.change("u", theirs, claim_recovery(0, "r1", "c2", NOW + 1))[1]  # (the newest)
    # Another copy of the shard is claimed apart.
    other, done = maps.change("u", theirs, claim_recovery(0, "r2", "c2", NOW))
    assert done
    # Only the owner's recovery moves on; the copy joins the in-sync set as it finalizes.
    assert not maps.change("u", other, recovery_stage(0, "r1", "c2", "finalize", NOW))[1]
    joined, done = maps.change("u", mine, recovery_stage(0, "r1", "c1", "finalize", NOW, files=3, ops=2))
    assert done and "r1" in joined.shards[0]["in_sync"] and joined.recovering(0, "r1", NOW)
    assert joined.recovery(0, "r2")["owner"] == "c2"  # (applied to the newest map)
    ended, done = maps.change("u", joined, recovery_stage(0, "r1", "c1", "done", NOW + 2))
    record = ended.recovery(0, "r1")
    assert done and not ended.recovering(0, "r1", NOW + 2)
    assert (record["stage"], record["files"], record["ops"], record["stop"]) == ("done", 3, 2, NOW + 2)
    # In sync, the copy is not claimed again (a coordinator that saw it out of sync before).
    assert not maps.change("u", first, claim_recovery(0, "r1", "c2", NOW + 3))[1]
    assert not maps.change("u", ended, claim_recovery(0, "r1", "c2", NOW + 3))[1]
    # r2's owner died: its claim holds until it expires, then another coordinator takes it over,
    # and the first owner can no longer move it on.
    later = NOW + RECOVERY_LEASE_SECONDS
    assert not maps.change("u", ended, claim_recovery(0, "r2", "c3", later - 1))[1]
    taken, done = maps.change("u", ended, claim_recovery(0, "r2", "c3", later + 1))
    assert done and taken.recovery(0, "r2")["owner"] == "c3" and taken.recovery(0, "r2")["attempt"] == 2
    assert not maps.change("u", taken, recovery_stage(0, "r2", "c2", "finalize", later + 1))[1]
    assert "r2" not in maps.read("u").shards[0]["in_sync"]
    # A copy that leaves the map takes its recovery along.
    gone, done = maps.change("u", taken, remove_copies(0, {"r2"}))
    assert done and gone.recovery(0, "r2") is None and not gone.recovering(0, "r2", later + 1)


def test_a_renewed_recovery_holds_past_its_lease_and_a_dead_owners_is_taken_over_in_seconds() -> None:
    """The owner renews its claim while it copies: the claim holds as long as it renews, however
    long the copy; only that claim's owner renews it, only while it holds; a claim not renewed
    (its owner died) expires one lease after its last renewal, a few renewals' time, and another
    coordinator takes it over; the first owner's renewal then fails (it stops its copy)."""
    assert 3 * RECOVERY_RENEW_SECONDS <= RECOVERY_LEASE_SECONDS <= 30
    maps = ShardMaps(Store())
    first = maps.claim("u", initial_map(placed()))
    first, _ = maps.change("u", first, drop_from_in_sync(0, ("r1",), 1))
    mine, done = maps.change("u", first, claim_recovery(0, "r1", "c1", NOW))
    assert done
    # Renewed every interval for ten leases: never expired, never taken over.
    now = NOW
    for _ in range(int(10 * RECOVERY_LEASE_SECONDS / RECOVERY_RENEW_SECONDS)):
        now += RECOVERY_RENEW_SECONDS
        assert not maps.change("u", mine, claim_recovery(0, "r1", "c2", now))[1]
        mine, done = maps.change("u", mine, renew_recovery(0, "r1", "c1", 1, now))
        assert done and mine.recovery(0, "r1")["expires"] == now + RECOVERY_LEASE_SECONDS
    assert now > NOW + 9 * RECOVERY_LEASE_SECONDS and mine.recovering(0, "r1", now)
    # Another coordinator, or an earlier claim of the owner's, does not renew it.
    assert not maps.change("u", mine, renew_recovery(0, "r1", "c2", 1, now))[1]
    assert not maps.change("u", mine, renew_recovery(0, "r1", "c1", 0, now))[1]
    assert not maps.change("u", mine, renew_recovery(0, "r2", "c1", 1, now))[1]  # (never claimed)
    # The owner dies: its claim holds one lease past its last renewal, then c2 takes it over.
    expiry = now + RECOVERY_LEASE_SECONDS
    assert not maps.change("u", mine, claim_recovery(0, "r1", "c2", expiry - 0.5))[1]
    late, done = maps.change("u", mine, renew_recovery(0, "r1", "c1", 1, expiry + 0.5))
    assert not done and not late.recovering(0, "r1", expiry + 0.5)  # (expired: not renewed either)
    taken, done = maps.change("u", mine, claim_recovery(0, "r1", "c2", expiry + 0.5))
    assert done and taken.recovery(0, "r1")["owner"] == "c2" and taken.recovery(0, "r1")["attempt"] == 2
    # The first owner's renewal is refused: the claim is another's (c1 stops its copy).
    assert not maps.change("u", taken, renew_recovery(0, "r1", "c1", 1, expiry + 1))[1]
    renewed, done = maps.change("u", taken, renew_recovery(0, "r1", "c2", 2, expiry + 1))
    assert done and renewed.recovering(0, "r1", expiry + RECOVERY_LEASE_SECONDS)
    # An ended claim is not renewed.
    ended, done = maps.change("u", renewed, recovery_stage(0, "r1", "c2", "failed", expiry + 2))
    assert done and not maps.change("u", ended, renew_recovery(0, "r1", "c2", 2, expiry + 3))[1]
