"""The renewal of a recovery's claim by its owner (ray_backend/recovery_lease.py): renewed while it
holds, lost at once when a renewal is refused, lost after failed renewals only once the lease ran
out; `lost` called once, and no renewal after it or after `stop`. No Ray needed."""

from __future__ import annotations

import itertools
import threading

from leafsearch.ray_backend.recovery_lease import LeaseRenewal

#: Seconds between renewals in these tests (their clock is a counter where it matters).
INTERVAL = 0.001


class Renewals:
    """What `renew` answers, in turn (True, False, or an exception raised), counted; `lost`."""

    def __init__(self, answers: list[bool | Exception]) -> None:
        self.answers = iter(answers)
        self.calls = 0
        self.lost = threading.Event()
        self.lost_calls = 0
        self.last = threading.Event()  # (set at the last answer given)

    def renew(self) -> bool:
        self.calls += 1
        answer = next(self.answers, None)
        if answer is None:
            self.last.set()
            return True
        if isinstance(answer, Exception):
            raise answer
        return answer

    def on_lost(self) -> None:
        self.lost_calls += 1
        self.lost.set()


def test_a_refused_renewal_loses_the_claim_once_and_renewals_end() -> None:
    renewals = Renewals([True, True, False])
    with LeaseRenewal(renewals.renew, renewals.on_lost, INTERVAL, 10.0) as renewal:
        assert renewals.lost.wait(30)
    assert renewal.lost and renewals.lost_calls == 1 and renewals.calls == 3


def test_failed_renewals_lose_the_claim_only_once_the_lease_ran_out() -> None:
    """The clock moves 1 s at each reading: the lease of 3 s renewed at 0 s holds after the
    renewals failing at 1 and 2 s, and is lost at 3 s; a success in between renews it."""
    failed = RuntimeError("the metadata actor is restarting")
    renewals = Renewals([failed, failed, True, failed, failed, failed])
    clock = itertools.count().__next__
    with LeaseRenewal(renewals.renew, renewals.on_lost, INTERVAL, 3.0, clock=clock) as renewal:
        assert renewals.lost.wait(30)
    # Readings: 0 (start), 1 and 2 (failed, held), 3 (renewed), 4 and 5 (held), 6 (lost).
    assert renewal.lost and renewals.lost_calls == 1 and renewals.calls == 6


def test_renewals_go_on_until_stopped_and_never_lose_a_claim_that_holds() -> None:
    renewals = Renewals([True] * 5)
    renewal = LeaseRenewal(renewals.renew, renewals.on_lost, INTERVAL, 10.0)
    with renewal:
        assert renewals.last.wait(30)  # (every answer given: renewed 5 times and more)
    calls = renewals.calls
    assert not renewal.lost and not renewals.lost.is_set() and calls >= 6
    renewal.stop()  # (again: nothing)
    assert renewals.calls == calls
