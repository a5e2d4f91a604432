"""A generation's members acting as one batch: `PopulationPolicy` acts, agent a with member
a // E, and `PopulationEvaluator` scores each agent's first episode."""

from __future__ import annotations

import tensorflow as tf

from batchrl.core import Algorithm
from batchrl.networks import PopulationNetwork, action_size, to_action
from batchrl.parts.normalizer import StreamingNormalizer
from batchrl.tools.episodes import EpisodeRecorder, first_episodes

OBSERV_CLIP = 5.0  # OpenAI ES clips normalized observations to [-5, 5].


class PopulationPolicy(Algorithm):
    """Acting only: agent a acts with member a // E.

    `start(params)` loads the parameters [M, D] of M members for B = M E agents;
    `simulate` then drives it (through an `EpisodeRecorder`, which scores each agent's
    first episode). Observations are normalized with the statistics frozen at `start`
    (every member sees the same); with `update_normalizer`, the running statistics of
    `observ_normalizer` are updated with every observation.

    With `member_chunk` C > 0 and `skip_finished(finished)`, a step runs the network
    only for the members that still have an agent in its first episode, C members at a
    time in a loop of static shapes (so it compiles under XLA), and the other agents act
    with a zero network output: only first episodes are scored, and without this a
    generation keeps computing every member until the longest episode ends.
    """

    def __init__(
        self,
        network: PopulationNetwork,
        action_space,
        members: int,
        episodes_per_member: int,
        observ_normalizer: StreamingNormalizer | None = None,
        squash: bool = False,
        action_noise: float = 0.0,
        rng: tf.random.Generator | None = None,
        update_normalizer: bool = True,
        member_chunk: int = 0,
        common_noise: bool = False,
    ):
        super().__init__(name="population")
        if member_chunk < 0:
            raise ValueError(f"member_chunk={member_chunk} must be >= 0 (0: no skipping).")
        if common_noise and members % 2:
            raise ValueError(
                f"common_noise=True shares the action noise of member i and its mirror "
                f"i + N, which needs an even number of members, not {members}."
            )
        self._common_noise = bool(common_noise)
        self._chunk = min(int(member_chunk), members)
        self._finished = None
        self._network = network
        self._space = action_space
        self._members = members
        self._per_member = episodes_per_member
        self._normalizer = observ_normalizer
        self._squash = squash
        self._action_noise = action_noise
        self._rng = rng
        self._update_normalizer = update_normalizer
        self.params = tf.Variable(tf.zeros([members, network.num_params]), trainable=False)
        shape = () if observ_normalizer is None else observ_normalizer._shape
        self._mean = tf.Variable(tf.zeros(shape), trainable=False)
        self._std = tf.Variable(tf.ones(shape), trainable=False)

    def __len__(self) -> int:
        return self._members * self._per_member

    def start(self, params: tf.Tensor) -> None:
        self.params.assign(params)
        if self._normalizer is not None:
            self._mean.assign(tf.cast(self._normalizer.mean, tf.float32))
            self._std.assign(tf.cast(self._normalizer.std, tf.float32))

    def skip_finished(self, finished: tf.Variable) -> None:
        """Skips the network for members whose agents all have `finished` [B] set.

        Has an effect only with `member_chunk` > 0.
        """
        if self._chunk:
            self._finished = finished

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        batch = len(self)
        observ = tf.cast(observ, tf.float32)
        if self._normalizer is not None:
            observ = (observ - self._mean) / (self._std + 1e-8)
            observ = tf.clip_by_value(observ, -OBSERV_CLIP, OBSERV_CLIP)
        full_shape = tf.concat([[batch], tf.shape(observ)[1:]], 0)
        full = tf.scatter_nd(agent_indices[:, None], observ, full_shape)  # [B, ...]
        grouped = tf.reshape(
            full, tf.concat([[self._members, self._per_member], full_shape[1:]], 0)
        )
        if self._finished is None:
            output = self._network.apply(self.params, grouped)  # [M, E, size]
        else:
            output = self._apply_running(grouped)  # [M, E, size]
        output = tf.reshape(output, [batch, -1])  # [B, size]
        output = tf.gather(output, agent_indices)  # [K, size]
        if self._action_noise:
            output += self._action_noise * self._noise(agent_indices, tf.shape(output))
        return to_action(output, self._space, self._squash)

    def _noise(self, agent_indices, shape):
        """Standard normal noise [K, size] for the agents `agent_indices`.

        With `common_noise`, agent a and agent a + N E (the same agent of the mirror
        member) draw the same numbers, row a mod N E, so that a pair that routes the
        same demands (`common_streams` pairs the agents alike) also acts with the same
        noise.
        """
        if not self._common_noise:
            return self._rng.normal(shape)
        pair_agents = len(self) // 2  # N E
        noise = self._rng.normal([pair_agents, shape[1]])  # [N E, size]
        return tf.gather(noise, agent_indices % pair_agents)

    def _apply_running(self, grouped):
        """The network's output [M, E, size] for members with a running first episode.

        Those members are sorted first and taken C at a time; the rest output zeros.
        """
        members, chunk = self._members, self._chunk
        running = tf.reduce_any(
            ~tf.reshape(self._finished, [members, self._per_member]), axis=1
        )  # [M]
        order = tf.argsort(tf.cast(~running, tf.int32), stable=True)  # running first
        chunks = -(-members // chunk)
        # Pad with the last member so that every chunk has C rows; computing it twice
        # writes the same output twice.
        order = tf.concat([order, tf.fill([chunks * chunk - members], order[-1])], 0)
        count = -(-tf.reduce_sum(tf.cast(running, tf.int32)) // chunk)
        empty = tf.zeros([members, self._per_member, action_size(self._space)])

        def body(index, output):
            rows = tf.slice(order, [index * chunk], [chunk])  # [C]
            part = self._network.apply(
                tf.gather(self.params, rows), tf.gather(grouped, rows)
            )  # [C, E, size]
            return index + 1, tf.tensor_scatter_nd_update(output, rows[:, None], part)

        _, output = tf.while_loop(lambda index, _: index < count, body, (0, empty))
        return output

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        if self._normalizer is not None and self._update_normalizer:
            self._normalizer.update(observ)

    def end_episodes(self, agent_indices):
        pass


class PopulationEvaluator:
    """Fitness of M members: one graph call runs each agent's first episode, M E agents.

    `evaluator(params [M, D])` returns the fitness [M] (mean return of each member's E
    episodes) and the statistics a `Trainer` returns, with `steps` the steps of those
    episodes. The call steps until every environment finished its first episode or
    `max_steps` steps; with `jit_compile` it is one XLA computation.
    """

    def __init__(self, batch_env, policy: PopulationPolicy, max_steps: int, jit_compile=False):
        if len(batch_env) != len(policy):
            raise ValueError(
                f"{len(policy)} agents need as many environments, not {len(batch_env)}."
            )
        self._env = batch_env
        self._policy = policy
        self._recorder = EpisodeRecorder(policy, len(policy))
        policy.skip_finished(self._recorder.finished)
        self._max_steps = int(max_steps)
        self._call = tf.function(self._run, jit_compile=bool(jit_compile))

    def __call__(self, params) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """Call it without a default summary writer when it is compiled with XLA."""
        return self._call(tf.convert_to_tensor(params, tf.float32))

    @property
    def recorder(self) -> EpisodeRecorder:
        """The first episodes of the last call (`finished` says which ended)."""
        return self._recorder

    def _run(self, params):
        policy = self._policy
        policy.start(params)
        returns, lengths = first_episodes(self._env, self._recorder, self._max_steps)  # [B] each
        per_member = tf.reshape(returns, [policy._members, policy._per_member])
        stats = {
            "episodes": tf.size(returns),
            "mean_return": tf.reduce_mean(returns),
            "mean_length": tf.reduce_mean(tf.cast(lengths, tf.float32)),
            "steps": tf.reduce_sum(lengths),
        }
        return tf.reduce_mean(per_member, 1), stats
