"""The threads runner: actor threads with their own environments feed one learner."""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from batchrl.config import ConfigError, check_choice
from batchrl.config.config import check_range
from batchrl.config.run_config import algorithm_section
from batchrl.core import Learner, Trainer
from batchrl.parts import summary
from batchrl.runners.dynamic_batching import DynamicBatcher
from batchrl.runners.restarts import Restarts, first_line
from batchrl.runners.unrolls import Unroll, UnrollCollector, concatenate, episode_stats
from batchrl.tools.batch_env import BatchEnv
from batchrl.tools.environments import EnvSpaces, make_batch_env

# Seconds an actor waits for room in the full queue before it checks whether to stop.
_PUT_INTERVAL = 0.1
# Seconds the learner waits for an unroll before it checks on the actors.
_GET_INTERVAL = 0.2
# Seconds `close` waits for an actor thread to finish its current environment step.
_JOIN_TIMEOUT = 10.0


class _Weights:
    """The latest learner weights and their version, shared with the actor threads."""

    def __init__(self, values: list[np.ndarray]):
        self._lock = threading.Lock()
        self._values = values
        self._version = 0

    def publish(self, values: list[np.ndarray]) -> None:
        with self._lock:
            self._values = values
            self._version += 1

    def latest(self) -> tuple[int, list[np.ndarray]]:
        with self._lock:
            return self._version, self._values


class Actor:
    """A thread that steps its own `BatchEnv` with a copy of the policy.

    Each unroll it loads the newest published weights, has its `UnrollCollector` (the
    actor core that Ray actors share) take T batched steps with the behaviour policy, and
    puts an `Unroll` into the learner's queue. Any error, such as a dead environment
    worker, ends the thread; it is kept in `error` and the environments are closed.
    """

    def __init__(self, index, make_env, policy, unroll_length, weights, unrolls, stop, seed):
        self.index = index
        self.error: BaseException | None = None
        self.batch_env = None
        self._make_env = make_env
        self._unroll_length = unroll_length
        self._weights = weights
        self._unrolls = unrolls
        self._stop = stop
        self._seed = seed
        self._policy = policy
        self._thread = threading.Thread(target=self._run, name=f"actor-{index}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive() and self.batch_env is not None:
            # Stuck in a step: closing the workers makes it raise, and the thread ends.
            self.batch_env.close()
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self.batch_env = self._make_env()
            collector = UnrollCollector(self.batch_env, self._seed)
            while not self._stop.is_set():
                version, values = self._weights.latest()
                self._policy.load(values)
                arrays, returns, lengths = collector.unroll(self._policy, self._unroll_length)
                unroll = Unroll(arrays, self.index, version, returns, lengths)
                while not self._stop.is_set():
                    try:
                        self._unrolls.put(unroll, timeout=_PUT_INTERVAL)
                        break
                    except queue.Full:
                        pass
        except BaseException as error:  # Reported to the learner, which restarts us.
            if not self._stop.is_set():
                self.error = error
        finally:
            if self.batch_env is not None:
                self.batch_env.close()


class _BatchedPolicy:
    """An actor's policy whose actions come from the shared `DynamicBatcher`.

    Sampling goes through the batcher (one forward pass for whichever actors wait); the
    actor's own copy keeps loading the weights and completes its unrolls
    (`finish_unroll` keeps per-actor state, such as IMPALA's running returns).
    """

    def __init__(self, own, batcher: DynamicBatcher):
        self._own, self._batcher = own, batcher

    def initial_state(self, batch_size: int):
        return self._own.initial_state(batch_size)

    def __call__(self, observ, first=None, state=None):
        if state is None:
            return self._batcher(np.asarray(observ))
        return self._batcher((np.asarray(observ), first, state))  # Recurrent: states too.

    def load(self, weights) -> None:
        self._own.load(weights)

    def finish_unroll(self, arrays: dict) -> dict:
        return self._own.finish_unroll(arrays)

    def carry_reward(self, state, reward):
        return self._own.carry_reward(state, reward)


class ActorLearner:
    """TorchBeast's actor-learner loop on one machine: actor threads, a queue, a learner.

    `num_actors` `Actor` threads each step their own batch of environments (from
    `make_env`; in `ExternalProcess` workers if it makes them so) with their own copy of
    the policy (`learner.make_behaviour_policy`) and put unrolls [T, B] into a queue of
    `queue_size`. Each `update` takes `learner_batch` unrolls, concatenates them along
    the batch axis and makes one learner step (`learner.learn`), then publishes the new
    weights (`learner.behaviour_variables()`), which actors load before their next
    unroll. The policy lag of an unroll is the learner version at its update minus the
    version that acted.

    With `inference='dynamic'` the actors do not run their policy copies: their requests
    go to one `DynamicBatcher`, whose thread samples for up to `max_batch` actors at a
    time (or whoever waits after `batch_timeout` seconds) with a shared copy that loads
    the newest weights before each batch (TorchBeast's dynamic batching). A step's
    outputs are then those of the newest weights, which V-trace's importance weights
    read; for Gaussian policies the unroll's `behaviour_log_std` is the actor copy's, of
    the weights at the unroll's start.

    An actor that fails (an environment raised, or its worker died) is logged and
    replaced by a new one with fresh environments, up to `max_actor_restarts` times in
    all. `close` (also on errors and Ctrl-C, as a context manager) stops the actors and
    closes their environment workers.

        with ActorLearner(make_env, learner, num_actors=2, unroll_length=20) as runner:
            while ...:
                env_steps, stats = runner.update()
    """

    def __init__(
        self,
        make_env: Callable[[], BatchEnv],
        learner: Learner,
        num_actors: int,
        unroll_length: int,
        learner_batch: int = 2,
        queue_size: int = 8,
        max_actor_restarts: int = 10,
        seed: int = 0,
        unroll_timeout: float = 120.0,
        inference: str = "actor",
        max_batch: int = 0,
        batch_timeout: float = 0.005,
    ):
        """Creates the queue and the actors; `start` (or entering the context) runs them.

        Args:
          make_env: builds one actor's `BatchEnv`; called in the actor's thread.
          learner: what learns (e.g. `IMPALA`); its weights are published.
          num_actors: actor threads.
          unroll_length: T, steps per environment in an unroll.
          learner_batch: unrolls per learner step.
          queue_size: unrolls the queue holds before actors wait.
          max_actor_restarts: failed actors replaced before `update` raises.
          seed: actor i's environments and samples start from `seed + 1000 * i` (and a
            further offset per restart).
          unroll_timeout: seconds `update` waits for one unroll before it raises.
          inference: 'actor' (each actor samples with its copy) or 'dynamic' (one
            `DynamicBatcher` samples for the actors that wait).
          max_batch: with 'dynamic', the most actors one forward pass serves; 0: all.
          batch_timeout: with 'dynamic', seconds the batcher waits for more actors.
        """
        self._make_env = make_env
        self._learner = learner
        self._seed = seed
        self._unroll_length = unroll_length
        self._unroll_timeout = unroll_timeout
        self._batch = learner_batch
        self._unrolls = queue.Queue(maxsize=queue_size)
        self._stop = threading.Event()
        self._weights = _Weights(self._snapshot())
        self._learn = tf.function(learner.learn)
        self.version = 0
        self._restarts = Restarts(max_actor_restarts, "actor", "threads.max_actor_restarts")
        self.batcher = None
        if inference == "dynamic":
            shared = learner.make_behaviour_policy(seed + 999_999)
            loaded = [None]  # The version of the weights in `shared`.

            def sample(inputs):  # observ [N, ...], or (observ, first, state) if recurrent.
                version, values = self._weights.latest()
                if version != loaded[0]:
                    shared.load(values)
                    loaded[0] = version
                return shared(*inputs) if isinstance(inputs, tuple) else shared(inputs)

            batch = max_batch or num_actors
            self.batcher = DynamicBatcher(sample, batch, batch_timeout, "inference batcher")
        elif inference != "actor":
            raise ValueError(f"inference={inference!r}: 'actor' or 'dynamic'.")
        self.actors = [self._make_actor(index) for index in range(num_actors)]

    @property
    def restarts(self) -> int:
        """Actors replaced so far."""
        return self._restarts.restarts

    def __enter__(self) -> ActorLearner:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self) -> None:
        for actor in self.actors:
            actor.start()

    def update(self) -> tuple[int, dict[str, float]]:
        """Takes `learner_batch` unrolls, makes one learner step, publishes the weights.

        Writes `impala/policy_lag` (mean), `impala/policy_lag_max`, `impala/queue_size` and
        `impala/actor_restarts` to the default summary writer, if there is one.

        Returns:
          The number of environment steps consumed, and the finished-episode statistics
          of the batch (`mean_return`, `mean_length`, `episodes`), as `simulate` reports.

        Raises:
          RuntimeError: actors failed more than `max_actor_restarts` times.
          TimeoutError: no unroll arrived for `unroll_timeout` seconds.
        """
        unrolls = [self.next_unroll() for _ in range(self._batch)]
        self._learn(concatenate(unrolls))
        lags = [self.version - unroll.version for unroll in unrolls]
        self.version += 1
        self._weights.publish(self._snapshot())
        summary.scalar("impala/policy_lag", float(np.mean(lags)))
        summary.scalar("impala/policy_lag_max", float(np.max(lags)))
        summary.scalar("impala/queue_size", float(self._unrolls.qsize()))
        summary.scalar("impala/actor_restarts", float(self.restarts))
        stats = episode_stats(unrolls, lags)
        steps = sum(unroll.arrays["reward"].size for unroll in unrolls)
        return steps, stats

    def close(self) -> None:
        """Stops the actors and closes their environments; returns within seconds."""
        self._stop.set()
        if self.batcher is not None:  # Actors waiting on it raise, and stop.
            self.batcher.close()
        for actor in self.actors:
            actor.join(_JOIN_TIMEOUT)

    def _make_actor(self, index: int) -> Actor:
        seed = self._seed + 1000 * index + 100_000 * self.restarts
        policy = self._learner.make_behaviour_policy(seed)
        if self.batcher is not None:
            policy = _BatchedPolicy(policy, self.batcher)
        return Actor(
            index,
            self._make_env,
            policy,
            self._unroll_length,
            self._weights,
            self._unrolls,
            self._stop,
            seed,
        )

    def _snapshot(self) -> list[np.ndarray]:
        return [variable.numpy() for variable in self._learner.behaviour_variables()]

    def next_unroll(self) -> Unroll:
        """The learner's side of the queue: the next unroll of any actor.

        While it waits it replaces failed actors (see `update` for what it raises).
        """
        deadline = time.monotonic() + self._unroll_timeout
        while True:
            self._supervise()
            try:
                return self._unrolls.get(timeout=_GET_INTERVAL)
            except queue.Empty:
                pass
            if time.monotonic() > deadline:
                states = ", ".join(
                    f"actor {a.index}: {'running' if a.is_alive() else 'stopped'}"
                    for a in self.actors
                )
                raise TimeoutError(
                    f"No unroll from any actor for {self._unroll_timeout:.0f} s ({states})."
                )

    def _supervise(self) -> None:
        """Replaces actors whose thread ended with an error."""
        for position, actor in enumerate(self.actors):
            if actor.is_alive() or self._stop.is_set():
                continue
            error = actor.error or RuntimeError("the actor thread ended without an error")
            self._restarts.lose()  # Its unroll in progress.
            self._restarts.count(actor.index, first_line(error), error)
            self.actors[position] = self._make_actor(actor.index)
            self.actors[position].start()


class ThreadsTrainer(Trainer):
    """Runner `threads`: an `ActorLearner` whose every `step` is one learner update.

    Reads the `threads` section of the config and `unroll_length` of the algorithm's
    section; the algorithm must be a `Learner` with a behaviour policy (IMPALA is).
    """

    @classmethod
    def check_config(cls, config, algo_cls) -> None:
        """Raises ConfigError when the config or the algorithm cannot run with threads."""
        check_range(
            config.threads,
            "threads",
            {
                "num_actors": (lambda x: x >= 1, ">= 1"),
                "learner_batch": (lambda x: x >= 1, ">= 1"),
                "queue_size": (lambda x: x >= 1, ">= 1"),
                "max_actor_restarts": (lambda x: x >= 0, ">= 0"),
                "inference_batch": (lambda x: x >= 0, ">= 0 (0: all actors)"),
                "inference_timeout": (lambda x: x >= 0, ">= 0 seconds"),
            },
        )
        check_choice("threads.inference", config.threads.inference, ("actor", "dynamic"))
        name = config.algorithm.name
        if getattr(algo_cls, "make_behaviour_policy", None) in (
            None,
            Learner.make_behaviour_policy,
        ):
            raise ConfigError(
                f"runner.name='threads' needs an algorithm with a behaviour policy for its "
                f"actors (a Learner with make_behaviour_policy, as impala); algorithm.name="
                f"{name!r} has none. Use runner.name='local'."
            )
        section = config[algorithm_section(config)]
        if "unroll_length" not in section:
            raise ConfigError(
                f"runner.name='threads' reads unroll_length from the {name!r} section, "
                "which has none."
            )
        if config.env.backend != "gymnasium" or config.train.jit_compile:
            raise ConfigError(
                "runner.name='threads' steps Gymnasium environments in actor threads: it "
                "needs env.backend='gymnasium' and train.jit_compile=false. Use "
                "runner.name='local' for environments in TensorFlow ops."
            )

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """What the algorithm is built with: the spaces of the actors' environments."""
        return EnvSpaces(config.env, config.env.num_envs)

    def __init__(self, config, algo: Learner, batch_env=None, seed: int = 0):
        del batch_env  # The actors build their own.
        threads = config.threads
        self._runner = ActorLearner(
            functools.partial(make_batch_env, config.env, config.env.num_envs),
            algo,
            num_actors=threads.num_actors,
            unroll_length=config[algorithm_section(config)].unroll_length,
            learner_batch=threads.learner_batch,
            queue_size=threads.queue_size,
            max_actor_restarts=threads.max_actor_restarts,
            seed=seed,
            inference=threads.inference,
            max_batch=threads.inference_batch,
            batch_timeout=threads.inference_timeout,
        )
        self._runner.start()

    @property
    def runner(self) -> ActorLearner:
        return self._runner

    def step(self) -> tuple[int, dict]:
        return self._runner.update()

    def close(self) -> None:
        self._runner.close()
