"""Ray actors of the ray runner: connecting, threads of an actor, an environment actor."""

from __future__ import annotations

import math
import os

import numpy as np
import ray
import tensorflow as tf

from batchrl.runners.unrolls import UnrollCollector

# The job's runtime environment: each worker imports TensorFlow at start without its C++
# start-up lines, as the train script does, so they do not reach the driver's terminal
# once per worker (`(pid=...) I0000 ... cudart_stub.cc`).
RUNTIME_ENV = {"worker_process_setup_hook": "batchrl.quiet.quiet_worker"}


def connect(cfg, cpus_needed: float) -> bool:
    """Connects this process to Ray as the `ray` section says, unless it already is.

    Args:
      cfg: the `ray` section: `address` empty starts Ray on this machine, with as many
        CPUs as the machine has or `cpus_needed`, whichever is more; else it joins the
        cluster at `address`.
      cpus_needed: CPUs the run's actors reserve.

    Returns:
      Whether this call connected (and so `ray.shutdown` is the caller's to call).
    """
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if cfg.address:
        ray.init(address=cfg.address, runtime_env=RUNTIME_ENV)
    else:
        cpus = max(os.cpu_count() or 1, math.ceil(cpus_needed))
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, runtime_env=RUNTIME_ENV)
    return True


def limit_threads(tf_threads: int) -> None:
    """TensorFlow's thread pools of an actor, set before its first op (Ray sets none)."""
    tf.config.threading.set_intra_op_parallelism_threads(tf_threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.set_visible_devices([], "GPU")


@ray.remote(max_restarts=0)
class EnvActor:
    """A Ray actor that owns a batch of environments (an `UnrollCollector`).

    With a behaviour policy (actor-side inference) `unroll` returns whole unrolls; without
    one (dynamic batching in the learner) the learner sends actions to `step`.
    """

    def __init__(self, make_env, make_policy, seed: int, tf_threads: int):
        limit_threads(tf_threads)
        self._collector = UnrollCollector(make_env(), seed)
        self._policy = None if make_policy is None else make_policy(seed)
        self._version = None

    def unroll(self, weights, version: int, length: int) -> tuple[dict, list, list, int]:
        """T steps with the policy holding `weights` (loaded only when `version` is new)."""
        if version != self._version:
            self._policy.load(weights)
            self._version = version
        return (*self._collector.unroll(self._policy, length), version)

    def observ(self) -> np.ndarray:
        return self._collector.observ

    def step(self, action) -> tuple[dict, np.ndarray, tuple[list[float], list[int]]]:
        """One batched step: the transition, the observations to act on next, and the
        returns and lengths of the episodes that ended in it."""
        transition = self._collector.step(action)
        return transition, self._collector.observ, self._collector.take_episodes()

    def pid(self) -> int:
        return os.getpid()

    def env_pids(self) -> list[int]:
        """The processes of its environment workers (none for in-process environments)."""
        return [env.pid for env in self._collector.batch_env if hasattr(env, "pid")]

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def close(self) -> None:
        self._collector.close()


def merge_episode_stats(parts: list[dict]) -> tuple[int, dict]:
    """The environment steps and finished-episode statistics of several `simulate` calls.

    Each part holds `steps`, `episodes`, `mean_return` and `mean_length` (NaN when none
    ended), as `simulate` returns them; the means are weighted by the episodes.
    """
    episodes = np.array([float(part["episodes"]) for part in parts])
    weights = episodes / max(episodes.sum(), 1.0)
    if not episodes.sum():
        mean_return = mean_length = float("nan")
    else:
        mean_return, mean_length = (
            float(sum(w * float(p[key]) for w, p in zip(weights, parts) if w))
            for key in ("mean_return", "mean_length")
        )
    stats = {
        "episodes": int(episodes.sum()),
        "mean_return": mean_return,
        "mean_length": mean_length,
    }
    return int(sum(int(part["steps"]) for part in parts)), stats
