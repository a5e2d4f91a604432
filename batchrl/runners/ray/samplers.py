"""PPO over Ray: sampler actors collect rollouts with the learner's weights; it learns."""

from __future__ import annotations

import os
from typing import Unpack

import numpy as np
import ray
import tensorflow as tf

from batchrl.config import ConfigError
from batchrl.config.run_config import algorithm_class, algorithm_section
from batchrl.core import Algorithm, RolloutLearner
from batchrl.runners.ray.actors import limit_threads, merge_episode_stats
from batchrl.runners.ray.group import ActorOptions, RayRunner, options_of, require_key
from batchrl.runners.ray.population import merge_statistics
from batchrl.tools.environments import EnvSpaces, make_in_graph_env
from batchrl.tools.simulate import needs_autograph, simulate


@ray.remote(max_restarts=0)
class Sampler:
    """A Ray actor with `env.num_envs` environments and a copy of the learner that acts.

    The copy is built from the config as the learner is, for this actor's environments
    (`make_in_graph_env`, seeded `seed`). Each `collect` loads the learner's acting
    variables, normalizer statistics and random stream, runs T steps of `simulate` with
    the copy's `perform`, `experience` and episode calls (its update is never called)
    and returns the rollout. The environments' episodes, and the per-environment state
    of the copy (each agent's discounted return for reward scaling, recurrent states),
    carry over from one rollout to the next, as they do in a local run.
    """

    def __init__(self, config, seed: int, index: int, rollout_length: int, tf_threads: int):
        limit_threads(tf_threads)
        self._index = index
        self._env = make_in_graph_env(config.env, config.env.num_envs, seed)
        self._algo = algorithm_class(config)(self._env, config, seed=config.train.seed)
        acting = _Acting(self._algo)
        self._simulate = tf.function(
            lambda: simulate(self._env, acting, steps=rollout_length),
            autograph=needs_autograph(self._env, acting),
        )
        self._take = tf.function(self._algo.take_rollout, autograph=False)

    def collect(self, shared) -> tuple[dict, list, np.ndarray, dict]:
        """One rollout acted with the learner's `shared` state (`RaySamplers.shared`).

        Returns:
          The rollout {key: [T, B, ...]}, the normalizers' statistics after it (values of
          their variables), the random stream's state after it and `simulate`'s episode
          statistics.
        """
        weights, statistics, rng_state = shared
        algo = self._algo
        for variable, value in zip(algo.acting_variables(), weights, strict=True):
            variable.assign(value)
        for normalizer, values in zip(algo.statistics(), statistics, strict=True):
            for variable, value in zip(normalizer.variables, values, strict=True):
                variable.assign(value)
        algo.rng.reset(_stream_of(rng_state, self._index))
        stats = self._simulate()
        rollout = {key: value.numpy() for key, value in self._take().items()}
        after = [[v.numpy() for v in normalizer.variables] for normalizer in algo.statistics()]
        return rollout, after, algo.rng.state.numpy(), {k: v.numpy() for k, v in stats.items()}

    def pid(self) -> int:
        return os.getpid()

    def env_pids(self) -> list[int]:
        """The processes of its environment workers (none for in-process environments)."""
        return [env.pid for env in self._env.batch_env if hasattr(env, "pid")]

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


class _Acting(Algorithm):
    """An algorithm's acting and recording without its scheduled update: a sampler's part."""

    def __init__(self, algo: Algorithm):
        super().__init__(name="acting")
        self._algo = algo
        self.autograph = algo.autograph

    def begin_episodes(self, agent_indices):
        self._algo.begin_episodes(agent_indices)

    def perform(self, agent_indices, observ):
        return self._algo.perform(agent_indices, observ)

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        transition = (observ, action, reward, terminated, truncated, next_observ)
        self._algo.experience(agent_indices, *transition)

    def end_episodes(self, agent_indices):
        self._algo.end_episodes(agent_indices)


def _stream_of(rng_state: np.ndarray, index: int) -> np.ndarray:
    """The Philox state [counter, counter, key] of actor `index`: the learner's, keyed +index.

    Actor 0 continues the learner's own stream; the others draw from streams of other
    keys, which Philox makes independent of it.
    """
    state = np.array(rng_state, np.int64)
    state[-1] += index
    return state


class RaySamplers(RayRunner):
    """PPO's loop of collecting and learning, with the collecting spread over Ray actors.

    Each update puts the learner's acting variables, normalizer statistics and random
    stream into the object store once (`shared`); each of `num_actors` `Sampler`s collects
    T steps of its B environments with them; the learner merges the statistics the
    actors gathered (`merge_statistics`), continues its random stream from actor 0's
    and learns on the rollouts concatenated along the batch, [T, sum of B, ...], in
    actor order. Every rollout is acted on with the newest weights: PPO stays on-policy.

    With one actor this is the local runner's loop: the same rollouts, and the same
    parameters, statistics and random stream after every update (tests/runners/test_ray.py
    checks they are bitwise equal).

    An actor whose call fails is logged and replaced (its environments seeded anew), and
    the replacement collects the rollout again, up to `max_actor_restarts` times.
    """

    @classmethod
    def check_config(cls, config, algo_cls) -> None:
        """Raises ConfigError unless the rollouts are of `rollout_length` steps."""
        section = algorithm_section(config)
        if config[section].get("update_mode", "steps") != "steps":
            raise ConfigError(
                f"runner.name='ray' collects rollouts of {section}.rollout_length steps in "
                f"sampler actors; {section}.update_mode="
                f"{config[section].update_mode!r} (updates after finished episodes) has "
                f"no Ray path. Use {section}.update_mode='steps' or runner.name='local'."
            )
        require_key(config, "rollout_length")
        super().check_config(config, algo_cls)

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """The spaces, and the size of the learner batch: every actor's environments."""
        return EnvSpaces(config.env, config.ray.num_actors * config.env.num_envs)

    @classmethod
    def from_config(cls, config, algo, seed: int) -> RaySamplers:
        length = config[algorithm_section(config)].rollout_length
        updates = config.train.steps_per_call // length
        return cls(config, algo, config.ray.num_actors, length, updates, **options_of(config, seed))

    def __init__(
        self,
        config,
        learner: RolloutLearner,
        num_actors: int,
        rollout_length: int,
        updates_per_step: int = 1,
        **options: Unpack[ActorOptions],
    ):
        """Starts the actors; Ray must be connected (`connect`).

        Args:
          config: the run's config (the actors build their copies from it).
          learner: what learns (e.g. `PPO`), built for sum B environments.
          num_actors: Ray actors, each with `env.num_envs` environments.
          rollout_length: T.
          updates_per_step: updates (rollouts) per `step`, as many as a local training
            call makes (`train.steps_per_call` / T).
          **options: of the actors (`ActorOptions`). Actor i's environments are reset
            with seeds `seed + 1000 * i + j` (plus 100,000 per restart so far), as the
            local runner's are with `seed + j`.
        """
        super().__init__(**options)
        self._learner = learner
        self._learn = tf.function(learner.learn, autograph=False)
        self._updates = updates_per_step
        self.updates = 0
        with self.closing_on_error():
            self._actors = self.start_group(
                Sampler,
                lambda index, seed: (config, seed, index, rollout_length, self.tf_threads),
                num_actors,
            )

    def shared(self) -> tuple[list, list, np.ndarray]:
        """What the actors act with: weights, normalizer statistics, random stream."""
        learner = self._learner
        return (
            [variable.numpy() for variable in learner.acting_variables()],
            [[v.numpy() for v in normalizer.variables] for normalizer in learner.statistics()],
            learner.rng.state.numpy(),
        )

    def step(self) -> tuple[int, dict]:
        """`updates_per_step` rounds of collecting and learning.

        Returns:
          The environment steps collected and their finished-episode statistics.

        Raises:
          RuntimeError: actors failed more than `max_actor_restarts` times.
          TimeoutError: an actor gave no rollout for `timeout` seconds; names it.
        """
        parts = []
        for _ in range(self._updates):
            parts.extend(self._update())
        return merge_episode_stats(parts)

    def _update(self) -> list[dict]:
        """Collects a rollout in every actor and learns on them; returns their statistics."""
        learner = self._learner
        before = self.shared()
        shared = ray.put(before)
        results = self._actors.gather(
            lambda index, handle: handle.collect.remote(shared),
            f"the rollouts of update {self.updates + 1}",
        )
        rollouts, statistics, rng_states, stats = zip(*results)
        for k, normalizer in enumerate(learner.statistics()):
            merged = merge_statistics(before[1][k], [values[k] for values in statistics])
            for variable, value in zip(normalizer.variables, merged, strict=True):
                variable.assign(value)
        learner.rng.reset(rng_states[0])
        self._learn(concatenate(rollouts))
        self.updates += 1
        return list(stats)


def concatenate(rollouts: list[dict]) -> dict[str, tf.Tensor]:
    """One batch of rollouts: [T, B_1 + ... + B_n, ...], recurrent states [sum of B, S]."""
    return {
        key: tf.convert_to_tensor(
            np.concatenate([rollout[key] for rollout in rollouts], axis=0 if key == "state" else 1)
        )
        for key in rollouts[0]
    }
