"""Recurrent cells, the episode reset of their state, and the networks built on them.

Written here rather than taken from Keras: Keras 3 layers are not `tf.Module`s, so their
variables would escape `tf.Module.trainable_variables` and need separate checkpoint
tracking; these cells are a few lines each and use the same `Linear` layers as the MLPs.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.networks.mlp import MLP, Linear, batch_apply


class GRUCell(tf.Module):
    """Gated recurrent unit (Cho et al. 2014), with the reset gate applied after the
    hidden projection as in cuDNN and Keras (`reset_after=True`):

        z = sigmoid(x Wz + h Uz + bz),   r = sigmoid(x Wr + h Ur + br)
        n = tanh(x Wn + bn + r * (h Un + cn)),   h' = (1 - z) * n + z * h
    """

    def __init__(self, units: int, name: str | None = None):
        super().__init__(name=name)
        self.units = units
        self.state_size = units
        self.input = Linear(3 * units, name="input")
        self.hidden = Linear(3 * units, name="hidden")

    def __call__(self, x, state):
        """Returns the output [K, units] and the new state [K, units]."""
        xz, xr, xn = tf.split(self.input(x), 3, axis=-1)
        hz, hr, hn = tf.split(self.hidden(state), 3, axis=-1)
        z = tf.sigmoid(xz + hz)
        r = tf.sigmoid(xr + hr)
        n = tf.tanh(xn + r * hn)
        state = (1.0 - z) * n + z * state
        return state, state


class LSTMCell(tf.Module):
    """Long short-term memory (Hochreiter and Schmidhuber 1997) with a forget-gate bias of 1
    (Jozefowicz et al. 2015). The state is [h, c] concatenated: [K, 2 * units].

        i, f, g, o = split(x W + h U + b);  c' = sigmoid(f + 1) * c + sigmoid(i) * tanh(g)
        h' = sigmoid(o) * tanh(c')
    """

    def __init__(self, units: int, name: str | None = None):
        super().__init__(name=name)
        self.units = units
        self.state_size = 2 * units
        self.input = Linear(4 * units, name="input")
        self.hidden = Linear(4 * units, name="hidden")

    def __call__(self, x, state):
        """Returns the output h' [K, units] and the new state [h', c'] [K, 2 * units]."""
        h, c = tf.split(state, 2, axis=-1)
        i, f, g, o = tf.split(self.input(x) + self.hidden(h), 4, axis=-1)
        c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(g)
        h = tf.sigmoid(o) * tf.tanh(c)
        return h, tf.concat([h, c], -1)


CELLS = {"gru": GRUCell, "lstm": LSTMCell}


class RecurrentNetwork(tf.Module):
    """A recurrent cell on the observation, then an MLP to the outputs."""

    def __init__(
        self,
        cell: str,
        units: int,
        hidden: Sequence[int],
        output: int,
        activation: str = "tanh",
        output_gain: float = 1.0,
        name: str | None = None,
    ):
        super().__init__(name=name)
        if cell not in CELLS:
            raise ValueError(f"Unknown cell {cell!r}; valid choices are {sorted(CELLS)}.")
        self.cell = CELLS[cell](units)
        self.head = MLP(hidden, output, activation, output_gain)
        self.state_size = self.cell.state_size
        self._output_size = output

    def initial_state(self, batch_size) -> tf.Tensor:
        """Zeros [batch_size, state_size], the state at the start of an episode."""
        return tf.zeros([batch_size, self.state_size])

    def __call__(self, observ, state):
        """One step: observations [K, O] and states [K, S] to outputs [K, D] and states."""
        features, state = self.cell(observ, state)
        return self.head(features), state

    def unroll(self, observ, first, state):
        """Outputs [T, N, D] for time-major observations [T, N, O] from states [N, S].

        Where `first` [T, N] is true an episode starts: the state is reset to zeros before
        that step, so that no memory crosses from one episode into the next.
        """
        features, _ = unroll_cell(self.cell, observ, first, state)  # [T, N, units]
        return batch_apply(self.head, features)  # [T, N, D]


class CoreNetwork(tf.Module):
    """TorchBeast's agent network: a feed-forward body, a recurrent core, and a linear policy
    output and baseline on the core's output (Espeholt et al. 2018, Figure 3; Küttler et
    al. 2019, `AtariNet` with `use_lstm`):

        f_t = body(x_t)                       Atari torso and/or dense layers  [K, F]
        s_t <- s_t * (1 - first_t)            reset where an episode starts    [K, S]
        h_t, s_{t+1} = core([f_t, a_{t-1}], s_t)   LSTM (or GRU)               [K, U]
        output_t = h_t W_pi + b_pi,  V(x_t) = h_t w_v + b_v

    The policy and the baseline share the body and the core. With `num_actions` A > 0 the
    core also reads the one-hot last action a_{t-1} [K, A], and with `last_reward` the
    last (clipped) reward r_{t-1} [K, 1], as TorchBeast's `AtariNet` does. Both are kept
    in the state's last columns (`cell_state_size` columns of the cell, then A, then 1),
    so whoever carries the state carries them, and they reset to zeros with the state
    where an episode starts. The caller writes the sampled action into the state
    (`with_last_action`) and, after the environment's step, the reward
    (`with_last_reward`); `unroll` takes the actions and rewards of the unroll instead.
    """

    def __init__(
        self,
        body: tf.Module,
        cell: str,
        units: int,
        output: int,
        num_actions: int = 0,
        name=None,
        last_reward: bool = False,
    ):
        super().__init__(name=name)
        if cell not in CELLS:
            raise ValueError(f"Unknown core {cell!r}; valid choices are {sorted(CELLS)}.")
        self.body = body
        self.core = CELLS[cell](units, name="core")
        self.policy = Linear(output, gain=0.01, name="policy")
        self.baseline = Linear(1, gain=1.0, name="baseline")
        self.num_actions = num_actions
        self.last_reward = last_reward
        self.cell_state_size = self.core.state_size
        self._extra = num_actions + int(last_reward)  # Columns after the cell's.
        self.state_size = self.core.state_size + self._extra

    def initial_state(self, batch_size) -> tf.Tensor:
        """Zeros [batch_size, state_size], the state at the start of an episode."""
        return tf.zeros([batch_size, self.state_size])

    def with_last_action(self, state, action):
        """The states [K, S] with the last-action columns set to one_hot(action [K]); the
        states unchanged without last-action inputs."""
        if not self.num_actions:
            return state
        one_hot = tf.one_hot(tf.cast(action, tf.int32), self.num_actions, dtype=state.dtype)
        after = self.cell_state_size + self.num_actions  # The last reward's column, if any.
        return tf.concat([state[:, : self.cell_state_size], one_hot, state[:, after:]], -1)

    def with_last_reward(self, state, reward):
        """The states [K, S] with the last-reward column set to `reward` [K] (clipped by
        the caller); the states unchanged without a last-reward input."""
        if not self.last_reward:
            return state
        return tf.concat([state[:, :-1], tf.cast(reward, state.dtype)[:, None]], -1)

    def __call__(self, observ, state, first=None):
        """One step: observations [K, ...], states [K, S] and, if given, episode starts
        `first` [K] to policy outputs [K, D], values [K] and the new states [K, S] (their
        last-action and last-reward columns still those of `state`: see `with_last_action`
        and `with_last_reward`)."""
        if first is not None:
            state = reset_state(state, first)
        cell_state, last = tf.split(state, [self.cell_state_size, self._extra], -1)
        inputs = tf.concat([self.body(observ), last], -1)  # [K, F + A + R]
        hidden, cell_state = self.core(inputs, cell_state)  # [K, U], [K, S - A - R]
        state = tf.concat([cell_state, last], -1)
        return self.policy(hidden), self.baseline(hidden)[:, 0], state

    def unroll(self, observ, first, state, action=None, reward=None):
        """The core over time-major observations [T, N, ...] from states [N, S].

        The body runs on all T x N observations at once, the core step by step, reset
        where `first` [T, N] is true. With last-action inputs, step t reads the one-hot of
        `action` [T, N] at t - 1, step 0 the last action in `state`, zeros where `first`;
        with a last-reward input, likewise `reward` [T, N] (clipped by the caller).

        Returns:
          Policy outputs [T, N, D], values [T, N] and the states after each step [T, N, S]
          (with the one-hot of each step's own action and its own reward).
        """
        inner = observ.shape.rank - 2
        features = batch_apply(self.body, observ, inner)  # [T, N, F]
        cell_state = state[:, : self.cell_state_size]  # [N, S - A - R]
        taken = []  # What each step leaves in the state's last columns: [T, N, A + R].
        if self.num_actions:
            taken.append(tf.one_hot(tf.cast(action, tf.int32), self.num_actions))
        if self.last_reward:
            taken.append(tf.cast(reward, tf.float32)[..., None])
        if taken:
            taken = tf.concat(taken, -1)  # [T, N, A + R]
            last = tf.concat([state[None, :, self.cell_state_size :], taken[:-1]], 0)
            last *= 1.0 - tf.cast(first, last.dtype)[..., None]  # [T, N, A + R]
            features = tf.concat([features, last], -1)  # [T, N, F + A + R]
        hidden, states = unroll_cell(self.core, features, first, cell_state)  # [T, N, U]
        if self._extra:
            states = tf.concat([states, taken], -1)  # [T, N, S]
        return batch_apply(self.policy, hidden), batch_apply(self.baseline, hidden)[..., 0], states

    def bootstrap_values(self, next_observ, states):
        """V(x'_t) [T, N]: the values of the observations after each step [T, N, ...], the
        core continuing from the states after that step [T, N, S], without a reset (the
        final observation of an episode still belongs to it)."""
        inner = next_observ.shape.rank - 2
        features = batch_apply(self.body, next_observ, inner)  # [T, N, F]
        flat_features = tf.reshape(features, [-1, features.shape[-1]])  # [T * N, F]
        flat_states = tf.reshape(states, [-1, self.state_size])  # [T * N, S]
        cell_state, last = tf.split(flat_states, [self.cell_state_size, self._extra], -1)
        hidden, _ = self.core(tf.concat([flat_features, last], -1), cell_state)
        return tf.reshape(self.baseline(hidden), tf.shape(states)[:2])  # [T, N]


def reset_state(state: tf.Tensor, first: tf.Tensor) -> tf.Tensor:
    """The recurrent states [K, S] with the rows where an episode starts set to zero:

        s <- s * (1 - first)

    as TorchBeast's `AtariNet.forward` resets its LSTM state with `notdone` at every step
    (Küttler et al. 2019, https://arxiv.org/abs/1910.03552), so that no memory crosses
    from one episode into the next.
    """
    return state * (1.0 - tf.cast(first, state.dtype))[:, None]


def unroll_cell(cell, inputs, first, state):
    """Runs `cell` over time-major inputs [T, N, F] from states [N, S], with `reset_state`
    before every step t where `first[t]` [N] is true.

    Returns:
      The outputs [T, N, U] and the states after each step [T, N, S].
    """

    def step(carry, inputs_t):
        _, state = carry
        x_t, first_t = inputs_t
        return cell(x_t, reset_state(state, first_t))

    initial = (tf.zeros([tf.shape(state)[0], cell.units], inputs.dtype), state)
    return tf.scan(step, (inputs, first), initializer=initial)
