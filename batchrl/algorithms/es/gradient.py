"""The step of evolution strategies: the mirrored gradient estimate, coupled L2 and Adam."""

from __future__ import annotations

import tensorflow as tf


def mirrored_gradient(
    fitness_plus: tf.Tensor, fitness_minus: tf.Tensor, noise: tf.Tensor, sigma: float
) -> tf.Tensor:
    """The antithetic estimate of the gradient of E[F(theta + sigma eps)] (ascent direction).

    Salimans et al. (2017), mirrored sampling (Brockhoff et al. 2010):

        g = 1 / (2 N sigma) * sum_i (F+_i - F-_i) eps_i

    Args:
      fitness_plus: float [N], (shaped) fitness of theta + sigma eps_i.
      fitness_minus: float [N], (shaped) fitness of theta - sigma eps_i.
      noise: float [N, D], eps_i ~ N(0, I).
      sigma: the noise standard deviation.

    Returns:
      float32 [D].
    """
    diff = tf.cast(fitness_plus, tf.float32) - tf.cast(fitness_minus, tf.float32)  # [N]
    n = tf.cast(tf.shape(diff)[0], tf.float32)
    return tf.linalg.matvec(tf.cast(noise, tf.float32), diff, transpose_a=True) / (
        2.0 * n * sigma
    )  # [D]


def coupled_l2(gradient: tf.Tensor, theta: tf.Tensor, l2_coeff: float) -> tf.Tensor:
    """The ascent direction with weight decay coupled into the gradient.

    We ascend the fitness, so the L2 penalty -l2_coeff / 2 * |theta|^2 enters as

        g_total = g - l2_coeff * theta

    This is OpenAI's ES (`es.py`: `g = -g + l2coeff * theta` and a minimizing optimizer)
    and the routing paper's form, written for ascent: the decay passes through Adam's
    moments, unlike AdamW's decoupled decay.
    """
    return tf.convert_to_tensor(gradient, tf.float32) - l2_coeff * tf.cast(theta, tf.float32)


def adam_step(
    gradient: tf.Tensor,
    m: tf.Tensor,
    v: tf.Tensor,
    t: tf.Tensor,
    learning_rate: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One Adam step for ascent (Kingma & Ba 2015), in OpenAI ES's form (`optimizers.py`).

        m = beta1 m + (1 - beta1) g
        v = beta2 v + (1 - beta2) g^2
        a = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
        step = a * m / (sqrt(v) + epsilon)           theta <- theta + step

    Args:
      gradient: float32 [D], the ascent direction g.
      m, v: float32 [D], the moments before this step.
      t: the number of this step, 1 for the first.
      learning_rate, beta1, beta2, epsilon: Adam's constants.

    Returns:
      (step [D], new m [D], new v [D]).
    """
    t = tf.cast(t, tf.float32)
    m = beta1 * m + (1.0 - beta1) * gradient
    v = beta2 * v + (1.0 - beta2) * tf.square(gradient)
    a = learning_rate * tf.sqrt(1.0 - beta2**t) / (1.0 - beta1**t)
    return a * m / (tf.sqrt(v) + epsilon), m, v
