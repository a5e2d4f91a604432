"""PPO's update of M members at once: epochs of shuffled minibatches, one Adam step each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tensorflow as tf

from batchrl.algorithms.ppo import losses
from batchrl.algorithms.ppo.losses import minibatch_loss
from batchrl.algorithms.ppo.member_networks import MemberNetworks
from batchrl.algorithms.ppo.member_settings import MemberSettings
from batchrl.algorithms.ppo.update import METRICS, run_epochs
from batchrl.parts import optimizers
from batchrl.parts.permutations import random_permutations


class MemberUpdate:
    """The epochs and minibatch steps of every member of a population, as `PPO`'s.

    Member m shuffles its rows with the permutations its own stream draws (the ones a
    single run of its seed draws), and each minibatch step is one Adam step of all
    members: `minibatch_loss` of all members at once (over axis -1), summed (member m's
    parameters see only loss[m]), gradients clipped by each member's norm, and
    `MemberAdam` at each member's rate.

        update = MemberUpdate(config.ppo, nets, settings, optimizer, rngs, penalty)
        metrics = update.epochs(data, old_log_std, total)   # data [M, total, ...]
        kl = update.mean_kl(data, old_log_std)              # [M]

    A recurrent policy trains, as `PPO`'s does, on minibatches of whole columns: data
    [M, T, B, ...], `total` B columns, each replayed from its state in `states` [M, B, S].

    Holds no state of its own: the variables belong to the algorithm.
    """

    def __init__(
        self,
        cfg: Mapping,
        nets: MemberNetworks,
        settings: MemberSettings,
        optimizer: optimizers.MemberAdam,
        rngs: Sequence[tf.random.Generator],
        penalty: tf.Variable,
    ):
        """Args:
        cfg: the `ppo` section (epochs, minibatches, objective and shared settings).
        nets: the members' networks, whose `trainable` variables the steps update.
        settings: each member's own settings.
        optimizer: Adam with a rate per member; its `rates` must be set before `epochs`.
        rngs: each member's random stream, M of them.
        penalty: the members' KL penalty coefficients [M] (objective kl_penalty).
        """
        self._cfg = cfg
        self._nets = nets
        self._settings = settings
        self._optimizer = optimizer
        self._rngs = list(rngs)
        self._penalty = penalty
        self._members = len(self._rngs)

    def epochs(self, data, old_log_std, total: int, states=None) -> dict[str, tf.Tensor]:
        """Epochs of minibatch steps of all members on rows [M, total, ...] of `data`.

        Args:
          data: `observ`, `sample`, `output` (of the acting policy), `advantage`,
            `target` and `old_value`, each [M, total, ...]; with `states`, time-major
            columns [M, T, total, ...], and `first` [M, T, total] too.
          old_log_std: the acting policy's log std [M, A], or None (categorical).
          total: the rows (columns, with `states`) of each member.
          states: None, or the recurrent states [M, total, S] the columns start from.

        Returns:
          Each member's means over all minibatches of `METRICS`, [M] each.
        """
        cfg, members = self._cfg, self._members
        size = max(total // cfg.minibatches, 1)
        axis = 1 if states is None else 2
        # Each member's orders for every epoch, from its own stream: [M, epochs, total].
        orders = tf.stack([random_permutations(rng, cfg.epochs, total) for rng in self._rngs])

        def step(order, index):
            indices = tf.slice(order, [0, index * size], [members, size])  # [M, size]
            minibatch = {
                key: tf.gather(v, indices, axis=axis, batch_dims=1) for key, v in data.items()
            }  # [M, size, ...] or [M, T, size, ...]
            if states is not None:
                minibatch["state"] = tf.gather(states, indices, batch_dims=1)  # [M, size, S]
            return self._minibatch(minibatch, old_log_std)

        zeros = {name: tf.zeros([members]) for name in METRICS}
        order_of = lambda e: tf.gather(orders, e, axis=1)  # [M, total]
        return run_epochs(cfg.epochs, cfg.minibatches, order_of, step, zeros)

    def mean_kl(self, data, old_log_std, states=None) -> tf.Tensor:
        """Each member's mean KL(acting || current) [M] over its rows [M, n, ...].

        With `states` [M, B, S], over its columns [M, T, B, ...], replayed from them.
        """
        if states is not None:
            data = dict(data, state=states)
        dist, old_dist, _ = self._dists(data, old_log_std)
        return tf.reduce_mean(old_dist.kl_divergence(dist), 1)  # [M]

    def _minibatch(self, batch, old_log_std):
        """One Adam step of every member on its minibatch [M, n, ...]; metrics [M]."""
        cfg = self._cfg
        with tf.GradientTape() as tape:
            dist, old_dist, batch = self._dists(batch, old_log_std)
            terms = {
                "log_prob": dist.log_prob(batch["sample"]),  # [M, n]
                "old_log_prob": old_dist.log_prob(batch["sample"]),  # [M, n]
                "entropy": dist.entropy(),  # [M, n]
                "value": self._nets.value_of(batch["observ"]),  # [M, n]
                "advantage": batch["advantage"],
                "target": batch["target"],
                "old_value": batch["old_value"],
            }
            if cfg.objective == "kl_penalty":
                terms["kl"] = old_dist.kl_divergence(dist)  # [M, n]
                terms["penalty"] = self._penalty.read_value()  # [M]
            # Every member's loss at once: terms [M, n], each member's settings [M],
            # reductions over the steps (axis -1). (Not `tf.vectorized_map`, under which
            # XLA took a parameter variable of the gradient for a compile-time constant
            # and compiled the training call again at every call; nor a `tf.map_fn` over
            # members, which made 64 members' minibatch steps 64 small steps each.)
            loss, metrics = minibatch_loss({**cfg, **self._settings.varying()}, terms, axis=-1)
            total = tf.reduce_sum(loss)  # Member m's parameters see only loss[m].
        variables = self._nets.trainable
        gradients = tape.gradient(total, variables)
        max_grad_norm = self._settings.get("max_grad_norm")
        gradients, grad_norm = losses.clip_by_member_norm(gradients, max_grad_norm)
        self._optimizer.apply_gradients(zip(gradients, variables))
        return dict(metrics, grad_norm=grad_norm)

    def _dists(self, batch, old_log_std):
        """The current and the acting policy's distributions [M, n] on a batch [M, n, ...].

        A batch of columns [M, T, c, ...] with their `state` [M, c, S] is replayed by the
        recurrent policy, and returned flat as rows [M, n = T c, ...] (t c + j, as PPO's).
        """
        if "state" not in batch:
            output = self._nets.policy_output(batch["observ"])  # [M, n, size]
        else:
            output = self._nets.unroll(batch["observ"], batch["first"], batch["state"])
            batch = {key: _rows(v) for key, v in batch.items() if key != "state"}
            output = _rows(output)  # [M, n, size]
        dists = self._nets.dist(output), self._nets.dist(batch["output"], old_log_std)
        return (*dists, batch)


def _rows(x: tf.Tensor) -> tf.Tensor:
    """Columns [M, T, c, ...] -> rows [M, T c, ...]."""
    return tf.reshape(x, [x.shape[0], -1, *x.shape[3:]])
