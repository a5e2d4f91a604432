"""Recurrent cells and a recurrent policy network as `tf.Module`s.

Written here rather than taken from Keras: Keras 3 layers are not `tf.Module`s, so their
variables would escape `tf.Module.trainable_variables` and need separate checkpoint
tracking; these cells are a few lines each and use the same `Linear` layers as the MLPs.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.networks.mlp import MLP, Linear


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

        def step(carry, inputs):
            _, state = carry
            observ_t, first_t = inputs
            state = tf.where(first_t[:, None], tf.zeros_like(state), state)
            return self(observ_t, state)

        initial = (tf.zeros([tf.shape(state)[0], self._output_size]), state)
        outputs, _ = tf.scan(step, (observ, first), initializer=initial)
        return outputs
