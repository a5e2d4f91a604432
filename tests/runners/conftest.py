"""A real two-node Ray cluster on loopback, started once for the session, as Ray's tests do."""

import os
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

REPO = Path(__file__).parents[2]


def _our_processes() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


@pytest.fixture(scope="session")
def ray_cluster():
    """Two nodes of 2 CPUs on 127.0.0.1 (`ray.cluster_utils.Cluster`), this process joined.

    Never `ray stop`: it would end every Ray process on the machine. At the end the
    fixture shuts the cluster down and fails if any process it started is left.
    """
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    # Bound to 127.0.0.1 without token authentication, no usage reports; the workers
    # import the tests' own modules (fake environments) from the repository.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), path]))
    before = _our_processes()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False}
    )
    try:
        worker = cluster.add_node(num_cpus=2)
        from batchrl.runners.ray.actors import RUNTIME_ENV

        ray.init(address=cluster.address, runtime_env=RUNTIME_ENV)
        yield SimpleNamespace(cluster=cluster, worker=worker)
    finally:
        ray.shutdown()
        cluster.shutdown()
        os.environ["PYTHONPATH"] = path
    deadline = time.monotonic() + 30  # Worker processes may take seconds to go.
    while (left := _our_processes() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [p for p in psutil.process_iter(["pid", "cmdline"]) if p.pid in left]
    assert not left, f"Ray processes left running after the cluster's shutdown: {left}"
