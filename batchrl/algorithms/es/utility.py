"""The math of evolution strategies: fitness shaping, the mirrored gradient, L2, Adam, noise."""

from __future__ import annotations

import tensorflow as tf

# Philox, named rather than 'auto_select', so that every device and process draws the same.
_ALG = "philox"


def centered_ranks(fitness: tf.Tensor) -> tf.Tensor:
    """Ranks of all values mapped linearly onto [-0.5, 0.5] (Salimans et al. 2017).

    For n values x_1..x_n, rank_i = #{j : x_j < x_i} + (#{j : x_j = x_i} - 1) / 2, so
    that the smallest value has rank 0 and the largest n - 1, and the result is

        u_i = rank_i / (n - 1) - 0.5                 (u_i = 0 when n = 1)

    Ties: tied values share the mean of the ranks they occupy (scipy's `rankdata(method=
    'average')`), so equal returns get equal utilities; OpenAI's `compute_ranks` breaks
    ties by position instead, which would favour whichever member came first. A pair of
    mirrored members with equal returns therefore contributes nothing to the gradient.
    The utilities sum to zero. O(n^2) comparisons: fine for populations of thousands.

    Args:
      fitness: float [n], the returns of all 2N members.

    Returns:
      float32 [n] in [-0.5, 0.5].
    """
    x = tf.cast(tf.convert_to_tensor(fitness), tf.float32)  # [n]
    below = tf.reduce_sum(tf.cast(x[None, :] < x[:, None], tf.float32), 1)  # [n]
    equal = tf.reduce_sum(tf.cast(x[None, :] == x[:, None], tf.float32), 1)  # [n]
    rank = below + (equal - 1.0) / 2.0  # [n]
    n = tf.cast(tf.size(x), tf.float32)
    return tf.math.divide_no_nan(rank, n - 1.0) - tf.where(n > 1.0, 0.5, 0.0)


def separate_ranks(fitness_plus: tf.Tensor, fitness_minus: tf.Tensor) -> tf.Tensor:
    """The routing paper's shaping: +eps and -eps returns ranked apart, each into [-0.5, 0.5].

    Güemes-Palau et al. (digital-twin routing with ES) apply `centered_ranks` to the N
    returns of theta + sigma eps_i and, separately, to the N returns of theta - sigma eps_i:

        u+ = centered_ranks(F+),   u- = centered_ranks(F-)

    Args:
      fitness_plus: float [N], returns of the members theta + sigma eps_i.
      fitness_minus: float [N], returns of the members theta - sigma eps_i.

    Returns:
      float32 [2N]: u+ followed by u-, in the population's member order.
    """
    return tf.concat([centered_ranks(fitness_plus), centered_ranks(fitness_minus)], 0)


def shape_fitness(fitness: tf.Tensor, method: str) -> tf.Tensor:
    """Shaped fitness [2N] of the returns [2N] = (F+ [N], F- [N]) by `method`.

    Args:
      fitness: float [2N], the +eps members first, then the -eps members.
      method: 'centered_ranks' (over all 2N), 'separate_ranks' (each half apart) or
        'raw' (the returns as they are, as float32).
    """
    fitness = tf.cast(tf.convert_to_tensor(fitness), tf.float32)
    if method == "centered_ranks":
        return centered_ranks(fitness)
    if method == "separate_ranks":
        plus, minus = tf.split(fitness, 2)
        return separate_ranks(plus, minus)
    if method == "raw":
        return fitness
    raise ValueError(f"Unknown fitness shaping {method!r}.")


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


def member_seed(seed: int, generation, pair) -> tf.Tensor:
    """The stateless seed [2] of noise vector `pair` of `generation`: fold_in(fold_in(seed)).

    Keyed by three integers, the noise needs no table and no communication: a worker that
    knows the run's seed, the generation and a pair index regenerates the same eps.
    """
    key = tf.stack([tf.constant(seed % 2**31, tf.int64), tf.constant(0, tf.int64)])
    key = tf.random.experimental.stateless_fold_in(key, tf.cast(generation, tf.int64), alg=_ALG)
    return tf.random.experimental.stateless_fold_in(key, tf.cast(pair, tf.int64), alg=_ALG)


def member_noise(seed: int, generation, pairs: tf.Tensor, size: int) -> tf.Tensor:
    """The noise eps [K, size] ~ N(0, I) of `pairs` [K] of `generation`.

    `tf.random.stateless_normal` (Philox) from `member_seed`. We chose stateless ops over
    OpenAI's shared noise table (250M floats, 1 GB per machine, indexed by a random
    offset): nothing to allocate or ship to workers, no correlation between members whose
    table slices overlap, and any number of parameters. Generating D normals per member
    costs about as much as reading them from a table on CPU. TensorFlow's XLA kernels
    draw different numbers than its eager and graph kernels, so noise is drawn outside
    XLA (`ask` and `tell` are plain `tf.function`s) for every process to agree.

    Args:
      seed: the run's seed.
      generation: int, the generation number.
      pairs: int [K], indices of mirrored pairs in [0, N).
      size: D, the number of parameters.

    Returns:
      float32 [K, size].
    """
    pairs = tf.cast(tf.convert_to_tensor(pairs), tf.int64)

    def draw(pair):
        return tf.random.stateless_normal([size], member_seed(seed, generation, pair), alg=_ALG)

    return tf.map_fn(draw, pairs, fn_output_signature=tf.TensorSpec([size], tf.float32))
