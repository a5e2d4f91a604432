"""Normalize observations or rewards with streaming estimates of their mean and spread."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf


class StreamingNormalizer(tf.Module):
    """Running mean and standard deviation of a stream of batches, and normalization.

    BatchPPO (Hafner et al., 2017, https://arxiv.org/abs/1709.02878), following
    Schulman et al. (2017) and Heess et al. (2017), normalizes observations with
    `center=True, scale=True` and rewards with `center=False, scale=True`.

    `update` merges the statistics of each batch into the running ones with the
    parallel algorithm of Chan, Golub and LeVeque (1979), for running statistics
    (n_a, mean_a, M2_a) and a batch (n_b, mean_b, M2_b):

        n = n_a + n_b,   delta = mean_b - mean_a
        mean = mean_a + delta * n_b / n
        M2 = M2_a + M2_b + delta^2 * n_a * n_b / n

    The count, mean and M2 are float64 `tf.Variable`s, so that merging batches into a
    count of many millions keeps its precision; they survive `tf.train.Checkpoint`.
    The standard deviation is the population one, sqrt(M2 / n) (numpy's default
    ddof=0). Until two values have been seen, the std is 1.

    Usage, inside or outside `tf.function`:

        normalizer = StreamingNormalizer(observ_shape)
        normalizer.update(observ)            # [N, *shape]
        observ = normalizer.normalize(observ)
    """

    def __init__(
        self,
        shape: Sequence[int] | tf.TensorShape = (),
        center: bool = True,
        scale: bool = True,
        clip: float | tf.Tensor | None = 10.0,
        epsilon: float = 1e-8,
        name: str | None = None,
    ):
        """Creates zero statistics.

        Args:
          shape: Shape of one value; () for scalars such as rewards.
          center: Subtract the running mean in `normalize`.
          scale: Divide by the running standard deviation in `normalize`.
          clip: Clip normalized values to [-clip, clip]; None or 0 turns it off. A float32
            tensor broadcastable to the values' shape clips each row to its own bound
            (a population's members: [M, 1] for values [N, M, O]; inf: no clipping).
          epsilon: Added to the standard deviation before dividing by it.
          name: Name of the module.
        """
        super().__init__(name=name)
        self._shape = tf.TensorShape(shape)
        self._center = center
        self._scale = scale
        self._clip = clip
        self._epsilon = epsilon
        with self.name_scope:
            self._count = tf.Variable(tf.constant(0.0, tf.float64), trainable=False, name="count")
            self._mean = tf.Variable(
                tf.zeros(self._shape, tf.float64), trainable=False, name="mean"
            )
            self._m2 = tf.Variable(tf.zeros(self._shape, tf.float64), trainable=False, name="m2")

    @property
    def count(self) -> tf.Tensor:
        """Number of values seen, float64 scalar."""
        return self._count.read_value()

    @property
    def mean(self) -> tf.Tensor:
        """Running mean, float64 [*shape]; 0 before the first update."""
        return self._mean.read_value()

    @property
    def std(self) -> tf.Tensor:
        """Running population standard deviation, float64 [*shape]; 1 until two values."""
        count = self._count.read_value()
        variance = tf.math.divide_no_nan(self._m2, count)  # [*shape]
        return tf.where(count > 1, tf.sqrt(variance), tf.ones_like(variance))

    def update(self, value: tf.Tensor) -> None:
        """Merges a batch of values into the running statistics.

        Args:
          value: [N, *shape] batch; N may be 0.
        """
        value = tf.cast(value, tf.float64)  # [N, *shape]
        value.shape[1:].assert_is_compatible_with(self._shape)
        batch_count = tf.cast(tf.shape(value)[0], tf.float64)
        batch_mean = tf.math.divide_no_nan(tf.reduce_sum(value, 0), batch_count)  # [*shape]
        batch_m2 = tf.reduce_sum(tf.square(value - batch_mean), 0)  # [*shape]
        old_count = self._count.read_value()
        count = old_count + batch_count
        delta = batch_mean - self._mean.read_value()  # [*shape]
        self._mean.assign_add(delta * tf.math.divide_no_nan(batch_count, count))
        self._m2.assign_add(
            batch_m2 + tf.square(delta) * tf.math.divide_no_nan(old_count * batch_count, count)
        )
        self._count.assign(count)

    def normalize(self, value: tf.Tensor) -> tf.Tensor:
        """Centers, scales and clips values with the running statistics.

            (value - mean) / (std + epsilon), clipped to [-clip, clip]

        where `center` and `scale` choose which of the two operations apply.

        Args:
          value: [..., *shape] values of any float dtype, or integers (frames of uint8),
            which become float32.

        Returns:
          Normalized values of the shape and (float) dtype of `value`.
        """
        value = tf.convert_to_tensor(value)
        if not value.dtype.is_floating:
            value = tf.cast(value, tf.float32)
        dtype = value.dtype
        if self._center:
            value -= tf.cast(self.mean, dtype)
        if self._scale:
            value /= tf.cast(self.std + self._epsilon, dtype)
        if isinstance(self._clip, tf.Tensor) or self._clip:
            value = tf.clip_by_value(value, -self._clip, self._clip)
        return value

    def select(self, rows: list[int]) -> StreamingNormalizer:
        """A copy holding the statistics of `rows` of the leading axis, e.g. one member's.

        For statistics of shape [M, ...] (one per member of a population), the copy has
        shape [len(rows), ...] and normalizes exactly as this one does those rows; a
        clip tensor of bounds per row is selected too.
        """
        clip = self._clip
        if isinstance(clip, tf.Tensor) and clip.shape.rank:
            clip = tf.gather(clip, rows)
        copy = StreamingNormalizer(
            [len(rows), *self._shape[1:]], self._center, self._scale, clip, self._epsilon
        )
        copy._count.assign(self._count)
        copy._mean.assign(tf.gather(self._mean, rows))
        copy._m2.assign(tf.gather(self._m2, rows))
        return copy

    def copy_rows(self, source: tf.Tensor) -> None:
        """Row m of the leading axis takes the statistics of row `source[m]` ([M] ints).

        For a population's members (population-based training); the count is shared.
        """
        self._mean.assign(tf.gather(self._mean, source))
        self._m2.assign(tf.gather(self._m2, source))

    def summary(self, step: int | tf.Tensor | None = None) -> None:
        """Writes the mean and std to the default `tf.summary` writer, if there is one.

        Args:
          step: Summary step; None uses `tf.summary.experimental.get_step()`.
        """
        with tf.name_scope(self.name):
            tf.summary.scalar("count", self.count, step=step)
            if self._shape.rank:
                tf.summary.histogram("mean", self.mean, step=step)
                tf.summary.histogram("std", self.std, step=step)
            else:
                tf.summary.scalar("mean", self.mean, step=step)
                tf.summary.scalar("std", self.std, step=step)


class RewardScaler(tf.Module):
    """Divides each agent's rewards by the running std of the discounted return.

    Gymnasium's `NormalizeReward`, SB3's `VecNormalize` and CleanRL scale rewards so:
    each agent keeps a discounted return R that restarts at 0 after its episode ends,

        R <- discount * R + r,    r_scaled = clip(r / (std(R) + epsilon), -clip, clip),

    where std(R) is the running standard deviation of all returns seen, including the
    current step's. Rewards are not centred, so their sign, and the meaning of a
    terminal state, are kept. The statistics and returns survive `tf.train.Checkpoint`.
    """

    def __init__(
        self,
        batch_size: int,
        discount: float | tf.Tensor,
        clip: float | tf.Tensor | None = 10.0,
        name: str | None = None,
        shape: Sequence[int] = (),
    ):
        """Creates zero statistics for `batch_size` agents.

        Args:
          batch_size: the number of agents B.
          discount: the discount of the return whose spread scales the rewards; or
            discounts [*shape], one for each of a population's members.
          clip: clip scaled rewards to [-clip, clip]; None or 0 turns it off; or bounds
            [*shape] (see `StreamingNormalizer`).
          name: name of the module.
          shape: the shape of each agent's reward; [M] gives M separate statistics, one
            for each member of a population, whose agent i is then a row of M agents.
        """
        super().__init__(name=name)
        self._discount = discount
        with self.name_scope:
            self.normalizer = StreamingNormalizer(shape, center=False, scale=True, clip=clip)
            self.discounted_return = tf.Variable(
                tf.zeros([batch_size, *shape]), trainable=False, name="discounted_return"
            )

    def scale(self, agent_indices: tf.Tensor, reward: tf.Tensor, done: tf.Tensor) -> tf.Tensor:
        """Updates the statistics with one step of `agent_indices` and scales its rewards.

        Args:
          agent_indices: int32 [K].
          reward: float32 [K, *shape].
          done: bool [K, *shape], the step ended the agent's episode.

        Returns:
          The scaled rewards [K, *shape].
        """
        ret = tf.gather(self.discounted_return, agent_indices) * self._discount + reward  # [K, ...]
        self.normalizer.update(ret)
        ret = tf.where(done, tf.zeros_like(ret), ret)
        self.discounted_return.scatter_nd_update(agent_indices[:, None], ret)
        return self.normalizer.normalize(reward)
