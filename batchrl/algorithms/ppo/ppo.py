"""BatchPPO: proximal policy optimization with experience and updates in the graph."""

from __future__ import annotations

import gymnasium as gym
import tensorflow as tf

from batchrl.algorithms.ppo import advantages, gsde, losses
from batchrl.algorithms.ppo.networks import make_networks
from batchrl.algorithms.ppo.section import MEMBER_KEYS, PBT_KEYS, check_ppo_config
from batchrl.algorithms.ppo.update import METRICS, Update
from batchrl.config import ConfigError
from batchrl.core import Algorithm, Learner, Policy, RolloutLearner
from batchrl.networks import (
    is_recurrent,
)
from batchrl.parts import optimizers, summary
from batchrl.parts.normalizer import RewardScaler, StreamingNormalizer
from batchrl.parts.rollout_buffer import EpisodeBuffer, RolloutBuffer, transition_spec
from batchrl.parts.schedules import learning_rate
from batchrl.parts.untracked import Untracked

# What `learn` reports, as `summaries()` returns it after a training call.
SUMMARIES = METRICS + (
    "kl",
    "explained_variance",
    "penalty_coefficient",
    "learning_rate",
    "mean_scaled_reward",
)


class PPO(Algorithm, Learner, Policy, RolloutLearner):
    """Proximal policy optimization for a batch of environments, driven by `simulate`.

    The algorithm reads like the papers (Schulman et al. 2017; Hafner et al. 2017):

    1. Collect: `perform` samples actions from the Gaussian or categorical policy and
       `experience` stores normalized transitions in a rollout buffer (update_mode
       'steps', as SB3 and CleanRL do) or an episode buffer (update_mode 'episodes', as
       BatchPPO does).
    2. When every environment has taken `rollout_length` steps, or `update_every`
       episodes have finished, `learn` computes GAE(lambda) advantages with Gymnasium's
       semantics: no bootstrap after termination, a bootstrap from the final observation
       after truncation, and after a rollout boundary.
    3. It updates the policy and value networks for `epochs` passes over shuffled
       minibatches, with the clipped objective or BatchPPO's adaptive KL penalty.
    4. It reports losses, KL, clip fraction, explained variance and more via `tf.summary`.

    Losses are means over the valid steps of a minibatch. A recurrent network
    (`network.name` gru or lstm) replays each rollout from the state it started in.

    The graph code writes its control flow explicitly (`tf.cond`, `tf.while_loop`), and
    the four interface methods are marked `do_not_convert`: autograph's rewriting of
    them and of everything they call took 3 of the 7 s that tracing a `pendulum`
    training call took. With `autograph = False` the runners trace without autograph
    at all (it still rewrote the branches of every `tf.cond` and the bodies of every
    `tf.while_loop`): tracing a `pendulum_tf` training call took 1.9 s instead of 3.9 s.
    """

    config_section = "ppo"
    distribution = "samplers"  # On Ray: sampler actors feed this learner.
    autograph = False  # Control flow is written with tf.cond and tf.while_loop.
    member_keys = MEMBER_KEYS  # A population (`PopulationPPO`) reads lists of these.
    pbt_keys = tuple(PBT_KEYS)  # And population-based training perturbs these.

    @classmethod
    def check_config(cls, config) -> None:
        check_ppo_config(config)

    def __init__(self, batch_env, config, step: tf.Variable | None = None, seed: int = 0):
        """Creates networks, optimizer and experience buffers.

        Args:
          batch_env: the in-graph batch environment (`InGraphEnv`) to learn in.
          config: the run's `Config`; PPO reads `config.ppo`, `config.network` and, for
            the learning-rate schedule, `config.train.total_steps`.
          step: int64 variable counting environment steps, for the learning-rate
            schedule; None keeps the rate constant.
          seed: seed of the algorithm's random stream (sampling and shuffling).

        Raises:
          ConfigError: on a config value PPO cannot train with.
        """
        super().__init__()
        self.check_config(config)
        cfg = self._cfg = config.ppo
        network = config.network
        self.recurrent = is_recurrent(network)
        self._total_steps = int(config.train.total_steps)
        self._step = step
        self._batch_size = len(batch_env)
        self._observ_shape = tuple(batch_env.observation_space.shape)
        self._rng = tf.random.Generator.from_seed(seed)

        normalize = cfg.normalize_observ  # Off, the normalizer passes observations through.
        self.observ_normalizer = StreamingNormalizer(
            self._observ_shape,
            center=normalize,
            scale=normalize,
            clip=cfg.observ_clip if normalize else 0.0,
            name="observ",
        )
        self.reward_scaler = RewardScaler(
            self._batch_size, cfg.discount, clip=cfg.reward_clip, name="reward"
        )
        # The names checkpoints of batchrl 0.1 gave them, so that those restore too.
        self.reward_normalizer = self.reward_scaler.normalizer
        self._discounted_return = self.reward_scaler.discounted_return
        if cfg.gsde and not isinstance(batch_env.action_space, gym.spaces.Box):
            raise ConfigError(
                f"ppo.gsde=true explores in continuous actions, but {config.env.id} has "
                f"{batch_env.action_space}: set ppo.gsde=false."
            )
        self.head, self.policy, self.value = make_networks(
            network, batch_env, config.env.get("topologies", ()), gsde=cfg.gsde
        )
        if cfg.gsde:
            # gSDE's exploration matrices theta [B, L, A] of each environment, drawn every
            # `gsde_every` of its steps (a count of them), held in between.
            head = self.head
            self._noise = _zeros([self._batch_size, head.latent_size, head.action_size])
            self._noise_age = _zeros([self._batch_size], tf.int32)
        if self.recurrent:
            # Each agent's policy state, and the states the rollout started from.
            self._state = _zeros([self._batch_size, self.policy.state_size])
            self._rollout_state = _zeros([self._batch_size, self.policy.state_size])
            self._first = _zeros([self._batch_size], tf.bool)  # The next step begins an episode.
        self._trainable = (
            self.policy.trainable_variables
            + self.value.trainable_variables
            + self.head.trainable_variables
        )
        self.optimizer = optimizers.Adam(cfg.learning_rate, epsilon=1e-5)
        self.optimizer.build(self._trainable)
        self.penalty = tf.Variable(float(cfg.kl_init_penalty), trainable=False, name="penalty")
        self._update = Update(
            cfg,
            head=self.head,
            policy=self.policy,
            value_of=self._value,
            trainable=self._trainable,
            optimizer=self.optimizer,
            rng=self._rng,
            penalty=self.penalty,
            recurrent=self.recurrent,
            # In update_mode 'episodes' the minibatch shape changes with every update,
            # and XLA would compile again each time.
            jit_compile=cfg.jit_update and cfg.update_mode == "steps",
        )
        # The latest update's summaries, for a training call compiled by XLA, which records
        # none: outside the checkpoint (a plain object), so that older checkpoints restore.
        self._latest = Untracked({name: _zeros([]) for name in SUMMARIES})

        # The latest action of each agent: the raw sample and the policy output it came
        # from. `experience` stores these, since the environment sees a clipped action.
        self._sample_shape, self._sample_dtype = self.head.sample_spec()
        self._last_sample = _zeros((self._batch_size,) + self._sample_shape, self._sample_dtype)
        self._last_output = _zeros((self._batch_size, self.head.size))
        spec = transition_spec(
            self._observ_shape,
            tf.float32,
            self._sample_shape,
            self._sample_dtype,
            self.head.size,
            first=True,
        )
        if cfg.update_mode == "steps":
            self.rollout = RolloutBuffer(cfg.rollout_length, self._batch_size, spec)
        else:
            # Episodes that end in the same step as the update_every-th one are kept too.
            slots = cfg.update_every + self._batch_size
            self.episodes = EpisodeBuffer(cfg.max_episode_length, self._batch_size, slots, spec)

    # Collect.

    @tf.autograph.experimental.do_not_convert
    def begin_episodes(self, agent_indices):
        if self.recurrent:
            rows = agent_indices[:, None]
            self._state.scatter_nd_update(rows, self.initial_state(tf.size(agent_indices)))
            self._first.scatter_nd_update(rows, tf.ones_like(agent_indices, tf.bool))
        if self._cfg.update_mode == "episodes":
            self.episodes.begin(agent_indices)

    @tf.autograph.experimental.do_not_convert
    def perform(self, agent_indices, observ):
        observ = self.observ_normalizer.normalize(observ)  # [K, O]
        rows = agent_indices[:, None]
        if self.recurrent:
            state = tf.gather(self._state, agent_indices)  # [K, S]

            def remember_start():
                self._rollout_state.scatter_nd_update(rows, state)

            tf.cond(self.rollout.step == 0, remember_start, lambda: None)
            output, state = self.policy(observ, state)  # [K, size], [K, S]
            self._state.scatter_nd_update(rows, state)
        else:
            output = self.policy(observ)  # [K, size]
        if self._cfg.gsde:
            sample = self._explore(agent_indices, output)
        else:
            sample = tf.cast(self.head(output).sample(seed=self._seed()), self._sample_dtype)
        self._last_sample.scatter_nd_update(rows, sample)
        self._last_output.scatter_nd_update(rows, output)
        return self.head.to_env_action(sample)

    def _explore(self, agent_indices, output):
        """gSDE's samples mu(s) + z(s) theta [K, A]. An environment draws its theta anew
        at its first step, after acting `ppo.gsde_every` times with the one it holds, and
        (update_mode steps) at the start of each rollout, as SB3 does."""
        rows = agent_indices[:, None]
        rollout_start = False  # Episode-mode rollouts have no fixed start.
        if self._cfg.update_mode == "steps":
            rollout_start = tf.equal(self.rollout.step, 0)
        noise, age = gsde.hold_noise(
            held=tf.gather(self._noise, agent_indices),  # [K, L, A]
            fresh=self.head.draw_noise(tf.size(agent_indices), self._seed()),
            age=tf.gather(self._noise_age, agent_indices),  # [K] steps acted with its theta
            every=self._cfg.gsde_every,
            rollout_start=rollout_start,
        )
        self._noise.scatter_nd_update(rows, noise)
        self._noise_age.scatter_nd_update(rows, age)
        return self.head.explore(output, noise)

    @tf.autograph.experimental.do_not_convert
    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        del action  # The raw sample from `perform` is stored instead of the clipped action.
        done = tf.logical_or(terminated, truncated)  # [K]
        step = {
            "observ": self.observ_normalizer.normalize(observ),  # [K, O]
            "next_observ": self.observ_normalizer.normalize(next_observ),  # [K, O]
            "sample": tf.gather(self._last_sample, agent_indices),
            "output": tf.gather(self._last_output, agent_indices),
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "first": tf.gather(self._first, agent_indices) if self.recurrent else done & False,
        }
        self.observ_normalizer.update(observ)
        if self._cfg.normalize_reward:
            step["reward"] = self.reward_scaler.scale(agent_indices, reward, done)  # [K]
        if self.recurrent:
            self._first.scatter_nd_update(agent_indices[:, None], tf.zeros_like(done))
        if self._cfg.update_mode == "steps":
            self.rollout.append(agent_indices, step)  # `simulate` calls `update` when full.
        else:
            self.episodes.append(agent_indices, step)

    @tf.autograph.experimental.do_not_convert
    def end_episodes(self, agent_indices):
        if self._cfg.update_mode == "episodes":
            count = self.episodes.finish(agent_indices)
            tf.cond(count >= self._cfg.update_every, self._learn_episodes, lambda: None)

    def steps_to_update(self):
        if self._cfg.update_mode != "steps":
            return None  # Updates follow finished episodes, in `end_episodes`.
        return self.rollout.length - self.rollout.step.read_value()

    @tf.autograph.experimental.do_not_convert
    def update(self):
        self.learn(self.take_rollout())

    @tf.autograph.experimental.do_not_convert
    def take_rollout(self) -> dict[str, tf.Tensor]:
        """The full rollout [T, B, ...] (and the recurrent states it started from); clears it."""
        batch = self.rollout.read()
        if self.recurrent:
            batch["state"] = self._rollout_state.read_value()
        self.rollout.clear()
        return batch

    def _learn_episodes(self):
        batch, length = self.episodes.read(self.episodes.count)
        self.learn(dict(batch, length=length))
        self.episodes.clear()

    # Collecting in sampler actors elsewhere (runner ray): see `RolloutLearner`.

    def acting_variables(self) -> list[tf.Variable]:
        return list(self.policy.variables) + list(self.head.variables)

    def statistics(self) -> list[StreamingNormalizer]:
        return [self.observ_normalizer, self.reward_scaler.normalizer]

    @property
    def rng(self) -> tf.random.Generator:
        return self._rng

    # Advantages and update.

    @tf.autograph.experimental.do_not_convert
    def learn(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Updates on time-major experience [T, N, ...] of normalized observations.

        Args:
          batch: `observ`, `next_observ` [T, N, O] (normalized), `sample`, `output` (the
            policy's sample and output that acted), `reward` (scaled), `terminated`,
            `truncated` and `first` [T, N]; optionally `length` [N], the valid steps of
            each column (episodes; default: all T), and `state` [N, S], the recurrent
            states the columns start from.

        Returns:
          The means over all minibatches of the losses, gradient norm and clip fraction,
          and `kl` and `explained_variance`.
        """
        cfg = self._cfg
        length = batch.get("length")
        steps = batch["reward"].shape[0] or tf.shape(batch["reward"])[0]
        columns = batch["reward"].shape[1] or tf.shape(batch["reward"])[1]
        if length is None:
            mask = tf.ones_like(batch["reward"], tf.bool)  # [T, N]
        else:
            mask = tf.range(steps)[:, None] < length[None, :]  # [T, N]
        value = self._value(batch["observ"])  # [T, N]
        next_value = self._value(batch["next_observ"])  # [T, N]
        advantage = advantages.gae(
            batch["reward"],
            value,
            next_value,
            batch["terminated"],
            batch["truncated"],
            cfg.discount,
            cfg.gae_lambda,
        )  # [T, N]
        target = advantage + value  # [T, N]
        if cfg.normalize_advantage:
            advantage = advantages.normalize_advantage(advantage, mask)
        old_log_std = None if self.head.size == 0 else tf.identity(self._log_std())
        self.optimizer.learning_rate.assign(self._learning_rate())
        data = {
            "observ": batch["observ"],
            "sample": batch["sample"],
            "output": batch["output"],
            "advantage": advantage,
            "target": target,
            "old_value": value,
            "first": batch["first"],
        }
        if self.recurrent:
            # Minibatches of whole rollouts (columns), replayed from their first state.
            metrics = self._update.epochs(data, old_log_std, columns, batch["state"])
            kl = self._update.mean_kl(dict(data, state=batch["state"]), old_log_std)
        elif length is None:
            # Every step is valid: static shapes, which XLA compiles well.
            total = batch["reward"].shape[0] * batch["reward"].shape[1]
            data = {key: tf.reshape(v, (total,) + tuple(v.shape[2:])) for key, v in data.items()}
            metrics = self._update.epochs(data, old_log_std, total)
            kl = self._update.mean_kl(data, old_log_std)
        else:
            valid = tf.where(mask)  # [M, 2]
            data = {key: tf.gather_nd(value, valid) for key, value in data.items()}
            metrics = self._update.epochs(data, old_log_std, tf.shape(valid)[0])
            kl = self._update.mean_kl(data, old_log_std)
        if cfg.objective == "kl_penalty":
            self.penalty.assign(losses.update_penalty_coefficient(self.penalty, kl, cfg.kl_target))
        metrics["kl"] = kl
        metrics["explained_variance"] = advantages.explained_variance(value, target, mask)
        self._write_summaries(metrics, batch["reward"], mask)
        return metrics

    def _seed(self):
        """A fresh stateless seed [2] for tensorflow-probability's samplers."""
        return tf.cast(self._rng.make_seeds(1)[:, 0], tf.int32)

    def _value(self, observ):
        """Values [...] of normalized observations [..., O]."""
        flat = tf.reshape(observ, (-1,) + self._observ_shape)
        return tf.reshape(self.value(flat)[:, 0], tf.shape(observ)[: -len(self._observ_shape)])

    def _log_std(self):
        return getattr(self.head, "log_std", tf.zeros([0]))

    def _learning_rate(self):
        cfg = self._cfg
        return learning_rate(
            cfg.learning_rate, cfg.learning_rate_schedule, self._step, self._total_steps
        )

    def _write_summaries(self, metrics, reward, mask):
        values = dict(
            metrics,
            penalty_coefficient=self.penalty.read_value(),
            learning_rate=tf.cast(self.optimizer.learning_rate, tf.float32),
            mean_scaled_reward=advantages.masked_mean(reward, mask),
        )
        for name, value in values.items():
            summary.scalar(f"ppo/{name}", value)
            self._latest.variables[name].assign(value)

    def summaries(self) -> dict[str, tf.Tensor]:
        """The scalars the latest update wrote, {'ppo/<name>': value}, as tensors.

        A training call that XLA compiles records no summaries; the local runner returns
        these from it, and the train loop writes them.
        """
        return {f"ppo/{name}": v.read_value() for name, v in self._latest.variables.items()}

    # The policy, for evaluation and export.

    def act(self, observ, deterministic: bool = True):
        """Environment actions [N, ...] for raw observations [N, ...] (feed-forward only)."""
        if self.recurrent:
            raise ValueError(
                f"A recurrent policy ({self.policy.name}) needs its state: use "
                "initial_state() and act_recurrent()."
            )
        return self._action(self.policy(self.observ_normalizer.normalize(observ)), deterministic)

    def initial_state(self, batch_size) -> tf.Tensor:
        """The state [N, S] of a recurrent policy at the start of an episode."""
        return self.policy.initial_state(batch_size)

    def act_recurrent(self, observ, state, deterministic: bool = True):
        """Actions [N, ...] and new states [N, S] for raw observations and states."""
        output, state = self.policy(self.observ_normalizer.normalize(observ), state)
        return self._action(output, deterministic), state

    def _action(self, output, deterministic):
        dist = self.head(output)
        sample = dist.mode() if deterministic else dist.sample(seed=self._seed())
        return self.head.to_env_action(tf.cast(sample, self._sample_dtype))


def _zeros(shape, dtype=tf.float32):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False)
