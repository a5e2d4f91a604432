"""The declared interfaces between the layers: Algorithm, Policy, Learner, Trainer."""

from __future__ import annotations

import abc
from typing import Any

import tensorflow as tf


class Algorithm(tf.Module, abc.ABC):
    """A batched algorithm: inference and learning for B agents, one per environment.

    `batchrl.tools.simulate` drives an algorithm inside one graph call. For every step it
    does the following, where `batch_env` is an in-graph batch of B environments:

        reset_indices = where(batch_env.done or reset)            # [K]
        if reset_indices:
            batch_env.reset(reset_indices)
            algo.begin_episodes(reset_indices)
        agent_indices = range(B)                                  # [B]
        observ = batch_env.observ                                 # [B, ...]
        action = algo.perform(agent_indices, observ)              # [B, ...]
        next_observ, reward, terminated, truncated = batch_env.step(action)
        algo.experience(agent_indices, observ, action, reward,
                        terminated, truncated, next_observ)
        done_indices = where(terminated or truncated)             # [K]
        if done_indices:
            algo.end_episodes(done_indices)

    `terminated` marks a terminal state (no value beyond it); `truncated` marks an episode
    cut short, for example by a time limit, whose `next_observ` can still be bootstrapped.
    Every method is called inside `tf.function`, so it must be written with TensorFlow
    ops; state that lives across calls belongs in `tf.Variable`s. Summaries written with
    `tf.summary` are recorded when `simulate` is called with `log=True`.

    The train script (`algorithm.name=package.module:Class`) builds an algorithm as
    `Class(batch_env, config, step, seed=config.train.seed)`, where `step` is the int64
    variable of environment steps, and checkpoints it with `tf.train.Checkpoint`; it
    evaluates and exports it when it is also a `Policy`. Its keys live in the config
    section `config_section`: a registered `batchrl.config.Section` (entry-point group
    `batchrl.sections`), or `config_defaults` (key -> default, the schema of a section of
    your own). `check_config` rejects bad values when the config loads, before anything
    is built or written. `population_class`, if set, is the class that trains
    `train.population` members of the algorithm as one batch. An algorithm whose unit
    of work is not a `simulate` call may define classmethods `make_batch_env(config,
    seed)` and `make_trainer(config, algo, batch_env, seed)` (a `Trainer`), which the train
    script then uses in place of the runner's.
    """

    config_section: str | None = None
    config_defaults: dict[str, Any] | None = None
    population_class: type | None = None
    # The shape of distribution the ray runner gives it (batchrl.runners.ray.SHAPES:
    # samplers, actor_learner, replay_shards, evaluator_pool); None: read from the
    # interfaces it implements.
    distribution: str | None = None
    # Whether the methods need autograph to turn Python `if` and `for` on tensors into
    # graph control flow. An algorithm that writes `tf.cond` and `tf.while_loop` itself
    # sets False, and (with an environment that does too) the training call is traced
    # without autograph, which halves the tracing of a PPO training call.
    autograph: bool = True

    @classmethod
    def check_config(cls, config) -> None:
        """Raises `batchrl.config.ConfigError` for values of its section it cannot train with."""

    @abc.abstractmethod
    def begin_episodes(self, agent_indices: tf.Tensor) -> None:
        """Starts new episodes for the agents at int32 `agent_indices` [K]."""

    @abc.abstractmethod
    def perform(self, agent_indices: tf.Tensor, observ: tf.Tensor) -> tf.Tensor:
        """Returns actions [K, ...] for the observations [K, ...] of `agent_indices` [K]."""

    @abc.abstractmethod
    def experience(
        self,
        agent_indices: tf.Tensor,
        observ: tf.Tensor,
        action: tf.Tensor,
        reward: tf.Tensor,
        terminated: tf.Tensor,
        truncated: tf.Tensor,
        next_observ: tf.Tensor,
    ) -> None:
        """Receives one transition for each agent in `agent_indices` [K].

        Args:
          agent_indices: int32 [K].
          observ: float32 [K, ...], the observation the action was chosen for.
          action: [K, ...], the action taken.
          reward: float32 [K].
          terminated: bool [K], the step reached a terminal state.
          truncated: bool [K], the episode was cut short after this step.
          next_observ: float32 [K, ...], the observation after the step (the final one
            when the episode ended).
        """

    @abc.abstractmethod
    def end_episodes(self, agent_indices: tf.Tensor) -> None:
        """Ends the episodes of the agents at int32 `agent_indices` [K]."""

    # Optional: updates on a schedule of steps.

    def steps_to_update(self) -> tf.Tensor | None:
        """The batched steps left before a scheduled update, or None (no such schedule).

        An algorithm that learns every fixed number of steps (PPO's and IMPALA's rollouts)
        returns an int32 scalar tensor: 0 when the update is due, otherwise how many more
        `experience` calls fill the rollout. Its `experience` then only records, and
        `simulate` calls `update` as soon as the count reaches 0, outside the loop of steps:

            while steps are left:
                run min(algo.steps_to_update(), steps left) steps (the loop above)
                if algo.steps_to_update() == 0:
                    algo.update()

        so the update is not a `tf.cond` inside every step. Under XLA such a branch made
        every step copy the networks' and the optimizer's variables (about 100 of the 160
        kernels of a CartPole step). Whoever drives `experience` without `simulate` calls
        `update` when the count reaches 0.
        """
        return None

    def update(self) -> None:
        """Learns from the steps recorded since the last update (see `steps_to_update`)."""
        raise NotImplementedError(f"{type(self).__name__} has no scheduled update.")


class Policy(abc.ABC):
    """What evaluation, export and videos use of a trained algorithm: its actions.

    The train loop evaluates a `Policy` through `batchrl.training.PolicyEvaluator`, exports it
    with `batchrl.training.export_policy` and `visualize` renders it:

        if policy.recurrent:
            state = policy.initial_state(N)                          # [N, S]
            action, state = policy.act_recurrent(observ, state)      # [N, ...], [N, S]
        else:
            action = policy.act(observ)                              # [N, ...]

    Observations are raw (the policy applies its own normalization) and actions are what
    the environment takes. Methods are called inside `tf.function`.
    """

    recurrent: bool = False

    @abc.abstractmethod
    def act(self, observ: tf.Tensor, deterministic: bool = True) -> tf.Tensor:
        """Environment actions [N, ...] for raw observations [N, ...] (feed-forward)."""

    def initial_state(self, batch_size) -> tf.Tensor:
        """The state [N, S] of a recurrent policy at the start of an episode."""
        raise NotImplementedError(f"{type(self).__name__} is not recurrent.")

    def act_recurrent(self, observ, state, deterministic: bool = True):
        """Actions [N, ...] and new states [N, S] for raw observations and states."""
        raise NotImplementedError(f"{type(self).__name__} is not recurrent.")

    def observe_reward(self, state, reward) -> tf.Tensor:
        """A recurrent policy's states [N, S] after the environments' step that followed
        `act_recurrent` gave `reward` [N]: a policy that reads the last reward keeps it
        in its state. The default: the states unchanged."""
        return state


class BehaviourPolicy(abc.ABC):
    """A learner's acting part, copied to actors that collect unrolls elsewhere.

    An actor (a thread of `batchrl.runners.threads`, or a remote worker) drives it so:

        policy = learner.make_behaviour_policy(seed)
        while True:
            policy.load(latest_weights)                   # learner.behaviour_variables()
            for t in range(T):
                action, sample, output = policy(observ)   # NumPy [B, ...] each
                ...step the environments, keep the transition...
            unroll = policy.finish_unroll(arrays)         # [T, B, ...] -> what learn() takes

    A recurrent policy's `initial_state(B)` is not None; the actor then carries the
    states: `action, sample, output, state = policy(observ, first, state)`, with `first`
    [B] true where the step begins an episode, and after the step
    `state = policy.carry_reward(state, reward)` (see `batchrl.runners.unrolls`).
    """

    @abc.abstractmethod
    def __call__(self, observ) -> tuple[Any, Any, Any]:
        """(environment action, raw sample, network output) for NumPy observations [B, ...]."""

    @abc.abstractmethod
    def load(self, weights) -> None:
        """Assigns the values of the learner's `behaviour_variables()`, in order."""

    def finish_unroll(self, arrays: dict) -> dict:
        """Completes an unroll of time-major arrays [T, B, ...] for the learner; default: as is."""
        return arrays

    def initial_state(self, batch_size: int):
        """A recurrent policy's states [B, S] at episode starts; None (the default): none."""
        return None

    def carry_reward(self, state, reward):
        """A recurrent policy's NumPy states [B, S] after a step that gave `reward` [B]: a
        policy that reads the last reward keeps it in its state. The default: unchanged."""
        return state


class Learner(abc.ABC):
    """Learns from batches of experience collected elsewhere.

    A runner that separates acting from learning drives it so:

        policies = [learner.make_behaviour_policy(seed=i) for i in range(num_actors)]
        while training:
            batch = next_batch_of_unrolls()      # time-major [T, B, ...], from the actors
            learner.learn(batch)
            publish([v.numpy() for v in learner.behaviour_variables()])

    `learn` alone is what an algorithm's own update calls; the other two methods are
    needed only by runners with actors (runner `threads`), and a learner without them
    cannot be run there.
    """

    @abc.abstractmethod
    def learn(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """One update on a batch of time-major tensors [T, B, ...]; returns its metrics."""

    def behaviour_variables(self) -> list[tf.Variable]:
        """The variables actors copy into their behaviour policies, in `load`'s order."""
        raise NotImplementedError(f"{type(self).__name__} has no behaviour policy for actors.")

    def make_behaviour_policy(self, seed: int) -> BehaviourPolicy:
        """A new copy of the acting part, for one actor."""
        raise NotImplementedError(f"{type(self).__name__} has no behaviour policy for actors.")


class RolloutLearner(abc.ABC):
    """An on-policy algorithm whose rollouts copies of it collect elsewhere (runner ray).

    Each sampler actor builds a copy of the algorithm from the same config for its own
    B_i environments. For every update the runner drives them so:

        shared = ([v.numpy() for v in learner.acting_variables()],
                  [n.variables for n in learner.statistics()], learner.rng.state)
        # in actor i, with the copy:
        load shared into copy (its random stream keyed apart for i > 0)
        simulate(env_i, copy's perform, experience and episodes only, T steps)
        rollout_i = copy.take_rollout()                     # [T, B_i, ...]
        # back in the learner:
        merge the copies' statistics into learner.statistics()
        learner.rng.reset(actor 0's state)
        learner.learn(rollouts concatenated along B)        # [T, sum B_i, ...]

    With one actor this is the algorithm's own loop of collecting and `update`.
    """

    @abc.abstractmethod
    def acting_variables(self) -> list[tf.Variable]:
        """The variables `perform` reads that learning changes, in a fixed order."""

    @abc.abstractmethod
    def statistics(self) -> list:
        """The `StreamingNormalizer`s that `experience` updates (observations, rewards)."""

    @property
    @abc.abstractmethod
    def rng(self) -> tf.random.Generator:
        """The random stream of acting (and of learning, e.g. shuffling)."""

    @abc.abstractmethod
    def take_rollout(self) -> dict[str, tf.Tensor]:
        """The full rollout [T, B, ...] as `learn` takes it; the next one starts empty."""


class Trainer(abc.ABC):
    """One unit of training work per call, however it is spread (a runner).

    The train loop (`batchrl.training.train_loop`) drives it and owns counters, summaries,
    evaluation and checkpoints:

        with trainer:
            while step < total_steps:
                env_steps, stats = trainer.step()     # one graph call, or one learner update
                step += env_steps
                ...summaries, evaluation, checkpoints...

    Attributes:
      in_graph_logging: `step` writes `simulate/*` summaries itself; otherwise the loop
        writes them from the returned statistics.
      jit_compile: `step` is an XLA computation, which records no summaries, so the
        loop calls it without a default summary writer.
      members: M members of a population (`train.population`) train in each `step`; the
        statistics are then [M] arrays, and the environment steps each member's.
    """

    in_graph_logging: bool = False
    jit_compile: bool = False
    members: int = 1  # M > 1: a population, whose statistics and summaries are [M].

    @abc.abstractmethod
    def step(self) -> tuple[int, dict[str, Any]]:
        """Trains; returns the environment steps taken and the finished-episode statistics.

        The statistics hold `episodes`, `mean_return` and `mean_length` (NaN when no
        episode finished), as `simulate` returns them.
        """

    def close(self) -> None:
        """Stops whatever the trainer started (threads, processes); safe to call twice."""
        return None

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
