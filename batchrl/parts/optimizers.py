"""Keras's Adam as TensorFlow's one fused Adam op, and Adam at a rate per population member."""

from __future__ import annotations

import tensorflow as tf

from batchrl.parts.untracked import Untracked


class Adam(tf.keras.optimizers.Adam):
    """`tf.keras.optimizers.Adam` whose update of a variable is one `ResourceApplyAdam` op.

    Keras builds each variable's update from about 25 small ops (casts, powers, the moment
    updates, the step), and their Python made about a fifth of the time to trace a PPO
    training call; every op is also lowered and compiled again under XLA. TensorFlow's
    `ResourceApplyAdam` kernel (with an XLA kernel) computes the same update,

        m <- m + (1 - beta_1) (g - m);  v <- v + (1 - beta_2) (g^2 - v)
        variable <- variable - lr sqrt(1 - beta_2^t) / (1 - beta_1^t) m / (sqrt(v) + epsilon)

    on the moment variables Keras made, so checkpoints, `iterations` and the learning rate
    are Keras's own. AMSGrad, sparse gradients (`tf.IndexedSlices`, e.g. of a gathered
    table) and variables that are not TensorFlow resource variables take Keras's update.
    """

    def update_step(self, gradient, variable, learning_rate):
        sparse = isinstance(gradient, tf.IndexedSlices)
        if self.amsgrad or sparse or not isinstance(variable, tf.Variable):
            return super().update_step(gradient, variable, learning_rate)
        # Keras's Adam.update_step finds the moments the same way.
        index = self._get_variable_index(variable)
        momentum, velocity = self._momentums[index].value, self._velocities[index].value
        dtype = variable.dtype
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        local_step = tf.cast(self.iterations + 1, dtype)
        return tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=momentum.handle,
            v=velocity.handle,
            beta1_power=beta_1**local_step,
            beta2_power=beta_2**local_step,
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
        )


class MemberAdam(Adam):
    """Adam on a population's stacked parameters [M, ...], member m at its own rate.

    `rates` [M] (assign them before `apply_gradients`; Keras's scalar `learning_rate` is
    unused) scale the rows of member m; everything else is Adam's, in the order of the
    `ResourceApplyAdam` kernel, whose `lr` must be a scalar:

        alpha_m = rates_m sqrt(1 - beta_2^t) / (1 - beta_1^t)
        m <- m + (g - m) (1 - beta_1);  v <- v + (g^2 - v) (1 - beta_2)
        variable_m <- variable_m - m_m alpha_m / (sqrt(v_m) + epsilon)

    so that member m's rows change as a single run's variables at rate rates_m do. The
    rates are outside checkpoints (the config and the schedule set them every update);
    the moments and `iterations` are Keras's, as in `Adam`.
    """

    def __init__(self, members: int, epsilon: float = 1e-7):
        super().__init__(0.0, epsilon=epsilon)
        self._rates = Untracked({"rates": tf.Variable(tf.zeros([members]), trainable=False)})

    @property
    def rates(self) -> tf.Variable:
        """The members' learning rates [M]."""
        return self._rates.variables["rates"]

    def member_variables(self) -> list[tf.Variable]:
        """The first and second moments [M, ...] of every variable, rows by member."""
        return [v.value for v in [*self._momentums, *self._velocities]]

    def update_step(self, gradient, variable, learning_rate):
        del learning_rate  # Each member's is in `rates`.
        index = self._get_variable_index(variable)
        momentum, velocity = self._momentums[index].value, self._velocities[index].value
        dtype = variable.dtype
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        local_step = tf.cast(self.iterations + 1, dtype)
        rates = tf.reshape(tf.cast(self.rates, dtype), [-1] + [1] * (variable.shape.rank - 1))
        alpha = rates * tf.sqrt(1 - beta_2**local_step) / (1 - beta_1**local_step)  # [M, 1...]
        gradient = tf.cast(gradient, dtype)
        momentum.assign_add((gradient - momentum) * (1 - beta_1))
        velocity.assign_add((tf.square(gradient) - velocity) * (1 - beta_2))
        variable.assign_sub(momentum * alpha / (tf.sqrt(velocity) + tf.cast(self.epsilon, dtype)))
