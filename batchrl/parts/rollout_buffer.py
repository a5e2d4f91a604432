"""Time-major experience buffers in variables: fixed-length rollouts and whole episodes."""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf

# A buffer's layout: key -> (shape of one agent's value, dtype).
Spec = Mapping[str, tuple[tuple[int, ...], tf.DType]]


def transition_spec(
    observ_shape, observ_dtype, sample_shape, sample_dtype, output_size: int, first: bool
) -> dict[str, tuple]:
    """The layout of an on-policy agent's step: its observation and the next (of
    `observ_dtype`), the raw `sample` its policy drew and the policy `output` it came from,
    the reward, `terminated` and `truncated`, and with `first` whether the step began an
    episode (what a recurrent policy needs to replay its core). PPO's rollouts, a PPO
    population's and IMPALA's unrolls store it."""
    spec = {
        "observ": (tuple(observ_shape), observ_dtype),
        "next_observ": (tuple(observ_shape), observ_dtype),
        "sample": (tuple(sample_shape), sample_dtype),
        "output": ((output_size,), tf.float32),
        "reward": ((), tf.float32),
        "terminated": ((), tf.bool),
        "truncated": ((), tf.bool),
    }
    if first:
        spec["first"] = ((), tf.bool)
    return spec


def _zeros(shape, dtype=tf.float32, name=None):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False, name=name)


class RolloutBuffer(tf.Module):
    """A rollout [T, B, ...] that every agent fills one step at a time, all agents at once.

        buffer = RolloutBuffer(T, B, {"observ": ((O,), tf.float32), ...})
        for each step:                               # inside the graph
            full = buffer.append(agent_indices, {"observ": observ, ...})   # [B, ...] each
            if full:
                learn(buffer.read())                 # {"observ": [T, B, O], ...}
                buffer.clear()

    PPO's rollouts (update_mode 'steps') and IMPALA's unrolls are such buffers. The
    position `step` and the data survive `tf.train.Checkpoint`.
    """

    def __init__(self, length: int, batch_size: int, spec: Spec, name: str = "rollout"):
        super().__init__(name=name)
        self.length = int(length)
        self.batch_size = int(batch_size)
        with self.name_scope:
            self.data = {
                key: _zeros((self.length, self.batch_size) + tuple(shape), dtype, key)
                for key, (shape, dtype) in spec.items()
            }  # [T, B, ...] each
            self.step = tf.Variable(0, trainable=False, name="step")

    def append(self, agent_indices: tf.Tensor, values: Mapping[str, tf.Tensor]) -> tf.Tensor:
        """Writes one step [K, ...] of `agent_indices` [K]; returns whether T steps are in."""
        time = tf.fill(tf.shape(agent_indices), self.step.read_value())  # [K]
        rows = tf.stack([time, agent_indices], 1)  # [K, 2]
        writes = [self.data[key].scatter_nd_update(rows, value) for key, value in values.items()]
        with tf.control_dependencies(writes):
            self.step.assign_add(1)
        return self.step.read_value() >= self.length

    def read(self) -> dict[str, tf.Tensor]:
        """The rollout {key: [T, B, ...]}."""
        return {key: value.read_value() for key, value in self.data.items()}

    def clear(self) -> None:
        """Starts the next rollout at step 0."""
        self.step.assign(0)


class EpisodeBuffer(tf.Module):
    """Whole episodes of B agents, gathered into a time-major memory [L, slots, ...].

        buffer.begin(agent_indices)                  # episodes start: rows restart at 0
        buffer.append(agent_indices, step)           # one step of running episodes
        count = buffer.finish(agent_indices)         # episodes end: copied to memory
        if count >= N:
            batch, lengths = buffer.read(count)      # {key: [L, count, ...]}, [count]
            buffer.clear()

    Steps beyond `length` are dropped; an episode cut there ends as a truncation (its last
    kept step gets `truncated` true unless it is `terminated`), so that it bootstraps. The
    memory holds `slots` episodes: enough for N plus one batch of B that end together.
    This is BatchPPO's memory (update_mode 'episodes').
    """

    def __init__(self, length: int, batch_size: int, slots: int, spec: Spec, name="episodes"):
        super().__init__(name=name)
        self.length = int(length)
        with self.name_scope:
            self.running = {
                key: _zeros((self.length, batch_size) + tuple(shape), dtype, key)
                for key, (shape, dtype) in spec.items()
            }  # [L, B, ...]
            self.running_length = _zeros([batch_size], tf.int32, "running_length")  # [B]
            self.memory = {
                key: _zeros((self.length, slots) + tuple(shape), dtype, key)
                for key, (shape, dtype) in spec.items()
            }  # [L, slots, ...]
            self.memory_length = _zeros([slots], tf.int32, "memory_length")  # [slots]
            self.count = tf.Variable(0, trainable=False, name="count")

    def begin(self, agent_indices: tf.Tensor) -> None:
        """Restarts the running episodes of `agent_indices` [K]."""
        self.running_length.scatter_nd_update(agent_indices[:, None], tf.zeros_like(agent_indices))

    def append(self, agent_indices: tf.Tensor, step: Mapping[str, tf.Tensor]) -> None:
        """Appends one step [K, ...] to each agent's running episode, up to `length`."""
        step = dict(step)
        position = tf.gather(self.running_length, agent_indices)  # [K]
        keep = position < self.length  # [K]
        if "truncated" in step and "terminated" in step:
            cut = tf.logical_and(position == self.length - 1, tf.logical_not(step["terminated"]))
            step["truncated"] = tf.logical_or(step["truncated"], cut)
        rows = tf.boolean_mask(tf.stack([position, agent_indices], 1), keep)  # [K', 2]
        for key, value in step.items():
            self.running[key].scatter_nd_update(rows, tf.boolean_mask(value, keep))
        self.running_length.scatter_nd_add(agent_indices[:, None], tf.cast(keep, tf.int32))

    def finish(self, agent_indices: tf.Tensor) -> tf.Tensor:
        """Moves the episodes of `agent_indices` [K] into memory; returns the count held."""
        count = tf.shape(agent_indices)[0]
        slots = self.count + tf.range(count)  # [K]
        for key, running in self.running.items():
            swap = [1, 0] + list(range(2, running.shape.rank))
            episodes = tf.gather(running, agent_indices, axis=1)  # [L, K, ...]
            memory = tf.transpose(self.memory[key], swap)  # [slots, L, ...]
            memory = tf.tensor_scatter_nd_update(
                memory, slots[:, None], tf.transpose(episodes, swap)
            )
            self.memory[key].assign(tf.transpose(memory, swap))
        lengths = tf.gather(self.running_length, agent_indices)  # [K]
        self.memory_length.scatter_nd_update(slots[:, None], lengths)
        self.count.assign_add(count)
        return self.count.read_value()

    def read(self, columns) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
        """The first `columns` episodes {key: [L, columns, ...]} and their lengths [columns]."""
        data = {key: value[:, :columns] for key, value in self.memory.items()}
        return data, self.memory_length[:columns]

    def clear(self) -> None:
        """Empties the memory (running episodes go on)."""
        self.count.assign(0)
