"""`remote.send_calls`: one call per machine, each machine's shard calls answered in order; a
search phase's calls (`shared`) pickled once for every machine (`SharedCalls`)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from leafsearch.ray_backend.actor import SharedCalls
from tests.ray_cluster import import_ray


@pytest.fixture
def send_calls() -> Any:
    import_ray()
    from leafsearch.ray_backend.remote import send_calls

    return send_calls


class Answered:
    def __init__(self, answer: bytes) -> None:
        self._answer = answer

    def answer(self, deadline: float) -> bytes:
        return self._answer


class Machines:
    """Stands for the machines' channels: each message decoded as `MachineActor.batch` does,
    each shard call answered with what it asked."""

    def __init__(self) -> None:
        self.messages: dict[str, Any] = {}

    def send(self, machine: str, message: bytes, deadline: float) -> Answered:
        calls = self.messages[machine] = pickle.loads(message)
        if isinstance(calls, SharedCalls):
            calls = calls.select()
        return Answered(pickle.dumps([(machine, key, args) for key, _, args in calls]))


def _calls() -> list[tuple[str, tuple, str]]:
    request = {"query": {"range": {"n": {"gte": 1}}}, "sort": ["n"]}  # what every shard's message shares
    return [(f"m{i % 3}", (("uuid", i), "query", (request, i)), f"[i][{i}]") for i in range(6)]


def test_a_phase_over_several_machines_is_pickled_once_and_each_shard_answered(send_calls: Any) -> None:
    machines = Machines()
    calls = _calls()
    waits = send_calls(machines, calls, shared=True)  # type: ignore[arg-type]
    assert [wait() for wait in waits] == [(m, key, args) for m, (key, _, args), _ in calls]
    sent = list(machines.messages.values())
    assert len(sent) == 3 and all(isinstance(m, SharedCalls) for m in sent)
    assert len({m.calls for m in sent}) == 1  # the same pickled calls for every machine
    assert sorted(p for m in sent for p in m.positions) == list(range(6))


def test_calls_not_shared_or_to_one_machine_carry_only_that_machines_calls(send_calls: Any) -> None:
    for shared, calls in ((False, _calls()), (True, [c for c in _calls() if c[0] == "m1"])):
        machines = Machines()
        waits = send_calls(machines, calls, shared=shared)  # type: ignore[arg-type]
        assert [wait() for wait in waits] == [(m, key, args) for m, (key, _, args), _ in calls]
        for machine, message in machines.messages.items():
            assert message == [call for m, call, _ in calls if m == machine]
