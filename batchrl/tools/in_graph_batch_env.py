"""Puts a batch of Python environments into the TensorFlow graph."""

from __future__ import annotations

import ctypes
import dataclasses
import threading

import numpy as np
import tensorflow as tf

from batchrl.tools.batch_env import check_finite
from batchrl.tools.in_graph_env import InGraphEnv


class InGraphBatchEnv(InGraphEnv):
    """A `BatchEnv` (or anything with its interface) stepped from inside the graph.

    `step` and `reset` call the batch through `tf.numpy_function`, so they work inside
    `tf.function` (not under XLA: use an environment written in TensorFlow ops for that).
    Observations are cast to float32, but frames (a Box of uint8) stay uint8 (see
    `observ_dtype`); rewards are cast to float32. A NaN or infinite observation or reward
    raises an error that names the environment index. The infos of the latest step are
    kept in `self.infos` for inspection from Python.
    """

    autograph = False  # Its graph side has no Python control flow on tensors.

    def __init__(self, batch_env, seed: int | None = None, name: str | None = None):
        """Creates the variables for the batch.

        Args:
          batch_env: a `BatchEnv`, or an object with its `step`, `reset`, `len`,
            `observation_space` and `action_space`.
          seed: when given, environment i is reset once with seed `seed + i` here, which
            seeds its random stream for all later episodes.
          name: module name.
        """
        super().__init__(
            len(batch_env), batch_env.observation_space, batch_env.action_space, name=name
        )
        self._batch_env = batch_env
        self._observ_shape = tuple(batch_env.observation_space.shape)
        self._observ_size = int(np.prod(self._observ_shape))
        # A plain holder: assigning a list to a tf.Module attribute wraps it for
        # checkpoint tracking, which costs more than a whole environment step.
        self._latest = _Latest(infos=[{} for _ in range(len(batch_env))])
        if seed is not None:
            batch_env.reset(seed=seed)

    @property
    def infos(self) -> list[dict]:
        """The info dicts of the latest step, one per environment."""
        return self._latest.infos

    @property
    def batch_env(self):
        """The wrapped Python batch environment."""
        return self._batch_env

    def close(self) -> None:
        """Closes the wrapped batch environment."""
        self._batch_env.close()

    def _step(self, action):
        if self.observ_dtype != tf.float32:
            return self._step_frames(action)
        # One packed float32 output [B, observ size + 3] instead of four: every output of
        # a numpy_function costs a conversion, and this call runs once per step.
        with tf.control_dependencies(self._after_last_call()):
            packed = tf.numpy_function(
                self._step_numpy, [action], tf.float32, name="batch_env_step"
            )
        batch_size = len(self)
        size = int(np.prod(self._observ_shape))
        packed.set_shape([batch_size, size + 3])
        observ = tf.reshape(packed[:, :size], (batch_size,) + self._observ_shape)
        reward = packed[:, size]
        terminated = tf.cast(packed[:, size + 1], tf.bool)
        truncated = tf.cast(packed[:, size + 2], tf.bool)
        return observ, reward, terminated, truncated

    def _step_frames(self, action):
        """`_step` for uint8 frames: the frames, and reward and flags packed as float32."""
        with tf.control_dependencies(self._after_last_call()):
            observ, packed = tf.numpy_function(
                self._step_frames_numpy,
                [action],
                [self.observ_dtype, tf.float32],
                name="batch_env_step",
            )
        batch_size = len(self)
        observ.set_shape((batch_size,) + self._observ_shape)
        packed.set_shape([batch_size, 3])
        terminated = tf.cast(packed[:, 1], tf.bool)
        truncated = tf.cast(packed[:, 2], tf.bool)
        return observ, packed[:, 0], terminated, truncated

    def _reset(self, indices):
        with tf.control_dependencies(self._after_last_call()):
            observ = tf.numpy_function(
                self._reset_numpy, [indices], self.observ_dtype, name="batch_env_reset"
            )
        observ.set_shape((None,) + self._observ_shape)
        return observ

    def _after_last_call(self) -> list:
        """Control inputs that order a call of the batch after every earlier one.

        Automatic control dependencies order a `tf.numpy_function`, which takes no variable,
        against other such calls but not against a `tf.cond` that writes variables, such as
        a reset of some environments: a step could run before that reset or during it. Every
        step and reset writes `done`, and reading it waits for the latest of them.
        """
        if tf.executing_eagerly():
            return []
        return [self.done.read_value()]

    def _step_numpy(self, action):
        _keep_thread_state()
        observ, reward, terminated, truncated, infos = self._batch_env.step(action)
        self._latest.infos = infos
        packed = np.empty((len(reward), self._observ_size + 3), np.float32)
        packed[:, : self._observ_size] = np.reshape(observ, (len(reward), -1))
        packed[:, -3] = reward
        packed[:, -2] = terminated
        packed[:, -1] = truncated
        if not np.isfinite(packed).all():
            check_finite("observation", packed[:, : self._observ_size], "step")
            check_finite("reward", packed[:, -3], "step")
        return packed

    def _step_frames_numpy(self, action):
        _keep_thread_state()
        observ, reward, terminated, truncated, infos = self._batch_env.step(action)
        self._latest.infos = infos
        packed = np.stack([reward, terminated, truncated], axis=1).astype(np.float32)  # [B, 3]
        check_finite("reward", packed[:, 0], "step")
        return np.asarray(observ, self.observ_dtype.as_numpy_dtype), packed

    def _reset_numpy(self, indices):
        _keep_thread_state()
        dtype = self.observ_dtype.as_numpy_dtype
        if len(indices) == 0:
            return np.zeros((0,) + self._observ_shape, dtype)
        observ = np.asarray(self._batch_env.reset(indices), dtype)
        check_finite("observation", observ, "reset", indices)
        return observ


@dataclasses.dataclass
class _Latest:
    infos: list[dict]


_pinned = threading.local()


def _keep_thread_state() -> None:
    """Keeps the Python state of the TensorFlow thread that runs a numpy_function.

    TensorFlow runs a numpy_function on a thread of its own pool, which takes the GIL with
    `PyGILState_Ensure` and gives it back with `PyGILState_Release`. For a thread Python
    did not start, that pair creates and destroys a thread state on every call, which
    made each call cost about 85 us instead of 27 us (measured here). One extra, never
    released `PyGILState_Ensure` per thread keeps its thread state alive; the GIL is still
    released after every call. The pool has a fixed number of threads, so this holds at
    most one small thread state per thread.
    """
    if not getattr(_pinned, "done", False):
        ctypes.pythonapi.PyGILState_Ensure()
        _pinned.done = True
