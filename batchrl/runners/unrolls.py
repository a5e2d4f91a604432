"""The actor core that threads and Ray actors share: a batch of environments making unrolls."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from batchrl.core import BehaviourPolicy
from batchrl.tools.batch_env import BatchEnv, check_finite


@dataclass
class Unroll:
    """T steps of an actor's B environments, time-major, and where they came from."""

    arrays: dict[str, np.ndarray]  # [T, B, ...] each, plus behaviour_log_std [size].
    actor: int
    version: int  # The learner version whose weights acted.
    returns: list[float] = field(default_factory=list)  # Episodes finished in the unroll.
    lengths: list[int] = field(default_factory=list)


class UnrollCollector:
    """One actor's environments: steps them, resets ended episodes and makes unrolls.

    It is the part of an actor that does not depend on where the actor runs: an actor
    thread (`batchrl.runners.threads`) and a Ray actor (`batchrl.runners.ray`) both drive
    one. With actor-side inference, `unroll(policy, T)` acts with the actor's own policy
    copy; with dynamic batching on Ray the learner chooses the actions and calls `step`
    with them, one batched step at a time.

    Environments are reset as their episodes end; the transition keeps the final
    observation as `next_observ`, and `observ` is then the first of the next episode.
    Observations are float32, but frames (a Box of uint8) stay uint8.

    A recurrent policy (one whose `initial_state` is not None) gets each environment's
    state and whether its step begins an episode, and returns the new states; the
    collector carries them across unrolls, zeroes them where episodes end, and adds to
    each unroll the states it started from (`core_state` [B, S]) and `first` [T, B].
    """

    def __init__(self, batch_env: BatchEnv, seed: int):
        """Resets `batch_env` (which the collector then owns and closes) with `seed`."""
        self.batch_env = batch_env
        frames = batch_env.observation_space.dtype == np.uint8
        self._observ_dtype = np.uint8 if frames else np.float32
        self.observ = batch_env.reset(seed=seed).astype(self._observ_dtype)  # [B, ...]
        size = len(batch_env)
        self._episode_return = np.zeros(size)
        self._episode_length = np.zeros(size, int)
        self._returns: list[float] = []
        self._lengths: list[int] = []
        self.first = np.ones(size, bool)  # Whether the next step begins an episode.
        self.state: np.ndarray | None = None  # A recurrent policy's states [B, S].

    def __len__(self) -> int:
        return len(self.batch_env)

    def step(self, action) -> dict[str, np.ndarray]:
        """One batched step with `action` [B, ...]; returns the transition [B, ...] each.

        The transition holds `observ`, `next_observ`, `reward`, `terminated` and
        `truncated`. Episodes that ended are counted (see `take_episodes`) and reset.

        Raises:
          ValueError: an observation or reward is not finite (names which).
        """
        observ = self.observ
        next_observ, reward, terminated, truncated, _ = self.batch_env.step(action)
        next_observ = next_observ.astype(self._observ_dtype, copy=False)  # MinAtar's are bool.
        check_finite("observation", next_observ, "step")
        check_finite("reward", reward, "step")
        self._episode_return += reward
        self._episode_length += 1
        self.observ = next_observ
        done = terminated | truncated
        if done.any():
            ended = np.flatnonzero(done)
            self._returns.extend(self._episode_return[ended].tolist())
            self._lengths.extend(self._episode_length[ended].tolist())
            self._episode_return[ended] = 0.0
            self._episode_length[ended] = 0
            self.observ = next_observ.copy()  # next_observ keeps the final observations.
            self.observ[ended] = self.batch_env.reset(ended)
        return {
            "observ": observ,
            "next_observ": next_observ,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
        }

    def take_episodes(self) -> tuple[list[float], list[int]]:
        """The returns and lengths of the episodes finished since the last call."""
        episodes = self._returns, self._lengths
        self._returns, self._lengths = [], []
        return episodes

    def unroll(self, policy: BehaviourPolicy, length: int) -> tuple[dict, list, list]:
        """T = `length` steps acting with `policy`, completed by its `finish_unroll`.

        Returns:
          The arrays [T, B, ...], and the returns and lengths of the episodes finished.
        """
        if self.state is None:
            self.state = policy.initial_state(len(self))  # None for feed-forward policies.
        start, steps = self.state, []
        for _ in range(length):
            if start is None:
                action, sample, output = policy(self.observ)
                steps.append(dict(self.step(action), sample=sample, output=output))
                continue
            action, sample, output, self.state = policy(self.observ, self.first, self.state)
            step = dict(self.step(action), sample=sample, output=output, first=self.first)
            self.first, self.state = carry_state(step, self.state, policy)
            steps.append(step)
        arrays = policy.finish_unroll(stack(steps))
        if start is not None:
            arrays["core_state"] = start  # [B, S]
        return (arrays, *self.take_episodes())

    def close(self) -> None:
        self.batch_env.close()


def carry_state(
    transition: dict, state: np.ndarray, policy: BehaviourPolicy
) -> tuple[np.ndarray, np.ndarray]:
    """After a step, whether the next one begins an episode [B], and the core states [B, S]
    to act from: `state` with the step's reward (`policy.carry_reward`), zeros where the
    step's episode ended (terminated or truncated)."""
    state = policy.carry_reward(state, transition["reward"])
    first = transition["terminated"] | transition["truncated"]
    return first, np.where(first[:, None], 0.0, state).astype(np.float32)


def stack(steps: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Time-major arrays [T, ...] from T dicts of arrays [...] with the same keys."""
    return {key: np.stack([step[key] for step in steps]) for key in steps[0]}


def concatenate(unrolls: list[Unroll]) -> dict[str, tf.Tensor]:
    """One batch [T, B_1 + ... + B_n, ...] of unrolls, floats as float32.

    `behaviour_log_std` [size] becomes [T, B, size]: each column gets the log standard
    deviation of the copy that acted in it. `core_state` [B_i, S] is concatenated along
    its batch axis: [B_1 + ... + B_n, S].
    """
    batch = {}
    for key, value in unrolls[0].arrays.items():
        if key == "core_state":
            batch[key] = tf.constant(np.concatenate([u.arrays[key] for u in unrolls]), tf.float32)
            continue
        if key == "behaviour_log_std":
            parts = [np.broadcast_to(u.arrays[key], u.arrays["output"].shape) for u in unrolls]
        else:
            parts = [unroll.arrays[key] for unroll in unrolls]
        value = np.concatenate(parts, axis=1)
        if value.dtype.kind == "f":
            value = value.astype(np.float32)
        batch[key] = tf.convert_to_tensor(value)
    return batch


def episode_stats(unrolls: list[Unroll], lags: list[int]) -> dict[str, float]:
    """The finished-episode statistics of a learner batch, as `simulate` reports them."""
    returns = [value for unroll in unrolls for value in unroll.returns]
    lengths = [value for unroll in unrolls for value in unroll.lengths]
    return {
        "mean_return": float(np.mean(returns)) if returns else float("nan"),
        "mean_length": float(np.mean(lengths)) if lengths else float("nan"),
        "episodes": len(returns),
        "policy_lag": float(np.mean(lags)),
    }
