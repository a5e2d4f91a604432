"""PPO for a population of M independent agents: a leading member axis, one graph call."""

from __future__ import annotations

import tensorflow as tf

from batchrl.algorithms.ppo import utility
from batchrl.algorithms.ppo.ppo import (
    MEMBER_KEYS,
    METRICS,
    PBT_KEYS,
    PPO,
    SUMMARIES,
    make_networks,
    minibatch_loss,
)
from batchrl.config.members import member_seeds
from batchrl.core import Algorithm, Policy
from batchrl.networks import PopulationMLP
from batchrl.parts import optimizers, pbt
from batchrl.parts.normalizer import RewardScaler, StreamingNormalizer
from batchrl.parts.permutations import random_permutations
from batchrl.parts.rollout_buffer import RolloutBuffer
from batchrl.parts.schedules import learning_rate
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
    same permutations, and its losses are `minibatch_loss`, vectorized over members with
    `tf.vectorized_map`. The members' losses are summed: each member's parameters get
    its own loss's gradient.

    Tensors carry the member axis first, [M, ...]; the environments' agents are
    member-major (agent m B + b is member m's b). One batched product per layer
    (`PopulationMLP`) evaluates every member; the optimizer updates the stacked
    parameters [M, D] elementwise, each member's rows at its learning rate. Only
    drawing from the M random streams loops over members: a `tf.random.Generator` has
    no batched form, and a stateless sampler takes one seed (a `tf.map_fn`).

    Feed-forward networks on vector observations, fixed-length rollouts (update_mode
    'steps'); `simulate` calls `perform` and `experience` with all M B agents.
    """

    config_section = "ppo"
    autograph = False  # Control flow is written with tf.cond and tf.while_loop.
    recurrent = False

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
        network = config.network
        members = self.members = int(config.train.population)
        if len(batch_env) % members:
            raise ValueError(f"{len(batch_env)} environments cannot be split into {members}.")
        self._total_steps = int(config.train.total_steps)
        self._step = step
        self._batch_size = len(batch_env) // members
        self._observ_shape = tuple(batch_env.observation_space.shape)
        seeds = member_seeds(config.train)
        self._rngs = [tf.random.Generator.from_seed(s) for s in seeds]
        # Each member's own values [M] of the keys given as lists (shared ones: `cfg`).
        self._settings = Untracked(
            {key: tf.constant(cfg[key], tf.float32) for key in MEMBER_KEYS if _listed(cfg[key])}
        )

        self._pbt_keys = tuple(config.pbt.perturb) if config.pbt.interval else ()
        if self._pbt_keys:  # Settings that population-based training changes: state.
            self.pbt_settings = {
                key: tf.Variable(
                    tf.broadcast_to(tf.constant(cfg[key], tf.float32), [members]),
                    trainable=False,
                    name=key,
                )
                for key in self._pbt_keys
            }
            self._pbt_rng = tf.random.Generator.from_seed(2**40 + int(config.train.seed))

        normalize = cfg.normalize_observ
        observ_clip = self._clip("observ_clip")
        if isinstance(observ_clip, tf.Tensor):
            observ_clip = observ_clip[:, None]  # [M, 1], for values [N, M, O].
        self.observ_normalizer = StreamingNormalizer(
            (members, *self._observ_shape),
            center=normalize,
            scale=normalize,
            clip=observ_clip if normalize else 0.0,
            name="observ",
        )
        self.reward_scaler = RewardScaler(
            self._batch_size,
            self._setting("discount"),
            self._clip("reward_clip"),
            "reward",
            shape=(members,),
        )
        singles = []
        for member_seed in seeds:
            tf.keras.utils.set_random_seed(member_seed)
            singles.append(make_networks(network, batch_env))
        head = singles[0][0]
        self._head = Untracked({"head": head})  # Holds the action space; its log_std is unused.
        (observ_size,) = self._observ_shape
        self.policy = PopulationMLP(
            observ_size, network.policy_layers, head.size, network.activation, 0.01
        )
        self.value = PopulationMLP(observ_size, network.value_layers, 1, network.activation, 1.0)
        self.policy_params = tf.Variable(
            tf.stack([self.policy.flatten(policy) for _, policy, _ in singles]), name="policy"
        )  # [M, D_policy]
        self.value_params = tf.Variable(
            tf.stack([self.value.flatten(value) for _, _, value in singles]), name="value"
        )  # [M, D_value]
        self._trainable = [self.policy_params, self.value_params]
        self.log_std = None  # A categorical policy has none.
        if hasattr(head, "log_std"):
            self.log_std = tf.Variable(tf.stack([h.log_std for h, _, _ in singles]))  # [M, A]
            self._trainable.append(self.log_std)
        self.optimizer = optimizers.MemberAdam(members, epsilon=1e-5)
        self.optimizer.build(self._trainable)
        penalty = tf.broadcast_to(self._setting("kl_init_penalty"), [members])
        self.penalty = tf.Variable(penalty, trainable=False, name="penalty")
        self._latest = Untracked({name: _zeros([members]) for name in SUMMARIES})

        agents = members * self._batch_size
        self._sample_shape, self._sample_dtype = head.sample_spec()
        self._last_sample = _zeros((agents, *self._sample_shape), self._sample_dtype)
        self._last_output = _zeros((agents, head.size))
        spec = {
            "observ": (self._observ_shape, tf.float32),
            "next_observ": (self._observ_shape, tf.float32),
            "sample": (self._sample_shape, self._sample_dtype),
            "output": ((head.size,), tf.float32),
            "reward": ((), tf.float32),
            "terminated": ((), tf.bool),
            "truncated": ((), tf.bool),
        }
        self.rollout = RolloutBuffer(cfg.rollout_length, agents, spec)

    # Collect.

    @tf.autograph.experimental.do_not_convert
    def begin_episodes(self, agent_indices):
        del agent_indices  # Feed-forward members in fixed-length rollouts keep nothing.

    @tf.autograph.experimental.do_not_convert
    def perform(self, agent_indices, observ):
        del agent_indices  # All agents, as `simulate` calls it.
        output = self.policy.apply(self.policy_params, self._normalize(observ))  # [M, B, size]
        sample = self._sample(output)  # [M, B, ...]
        self._last_sample.assign(_flat(sample))
        self._last_output.assign(_flat(output))
        return self._head.variables["head"].to_env_action(_flat(sample))

    @tf.autograph.experimental.do_not_convert
    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        del action  # The raw sample from `perform` is stored instead of the clipped action.
        step = {
            "observ": _flat(self._normalize(observ)),  # [M B, O]
            "next_observ": _flat(self._normalize(next_observ)),  # [M B, O]
            "sample": self._last_sample.read_value(),
            "output": self._last_output.read_value(),
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
        }
        self.observ_normalizer.update(self._by_agent(observ))  # [B, M, O]
        if self._cfg.normalize_reward:
            done = tf.logical_or(terminated, truncated)
            indices = tf.range(self._batch_size)
            scaled = self.reward_scaler.scale(
                indices, self._by_agent(reward), self._by_agent(done)
            )  # [B, M]
            step["reward"] = tf.reshape(tf.transpose(scaled), [-1])  # [M B]
        self.rollout.append(agent_indices, step)

    @tf.autograph.experimental.do_not_convert
    def end_episodes(self, agent_indices):
        del agent_indices

    def steps_to_update(self):
        return self.rollout.length - self.rollout.step.read_value()

    @tf.autograph.experimental.do_not_convert
    def update(self):
        batch = self.rollout.read()
        self.rollout.clear()
        self.learn(batch)

    # Advantages and update.

    @tf.autograph.experimental.do_not_convert
    def learn(self, batch: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """Updates every member on its columns of a rollout [T, M B, ...] (as PPO.learn).

        Returns:
          Each member's means over all minibatches of the losses, gradient norm and
          clip fraction, and its `kl` and `explained_variance`, each [M].
        """
        cfg = self._cfg
        steps = batch["reward"].shape[0]
        value = self._to_time(self._value(self._to_members(batch["observ"])))  # [T, M B]
        next_value = self._to_time(self._value(self._to_members(batch["next_observ"])))
        advantage = utility.gae(
            batch["reward"],
            value,
            next_value,
            batch["terminated"],
            batch["truncated"],
            self._by_column(self._setting("discount")),
            self._by_column(self._setting("gae_lambda")),
        )  # [T, M B]
        data = {
            "observ": batch["observ"],
            "sample": batch["sample"],
            "output": batch["output"],
            "advantage": advantage,
            "target": advantage + value,
            "old_value": value,
        }
        data = {key: self._to_members(v) for key, v in data.items()}  # [M, T B, ...]
        if cfg.normalize_advantage:
            data["advantage"] = tf.vectorized_map(utility.normalize_advantage, data["advantage"])
        old_log_std = None if self.log_std is None else tf.identity(self.log_std)
        metrics = self._train_epochs(data, old_log_std, steps * self._batch_size)
        kl = self._mean_kl(data, old_log_std)  # [M]
        if cfg.objective == "kl_penalty":
            kl_target = self._setting("kl_target")
            self.penalty.assign(utility.update_penalty_coefficient(self.penalty, kl, kl_target))
        metrics["kl"] = kl
        metrics["explained_variance"] = tf.vectorized_map(
            lambda pair: utility.explained_variance(*pair), (data["old_value"], data["target"])
        )
        values = dict(
            metrics,
            penalty_coefficient=self.penalty.read_value(),
            learning_rate=self.optimizer.rates.read_value(),
            mean_scaled_reward=tf.reduce_mean(self._to_members(batch["reward"]), 1),
        )
        for name, value in values.items():
            self._latest.variables[name].assign(value)
        return metrics

    def _train_epochs(self, data, old_log_std, total: int):
        """Epochs of minibatch steps of all members; each member's mean metrics [M]."""
        cfg = self._cfg
        size = max(total // cfg.minibatches, 1)
        self.optimizer.rates.assign(tf.broadcast_to(self._learning_rate(), [self.members]))
        # Each member's orders for every epoch, from its own stream: [M, epochs, total].
        orders = tf.stack([random_permutations(rng, cfg.epochs, total) for rng in self._rngs])

        def minibatch_step(index, order, metrics):
            indices = tf.slice(order, [0, index * size], [self.members, size])  # [M, size]
            minibatch = {key: tf.gather(v, indices, batch_dims=1) for key, v in data.items()}
            new = self._train_minibatch(minibatch, old_log_std)
            return index + 1, order, {name: metrics[name] + new[name] for name in METRICS}

        def epoch(count, metrics):
            order = tf.gather(orders, count, axis=1)  # [M, total]
            _, _, metrics = tf.while_loop(
                lambda index, *_: index < cfg.minibatches, minibatch_step, (0, order, metrics)
            )
            return count + 1, metrics

        metrics = {name: tf.zeros([self.members]) for name in METRICS}
        _, metrics = tf.while_loop(lambda count, _: count < cfg.epochs, epoch, (0, metrics))
        return {name: value / (cfg.epochs * cfg.minibatches) for name, value in metrics.items()}

    def _train_minibatch(self, batch, old_log_std):
        """One Adam step of every member on its minibatch [M, n, ...]; metrics [M]."""
        cfg = self._cfg
        with tf.GradientTape() as tape:
            dist, old_dist = self._dists(batch, old_log_std)
            terms = {
                "log_prob": dist.log_prob(batch["sample"]),  # [M, n]
                "old_log_prob": old_dist.log_prob(batch["sample"]),  # [M, n]
                "entropy": dist.entropy(),  # [M, n]
                "value": self._value(batch["observ"]),  # [M, n]
                "advantage": batch["advantage"],
                "target": batch["target"],
                "old_value": batch["old_value"],
            }
            if cfg.objective == "kl_penalty":
                terms["kl"] = old_dist.kl_divergence(dist)  # [M, n]
                terms["penalty"] = self.penalty.read_value()  # [M]
            settings = self._member_settings()
            if settings:  # [M] each; a scalar in each member's map.
                terms["settings"] = settings

            def member_loss(member):
                return minibatch_loss({**cfg, **member.pop("settings", {})}, member)

            loss, metrics = tf.vectorized_map(member_loss, terms)
            total = tf.reduce_sum(loss)  # Member m's parameters see only loss[m].
        gradients = tape.gradient(total, self._trainable)
        max_grad_norm = self._setting("max_grad_norm")
        gradients, grad_norm = utility.clip_by_member_norm(gradients, max_grad_norm)
        self.optimizer.apply_gradients(zip(gradients, self._trainable))
        return dict(metrics, grad_norm=grad_norm)

    def _dists(self, batch, old_log_std):
        """The current and the acting policy's distributions [M, n] on a batch [M, n, ...]."""
        head = self._head.variables["head"]
        output = self.policy.apply(self.policy_params, batch["observ"])  # [M, n, size]
        if self.log_std is None:
            return head(output), head(batch["output"])
        return head(output, self.log_std[:, None]), head(batch["output"], old_log_std[:, None])

    def _mean_kl(self, batch, old_log_std):
        dist, old_dist = self._dists(batch, old_log_std)
        return tf.reduce_mean(old_dist.kl_divergence(dist), 1)  # [M]

    def _value(self, observ):
        """Values [M, n] of normalized observations [M, n, O]."""
        return self.value.apply(self.value_params, observ)[..., 0]

    def _learning_rate(self):
        """The learning rate, or each member's [M], at the current step."""
        cfg = self._cfg
        if "learning_rate" in self._pbt_keys:  # The schedule's factor times each member's.
            factor = learning_rate(1.0, cfg.learning_rate_schedule, self._step, self._total_steps)
            return factor * self.pbt_settings["learning_rate"]
        return learning_rate(
            cfg.learning_rate, cfg.learning_rate_schedule, self._step, self._total_steps
        )

    # The members' settings.

    def _setting(self, key: str):
        """`ppo.<key>`: a float the members share, or each member's value [M]."""
        if key in self._pbt_keys:
            return self.pbt_settings[key].read_value()
        return self._settings.variables.get(key, self._cfg[key])

    def _member_settings(self) -> dict[str, tf.Tensor]:
        """The settings that differ by member (listed, or changed by PBT), [M] each."""
        keys = [k for k in MEMBER_KEYS if k in self._pbt_keys or k in self._settings.variables]
        return {key: tf.convert_to_tensor(self._setting(key)) for key in keys}

    def _clip(self, key: str):
        """A clip bound: a float (0: off), or each member's [M], inf where it is 0."""
        value = self._setting(key)
        if isinstance(value, tf.Tensor):
            return tf.where(value > 0, value, float("inf"))
        return value

    def _by_column(self, value):
        """A member setting [M] as one value per column [M B] of a rollout; a float as is."""
        if isinstance(value, tf.Tensor):
            return tf.repeat(value, self._batch_size)
        return value

    def summaries(self) -> dict[str, tf.Tensor]:
        """Each member's scalars of the latest update, {'ppo/<name>': [M]}."""
        return {f"ppo/{name}": v.read_value() for name, v in self._latest.variables.items()}

    # Population-based training.

    def exploit(self, scores, quantile: float, factors) -> tf.Tensor:
        """Population-based training's exploit and explore step (Jaderberg et al. 2017).

        The members in the bottom `quantile` by `scores` take the state of members in the
        top one (`pbt.exploit`): their policy and value parameters, log std, Adam moments,
        KL penalty and observation and reward normalizer statistics are the parent's
        rows. Their `pbt.perturb` settings become the parent's times a factor drawn from
        `factors` (`pbt.perturb`). Random streams and environments stay the member's.

        Args:
          scores: [M] each member's latest evaluation return (NaN: none, ranks lowest).
          quantile: the share of members replaced, in (0, 0.5].
          factors: e.g. (0.8, 1.2).

        Returns:
          `source` [M] int32: the member whose state member m took (m if it kept its own).
        """
        source, copied = pbt.exploit(scores, quantile, self._pbt_rng)
        state = [self.policy_params, self.value_params, self.penalty]
        state += self.optimizer.member_variables()
        if self.log_std is not None:
            state.append(self.log_std)
        for variable in state:
            variable.assign(tf.gather(variable, source))
        self.observ_normalizer.copy_rows(source)
        self.reward_scaler.normalizer.copy_rows(source)
        for key in self._pbt_keys:
            variable = self.pbt_settings[key]
            low, high = PBT_KEYS[key]
            parent = tf.gather(variable, source)
            variable.assign(pbt.perturb(parent, copied, factors, self._pbt_rng, low, high))
        return source

    def pbt_values(self) -> dict[str, list[float]]:
        """Each member's current value of every `pbt.perturb` setting, {'ppo.<key>': [M]}."""
        return {f"ppo.{key}": self.pbt_settings[key].numpy().tolist() for key in self._pbt_keys}

    # The policy, for evaluation.

    def act(self, observ, deterministic: bool = True):
        """Actions [M N, ...] for raw observations [M N, ...]: member m acts for rows m N..."""
        output = self.policy.apply(self.policy_params, self._normalize(observ))  # [M, N, size]
        if deterministic:
            head = self._head.variables["head"]
            log_std = None if self.log_std is None else self.log_std[:, None]
            sample = tf.cast(head(output, log_std).mode(), self._sample_dtype)
        else:
            sample = self._sample(output)
        return self._head.variables["head"].to_env_action(_flat(sample))

    def member_policy(self, member: int) -> MemberPolicy:
        """Member `member` alone, as a `Policy` for export (a copy of its variables)."""
        return MemberPolicy(self, member)

    # Layouts and random draws.

    def _sample(self, output):
        """Samples [M, N, ...] of each member's policy, each with a seed from its stream."""
        head = self._head.variables["head"]
        seeds = tf.stack([tf.cast(rng.make_seeds(1)[:, 0], tf.int32) for rng in self._rngs])
        log_std = tf.zeros([self.members, 0]) if self.log_std is None else self.log_std

        def sample(args):
            output, log_std, seed = args  # [N, size], [A], [2]
            dist = head(output) if self.log_std is None else head(output, log_std)
            return tf.cast(dist.sample(seed=seed), self._sample_dtype)

        spec = tf.TensorSpec([None, *self._sample_shape], self._sample_dtype)
        return tf.map_fn(sample, (output, log_std, seeds), fn_output_signature=spec)

    def _normalize(self, observ):
        """Normalized observations [M, N, O] of raw ones [M N, O], each by its member's."""
        return tf.transpose(self.observ_normalizer.normalize(self._by_agent(observ)), [1, 0, 2])

    def _by_agent(self, x):
        """[M N, ...] -> [N, M, ...]: the layout of the normalizers' statistics [M, ...]."""
        x = tf.reshape(x, [self.members, -1, *x.shape[1:]])
        return tf.transpose(x, [1, 0, *range(2, x.shape.rank)])

    def _to_members(self, x):
        """Time-major [T, M B, ...] -> member-major [M, T B, ...] (rows t B + b, as PPO's)."""
        steps, rest = x.shape[0], x.shape[2:]
        x = tf.reshape(x, [steps, self.members, self._batch_size, *rest])
        x = tf.transpose(x, [1, 0, 2, *range(3, x.shape.rank)])
        return tf.reshape(x, [self.members, steps * self._batch_size, *rest])

    def _to_time(self, x):
        """Member-major [M, T B] -> time-major [T, M B]."""
        x = tf.reshape(x, [self.members, -1, self._batch_size])
        return tf.reshape(tf.transpose(x, [1, 0, 2]), [-1, self.members * self._batch_size])


class MemberPolicy(tf.Module, Policy):
    """One member of a `PopulationPPO` acting alone, for `policies/member-<m>` and `policy/`.

    It holds copies of the member's policy parameters, log std and observation
    normalizer, taken when it is made, and its deterministic `act` runs the population's
    ops on a member axis of one: it acts as the member did in the population's `act`. An
    exported SavedModel of it holds only this member's variables.
    """

    autograph = False
    recurrent = False

    def __init__(self, population: PopulationPPO, member: int):
        super().__init__(name=f"member_{member}")
        if not 0 <= member < population.members:
            raise ValueError(f"No member {member} in a population of {population.members}.")
        rows = [member]
        self.member = member
        self._network = Untracked({"policy": population.policy, **population._head.variables})
        self._sample_dtype = population._sample_dtype
        self.observ_normalizer = population.observ_normalizer.select(rows)
        self.policy_params = tf.Variable(
            tf.gather(population.policy_params, rows), trainable=False
        )  # [1, D_policy]
        self.log_std = None
        if population.log_std is not None:
            self.log_std = tf.Variable(tf.gather(population.log_std, rows), trainable=False)

    def act(self, observ, deterministic: bool = True):
        """The member's greedy actions [N, ...] for raw observations [N, ...]."""
        if not deterministic:
            raise ValueError("A member's policy acts deterministically (its mode).")
        normalized = self.observ_normalizer.normalize(observ[:, None])  # [N, 1, O]
        normalized = tf.transpose(normalized, [1, 0, 2])  # [1, N, O]
        policy, head = self._network.variables["policy"], self._network.variables["head"]
        output = policy.apply(self.policy_params, normalized)  # [1, N, size]
        log_std = None if self.log_std is None else self.log_std[:, None]
        sample = tf.cast(head(output, log_std).mode(), self._sample_dtype)
        return head.to_env_action(_flat(sample))


def _listed(value) -> bool:
    return isinstance(value, tuple)


def _flat(x):
    """[M, N, ...] -> [M N, ...]."""
    return tf.reshape(x, [-1, *x.shape[2:]])


def _zeros(shape, dtype=tf.float32):
    return tf.Variable(tf.zeros(shape, dtype), trainable=False)
