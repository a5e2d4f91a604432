"""IMPALA's actor-learner loop over Ray actors, with actor-side inference or dynamic batching."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Unpack

import numpy as np
import ray
import tensorflow as tf

from batchrl.config import ConfigError, check_choice
from batchrl.config.run_config import algorithm_class, algorithm_section
from batchrl.core import Learner
from batchrl.parts import summary
from batchrl.runners.ray.actors import EnvActor
from batchrl.runners.ray.dynamic_batcher import RayDynamicBatcher
from batchrl.runners.ray.group import ActorOptions, RayRunner, options_of, require_key
from batchrl.runners.unrolls import Unroll, concatenate, episode_stats
from batchrl.tools.environments import EnvSpaces, make_batch_env

# 'central' is lockstep dynamic batching: every actor in every call, one update per T steps.
INFERENCE = ("actor", "dynamic", "central")


class RayActorLearner(RayRunner):
    """IMPALA's actor-learner loop with Ray actors, on one machine or a cluster.

    Each of `num_actors` `EnvActor`s owns a batch of environments (from `make_env`) and a
    policy copy (`make_policy(seed)`), and returns whole unrolls [T, B]. The learner keeps
    `requests_per_actor` requests in flight per actor and takes results as they arrive
    (`ray.wait`). Each `update` takes `learner_batch` unrolls, makes one learner step and
    puts the new weights into the object store once; requests sent after that carry
    them. The policy lag of an unroll is the learner version at its update minus the
    version that acted (for an unroll of several versions, the oldest).

    With `inference='dynamic'` actors only step environments, and the learner's process
    acts for them with its own policy copy, holding the newest weights, as TorchBeast's
    PolyBeast does (`RayDynamicBatcher`): one batched call for whichever actors'
    observations are in hand once `max_batch` of them are, or `batch_timeout` seconds
    after the first; each actor steps as soon as its actions arrive, and its T steps make
    its unroll. The batcher runs in a thread of its own, so actors keep stepping while the
    learner learns, up to `learner_batch` finished unrolls ahead of it.
    `inference='central'` is the lockstep case: every call waits for all actors
    (`max_batch` all, no timeout) and an update learns from the T steps of all actors
    together (`learner_batch` all), all acted on with that update's weights (lag 0).

    An actor whose call fails (it was killed, its node lost, or an environment raised)
    is logged and replaced on any node with room, up to `max_actor_restarts` times.
    `close` (also as a context manager) kills the actors.
    """

    @classmethod
    def check_config(cls, config, algo_cls) -> None:
        """Raises ConfigError for an inference batch larger than the actors, or without
        `unroll_length`."""
        cfg = config.ray
        if cfg.inference == "dynamic" and cfg.inference_batch > cfg.num_actors:
            raise ConfigError(
                f"Invalid ray.inference_batch={cfg.inference_batch}: a forward pass serves "
                f"at most the ray.num_actors={cfg.num_actors} actors; use 1 to "
                f"{cfg.num_actors}, or 0 for all."
            )
        require_key(config, "unroll_length")
        super().check_config(config, algo_cls)

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """The spaces of an actor's environments: the learner acts for none."""
        return EnvSpaces(config.env, config.env.num_envs)

    @classmethod
    def from_config(cls, config, algo, seed: int) -> RayActorLearner:
        cfg = config.ray
        return cls(
            functools.partial(make_batch_env, config.env, config.env.num_envs),
            functools.partial(make_behaviour_policy, config),
            algo,
            num_actors=cfg.num_actors,
            unroll_length=config[algorithm_section(config)].unroll_length,
            learner_batch=cfg.learner_batch,
            requests_per_actor=cfg.requests_per_actor,
            inference=cfg.inference,
            max_batch=cfg.inference_batch,
            batch_timeout=cfg.inference_timeout,
            **options_of(config, seed),
        )

    def __init__(
        self,
        make_env: Callable,
        make_policy: Callable[[int], object],
        learner: Learner,
        num_actors: int,
        unroll_length: int,
        learner_batch: int = 2,
        requests_per_actor: int = 2,
        inference: str = "actor",
        max_batch: int = 0,
        batch_timeout: float = 0.005,
        background: bool = True,
        **options: Unpack[ActorOptions],
    ):
        """Starts the actors; Ray must be connected (`connect`).

        Args:
          make_env: builds one actor's `BatchEnv`; called in the actor's process.
          make_policy: builds a behaviour policy from a seed; called in each actor with
            actor inference (the learner's own copies come from `learner`).
          learner: what learns (e.g. `IMPALA`); its `behaviour_variables` are published.
          num_actors: Ray actors.
          unroll_length: T.
          learner_batch: unrolls per learner step ('central': all actors').
          requests_per_actor: 1 or 2 unroll requests in flight per actor (actor inference).
          inference: 'actor', 'dynamic' or 'central'.
          max_batch: with 'dynamic', the most actors one forward pass serves; 0: all.
          batch_timeout: with 'dynamic', seconds to wait for more actors after the first.
          background: with 'dynamic', the batcher runs in a thread of its own (actors step
            while the learner learns); false: only while `update` waits for unrolls.
          **options: of the actors (`ActorOptions`); actor i's environments and samples
            start from `seed + 1000 * i` (plus 100,000 per restart so far).
        """
        check_choice("ray.inference", inference, INFERENCE)
        super().__init__(**options)
        seed = self.options.get("seed", 0)
        self._learner = learner
        self._learn = tf.function(learner.learn)
        self._unroll_length = unroll_length
        self._batch = num_actors if inference == "central" else learner_batch
        self._requests = requests_per_actor
        self.version = 0
        self._values = self._snapshot()
        self._weights = ray.put(self._values)
        self._pending: dict = {}  # ObjectRef -> (actor index, actor handle)
        self._owed: list[int] = []  # Actors to send a request after the update.
        self.batcher: RayDynamicBatcher | None = None
        in_actors = inference == "actor"

        def make_args(index: int, seed: int) -> tuple:
            return make_env, make_policy if in_actors else None, seed, self.tf_threads

        with self.closing_on_error():
            self._actors = self.start_group(EnvActor, make_args, num_actors)
            if in_actors:
                for index in range(num_actors):
                    for _ in range(requests_per_actor):
                        self._request(index)
            else:
                if inference == "central":
                    max_batch, batch_timeout = num_actors, math.inf
                policy = learner.make_behaviour_policy(seed)
                policy.load(self._values)
                self.batcher = RayDynamicBatcher(
                    self._actors,
                    policy,
                    lambda index: learner.make_behaviour_policy(seed + 1000 * index),
                    unroll_length,
                    min(max_batch or num_actors, num_actors),
                    batch_timeout,
                )
                if inference == "dynamic" and background:  # Actors step during `learn`.
                    self.batcher.start(capacity=learner_batch)

    def update(self) -> tuple[int, dict[str, float]]:
        """One learner step on `learner_batch` unrolls; publishes the new weights.

        Writes `impala/policy_lag`, `impala/policy_lag_max` and `impala/actor_restarts`
        (and with dynamic batching `impala/inference_batch`, the mean actors per forward
        pass since the last update) to the default summary writer, if there is one.

        Returns:
          The environment steps consumed and the finished-episode statistics.

        Raises:
          RuntimeError: actors failed more than `max_actor_restarts` times.
          TimeoutError: an actor gave no result for `timeout` seconds.
        """
        passes = 0
        if self.batcher is not None:
            self.batcher.load(self._values, self.version)
            passes = len(self.batcher.batch_sizes)
        unrolls = [self.next_unroll() for _ in range(self._batch)]
        self._learn(concatenate(unrolls))
        lags = [self.version - unroll.version for unroll in unrolls]
        self.version += 1
        self._values = self._snapshot()
        self._weights = ray.put(self._values)
        for index in self._owed:
            self._request(index)
        self._owed = []
        summary.scalar("impala/policy_lag", float(np.mean(lags)))
        summary.scalar("impala/policy_lag_max", float(np.max(lags)))
        summary.scalar("impala/actor_restarts", float(self.restarts))
        if self.batcher is not None and len(self.batcher.batch_sizes) > passes:
            sizes = self.batcher.batch_sizes[passes:]
            summary.scalar("impala/inference_batch", float(np.mean(sizes)))
        steps = sum(unroll.arrays["reward"].size for unroll in unrolls)
        return steps, episode_stats(unrolls, lags)

    def next_unroll(self) -> Unroll:
        """The next unroll of any actor, replacing actors that failed.

        With actor inference, the actor it came from gets a new request now if it has none
        left in flight, else after the next update, so that the request carries newer
        weights. With dynamic batching, the learner acts and steps the actors until one
        finishes an unroll.
        """
        if self.batcher is not None:
            return self.batcher.next_unroll()
        deadline = time.monotonic() + self._actors.timeout
        while True:
            awaited = [index for index, _ in self._pending.values()]
            for ref in self._actors.wait(list(self._pending), "unrolls", deadline, awaited):
                index, handle = self._pending.pop(ref)
                try:
                    arrays, returns, lengths, version = ray.get(ref)
                except ray.exceptions.RayError as error:
                    if self._actors.replace(index, handle, error):
                        self._pending = {
                            key: value
                            for key, value in self._pending.items()
                            if value[1] is not handle
                        }
                        for _ in range(self._requests):
                            self._request(index)
                    continue
                if any(value[0] == index for value in self._pending.values()):
                    self._owed.append(index)
                else:
                    self._request(index)
                return Unroll(arrays, index, version, returns, lengths)

    step = update  # One unit of work of a `RayRunner`.

    def close(self) -> None:
        """Kills the actors (their environment workers exit with them); safe to call twice."""
        self._pending = {}
        if self.batcher is not None:
            self.batcher.close()
        super().close()

    def _request(self, index: int) -> None:
        handle = self._actors.handles[index]
        ref = handle.unroll.remote(self._weights, self.version, self._unroll_length)
        self._pending[ref] = (index, handle)

    def _snapshot(self) -> list[np.ndarray]:
        return [variable.numpy() for variable in self._learner.behaviour_variables()]


def make_behaviour_policy(config, seed: int):
    """A behaviour policy of the config's algorithm, as an actor builds it in its process."""
    spaces = EnvSpaces(config.env, config.env.num_envs)
    algo = algorithm_class(config)(spaces, config, seed=config.train.seed)
    return algo.make_behaviour_policy(seed)
