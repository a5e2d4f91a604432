"""IMPALA's actor-learner loop over Ray actors, with actor-side or central inference."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import ray
import tensorflow as tf

from batchrl.config import check_choice
from batchrl.config.run_config import algorithm_class
from batchrl.core import Learner
from batchrl.parts import summary
from batchrl.runners.ray.actors import ActorGroup, Actors, EnvActor
from batchrl.runners.unrolls import Unroll, concatenate, episode_stats, stack
from batchrl.tools.environments import EnvSpaces

INFERENCE = ("actor", "central")


class RayActorLearner(ActorGroup):
    """IMPALA's actor-learner loop with Ray actors, on one machine or a cluster.

    Each of `num_actors` `EnvActor`s owns a batch of environments (from `make_env`) and a
    policy copy (`make_policy(seed)`), and returns whole unrolls [T, B]. The learner keeps
    `requests_per_actor` requests in flight per actor and takes results as they arrive
    (`ray.wait`). Each `update` takes `learner_batch` unrolls, makes one learner step and
    puts the new weights into the object store once; requests sent after that carry
    them. The policy lag of an unroll is the learner version at its update minus the
    version that acted.

    With `inference='central'` actors only step environments: every step, the learner
    acts for all actors' environments in one batched call of its own policy copy and
    sends each actor its actions; an update learns from the T steps of all actors
    together, acted on with the newest weights (lag 0).

    An actor whose call fails (it was killed, its node lost, or an environment raised)
    is logged and replaced on any node with room, up to `max_actor_restarts` times.
    `close` (also as a context manager) kills the actors.
    """

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
        cpus_per_actor: float = 1.0,
        tf_threads: int = 1,
        max_actor_restarts: int = 10,
        seed: int = 0,
        timeout: float = 300.0,
    ):
        """Starts the actors; Ray must be connected (`connect`).

        Args:
          make_env: builds one actor's `BatchEnv`; called in the actor's process.
          make_policy: builds a behaviour policy from a seed; called in each actor with
            actor inference, and once in this process with central inference.
          learner: what learns (e.g. `IMPALA`); its `behaviour_variables` are published.
          num_actors: Ray actors.
          unroll_length: T.
          learner_batch: unrolls per learner step (actor inference).
          requests_per_actor: 1 or 2 unroll requests in flight per actor.
          inference: 'actor' or 'central'.
          cpus_per_actor: Ray CPUs each actor reserves.
          tf_threads: TensorFlow intra-op threads in each actor.
          max_actor_restarts: failed actors replaced before `update` raises.
          seed: actor i's environments and samples start from `seed + 1000 * i` (plus
            100,000 per restart so far).
          timeout: seconds `update` waits for any actor before it raises.
        """
        check_choice("ray.inference", inference, INFERENCE)
        self._learner = learner
        self._learn = tf.function(learner.learn)
        self._unroll_length = unroll_length
        self._batch = learner_batch
        self._requests = requests_per_actor
        self._central = inference == "central"
        self._seed = seed
        self.version = 0
        self._weights = ray.put(self._snapshot())
        self._pending: dict = {}  # ObjectRef -> (actor index, actor handle)
        self._owed: list[int] = []  # Actors to send a request after the update.
        self._observ: list[np.ndarray] | None = None  # Central: each actor's next observ.

        def make_actor(index: int, restarts: int):
            return EnvActor.options(num_cpus=cpus_per_actor, scheduling_strategy="SPREAD").remote(
                make_env,
                None if self._central else make_policy,
                seed + 1000 * index + 100_000 * restarts,
                tf_threads,
            )

        self._actors = Actors(make_actor, max_actor_restarts, timeout)
        self._policy = make_policy(seed) if self._central else None
        try:
            self._actors.start(num_actors)
            if not self._central:
                for index in range(num_actors):
                    for _ in range(requests_per_actor):
                        self._request(index)
        except BaseException:
            self.close()
            raise

    def update(self) -> tuple[int, dict[str, float]]:
        """One learner step on `learner_batch` unrolls (or one central unroll); publishes.

        Writes `impala/policy_lag`, `impala/policy_lag_max` and `impala/actor_restarts`
        to the default summary writer, if there is one.

        Returns:
          The environment steps consumed and the finished-episode statistics.

        Raises:
          RuntimeError: actors failed more than `max_actor_restarts` times.
          TimeoutError: no actor answered for `timeout` seconds.
        """
        if self._central:
            unrolls = [self._central_unroll()]
        else:
            unrolls = [self.next_unroll() for _ in range(self._batch)]
        self._learn(concatenate(unrolls))
        lags = [self.version - unroll.version for unroll in unrolls]
        self.version += 1
        self._weights = ray.put(self._snapshot())
        for index in self._owed:
            self._request(index)
        self._owed = []
        summary.scalar("impala/policy_lag", float(np.mean(lags)))
        summary.scalar("impala/policy_lag_max", float(np.max(lags)))
        summary.scalar("impala/actor_restarts", float(self.restarts))
        steps = sum(unroll.arrays["reward"].size for unroll in unrolls)
        return steps, episode_stats(unrolls, lags)

    def next_unroll(self) -> Unroll:
        """The next unroll of any actor (actor inference), replacing actors that failed.

        The actor it came from gets a new request now if it has none left in flight,
        else after the next update, so that the request carries newer weights.
        """
        deadline = time.monotonic() + self._actors.timeout
        while True:
            for ref in self._actors.wait(list(self._pending), "unrolls", deadline):
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

    def close(self) -> None:
        """Kills the actors (their environment workers exit with them); safe to call twice."""
        self._pending = {}
        self._actors.close()

    def _request(self, index: int) -> None:
        handle = self._actors.handles[index]
        ref = handle.unroll.remote(self._weights, self.version, self._unroll_length)
        self._pending[ref] = (index, handle)

    def _snapshot(self) -> list[np.ndarray]:
        return [variable.numpy() for variable in self._learner.behaviour_variables()]

    def _central_unroll(self) -> Unroll:
        """T steps of every actor, acted on here in one call per step; restarts on a failure."""
        self._policy.load(self._snapshot())
        deadline = time.monotonic() + self._actors.timeout
        while True:
            try:
                return self._try_central_unroll(deadline)
            except _ActorFailed as failure:
                self._actors.replace(failure.index, failure.handle, failure.error)
                self._observ = None  # Start the unroll again, from the actors' observations.

    def _try_central_unroll(self, deadline: float) -> Unroll:
        handles = list(self._actors.handles)
        if self._observ is None:
            self._observ = self._gather(handles, [h.observ.remote() for h in handles], deadline)
        sizes = [len(observ) for observ in self._observ]
        splits = np.cumsum(sizes)[:-1]
        steps = []
        for _ in range(self._unroll_length):
            action, sample, output = self._policy(np.concatenate(self._observ))  # [sum B, ...]
            refs = [h.step.remote(a) for h, a in zip(handles, np.split(action, splits))]
            results = self._gather(handles, refs, deadline)
            transition = {
                key: np.concatenate([result[0][key] for result in results]) for key in results[0][0]
            }
            self._observ = [result[1] for result in results]
            steps.append(dict(transition, sample=sample, output=output))
        episodes = self._gather(handles, [h.take_episodes.remote() for h in handles], deadline)
        arrays = self._policy.finish_unroll(stack(steps))
        returns = [value for returns, _ in episodes for value in returns]
        lengths = [value for _, lengths in episodes for value in lengths]
        return Unroll(arrays, -1, self.version, returns, lengths)

    def _gather(self, handles: list, refs: list, deadline: float) -> list:
        """The results of one call per actor, in order; raises _ActorFailed for a failed one."""
        waiting = list(refs)
        while waiting:
            for ref in self._actors.wait(waiting, "a central step", deadline):
                waiting.remove(ref)
        results = []
        for index, (handle, ref) in enumerate(zip(handles, refs)):
            try:
                results.append(ray.get(ref))
            except ray.exceptions.RayError as error:
                raise _ActorFailed(index, handle, error) from error
        return results


class _ActorFailed(Exception):
    def __init__(self, index, handle, error):
        super().__init__(str(error))
        self.index, self.handle, self.error = index, handle, error


def make_behaviour_policy(config, seed: int):
    """A behaviour policy of the config's algorithm, as an actor builds it in its process."""
    spaces = EnvSpaces(config.env, config.env.num_envs)
    algo = algorithm_class(config)(spaces, config, seed=config.train.seed)
    return algo.make_behaviour_policy(seed)
