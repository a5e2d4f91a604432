"""The message-passing graph network of the routing paper, for PPO and for ES populations."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import tensorflow as tf

from batchrl.networks.stacked import PopulationNetwork


class GraphFeatures(Protocol):
    """What a graph network reads: observations as graphs of one shape, with features.

    Every graph has the same V vertices and directed edges (sender, receiver); an
    observation gives the features of its graphs' vertices. The actor scores one graph
    per action, the critic one graph of the state. An environment brings its own (for
    routing, `batchrl.envs.routing.RoutingGraphFeatures`: the vertices are the links),
    so that the network knows no environment.

    Attributes:
      name: what the graphs are, for messages (e.g. 'NSFNET').
      num_vertices: V.
      edges: int32 [P, 2], (sender, receiver) of each edge: messages flow from the
        sender's state to the receiver's.
      num_features: F, the features of a vertex; the network's states are wider (H >= F)
        and start as the features padded with zeros.
      num_actions: A, the actor's graphs per observation.

    A family of graphs of different shapes (for routing, a batch that mixes topologies)
    sets `edges` to None and gives instead `graphs`, a tuple of T (V_t, edges_t [P_t, 2]),
    V the largest V_t, and `graph_index(observ)`: int32 [...], which of the T graphs
    each observation's are. Graph t's vertices are 0..V_t - 1; its features are padded
    with vertices V_t..V - 1, which the network ignores (`GraphCore`).
    """

    name: str
    num_vertices: int
    edges: np.ndarray | None
    num_features: int
    num_actions: int

    def action_graphs(self, observ: tf.Tensor) -> tf.Tensor:
        """Vertex features [..., A, V, F] of each action's graph, of observations [..., O]."""

    def state_graph(self, observ: tf.Tensor) -> tf.Tensor:
        """Vertex features [..., 1, V, F] of the state's graph, of observations [..., O]."""

    def action_vertices(self, observ: tf.Tensor) -> tf.Tensor:
        """1 on the vertices each action acts on, else 0: [..., A, V] (for routing, the
        links of each candidate path). Only a network with `path_readout` reads it."""


def weight_shapes(
    link_state_size: int, readout_units: int, path_readout: bool = False
) -> list[tuple[str, tuple]]:
    """The weights in the order of the reference's `model.get_weights()`.

    Message kernel [2H, H] and bias [H]; GRU kernel [H, 3H], recurrent kernel [H, 3H]
    and bias [2, 3H] (Keras, reset_after, gates [z | r | h]); readout kernels and biases
    [H, R], [R], [R, R], [R], [R, 1], [1]. With `path_readout` the first readout kernel
    is [2H, R]: it reads the sum over all vertices and the sum over the action's.
    """
    h, r = int(link_state_size), int(readout_units)
    return [
        ("message_kernel", (2 * h, h)),
        ("message_bias", (h,)),
        ("gru_kernel", (h, 3 * h)),
        ("gru_recurrent_kernel", (h, 3 * h)),
        ("gru_bias", (2, 3 * h)),
        ("readout1_kernel", (2 * h if path_readout else h, r)),
        ("readout1_bias", (r,)),
        ("readout2_kernel", (r, r)),
        ("readout2_bias", (r,)),
        ("readout3_kernel", (r, 1)),
        ("readout3_bias", (1,)),
    ]


def initial_weights(
    link_state_size: int,
    readout_units: int,
    seed: int | None,
    output_gain: float,
    path_readout: bool = False,
):
    """Weights {name: float32 array} initialized as the reference initializes them
    (`weight_shapes`).

    Orthogonal with gain sqrt(2) for the message and hidden readout kernels,
    `output_gain` for the last readout kernel (reference: sqrt(0.01) for the actor, 1 for
    the critic), Glorot-uniform GRU kernel, orthogonal recurrent kernel, zero biases.
    A seed of None draws from the global random state (`tf.keras.utils.set_random_seed`),
    as the other networks' initializers do.
    """
    weights = {}
    shapes = weight_shapes(link_state_size, readout_units, path_readout)
    for index, (name, shape) in enumerate(shapes):
        seed_i = None if seed is None else int(seed) * 16 + index
        if name == "gru_kernel":
            init = tf.initializers.GlorotUniform(seed=seed_i)
        elif name == "gru_recurrent_kernel":
            init = tf.initializers.Orthogonal(seed=seed_i)
        elif name == "readout3_kernel":
            init = tf.initializers.Orthogonal(gain=output_gain, seed=seed_i)
        elif name.endswith("kernel"):
            init = tf.initializers.Orthogonal(gain=float(np.sqrt(2)), seed=seed_i)
        else:
            init = tf.initializers.Zeros()
        weights[name] = tf.cast(init(shape), tf.float32)
    return weights


class GraphCore:
    """The forward pass on weights with a leading member axis [M, ...].

    Vertex states h [M, G, V, H] of G graphs of one shape (`GraphFeatures`; for routing,
    a vertex is a link) go through T iterations of

        m_p = selu([h_sender(p) ; h_receiver(p)] W_m + b_m)   for every edge p
        M_v = sum of m_p over the edges with receiver(p) = v  (messages from upstream)
        h_v = GRU(input M_v, state h_v)

    with weights shared across iterations, then a sum over vertices and three dense
    layers (selu, selu, linear) give one score per graph [M, G]. With `path_readout` the
    first dense layer reads [sum over all vertices ; sum over the graph's marked
    vertices] (for routing, the links of the graph's candidate path; the reference sums
    all links only). Both faces of the
    network (`GraphPopulation` and `GraphNetwork`) call it; M = 1 for a single network.
    The message layer is split as [h_s ; h_r] W_m = (h W_top)_s + (h W_bottom)_r, so
    each vertex is projected once rather than once per edge.

    A family of graphs (`GraphFeatures.graphs`) takes `which` [M, G], each graph's
    member of the family: each vertex sums the messages from its senders in its own graph
    (`family_incoming`), so a padded vertex receives nothing and no vertex hears from it;
    its state still evolves from zeros, and the readout sums only the graph's own V_t
    vertices. A graph's scores are therefore those of the same graph alone, up to float32
    rounding: the sums run in another order.
    """

    def __init__(
        self,
        features: GraphFeatures,
        link_state_size: int,
        readout_units: int,
        steps: int,
        path_readout: bool = False,
    ):
        if int(link_state_size) < features.num_features:
            raise ValueError(
                f"link_state_size={link_state_size} is too small: the states of "
                f"{features.name}'s graphs start from {features.num_features} features; use "
                f">= {features.num_features}."
            )
        if int(steps) < 1:
            raise ValueError(f"message_passing_steps={steps} must be >= 1.")
        self.size = int(link_state_size)
        self.readout = int(readout_units)
        self.steps = int(steps)
        self.path_readout = bool(path_readout)
        self.family = features.edges is None
        if self.family:
            self._make_family(features.num_vertices, features.graphs)
            return
        edges = np.asarray(features.edges, np.int32).reshape(-1, 2)  # [P, 2]
        self._first = tf.constant(edges[:, 0], tf.int32)  # [P]
        self._second = tf.constant(edges[:, 1], tf.int32)  # [P]
        scatter = np.zeros([features.num_vertices, len(edges)], np.float32)
        scatter[edges[:, 1], np.arange(len(edges))] = 1.0
        self._scatter = tf.constant(scatter)  # [V, P], sums messages at the receiver

    def _make_family(self, num_vertices: int, graphs) -> None:
        """The incoming senders and masks [T, V, D] (`incoming_senders`) and the vertex
        masks [T, V] of a family of T graphs, D the most incoming edges of any vertex."""
        graphs = [(int(v), np.asarray(e, np.int32).reshape(-1, 2)) for v, e in graphs]
        if max(v for v, _ in graphs) > num_vertices:
            raise ValueError(f"A graph of the family has more than V = {num_vertices} vertices.")
        depth = max(most_incoming(num_vertices, e) for _, e in graphs)
        senders, masks = zip(*(incoming_senders(num_vertices, e, depth) for _, e in graphs))
        vertex_mask = np.zeros([len(graphs), num_vertices], np.float32)
        for t, (size, _) in enumerate(graphs):
            vertex_mask[t, :size] = 1.0
        self._senders = tf.constant(np.stack(senders))  # [T, V, D]
        self._incoming_mask = tf.constant(np.stack(masks))  # [T, V, D]
        self._vertex_mask = tf.constant(vertex_mask)  # [T, V]

    def __call__(
        self,
        weights: dict,
        states: tf.Tensor,
        which: tf.Tensor | None = None,
        marked: tf.Tensor | None = None,
    ):
        """Scores [M, G] of vertex states [M, G, V, H] with weights {name: [M, ...]}.

        `which` [M, G] int32: each graph's member of a family (only for a family).
        `marked` [M, G, V]: 1 on the vertices the path readout sums (only with it).
        """
        h = self.propagate(weights, states, which)
        return self.read(weights, h, marked)

    def propagate(self, weights: dict, states: tf.Tensor, which: tf.Tensor | None = None):
        """The vertex states [M, G, V, H] after the message-passing steps, those of a
        family's padded vertices zeroed."""
        h = states
        size = self.size
        kernel = weights["message_kernel"]  # [M, 2H, H]
        top, bottom = kernel[:, :size], kernel[:, size:]  # [M, H, H] each
        bias = weights["message_bias"][:, None, None, :]  # [M, 1, 1, H]
        gru_bias = weights["gru_bias"]  # [M, 2, 3H]
        input_bias = gru_bias[:, None, None, 0]  # [M, 1, 1, 3H]
        state_bias = gru_bias[:, None, None, 1]  # [M, 1, 1, 3H]
        if self.family:
            senders, mask = self.family_senders(which)
        for _ in range(self.steps):
            if self.family:
                incoming = self.family_incoming(
                    _matmul(h, top), _matmul(h, bottom), bias, senders, mask
                )  # [M, G, V, H]
            else:
                upstream = tf.gather(_matmul(h, top), self._first, axis=2)  # [M, G, P, H]
                downstream = tf.gather(_matmul(h, bottom), self._second, axis=2)
                message = tf.nn.selu(upstream + downstream + bias)  # [M, G, P, H]
                incoming = tf.linalg.matmul(self._scatter, message)  # [M, G, V, H]
            x = _matmul(incoming, weights["gru_kernel"]) + input_bias  # [M, G, V, 3H]
            r = _matmul(h, weights["gru_recurrent_kernel"]) + state_bias  # [M, G, V, 3H]
            x_z, x_r, x_h = tf.split(x, 3, axis=-1)
            r_z, r_r, r_h = tf.split(r, 3, axis=-1)
            z = tf.sigmoid(x_z + r_z)
            reset = tf.sigmoid(x_r + r_r)
            candidate = tf.tanh(x_h + reset * r_h)
            h = z * h + (1.0 - z) * candidate  # [M, G, V, H]
        if self.family:
            h *= tf.gather(self._vertex_mask, which)[..., None]  # [M, G, V, H]
        return h

    def read(self, weights: dict, h: tf.Tensor, marked: tf.Tensor | None = None):
        """Scores [M, G] of the final vertex states h [M, G, V, H] (`propagate`)."""
        g = tf.reduce_sum(h, axis=2)  # [M, G, H]
        if self.path_readout:
            if marked is None:
                raise ValueError("A path readout needs `marked`, the vertices it sums.")
            path = tf.einsum("mgv,mgvh->mgh", marked, h)  # [M, G, H]
            g = tf.concat([g, path], axis=-1)  # [M, G, 2H]
        g = tf.nn.selu(_dense(g, weights["readout1_kernel"], weights["readout1_bias"]))
        g = tf.nn.selu(_dense(g, weights["readout2_kernel"], weights["readout2_bias"]))
        score = _dense(g, weights["readout3_kernel"], weights["readout3_bias"])  # [M, G, 1]
        return score[..., 0]  # [M, G]

    def family_senders(self, which: tf.Tensor):
        """(senders int32 [M, G, V, D], mask [M, G, V, D, 1]) of the family's graphs
        `which` [M, G]: the senders of each vertex's incoming edges in its own graph, as
        rows of the vertex states flattened to [M G V, H], and 1 for an edge, 0 for
        padding (`incoming_senders`)."""
        graphs = tf.shape(which)  # [M, G]
        rows = tf.range(graphs[0] * graphs[1]) * int(self._senders.shape[1])  # [M G] times V
        rows = tf.reshape(rows, tf.concat([graphs, [1, 1]], 0))  # [M, G, 1, 1]
        senders = tf.gather(self._senders, which) + rows  # [M, G, V, D]
        return senders, tf.gather(self._incoming_mask, which)[..., None]

    def family_incoming(self, up, down, bias, senders, mask):
        """M_v [M, G, V, H] of a family: the sum over v's incoming edges p in its own
        graph of selu(up_sender(p) + down_v + b_m), of the projections up = h W_top and
        down = h W_bottom [M, G, V, H], the bias [M, 1, 1, H] and `family_senders`.

        Each vertex gathers its senders' rows with one plain gather, and padded entries
        are masked out. Per-edge messages from batched gathers (`batch_dims`), as this
        did up to 7cbb082, made `mixed_es`'s generations 1.5x slower under XLA
        (bench/graph_aggregation.py, docs/benchmarks.md).
        """
        upstream = tf.gather(tf.reshape(up, [-1, tf.shape(up)[-1]]), senders)  # [M, G, V, D, H]
        message = tf.nn.selu(upstream + down[..., None, :] + bias[..., None, :])
        return tf.reduce_sum(message * mask, axis=3)  # [M, G, V, H]

    def initial_states(self, features: tf.Tensor) -> tf.Tensor:
        """Vertex states [..., V, H]: the features [..., V, F], padded with zeros."""
        width = int(features.shape[-1])
        paddings = [[0, 0]] * (len(features.shape) - 1) + [[0, self.size - width]]
        return tf.pad(features, paddings)


def most_incoming(num_vertices: int, edges: np.ndarray) -> int:
    """The most incoming edges of any vertex of edges [P, 2] (at least 1)."""
    return max(int(np.bincount(edges[:, 1], minlength=num_vertices).max(initial=0)), 1)


def incoming_senders(num_vertices: int, edges: np.ndarray, depth: int):
    """(senders int32 [V, depth], mask float32 [V, depth]): the sender of each of vertex
    v's incoming edges (receiver = v) of edges [P, 2], in edge order, padded with vertex
    0, and 1 where an entry is an edge, 0 where it is padding."""
    senders = np.zeros([num_vertices, depth], np.int32)
    mask = np.zeros([num_vertices, depth], np.float32)
    for v in range(num_vertices):
        sent = edges[edges[:, 1] == v, 0]
        senders[v, : len(sent)], mask[v, : len(sent)] = sent, 1.0
    return senders, mask


def _matmul(x, w):
    """x [M, G, A, in] times w [M, in, out] for each member: [M, G, A, out]."""
    return tf.einsum("mgai,mio->mgao", x, w)


def _dense(x, w, b):
    """x [M, G, in] w [M, in, out] + b [M, out]: [M, G, out]."""
    return tf.linalg.matmul(x, w) + b[:, None, :]


class GraphPopulation(PopulationNetwork):
    """M graph-network policies at once, from flat parameter vectors [M, D] (for ES).

    `apply(params [M, D], observ [M, E, O])` returns the policy [M, E, A], the softmax
    over the scores of each action's graph (`GraphFeatures.action_graphs`; for routing,
    the candidate paths', so that ES's action noise is added to probabilities, as in the
    reference), with every member's A E graphs in one batched pass: no loop over members.
    The vector is laid out as the reference's `model.get_weights()` (see
    `weight_shapes`); D = 6,136 for (H, R) = (25, 20) and 12,601 for (35, 35), H R
    more with `path_readout` (`GraphCore`).
    """

    def __init__(
        self,
        features: GraphFeatures,
        link_state_size: int = 25,
        readout_units: int = 20,
        message_passing_steps: int = 5,
        output_gain: float = 0.1,
        path_readout: bool = False,
    ):
        self.features = features
        self.core = GraphCore(
            features, link_state_size, readout_units, message_passing_steps, path_readout
        )
        self._output_gain = float(output_gain)
        self.shapes = weight_shapes(link_state_size, readout_units, path_readout)
        self._sizes = [int(np.prod(shape)) for _, shape in self.shapes]

    @property
    def num_params(self) -> int:
        return sum(self._sizes)

    def init_params(self, seed: int) -> tf.Tensor:
        core = self.core
        weights = initial_weights(
            core.size, core.readout, seed, self._output_gain, core.path_readout
        )
        return tf.concat([tf.reshape(weights[name], [-1]) for name, _ in self.shapes], 0)

    def unflatten(self, params: tf.Tensor) -> dict:
        """The weights {name: [M, ...]} in the parameter vectors [M, D]."""
        parts = tf.split(params, self._sizes, axis=-1)
        return {
            name: tf.reshape(part, [-1, *shape]) for (name, shape), part in zip(self.shapes, parts)
        }

    def apply(self, params: tf.Tensor, observ: tf.Tensor) -> tf.Tensor:
        params = tf.convert_to_tensor(params, tf.float32)  # [M, D]
        observ = tf.convert_to_tensor(observ, tf.float32)  # [M, E, O]
        features = self.features
        states = self.core.initial_states(features.action_graphs(observ))  # [M, E, A, V, H]
        shape = tf.shape(states)
        graphs = tf.reshape(
            states, [shape[0], -1, features.num_vertices, self.core.size]
        )  # [M, E A, V, H]
        which = marked = None
        if self.core.family:
            which = tf.repeat(features.graph_index(observ), features.num_actions, axis=-1)
        if self.core.path_readout:
            marked = tf.reshape(
                features.action_vertices(observ), [shape[0], -1, features.num_vertices]
            )  # [M, E A, V]
        scores = self.core(self.unflatten(params), graphs, which, marked)  # [M, E A]
        scores = tf.reshape(scores, [shape[0], shape[1], features.num_actions])  # [M, E, A]
        return tf.nn.softmax(scores, axis=-1)


class GraphNetwork(tf.Module):
    """One graph network as a `tf.Module`: the actor (A scores) or the critic (1 value).

    The actor scores each action's graph (`GraphFeatures.action_graphs`; for routing,
    each candidate path's) and returns the A scores as logits [N, A]; the critic scores
    the state's graph (`GraphFeatures.state_graph`; for routing, the link capacities) and
    returns [N, 1], as the reference's criticPPO. Variables are created at construction,
    in `weight_shapes` order, from `seed`, or from the global random state when it is
    None (so a run's seed sets them, as for the MLPs). `path_readout` (`GraphCore`) is
    the actor's only: the critic's one graph marks no action.
    """

    def __init__(
        self,
        features: GraphFeatures,
        critic: bool,
        link_state_size: int = 25,
        readout_units: int = 20,
        message_passing_steps: int = 5,
        output_gain: float = 0.1,
        seed: int | None = None,
        name: str = "graph",
        path_readout: bool = False,
    ):
        super().__init__(name=name)
        self.features = features
        self.critic = bool(critic)
        if self.critic and path_readout:
            raise ValueError("path_readout is the actor's: the critic's graph marks no action.")
        self.core = GraphCore(
            features, link_state_size, readout_units, message_passing_steps, path_readout
        )
        initial = initial_weights(link_state_size, readout_units, seed, output_gain, path_readout)
        with self.name_scope:
            self.weights = {name: tf.Variable(value, name=name) for name, value in initial.items()}

    @tf.Module.with_name_scope
    def __call__(self, observ: tf.Tensor) -> tf.Tensor:
        """Logits [N, A] (actor) or values [N, 1] (critic) of observations [N, O]."""
        observ = tf.convert_to_tensor(observ, tf.float32)  # [N, O]
        features = self.features
        if self.critic:
            states = self.core.initial_states(features.state_graph(observ))  # [N, 1, V, H]
        else:
            states = self.core.initial_states(features.action_graphs(observ))  # [N, A, V, H]
        graphs = int(states.shape[1])
        states = tf.reshape(states, [1, -1, features.num_vertices, self.core.size])
        weights = {name: value[None] for name, value in self.weights.items()}
        which = marked = None
        if self.core.family:
            which = tf.repeat(features.graph_index(observ), graphs)[None]  # [1, N A]
        if self.core.path_readout:
            marked = tf.reshape(features.action_vertices(observ), [1, -1, features.num_vertices])
        scores = self.core(weights, states, which, marked)
        return tf.reshape(scores, [-1, graphs])  # [N, A] or [N, 1]
