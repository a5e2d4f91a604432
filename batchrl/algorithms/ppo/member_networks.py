"""The members' networks: each a single run's of its seed, stacked on a leading [M] axis."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from batchrl.algorithms.ppo.networks import make_networks
from batchrl.networks import (
    PopulationMLP,
    PopulationRecurrent,
    StateDependentNoiseHead,
    is_recurrent,
)
from batchrl.parts.rollout_buffer import transition_spec


class MemberNetworks:
    """The policy and value networks of M members: parameters [M, D], one batched pass.

    Member m's parameters start as those of the networks `PPO` builds under its seed;
    `PopulationMLP`s (and a `PopulationRecurrent` policy for network.name gru or lstm)
    evaluate every member with one batched product per layer.

        nets = MemberNetworks(config.network, batch_env, seeds=[5, 6, 7])
        output = nets.policy_output(observ)         # [M, N, O] -> [M, N, size]
        output, state = nets.policy_step(observ, state)   # recurrent: state [M, N, S]
        dist = nets.dist(output)                    # batch shape [M, N]
        value = nets.value_of(observ)               # [M, N]

    Not a `tf.Module`: the algorithm tracks its variables (`policy_params`,
    `value_params`, `log_std`) under the names its checkpoints have always had.
    """

    def __init__(self, network, batch_env, seeds: Sequence[int], gsde: bool = False):
        """Builds each member's networks as a single run of its seed does.

        Sets the global seeds (`tf.keras.utils.set_random_seed`) to member m's seed while
        its networks are initialized, as a single run of that seed does.

        Args:
          network: the `network` section (feedforward, gru or lstm; vector observations).
          batch_env: the environments, for their observation and action spaces.
          seeds: each member's seed, M of them.
          gsde: gSDE's policy (`ppo.gsde`): its output holds the last hidden layer too,
            and `log_std` is each member's [L, A].
        """
        singles = []
        for seed in seeds:
            tf.keras.utils.set_random_seed(seed)
            singles.append(make_networks(network, batch_env, gsde=gsde))
        self.head = singles[0][0]  # Holds the action space; its log_std is unused.
        self.gsde = gsde
        (observ_size,) = tuple(batch_env.observation_space.shape)
        size, activation = self.head.size, network.activation
        self.recurrent = is_recurrent(network)
        if self.recurrent:
            self.policy = PopulationRecurrent(
                network.name,
                network.recurrent_units,
                observ_size,
                network.policy_layers,
                size,
                activation,
                0.01,
            )
        elif gsde:  # The mean's layer, and the last hidden layer beside it.
            self.policy = PopulationMLP(
                observ_size, network.policy_layers, self.head.action_size, activation, 0.01, True
            )
        else:
            self.policy = PopulationMLP(observ_size, network.policy_layers, size, activation, 0.01)
        self.value = PopulationMLP(observ_size, network.value_layers, 1, activation, 1.0)
        self.policy_params = tf.Variable(
            tf.stack([self.policy.flatten(policy) for _, policy, _ in singles]), name="policy"
        )  # [M, D_policy]
        self.value_params = tf.Variable(
            tf.stack([self.value.flatten(value) for _, _, value in singles]), name="value"
        )  # [M, D_value]
        self.log_std = None  # A categorical policy has none.
        if hasattr(self.head, "log_std"):  # [M, A], or gSDE's [M, L, A].
            self.log_std = tf.Variable(tf.stack([h.log_std for h, _, _ in singles]))
        self.sample_shape, self.sample_dtype = self.head.sample_spec()

    @property
    def trainable(self) -> list[tf.Variable]:
        """The variables the members' losses train, each [M, ...]."""
        variables = [self.policy_params, self.value_params]
        return variables if self.log_std is None else [*variables, self.log_std]

    def rollout_spec(self, observ_shape) -> dict[str, tuple]:
        """The shape and dtype of each field of an agent's step in a rollout, as `PPO`'s.

        `sample` and `output` are what these networks' policy drew and computed; a
        recurrent policy's rollout also stores `first`, whether the step began an episode.
        """
        return transition_spec(
            observ_shape,
            tf.float32,
            self.sample_shape,
            self.sample_dtype,
            self.head.size,
            first=self.recurrent,
        )

    def policy_output(self, observ: tf.Tensor) -> tf.Tensor:
        """Policy outputs [M, n, size] of normalized observations [M, n, O] (feed-forward)."""
        return self.policy.apply(self.policy_params, observ)

    def policy_step(self, observ: tf.Tensor, state: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """A recurrent policy's outputs [M, n, size] and states [M, n, S] after one step."""
        return self.policy.step(self.policy_params, observ, state)

    def unroll(self, observ: tf.Tensor, first: tf.Tensor, state: tf.Tensor) -> tf.Tensor:
        """A recurrent policy's outputs [M, T, n, size] on rollouts [M, T, n, O].

        Replays each column from its state [M, n, S]; `first` [M, T, n] restarts it.
        """
        time_major = [1, 0, 2]
        observ = tf.transpose(observ, [*time_major, 3])  # [T, M, n, O]
        first = tf.transpose(first, time_major)  # [T, M, n]
        output = self.policy.unroll(self.policy_params, observ, first, state)
        return tf.transpose(output, [*time_major, 3])  # [M, T, n, size]

    def value_of(self, observ: tf.Tensor) -> tf.Tensor:
        """Values [M, n] of normalized observations [M, n, O]."""
        return self.value.apply(self.value_params, observ)[..., 0]

    def dist(self, output: tf.Tensor, log_std: tf.Tensor | None = None):
        """The members' action distributions, batch shape [M, n], of outputs [M, n, size].

        A Gaussian policy takes `log_std` [M, A] (gSDE's [M, L, A]; default: the current
        one).
        """
        if self.log_std is None:
            return self.head(output)
        log_std = self.log_std if log_std is None else log_std
        return self.head(output, per_member(self.head, log_std))

    def draw_noise(self, count: int, seeds: tf.Tensor) -> tf.Tensor:
        """gSDE's exploration matrices [M, count, L, A], member m's drawn with its seed
        seeds[m] [2] and its sigma."""

        def draw(args):
            log_std, seed = args  # [L, A], [2]
            return self.head.draw_noise(count, seed, log_std)

        head = self.head
        spec = tf.TensorSpec([count, head.latent_size, head.action_size], tf.float32)
        return tf.map_fn(draw, (self.log_std, seeds), fn_output_signature=spec)

    def mode(self, output: tf.Tensor) -> tf.Tensor:
        """The members' greedy samples [M, n, ...] of outputs [M, n, size]."""
        return tf.cast(self.dist(output).mode(), self.sample_dtype)

    def sample(self, output: tf.Tensor, seeds: tf.Tensor) -> tf.Tensor:
        """Samples [M, n, ...] of outputs [M, n, size], member m's with stateless seeds[m].

        A stateless sampler takes one seed: this maps over members (`tf.map_fn`).
        """
        head, dtype = self.head, self.sample_dtype
        log_std = tf.zeros([seeds.shape[0], 0]) if self.log_std is None else self.log_std
        categorical = self.log_std is None

        def sample(args):
            output, log_std, seed = args  # [n, size], [A], [2]
            dist = head(output) if categorical else head(output, log_std)
            return tf.cast(dist.sample(seed=seed), dtype)

        spec = tf.TensorSpec([None, *self.sample_shape], dtype)
        return tf.map_fn(sample, (output, log_std, seeds), fn_output_signature=spec)


def per_member(head, log_std: tf.Tensor) -> tf.Tensor:
    """Members' log stds [M, ...] shaped for `head` on outputs [M, n, size]: [M, 1, A] for
    a state-independent std, gSDE's [M, L, A] as they are (a batched product)."""
    return log_std if isinstance(head, StateDependentNoiseHead) else log_std[:, None]
