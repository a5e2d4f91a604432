"""The search distribution of evolution strategies and its optimizer: `ask` and `tell`."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from batchrl.algorithms.es.fitness import shape_fitness
from batchrl.algorithms.es.gradient import adam_step, coupled_l2, mirrored_gradient
from batchrl.algorithms.es.noise import member_noise
from batchrl.parts.schedules import learning_rate

OPTIMIZERS = ("adam", "sgd")
SHAPINGS = ("centered_ranks", "separate_ranks", "raw")


class Strategy(tf.Module):
    """The search distribution N(theta, sigma^2 I) and its optimizer: `ask` and `tell`.

    Member m of a generation of 2N is theta + sigma eps_m for m < N and theta - sigma
    eps_(m - N) otherwise, with eps_i regenerated from (seed, generation, i), so that
    anyone holding theta evaluates any slice of the population (`members`) and `tell`
    takes fitness computed anywhere. `theta`, Adam's moments and `generation` are
    variables and survive `tf.train.Checkpoint`. Both run as plain `tf.function`s, never
    under XLA, so the noise is the same numbers in every process.
    """

    def __init__(self, theta, config, seed: int, name: str = "strategy"):
        """Args:
        theta: float32 [D], the initial parameters.
        config: the `es` section.
        seed: the seed of the noise.
        """
        super().__init__(name=name)
        self._cfg = config
        self._seed = int(seed)
        self.pairs = int(config.population)
        self.size = int(theta.shape[0])
        self.theta = tf.Variable(theta, trainable=False, name="theta")  # [D]
        self.m = tf.Variable(tf.zeros([self.size]), trainable=False, name="m")  # [D]
        self.v = tf.Variable(tf.zeros([self.size]), trainable=False, name="v")  # [D]
        self.generation = tf.Variable(0, dtype=tf.int64, trainable=False, name="generation")
        self._drawn = _DrawnNoise(self.pairs, self.size)
        self._members = tf.function(self._make_members)
        self._tell = tf.function(self._update)

    def ask(self) -> tf.Tensor:
        """The parameters [2N, D] of the current generation's members.

        Keeps the generation's noise, which `tell` then reuses instead of drawing it again.
        """
        indices = tf.range(2 * self.pairs, dtype=tf.int64)
        return self._members(indices, tf.identity(self.generation), keep=True)

    def members(self, start: int, stop: int, generation: int | None = None) -> tf.Tensor:
        """The parameters [stop - start, D] of members start..stop-1 of `generation`.

        The generation defaults to the current one; theta is always the current one.
        """
        generation = int(self.generation) if generation is None else int(generation)
        indices = tf.range(start, stop, dtype=tf.int64)
        return self._members(indices, tf.constant(generation, tf.int64), keep=False)

    def pair_members(self, start: int, stop: int, generation: int | None = None) -> tf.Tensor:
        """The parameters [2 (stop - start), D] of pairs start..stop-1 of `generation`:
        members start..stop-1, then their mirrors N + start..N + stop-1.

        What a worker that evaluates whole pairs asks for (common random numbers); the
        generation defaults to the current one, theta is always the current one.
        """
        generation = int(self.generation) if generation is None else int(generation)
        pairs = tf.range(start, stop, dtype=tf.int64)
        indices = tf.concat([pairs, pairs + self.pairs], 0)
        return self._members(indices, tf.constant(generation, tf.int64), keep=False)

    def tell(self, fitness) -> dict[str, tf.Tensor]:
        """Updates theta from the fitness [2N] of the current generation; returns metrics."""
        fitness = tf.convert_to_tensor(np.asarray(fitness, np.float32))
        if fitness.shape != (2 * self.pairs,):
            raise ValueError(f"tell takes the fitness of all {2 * self.pairs} members.")
        return self._tell(fitness)

    def _make_members(self, indices, generation, keep: bool):
        pairs, index = tf.unique(indices % self.pairs)  # [K'], [K]: each pair drawn once
        sign = tf.where(indices < self.pairs, 1.0, -1.0)[:, None]  # [K, 1]
        noise = member_noise(self._seed, generation, pairs, self.size)  # [K', D]
        if keep:  # indices are 0..2N-1, so pairs are 0..N-1 in order
            self._drawn.noise.assign(noise)
            self._drawn.generation.assign(generation)
        return self.theta[None] + self._cfg.sigma * sign * tf.gather(noise, index)  # [K, D]

    def _update(self, fitness):
        cfg = self._cfg
        shaped = shape_fitness(fitness, cfg.fitness_shaping)  # [2N]
        plus, minus = tf.split(shaped, 2)  # [N] each
        noise = tf.cond(
            tf.equal(self._drawn.generation, self.generation),
            lambda: self._drawn.noise.read_value(),
            lambda: member_noise(self._seed, self.generation, tf.range(self.pairs), self.size),
        )  # [N, D]
        gradient = mirrored_gradient(plus, minus, noise, cfg.sigma)  # [D]
        total = coupled_l2(gradient, self.theta, cfg.l2_coeff)  # [D]
        rate = learning_rate(
            cfg.learning_rate,
            cfg.learning_rate_schedule,
            self.generation,
            cfg.decay_generations,
            cfg.final_learning_rate,
        )
        if cfg.optimizer == "adam":
            step, m, v = adam_step(
                total,
                self.m,
                self.v,
                self.generation + 1,
                rate,
                cfg.beta1,
                cfg.beta2,
                cfg.epsilon,
            )
            self.m.assign(m)
            self.v.assign(v)
        else:
            step = rate * total
        self.theta.assign_add(step)
        self.generation.assign_add(1)
        return {
            "fitness_mean": tf.reduce_mean(fitness),
            "fitness_max": tf.reduce_max(fitness),
            "fitness_min": tf.reduce_min(fitness),
            "grad_norm": tf.norm(total),
            "update_ratio": tf.norm(step) / tf.maximum(tf.norm(self.theta), 1e-8),
            "theta_norm": tf.norm(self.theta),
            "learning_rate": rate,
        }


class _DrawnNoise(tf.Module):
    """The noise [N, D] of every pair of the generation `ask` drew last, so that `tell`
    need not draw it again (`generation` says which; -1 for none).
    """

    def __init__(self, pairs: int, size: int):
        super().__init__(name="drawn_noise")
        self.noise = tf.Variable(tf.zeros([pairs, size]), trainable=False)
        self.generation = tf.Variable(-1, dtype=tf.int64, trainable=False)
