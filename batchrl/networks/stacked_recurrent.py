"""A recurrent cell and an MLP for M parameter vectors at once: recurrent population members."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.networks.recurrent import CELLS, RecurrentNetwork
from batchrl.networks.stacked import PopulationMLP, PopulationNetwork

# Gates of each cell: their pre-activations are `gates * units` wide.
GATES = {"gru": 3, "lstm": 4}


class PopulationRecurrent(PopulationNetwork):
    """`RecurrentNetwork` (a gru or lstm cell, then an MLP) for M members in one pass.

    Layout of a parameter vector [D]: the cell's input weights W [O, g u] row-major and
    biases [g u], its hidden weights U [u, g u] and biases [g u] (g gates of u units:
    3 for gru, 4 for lstm), then the MLP's parameters in `PopulationMLP`'s layout. Each
    step computes the cell for every member at once with batched products
    [M, E, O] x [M, O, g u], with the cell's equations (`GRUCell`, `LSTMCell`):

        output, state = net.step(params, observ, state)     # [M, D], [M, E, O], [M, E, S]
        outputs = net.unroll(params, observ, first, state)  # [T, M, E, O] -> [T, M, E, out]

    `flatten` takes a single `RecurrentNetwork`'s variables, so that member m can start
    from the network a single run of its seed builds. Holds no variables.
    """

    def __init__(
        self,
        cell: str,
        units: int,
        observ_size: int,
        hidden: Sequence[int],
        output_size: int,
        activation: str = "tanh",
        output_gain: float = 1.0,
    ):
        if cell not in CELLS:
            raise ValueError(f"Unknown cell {cell!r}; valid choices are {sorted(CELLS)}.")
        self.cell, self.units = cell, int(units)
        self._observ_size, self._output_size = int(observ_size), int(output_size)
        self.state_size = 2 * self.units if cell == "lstm" else self.units
        width = GATES[cell] * self.units
        self.cell_shapes = [(self._observ_size, width), (self.units, width)]  # W, U
        self.head = PopulationMLP(self.units, hidden, output_size, activation, output_gain)
        self._cell_params = sum(i * o + o for i, o in self.cell_shapes)

    @property
    def num_params(self) -> int:
        return self._cell_params + self.head.num_params

    def init_params(self, seed: int) -> tf.Tensor:
        """Orthogonal cell weights (gain 1) and zero biases, then the MLP's `init_params`."""
        parts = []
        for index, shape in enumerate(self.cell_shapes):
            init = tf.initializers.Orthogonal(gain=1.0, seed=int(seed) + 1000 + index)
            parts += [tf.reshape(init(shape), [-1]), tf.zeros([shape[1]])]
        return tf.concat([*parts, self.head.init_params(seed)], 0)  # [D]

    def flatten(self, network: RecurrentNetwork) -> tf.Tensor:
        """The parameters [D] of a built `RecurrentNetwork` of the same sizes, in this layout.

        Raises:
          ValueError: its cell or sizes differ.
        """
        cell = network.cell
        layers = [cell.input, cell.hidden]
        shapes = [tuple(layer.w.shape) if layer.w is not None else None for layer in layers]
        kind = {cls: name for name, cls in CELLS.items()}.get(type(cell))
        if kind != self.cell or shapes != self.cell_shapes:
            raise ValueError(
                f"A {kind} cell of layers {shapes} is not a {self.cell} cell of {self.cell_shapes}."
            )
        parts = [tf.reshape(p, [-1]) for layer in layers for p in (layer.w, layer.b)]
        return tf.concat([*parts, self.head.flatten(network.head)], 0)  # [D]

    def initial_state(self, batch_size) -> tf.Tensor:
        """Zeros [batch_size, S], the state at the start of an episode."""
        return tf.zeros([batch_size, self.state_size])

    def apply(self, params: tf.Tensor, observ: tf.Tensor) -> tf.Tensor:
        """Outputs [M, E, out] of one step from the initial state (episodes' first steps)."""
        observ = tf.convert_to_tensor(observ, tf.float32)
        state = tf.zeros([tf.shape(observ)[0], tf.shape(observ)[1], self.state_size])
        return self.step(params, observ, state)[0]

    def step(self, params, observ, state) -> tuple[tf.Tensor, tf.Tensor]:
        """One step of every member: outputs [M, E, out] and states [M, E, S].

        Args:
          params: [M, D].
          observ: [M, E, O] observations, member m's rows for parameters m.
          state: [M, E, S] the cells' states.
        """
        params = tf.convert_to_tensor(params, tf.float32)
        x = tf.convert_to_tensor(observ, tf.float32)
        (units_in, width), (units, _) = self.cell_shapes
        sizes = [units_in * width, width, units * width, width]
        w, b, u, c = tf.split(params[:, : self._cell_params], sizes, axis=1)
        w = tf.reshape(w, [-1, units_in, width])  # [M, O, g u]
        u = tf.reshape(u, [-1, units, width])  # [M, u, g u]
        projected = tf.linalg.matmul(x, w) + b[:, None, :]  # [M, E, g u]
        if self.cell == "gru":
            hidden = tf.linalg.matmul(state, u) + c[:, None, :]  # [M, E, 3 u]
            xz, xr, xn = tf.split(projected, 3, axis=-1)
            hz, hr, hn = tf.split(hidden, 3, axis=-1)
            z = tf.sigmoid(xz + hz)
            r = tf.sigmoid(xr + hr)
            n = tf.tanh(xn + r * hn)
            features = state = (1.0 - z) * n + z * state  # [M, E, u]
        else:
            h, cell = tf.split(state, 2, axis=-1)  # [M, E, u] each
            hidden = tf.linalg.matmul(h, u) + c[:, None, :]  # [M, E, 4 u]
            i, f, g, o = tf.split(projected + hidden, 4, axis=-1)
            cell = tf.sigmoid(f + 1.0) * cell + tf.sigmoid(i) * tf.tanh(g)
            features = tf.sigmoid(o) * tf.tanh(cell)
            state = tf.concat([features, cell], -1)  # [M, E, 2 u]
        return self.head.apply(params[:, self._cell_params :], features), state

    def unroll(self, params, observ, first, state) -> tf.Tensor:
        """Outputs [T, M, E, out] of time-major observations [T, M, E, O] from [M, E, S].

        Where `first` [T, M, E] is true an episode starts: the state is reset to zeros
        before that step, as `RecurrentNetwork.unroll` does.
        """

        def step(carry, inputs):
            _, state = carry
            observ_t, first_t = inputs
            state = tf.where(first_t[..., None], tf.zeros_like(state), state)
            return self.step(params, observ_t, state)

        shape = tf.concat([tf.shape(state)[:2], [self._output_size]], 0)
        initial = (tf.zeros(shape), state)
        outputs, _ = tf.scan(step, (observ, first), initializer=initial)
        return outputs
