"""PPO's update of one agent: epochs of shuffled minibatches, one Adam step each.

`run_epochs` is the loop itself, shared with a population's `MemberUpdate`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import tensorflow as tf

from batchrl.algorithms.ppo.losses import minibatch_loss
from batchrl.parts.permutations import random_permutations

METRICS = ("policy_loss", "value_loss", "entropy", "clip_fraction", "grad_norm")


def run_epochs(
    epochs: int,
    minibatches: int,
    order_of: Callable[[tf.Tensor], tf.Tensor],
    step: Callable[[tf.Tensor, tf.Tensor], dict[str, tf.Tensor]],
    zeros: dict[str, tf.Tensor],
) -> dict[str, tf.Tensor]:
    """The means over `epochs` x `minibatches` steps of what each step returns.

    Two nested `tf.while_loop`s: epoch e takes its order of rows `order_of(e)`, and its
    minibatch i is `step(order, i)`, which trains and returns metrics shaped as `zeros`.
    """

    def minibatch(index, order, metrics):
        new = step(order, index)
        return index + 1, order, {name: metrics[name] + new[name] for name in metrics}

    def epoch(count, metrics):
        _, _, metrics = tf.while_loop(
            lambda index, *_: index < minibatches, minibatch, (0, order_of(count), metrics)
        )
        return count + 1, metrics

    _, metrics = tf.while_loop(lambda count, _: count < epochs, epoch, (0, zeros))
    return {name: value / (epochs * minibatches) for name, value in metrics.items()}


class Update:
    """The epochs and minibatch steps of `PPO.learn` after its advantages (Schulman et
    al. 2017, Algorithm 1), as `MemberUpdate` is a population's.

        update = Update(config.ppo, head=..., policy=..., ...)
        metrics = update.epochs(data, old_log_std, total)   # rows [total, ...]
        kl = update.mean_kl(data, old_log_std)

    A recurrent policy trains on minibatches of whole columns: data [T, B, ...], `total`
    B columns, each replayed from its state in `states` [B, S].

    Holds no state of its own: the variables belong to the algorithm.
    """

    def __init__(
        self,
        cfg: Mapping,
        *,
        head,
        policy: tf.Module,
        value_of: Callable[[tf.Tensor], tf.Tensor],
        trainable: list[tf.Variable],
        optimizer,
        rng: tf.random.Generator,
        penalty: tf.Variable,
        recurrent: bool = False,
        jit_compile: bool = False,
    ):
        """Args:
        cfg: the `ppo` section (epochs, minibatches, objective, its settings).
        head: the policy head, outputs to distributions.
        policy: the policy network.
        value_of: values [...] of normalized observations [..., O].
        trainable: the variables each step updates.
        optimizer: Adam, its learning rate set before `epochs`.
        rng: the algorithm's random stream, for the minibatch orders.
        penalty: the KL penalty coefficient (objective kl_penalty).
        recurrent: whether `policy` is recurrent (`unroll` replays columns).
        jit_compile: each minibatch step as one XLA program, which fuses its many small
          ops (layers, losses, clipping and Adam). Only for a fixed minibatch shape:
          XLA would compile again at every new one.
        """
        self._cfg = cfg
        self._head, self._policy, self._value_of = head, policy, value_of
        self._trainable, self._optimizer = trainable, optimizer
        self._rng, self._penalty = rng, penalty
        self._recurrent = recurrent
        self._step = self._minibatch
        if jit_compile:
            self._step = tf.function(self._minibatch, jit_compile=True)

    def epochs(self, batch, old_log_std, total, states=None) -> dict[str, tf.Tensor]:
        """Epochs of minibatch steps over `total` rows of `batch` (columns, with `states`).

        Returns:
          The means over all minibatches of `METRICS`.
        """
        cfg, rng = self._cfg, self._rng
        # A static size when `total` is a Python int: under XLA a slice of a size computed
        # in the graph is padded to all `total` rows and masked, which made every minibatch
        # step under `train.jit_compile` cost as much as a step on the whole batch.
        static = isinstance(total, int)
        size = (
            max(total // cfg.minibatches, 1) if static else tf.maximum(total // cfg.minibatches, 1)
        )
        axis = 0 if states is None else 1

        def step(order, index):
            if static:
                indices = tf.slice(order, [index * size], [size])  # [size]
            else:
                indices = order[index * size : (index + 1) * size]  # [size]
            minibatch = {key: tf.gather(v, indices, axis=axis) for key, v in batch.items()}
            if states is not None:
                minibatch["state"] = tf.gather(states, indices)
            # Inside a call that XLA compiles, the nested XLA function is inlined. (It
            # gathered wrong rows there while minibatches had a dynamic size:
            # tests/algorithms/ppo/test_xla.py.)
            return self._step(minibatch, old_log_std)

        # Every epoch's order before the epochs. XLA on CPU sorts slowly (argsort of 2,048
        # keys: 0.4 ms), so a static size takes permutations that need no sort.
        if static:
            orders = random_permutations(rng, cfg.epochs, total)
        else:
            orders = tf.argsort(rng.uniform([cfg.epochs, total]), axis=-1)
        zeros = {name: tf.constant(0.0) for name in METRICS}
        return run_epochs(cfg.epochs, cfg.minibatches, lambda e: orders[e], step, zeros)

    def mean_kl(self, batch, old_log_std) -> tf.Tensor:
        """The mean KL(acting || current) over the rows of `batch`."""
        output, batch = self._policy_output(batch)
        head = self._head
        return tf.reduce_mean(head(batch["output"], old_log_std).kl_divergence(head(output)))

    def _policy_output(self, batch):
        """Policy outputs [M, size] for a batch, and the batch flattened to [M, ...].

        A recurrent policy replays time-major rollouts [T, n, ...] from `batch['state']`.
        """
        if not self._recurrent:
            return self._policy(batch["observ"]), batch
        output = self._policy.unroll(batch["observ"], batch["first"], batch["state"])
        flat = {
            key: tf.reshape(value, [-1] + value.shape[2:].as_list())
            for key, value in batch.items()
            if key != "state"
        }
        return tf.reshape(output, [-1, self._head.size]), flat

    def _minibatch(self, batch, old_log_std):
        """One Adam step on a minibatch; its `METRICS`."""
        cfg = self._cfg
        with tf.GradientTape() as tape:
            output, batch = self._policy_output(batch)
            dist = self._head(output)
            old_dist = self._head(batch["output"], old_log_std)
            terms = {
                "log_prob": dist.log_prob(batch["sample"]),  # [M]
                "old_log_prob": old_dist.log_prob(batch["sample"]),  # [M]
                "entropy": dist.entropy(),  # [M]
                "value": self._value_of(batch["observ"]),  # [M]
                "advantage": batch["advantage"],
                "target": batch["target"],
                "old_value": batch["old_value"],
            }
            if cfg.objective == "kl_penalty":
                terms["kl"] = old_dist.kl_divergence(dist)  # [M]
                terms["penalty"] = self._penalty
            loss, metrics = minibatch_loss(cfg, terms)
        variables = self._trainable
        gradients = tape.gradient(loss, variables)
        gradients, grad_norm = tf.clip_by_global_norm(gradients, cfg.max_grad_norm)
        self._optimizer.apply_gradients(zip(gradients, variables))
        return dict(metrics, grad_norm=grad_norm)
