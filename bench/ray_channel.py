"""The caller's CPU per machine call: a Ray task against the actor's channel (ray_backend/channel.py).

    python -m bench.ray_channel            # 2,000 calls each way, after 200 to warm up

One local Ray node (loopback) and one actor that answers every message with its first 1,500
bytes (a machine call's size), as `MachineActor.batch` answers on its channel; each call is sent
and its answer awaited, one at a time. Printed: the caller process's CPU per call (all its
threads, Ray's included) and the wall time per call, for two rounds of each way in turn.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from leafsearch.ray_backend.channel import Channels, ChannelServer

KEY = os.urandom(32)
MESSAGE_BYTES = 2_000
ANSWER_BYTES = 1_500


class Echo:
    """The actor: its channel answers as `batch` does through Ray."""

    def __init__(self) -> None:
        import ray

        self.server = ChannelServer(ray.util.get_node_ip_address(), KEY, self.batch)

    def batch(self, message: bytes) -> bytes:
        return message[:ANSWER_BYTES]

    def channel(self) -> tuple[str, int]:
        return self.server.address


def _measure(call: Any, calls: int) -> tuple[float, float]:
    """(caller CPU, wall) per call, in microseconds."""
    for _ in range(200):
        call()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        call()
    return (time.process_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--calls", type=int, default=2_000)
    options = parser.parse_args()
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback, before Ray is imported
    import ray
    from ray.cluster_utils import Cluster

    from leafsearch.ray_backend.channel import address_from_ray

    node = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        actor = ray.remote(Echo).options(max_concurrency=32, num_cpus=0).remote()
        channels = Channels(KEY, address_from_ray)
        message = os.urandom(MESSAGE_BYTES)

        def through_ray() -> bytes:
            return ray.get(actor.batch.options(max_task_retries=0).remote(message))

        def on_channel() -> bytes:
            deadline = time.monotonic() + 60
            return channels.send(actor, message, deadline).answer(deadline)

        for _ in range(2):
            for name, call in (("Ray task", through_ray), ("channel", on_channel)):
                cpu, wall = _measure(call, options.calls)
                print(f"{name:>8}: caller CPU {cpu:6.0f} us per call, wall {wall:6.0f} us")
        channels.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
