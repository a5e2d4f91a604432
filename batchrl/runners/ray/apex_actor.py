"""Ape-X's actors: epsilon-greedy DQN copies scoring their own n-step transitions; config."""

from __future__ import annotations

import os

import numpy as np
import ray
import tensorflow as tf

from batchrl.config import Config, ConfigError
from batchrl.config.config import check_range
from batchrl.config.run_config import algorithm_class
from batchrl.replay import NStep
from batchrl.runners.ray.actors import limit_threads
from batchrl.runners.ray.replay_shards import item_spec
from batchrl.runners.unrolls import UnrollCollector
from batchrl.tools.environments import EnvSpaces, make_batch_env


def epsilons(num_actors: int, epsilon: float, alpha: float) -> list[float]:
    """Each actor's exploration rate (Horgan et al. 2018, section 4.1).

        epsilon_i = epsilon ^ (1 + alpha * i / (N - 1)),    i = 0 .. N - 1

    One actor (N = 1) explores with `epsilon`.
    """
    if num_actors == 1:
        return [float(epsilon)]
    return [float(epsilon) ** (1.0 + alpha * i / (num_actors - 1)) for i in range(num_actors)]


def acting_config(config) -> Config:
    """The config of a DQN that keeps no replay of its own (the actors' copies, which act
    and score, and the learner, which samples from the shards): the least its checks allow."""
    tree = config.to_dict()
    dqn = tree["dqn"]
    least = config.env.num_envs * (2 * dqn["n_step"] + 2)
    dqn["buffer_size"] = max(dqn["batch_size"], least)
    dqn["checkpoint_replay"] = False
    return Config(tree)


def check_apex_config(config) -> None:
    """Raises ConfigError when the `apex` section is out of range or cannot feed `dqn`'s
    learner: a shard that holds fewer than a batch, or fewer than learning starts at."""
    apex, dqn = config.apex, config.dqn
    check_range(
        apex,
        "apex",
        {
            "num_shards": (lambda x: x >= 1, ">= 1"),
            "buffer_size": (lambda x: x >= 1, ">= 1"),
            "cpus_per_shard": (lambda x: x > 0, "> 0"),
            "epsilon": (lambda x: 0 <= x <= 1, "in [0, 1]"),
            "epsilon_alpha": (lambda x: x >= 0, ">= 0"),
            "block_length": (lambda x: x >= 1, ">= 1 (batched steps)"),
            "weights_every": (lambda x: x >= 1, ">= 1 (updates)"),
            "requests_per_shard": (lambda x: x >= 1, ">= 1"),
            "steps_per_update": (lambda x: x >= 0, ">= 0 (0: actors run free)"),
        },
    )
    if apex.buffer_size // apex.num_shards < dqn.batch_size:
        raise ConfigError(
            f"apex.buffer_size={apex.buffer_size} gives each of apex.num_shards="
            f"{apex.num_shards} shards fewer transitions than dqn.batch_size="
            f"{dqn.batch_size}, the batch one shard samples."
        )
    if dqn.learning_starts > apex.buffer_size:
        raise ConfigError(
            f"dqn.learning_starts={dqn.learning_starts} is more than apex.buffer_size="
            f"{apex.buffer_size}: the shards never hold that many transitions, so "
            "learning would never start. Valid: at most apex.buffer_size."
        )


def push_and_score(n_step: NStep, algo, *block) -> tuple[dict, tf.Tensor]:
    """A block's steps [T, B, ...] through the n-step window (`NStep.push_block`); the
    finished transitions {key: [K, ...]} and their initial priorities, |TD error| [K]."""
    items = n_step.push_block(*block)
    return items, tf.abs(algo.td_errors(items))


@ray.remote(max_restarts=0)
class ApexActor:
    """A Ray actor with `env.num_envs` environments, a DQN copy and an epsilon of its own.

    Each `collect` loads the learner's weights (when their version is new), steps the
    environments `length` times, acting for all of them in one batched call per step,
    pushes the steps through an n-step window (`NStep`, which carries over from block to
    block) and scores the finished transitions with its copy's TD errors, their initial
    priorities. The block goes to a replay shard straight from this actor's object store.
    """

    def __init__(self, config, epsilon: float, seed: int, tf_threads: int):
        limit_threads(tf_threads)
        cfg = config.dqn
        size = config.env.num_envs
        self.epsilon = float(epsilon)
        self._collector = UnrollCollector(make_batch_env(config.env, size), seed)
        self._algo = algorithm_class(config)(
            EnvSpaces(config.env, size), acting_config(config), seed=seed
        )
        spec = item_spec(config)
        self._n_step = NStep(cfg.n_step, cfg.discount, size, spec)
        self._act = tf.function(lambda observ: self._algo.explore(observ, self.epsilon))
        # A function of its own, not a method: Ray adds a keyword to an actor's methods.
        self._push_block = tf.function(
            lambda *block: push_and_score(self._n_step, self._algo, *block)
        )
        self._dtype = spec["observ"].dtype.as_numpy_dtype
        self._version = None

    @ray.method(num_returns=2)
    def collect(self, weights, version: int, length: int) -> tuple[tuple, dict]:
        """`length` batched steps acted with `weights` (version `version`).

        Returns:
          The block (items {key: [K, ...]}, priorities [K] = |TD error|), and what the
          learner reads: `steps` (environment steps), `transitions` (K), `version`, and
          the `returns` and `lengths` of the episodes that ended.
        """
        if version != self._version:
            variables = self._algo.q.variables + self._algo.target_q.variables
            for variable, value in zip(variables, weights, strict=True):
                variable.assign(value)
            self._version = version
        steps = []
        for _ in range(length):
            action = self._act(self._collector.observ).numpy()  # [B]
            steps.append(dict(self._collector.step(action), action=action))
        block = {key: np.stack([step[key] for step in steps]) for key in steps[0]}  # [T, B]
        items, priorities = self._push_block(
            block["observ"].astype(self._dtype),
            block["action"],
            block["reward"].astype(np.float32),
            block["terminated"],
            block["truncated"],
            block["next_observ"].astype(self._dtype),
        )
        priorities = priorities.numpy()  # [K]
        count = len(priorities)
        items = {key: value.numpy() for key, value in items.items()} if count else None
        if items is not None:
            items["version"] = np.full([count], version, np.int32)
        returns, lengths = self._collector.take_episodes()
        info = dict(
            steps=length * len(self._collector),
            transitions=count,
            version=version,
            returns=returns,
            lengths=lengths,
        )
        return (items, priorities), info

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def close(self) -> None:
        self._collector.close()
