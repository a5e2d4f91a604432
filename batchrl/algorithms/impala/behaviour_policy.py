"""IMPALA's acting part: the policy copy an actor samples with and loads weights into."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import tensorflow as tf

from batchrl.algorithms.impala import rewards
from batchrl.core import BehaviourPolicy
from batchrl.networks import (
    MLP,
    PolicyHead,
    make_core_network,
    make_shared_body_network,
    make_torso,
)
from batchrl.parts.normalizer import StreamingNormalizer


class ImpalaBehaviourPolicy(tf.Module, BehaviourPolicy):
    """The acting part of IMPALA: it samples actions and keeps the network outputs.

    The learner acts through one (`IMPALA.actor`); with runner `threads` each actor has a
    copy, loads the learner's weights into it between unrolls (`load`), and completes
    each unroll for the learner (`finish_unroll`): clipped rewards, each agent's running
    discounted return, and the log standard deviation that acted.

    With `network.core` it is recurrent: `initial_state(B)` gives zero states [B, S] and
    `policy(observ, first, state)` returns the new states too; whoever drives it (the
    `UnrollCollector`) carries them. With `network.core_inputs: [last_action]` the states
    end in the one-hot of the action just sampled, which the next step's core reads; with
    `last_reward`, the carrier writes each step's reward in with `carry_reward`.
    """

    def __init__(
        self,
        cfg,
        network,
        observ_shape,
        action_space,
        seed: int,
        observ_dtype: tf.DType = tf.float32,
    ):
        super().__init__(name="behaviour_policy")
        self._cfg = cfg
        self._observ_dtype = tf.as_dtype(observ_dtype)  # The environment's: uint8 frames.
        self.observ_normalizer = StreamingNormalizer(
            observ_shape, center=True, scale=True, clip=cfg.observ_clip, name="observ"
        )
        self.head = PolicyHead(action_space, network.squash_mean, network.init_log_std)
        dummy = tf.zeros((1,) + tuple(observ_shape))
        discrete = isinstance(action_space, gym.spaces.Discrete)
        num_actions = self.head.size if discrete else None
        core = make_core_network(network, self.head.size, "policy", num_actions)
        self.recurrent = core is not None
        shared = make_shared_body_network(network, self.head.size, "policy")
        # With a shared body (`network.shared_body`) the policy holds the baseline too.
        self.shared_body = shared is not None
        if self.recurrent:
            self.policy = core
            self.policy(dummy, core.initial_state(1))
        elif self.shared_body:
            self.policy = shared
            self.policy.with_value(dummy)  # Builds the baseline's variables as well.
        else:
            self.policy = MLP(
                network.policy_layers,
                self.head.size,
                network.activation,
                0.01,
                "policy",
                network.conv_filters,
                torso=make_torso(network),
            )
            self.policy(dummy)
        self._sample_dtype = self.head.sample_spec()[1]
        self._rng = tf.random.Generator.from_seed(seed)
        self._sample_numpy = tf.function(self.sample)
        self._discounted = None  # Each agent's discounted return across unrolls [B].

    @property
    def log_std(self):
        """The Gaussian's log standard deviation [size]; None for discrete actions."""
        log_std = getattr(self.head, "log_std", None)
        return None if log_std is None else log_std.numpy()

    def acting_variables(self) -> list[tf.Variable]:
        """The normalizer's, head's and policy network's variables, in `load`'s order."""
        modules = (self.observ_normalizer, self.head, self.policy)
        return [variable for module in modules for variable in module.variables]

    def load(self, weights) -> None:
        """Assigns the values of another copy's `acting_variables()` to this one."""
        for variable, value in zip(self.acting_variables(), weights, strict=True):
            variable.assign(value)

    def normalize(self, observ):
        """Observations as the networks see them (normalized if `normalize_observ`)."""
        if not self._cfg.normalize_observ:
            return observ
        return self.observ_normalizer.normalize(observ)

    def initial_state(self, batch_size: int) -> np.ndarray | None:
        """Zero core states [B, S] for a recurrent policy; None for a feed-forward one."""
        if not self.recurrent:
            return None
        return np.zeros([batch_size, self.policy.state_size], np.float32)

    def sample(self, observ, first=None, state=None):
        """Samples for raw observations [N, ...]: (environment action, sample, output),
        and with a core the new states [N, S] from `state` [N, S], reset where `first` [N]."""
        observ = self.normalize(observ)
        if self.recurrent:
            output, _, state = self.policy(observ, state, first)  # [N, size], [N], [N, S]
        else:
            output = self.policy(observ)  # [N, size]
        seed = tf.cast(self._rng.make_seeds(1)[:, 0], tf.int32)
        sample = tf.cast(self.head(output).sample(seed=seed), self._sample_dtype)
        result = (self.head.to_env_action(sample), sample, output)
        if not self.recurrent:
            return result
        return (*result, self.policy.with_last_action(state, sample))

    def __call__(self, observ, first=None, state=None):
        """`sample` as one graph call on NumPy observations, returning NumPy arrays; a
        recurrent policy takes and returns the states as well."""
        observ = tf.convert_to_tensor(np.asarray(observ, self._observ_dtype.as_numpy_dtype))
        if not self.recurrent:
            return tuple(t.numpy() for t in self._sample_numpy(observ))
        first = tf.convert_to_tensor(np.asarray(first, bool))
        state = tf.convert_to_tensor(np.asarray(state, np.float32))
        return tuple(t.numpy() for t in self._sample_numpy(observ, first, state))

    def carry_reward(self, state: np.ndarray, reward: np.ndarray) -> np.ndarray:
        """The states [B, S] with the step's rewards [B], clipped as the learner clips
        them (`reward_clipping`), in their last-reward column; unchanged without one."""
        if not (self.recurrent and self.policy.last_reward):
            return state
        state = np.array(state, np.float32)
        clipped = rewards.clip_rewards(tf.constant(reward, tf.float32), self._cfg.reward_clipping)
        state[:, -1] = clipped.numpy()
        return state

    def finish_unroll(self, arrays: dict) -> dict:
        """Adds what `IMPALA.learn` needs to an actor's unroll of NumPy arrays [T, B, ...].

        Rewards are clipped (`reward_clipping`); `discounted_return` [T, B] is each
        agent's discounted return of clipped rewards after each step, carried over from
        the previous unroll and restarting at 0 after episode ends; `behaviour_log_std`
        [size] is the Gaussian's log standard deviation (Box actions only).
        """
        arrays = dict(arrays)
        arrays["reward"] = rewards.clip_rewards(arrays["reward"], self._cfg.reward_clipping).numpy()
        ended = arrays["terminated"] | arrays["truncated"]  # [T, B]
        if self._discounted is None:
            self._discounted = np.zeros(arrays["reward"].shape[1])
        result = np.empty_like(arrays["reward"], np.float64)
        for t, reward in enumerate(arrays["reward"]):
            result[t] = self._discounted = self._discounted * self._cfg.discount + reward
            self._discounted = np.where(ended[t], 0.0, self._discounted)
        arrays["discounted_return"] = result
        if self.log_std is not None:
            arrays["behaviour_log_std"] = self.log_std
        return arrays
