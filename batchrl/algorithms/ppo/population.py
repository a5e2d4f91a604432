"""PPO for a population of M independent agents: a leading member axis, one graph call."""

from __future__ import annotations

import tensorflow as tf

from batchrl.algorithms.ppo import advantages, gsde, layout, losses
from batchrl.algorithms.ppo.core_states import CoreStates
from batchrl.algorithms.ppo.layout import MemberLayout
from batchrl.algorithms.ppo.member_networks import MemberNetworks
from batchrl.algorithms.ppo.member_normalizers import MemberNormalizers
from batchrl.algorithms.ppo.member_policy import MemberPolicy
from batchrl.algorithms.ppo.member_settings import MemberSettings
from batchrl.algorithms.ppo.member_update import MemberUpdate
from batchrl.algorithms.ppo.ppo import PPO, SUMMARIES
from batchrl.config.members import member_seeds
from batchrl.core import Algorithm, Policy
from batchrl.parts import optimizers, pbt
from batchrl.parts.rollout_buffer import RolloutBuffer
from batchrl.parts.untracked import Untracked


class PopulationPPO(Algorithm, Policy):
    """M independent PPO agents (`train.population`) collecting and learning together.

    Member m has its own parameters, Adam moments, observation and reward normalizers,
    KL penalty, random stream and the environments [m B, (m + 1) B) of a batch of M B
    (`make_in_graph_env(..., members=M)`), and its own value of every ppo key the config
    gives as a list (`MEMBER_KEYS`: learning rate, discount, clip ratio, ...), held as a
    tensor [M]. It computes what `PPO` computes for its seed (`member_seeds`: seed + m,
    or `train.seeds[m]`) and its settings: it starts from the networks PPO builds under
    that global seed, samples actions with the same stateless seeds, shuffles with the
    same permutations, and its losses are `minibatch_loss`, all members' at once along
    the member axis (`MemberUpdate`). The members' losses are summed: each member's parameters get
    its own loss's gradient.

    Tensors carry the member axis first, [M, ...]; the environments' agents are
    member-major (agent m B + b is member m's b). One batched product per layer
    (`PopulationMLP`, `PopulationRecurrent`) evaluates every member; the optimizer
    updates the stacked parameters [M, D] elementwise, each member's rows at its
    learning rate. Only drawing from the M random streams loops over members: a
    `tf.random.Generator` has no batched form, and a stateless sampler takes one seed.

    Feed-forward or recurrent (gru, lstm: a state [S] per agent, columns replayed from
    their first state as `PPO` does) networks on vector observations, fixed-length
    rollouts (update_mode 'steps'); `simulate` calls `perform` and `experience` with all
    M B agents.
    """

    config_section = "ppo"
    autograph = False  # Control flow is written with tf.cond and tf.while_loop.

    def __init__(self, batch_env, config, step: tf.Variable | None = None, seed: int = 0):
        """Creates the members' networks, optimizer state and buffers.

        Sets the global seeds (`tf.keras.utils.set_random_seed`) to member m's seed while
        its networks are initialized, as a single run of that seed does.

        Args:
          batch_env: M B environments in the graph, member-major.
          config: the run's `Config`; M is `config.train.population`.
          step: int64 variable counting each member's environment steps, for the
            learning-rate schedule; None keeps the rate constant.
          seed: unused: member m's random streams start from its seed,
            `member_seeds(config.train)[m]`.
        """
        super().__init__()
        del seed  # Each member's comes from the config: `member_seeds`.
        PPO.check_config(config)
        cfg = self._cfg = config.ppo
        members = self.members = int(config.train.population)
        if len(batch_env) % members:
            raise ValueError(f"{len(batch_env)} environments cannot be split into {members}.")
        self._total_steps = int(config.train.total_steps)
        self._step = step
        self._batch_size = len(batch_env) // members
        self._layout = MemberLayout(members, self._batch_size)
        observ_shape = tuple(batch_env.observation_space.shape)
        seeds = member_seeds(config.train)
        self._rngs = [tf.random.Generator.from_seed(s) for s in seeds]
        pbt_keys = tuple(config.pbt.perturb) if config.pbt.interval else ()
        # Each member's own values [M] of the keys given as lists or changed by PBT.
        resample = config.pbt.resample_probability
        inherit = bool(config.pbt.interval)
        self._settings = MemberSettings(cfg, pbt_keys, members, resample, inherit)
        if self._settings.variables:  # Settings that population-based training changes.
            self.pbt_settings = self._settings.variables
        if config.pbt.interval:  # Exploits, with or without settings to perturb.
            self._pbt_rng = tf.random.Generator.from_seed(2**40 + int(config.train.seed))
        norms = self._norms = MemberNormalizers(cfg, self._settings, self._layout, observ_shape)
        nets = self._nets = MemberNetworks(config.network, batch_env, seeds, gsde=cfg.gsde)
        # The variables under the names checkpoints have always given them.
        self.observ_normalizer, self.reward_scaler = norms.observ, norms.reward
        self.policy, self.value = nets.policy, nets.value  # Batched passes: no variables.
        self.policy_params, self.value_params = nets.policy_params, nets.value_params
        self.log_std = nets.log_std  # [M, A] (gSDE's [M, L, A]), or None if categorical.
        self.recurrent = nets.recurrent
        self.optimizer = optimizers.MemberAdam(members, epsilon=1e-5)
        self.optimizer.build(nets.trainable)
        penalty = tf.broadcast_to(self._settings.get("kl_init_penalty"), [members])
        self.penalty = tf.Variable(penalty, trainable=False, name="penalty")
        self._update = MemberUpdate(
            cfg, nets, self._settings, self.optimizer, self._rngs, self.penalty
        )
        self._latest = Untracked({name: _zeros([members]) for name in SUMMARIES})

        agents = members * self._batch_size
        self._last_sample = _zeros((agents, *nets.sample_shape), nets.sample_dtype)
        self._last_output = _zeros((agents, nets.head.size))
        if self.recurrent:  # Each agent's state, and whether a step began its episode.
            self.core_states = CoreStates(agents, self.policy.state_size)
        if cfg.gsde:  # As PPO's: each agent's matrix [L, A] and its steps acted with it.
            head = nets.head
            noise_shape = [members, self._batch_size, head.latent_size, head.action_size]
            self._noise = _zeros(noise_shape)
            self._noise_age = _zeros([members, self._batch_size], tf.int32)
        self.rollout = RolloutBuffer(cfg.rollout_length, agents, nets.rollout_spec(observ_shape))

    # Collect.

    @tf.autograph.experimental.do_not_convert
    def begin_episodes(self, agent_indices):
        if self.recurrent:  # Feed-forward members in fixed-length rollouts keep nothing.
            self.core_states.begin(agent_indices)

    @tf.autograph.experimental.do_not_convert
    def perform(self, agent_indices, observ):
        del agent_indices  # All agents, as `simulate` calls it.
        observ = self._norms.normalize(observ)  # [M, B, O]
        if self.recurrent:
            state = self.core_states.read(self.rollout.step == 0)  # [M B, S]
            output, state = self._nets.policy_step(observ, self._layout.by_member(state))
            self.core_states.write(layout.flat(state))
        else:
            output = self._nets.policy_output(observ)  # [M, B, size]
        if self._cfg.gsde:
            sample = self._explore(output)  # [M, B, A]
        else:
            sample = self._nets.sample(output, self._seeds())  # [M, B, ...]
        self._last_sample.assign(layout.flat(sample))
        self._last_output.assign(layout.flat(output))
        return self._nets.head.to_env_action(layout.flat(sample))

    def _explore(self, output):
        """gSDE's samples [M, B, A], each agent's matrix drawn as PPO's `_explore` draws
        it, member m's from its own stream and sigma."""
        noise, age = gsde.hold_noise(
            held=self._noise.read_value(),  # [M, B, L, A]
            fresh=self._nets.draw_noise(self._batch_size, self._seeds()),
            age=self._noise_age.read_value(),  # [M, B]
            every=self._cfg.gsde_every,
            rollout_start=tf.equal(self.rollout.step, 0),
        )
        self._noise.assign(noise)
        self._noise_age.assign(age)
        return self._nets.head.explore(output, noise)

    @tf.autograph.experimental.do_not_convert
    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        del action  # The raw sample from `perform` is stored instead of the clipped action.
        step = {
            "observ": layout.flat(self._norms.normalize(observ)),  # [M B, O]
            "next_observ": layout.flat(self._norms.normalize(next_observ)),  # [M B, O]
            "sample": self._last_sample.read_value(),
            "output": self._last_output.read_value(),
            "terminated": terminated,
            "truncated": truncated,
        }
        if self.recurrent:
            step["first"] = self.core_states.take_first()  # [M B]
        done = tf.logical_or(terminated, truncated)
        step["reward"] = self._norms.update(observ, reward, done)  # [M B]
        self.rollout.append(agent_indices, step)

    @tf.autograph.experimental.do_not_convert
    def end_episodes(self, agent_indices):
        del agent_indices

    def steps_to_update(self):
        return self.rollout.length - self.rollout.step.read_value()

    @tf.autograph.experimental.do_not_convert
    def update(self):
        batch = self.rollout.read()
        if self.recurrent:
            batch["state"] = self.core_states.rollout_start.read_value()  # [M B, S]
        self.rollout.clear()
        self.learn(batch)

    # Advantages and update.

    @tf.autograph.experimental.do_not_convert
    def learn(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Updates every member on its columns of a rollout [T, M B, ...] (as PPO.learn).

        A recurrent population's batch also holds `first` [T, M B] and `state` [M B, S],
        the states the columns started from; it trains on minibatches of whole columns.

        Returns:
          Each member's means over all minibatches of the losses, gradient norm and
          clip fraction, and its `kl` and `explained_variance`, each [M].
        """
        cfg, settings, lay = self._cfg, self._settings, self._layout
        steps = batch["reward"].shape[0]
        value = lay.to_time(self._nets.value_of(lay.to_members(batch["observ"])))  # [T, M B]
        next_value = lay.to_time(self._nets.value_of(lay.to_members(batch["next_observ"])))
        advantage = advantages.gae(
            batch["reward"],
            value,
            next_value,
            batch["terminated"],
            batch["truncated"],
            lay.by_column(settings.get("discount")),
            lay.by_column(settings.get("gae_lambda")),
        )  # [T, M B]
        data = {
            "observ": batch["observ"],
            "sample": batch["sample"],
            "output": batch["output"],
            "advantage": advantage,
            "target": advantage + value,
            "old_value": value,
        }
        data = {key: lay.to_members(v) for key, v in data.items()}  # [M, T B, ...]
        if cfg.normalize_advantage:
            data["advantage"] = tf.vectorized_map(advantages.normalize_advantage, data["advantage"])
        explained_variance = tf.vectorized_map(
            lambda pair: advantages.explained_variance(*pair), (data["old_value"], data["target"])
        )  # [M]
        old_log_std = None if self.log_std is None else tf.identity(self.log_std)
        rates = settings.learning_rate(self._step, self._total_steps)
        self.optimizer.rates.assign(tf.broadcast_to(rates, [self.members]))
        total, states = steps * self._batch_size, None
        if self.recurrent:  # Minibatches of whole columns, replayed from their first state.
            data["first"] = lay.to_members(batch["first"])
            shape = [self.members, steps, self._batch_size]
            data = {key: tf.reshape(v, [*shape, *v.shape[2:]]) for key, v in data.items()}
            total, states = self._batch_size, lay.by_member(batch["state"])  # [M, B, S]
        metrics = self._update.epochs(data, old_log_std, total, states)
        kl = self._update.mean_kl(data, old_log_std, states)  # [M]
        if cfg.objective == "kl_penalty":
            kl_target = settings.get("kl_target")
            self.penalty.assign(losses.update_penalty_coefficient(self.penalty, kl, kl_target))
        metrics["kl"] = kl
        metrics["explained_variance"] = explained_variance
        values = dict(
            metrics,
            penalty_coefficient=self.penalty.read_value(),
            learning_rate=self.optimizer.rates.read_value(),
            mean_scaled_reward=tf.reduce_mean(lay.to_members(batch["reward"]), 1),
        )
        for name, value in values.items():
            self._latest.variables[name].assign(value)
        return metrics

    def summaries(self) -> dict[str, tf.Tensor]:
        """Each member's scalars of the latest update, {'ppo/<name>': [M]}."""
        return {f"ppo/{name}": v.read_value() for name, v in self._latest.variables.items()}

    # Population-based training.

    def exploit(self, scores, quantile: float, factors) -> tf.Tensor:
        """Population-based training's exploit and explore step (Jaderberg et al. 2017).

        The members in the bottom `quantile` by `scores` take the state of members in the
        top one (`pbt.exploit`): their policy and value parameters, log std, Adam moments,
        KL penalty, observation and reward normalizer statistics and own settings (the
        ppo keys the config lists) are the parent's rows. Their `pbt.perturb` settings
        then become the parent's times a factor drawn from `factors`, or with
        `pbt.resample_probability` values drawn afresh (`MemberSettings.explore`).
        Random streams, environments and the recurrent states of the episodes under way
        stay the member's.

        Args:
          scores: [M] each member's latest evaluation return (NaN: none, ranks lowest).
          quantile: the share of members replaced, in (0, 0.5].
          factors: e.g. (0.8, 1.2).

        Returns:
          `source` [M] int32: the member whose state member m took (m if it kept its own).

        Raises:
          ValueError: a rollout is under way: its steps, collected by the members before
            the exploit, would be trained on as the copies' own (the config's check that
            `train.steps_per_call` is a multiple of `ppo.rollout_length` prevents it).
        """
        if int(self.rollout.step):
            raise ValueError(
                f"Population-based training exploits at rollout boundaries only, but "
                f"{int(self.rollout.step)} of ppo.rollout_length={self._cfg.rollout_length} "
                "steps of a rollout are collected."
            )
        source, copied = pbt.exploit(scores, quantile, self._pbt_rng)
        for variable in [*self._nets.trainable, self.penalty, *self.optimizer.member_variables()]:
            variable.assign(tf.gather(variable, source))
        self._norms.copy_rows(source)
        self._settings.explore(source, copied, factors, self._pbt_rng)
        return source

    def inherited_keys(self) -> tuple[str, ...]:
        """The listed settings PBT copies but does not perturb (`algo/pbt_settings/<key>`).

        Checkpoints written before copies inherited them lack them; those runs kept the
        config's values, which the variables start from.
        """
        settings = self._settings
        return tuple(key for key in settings.variables if key not in settings.pbt_keys)

    def pbt_values(self) -> dict[str, list[float]]:
        """Each member's current value of every setting PBT changes, {'ppo.<key>': [M]}.

        The keys of `pbt.perturb` and those the config lists, which copies inherit.
        """
        return self._settings.values()

    # The policy, for evaluation.

    def act(self, observ, deterministic: bool = True):
        """Actions [M N, ...] for raw observations [M N, ...]: member m acts for rows m N..."""
        if self.recurrent:
            raise ValueError(
                f"A recurrent population ({self.policy.cell}) needs its state: use "
                "initial_state() and act_recurrent()."
            )
        output = self._nets.policy_output(self._norms.normalize(observ))  # [M, N, size]
        return self._action(output, deterministic)

    def initial_state(self, batch_size) -> tf.Tensor:
        """The states [N, S] of recurrent agents at the start of an episode (zeros)."""
        return self.policy.initial_state(batch_size)

    def act_recurrent(self, observ, state, deterministic: bool = True):
        """Actions [M N, ...] and states [M N, S] for raw observations and states [M N, ...]."""
        observ, state = self._norms.normalize(observ), self._layout.by_member(state)
        output, state = self._nets.policy_step(observ, state)  # [M, N, size], [M, N, S]
        return self._action(output, deterministic), layout.flat(state)

    def member_policy(self, member: int) -> MemberPolicy:
        """Member `member` alone, as a `Policy` for export (a copy of its variables)."""
        return MemberPolicy(self, member)

    def _action(self, output, deterministic: bool):
        """Environment actions [M N, ...] for outputs [M, N, size]: modes, or samples."""
        if deterministic:
            sample = self._nets.mode(output)
        else:
            sample = self._nets.sample(output, self._seeds())
        return self._nets.head.to_env_action(layout.flat(sample))

    def _seeds(self):
        """A stateless seed [M, 2] from each member's stream (a Generator has no batch)."""
        return tf.stack([tf.cast(rng.make_seeds(1)[:, 0], tf.int32) for rng in self._rngs])


def _zeros(shape, dtype=tf.float32):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False)
