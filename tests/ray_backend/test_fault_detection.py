"""The failure detector of a Ray cluster's machines (ray_backend/fault_detection.py): a machine
is failed after `retry_count` checks in a row unanswered, at once when its connection breaks or
Ray no longer lists it, once when it answers as another incarnation; never on one slow answer.
First the detector's rules over checks the test answers, then a machine's check link against a
channel server in a child process that the tests stop (SIGSTOP) and kill."""

from __future__ import annotations

import os
import signal
import time
from functools import partial
from typing import Any

import pytest

from leafsearch.ray_backend.fault_detection import (
    Disconnected,
    FailureDetector,
    FollowerCheck,
    MachineLink,
    Unanswered,
)
from tests.concurrency import stop_process
from tests.ray_backend import channel_child
from tests.ray_backend.channel_child import KEY, Child, Machine

child = channel_child.child  # the fixture: a machine's channel server in a child process


class Checks:
    """A machine's check link whose answers the test gives: each an incarnation or an error."""

    def __init__(self) -> None:
        self.answers: list[bytes | Exception] = []

    def ping(self, deadline: float) -> bytes:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        pass


class Failures:
    """A listener: the machines it was told failed, in order."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def machine_failed(self, machine: str) -> None:
        self.told.append(machine)


@pytest.fixture
def detector() -> Any:
    links: dict[str, Checks] = {}
    made = FailureDetector(
        lambda machine: links.setdefault(machine, Checks()),
        lambda: made.members,
        lambda: FollowerCheck(interval=1.0, timeout=10.0, retry_count=3),
        background=False,
    )
    made.members = {"m1", "m2"}
    made.links = links
    made.told = Failures()
    made.listen(made.told)
    for machine in ("m1", "m2"):
        made.watch(machine)
        links[machine].answers.append(b"first")
        made.check(machine)
    return made


def answer(detector: Any, machine: str, *answers: bytes | Exception) -> None:
    """Each answer to one check of the machine."""
    for each in answers:
        detector.links[machine].answers.append(each)
        detector.check(machine)


def test_a_machine_fails_only_after_retry_count_checks_in_a_row_unanswered(detector: Any) -> None:
    answer(detector, "m1", Unanswered("slow"), Unanswered("slow"), b"first")
    assert not detector.failed("m1") and detector.told.told == []  # slow twice, then answered
    answer(detector, "m1", Unanswered("slow"), Unanswered("slow"))
    assert not detector.failed("m1")
    answer(detector, "m1", Unanswered("slow"))
    assert detector.failed("m1") and detector.told.told == ["m1"]
    assert detector.failures() == {"m1": "no answer to 3 checks in a row"}
    answer(detector, "m1", Unanswered("slow"))
    assert detector.told.told == ["m1"]  # told once
    answer(detector, "m1", b"first")  # it answers again: no longer failed
    assert not detector.failed("m1") and detector.failures() == {}
    assert not detector.failed("m2") and not detector.failed("unwatched")


def test_a_machine_disconnected_or_left_fails_at_once(detector: Any) -> None:
    answer(detector, "m1", Disconnected("refused"))
    assert detector.failures() == {"m1": "disconnected (refused)"}
    detector.members = {"m1"}  # Ray no longer lists m2: an unanswered check fails it at once
    answer(detector, "m2", Unanswered("slow"))
    assert detector.failures()["m2"] == "left the cluster"
    assert detector.told.told == ["m1", "m2"]


def test_a_machine_answering_as_another_incarnation_is_failed_once_and_serves_again(detector: Any) -> None:
    answer(detector, "m1", b"second")  # Ray restarted its actor between two checks
    assert detector.told.told == ["m1"] and not detector.failed("m1")
    answer(detector, "m1", b"second")
    assert detector.told.told == ["m1"]
    # Disconnected (killed), then back as another incarnation: told once, for the disconnection.
    answer(detector, "m2", Disconnected("broken"), b"third", b"third")
    assert detector.told.told == ["m1", "m2"] and not detector.failed("m2")


def test_a_verdict_waits_for_a_check_until_its_deadline(detector: Any) -> None:
    # No check runs (no threads): the verdict is what is known at its deadline.
    assert detector.verdict("m1", time.monotonic() + 0.05) is False
    answer(detector, "m1", Disconnected("broken"))
    assert detector.verdict("m1", time.monotonic() + 30) is True  # failed: no wait
    assert detector.verdict("unwatched", time.monotonic() + 30) is False


def test_a_link_reads_the_answer_a_stalled_machine_owes_before_the_next(child: Child) -> None:
    link = MachineLink(partial(child.locate, Machine), KEY)
    incarnation = link.ping(time.monotonic() + 30)
    stop_process(child.process.pid)
    try:
        with pytest.raises(Unanswered):
            link.ping(time.monotonic() + 0.2)
        with pytest.raises(Unanswered):
            link.ping(time.monotonic() + 0.2)
    finally:
        os.kill(child.process.pid, signal.SIGCONT)
    assert link.ping(time.monotonic() + 30) == incarnation  # the owed answers read first
    assert child.located == 1  # never reconnected
    link.close()


def test_a_link_to_a_machine_stalled_before_it_connects_is_unanswered_not_disconnected(child: Child) -> None:
    stop_process(child.process.pid)
    link = MachineLink(partial(child.locate, Machine), KEY)
    try:
        with pytest.raises(Unanswered):  # (its handshake stalls)
            link.ping(time.monotonic() + 0.3)
    finally:
        os.kill(child.process.pid, signal.SIGCONT)
    assert link.ping(time.monotonic() + 30)
    link.close()


def test_a_link_to_a_killed_machine_is_disconnected_and_a_restarted_one_another_incarnation(
    child: Child,
) -> None:
    link = MachineLink(partial(child.locate, Machine), KEY)
    before = link.ping(time.monotonic() + 30)
    child.kill()
    with pytest.raises(Disconnected):
        link.ping(time.monotonic() + 30)
    child.start()
    assert link.ping(time.monotonic() + 30) != before
    link.close()
