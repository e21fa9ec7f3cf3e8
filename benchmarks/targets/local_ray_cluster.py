"""A two-node Ray cluster on this one host (ray.cluster_utils), held until SIGTERM; SIGUSR1 removes the second node.

Prints one JSON line: the head's address and both node ids (what fake_ray_server.py and --ray-address take).
Usage: python benchmarks/targets/local_ray_cluster.py [CPUS_PER_NODE]
"""

from __future__ import annotations

import json
import signal
import sys
import time

from ray.cluster_utils import Cluster


def main() -> None:
    cpus = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False})
    second = cluster.add_node(num_cpus=cpus)
    cluster.wait_for_nodes()
    assert cluster.head_node is not None  # initialize_head started it
    head = cluster.head_node.node_id
    print(json.dumps({"address": cluster.address, "head": head, "second": second.node_id}), flush=True)
    asked: list[str] = []
    signal.signal(signal.SIGTERM, lambda *_: asked.append("stop"))
    signal.signal(signal.SIGUSR1, lambda *_: asked.append("lose"))
    while "stop" not in asked:
        if "lose" in asked:
            asked.remove("lose")
            print(f"removing the second node at {time.time():.3f}", flush=True)
            cluster.remove_node(second, allow_graceful=False)
        time.sleep(0.2)
    cluster.shutdown()
    print("cluster shut down", flush=True)


if __name__ == "__main__":
    main()
