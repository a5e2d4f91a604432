"""Evolution strategies with the whole population acting as one batch inside the graph."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from batchrl.algorithms.es import utility
from batchrl.config import ENVIRONMENTS, ConfigError, check_choice
from batchrl.config.config import check_range
from batchrl.core import Algorithm, Policy, Trainer
from batchrl.networks import PopulationNetwork, action_size, to_action
from batchrl.networks.factory import (
    POPULATION_NETWORKS,
    check_graph_config,
    make_population_network,
)
from batchrl.parts import summary
from batchrl.parts.normalizer import StreamingNormalizer
from batchrl.parts.schedules import SCHEDULES, learning_rate
from batchrl.tools.environments import make_in_graph_env
from batchrl.tools.episodes import EpisodeRecorder, first_episodes

OPTIMIZERS = ("adam", "sgd")
SHAPINGS = ("centered_ranks", "separate_ranks", "raw")
OBSERV_CLIP = 5.0  # OpenAI ES clips normalized observations to [-5, 5].


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
        noise = utility.member_noise(self._seed, generation, pairs, self.size)  # [K', D]
        if keep:  # indices are 0..2N-1, so pairs are 0..N-1 in order
            self._drawn.noise.assign(noise)
            self._drawn.generation.assign(generation)
        return self.theta[None] + self._cfg.sigma * sign * tf.gather(noise, index)  # [K, D]

    def _update(self, fitness):
        cfg = self._cfg
        shaped = utility.shape_fitness(fitness, cfg.fitness_shaping)  # [2N]
        plus, minus = tf.split(shaped, 2)  # [N] each
        noise = tf.cond(
            tf.equal(self._drawn.generation, self.generation),
            lambda: self._drawn.noise.read_value(),
            lambda: utility.member_noise(
                self._seed, self.generation, tf.range(self.pairs), self.size
            ),
        )  # [N, D]
        gradient = utility.mirrored_gradient(plus, minus, noise, cfg.sigma)  # [D]
        total = utility.coupled_l2(gradient, self.theta, cfg.l2_coeff)  # [D]
        rate = learning_rate(
            cfg.learning_rate,
            cfg.learning_rate_schedule,
            self.generation,
            cfg.decay_generations,
            cfg.final_learning_rate,
        )
        if cfg.optimizer == "adam":
            step, m, v = utility.adam_step(
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


class PopulationPolicy(Algorithm):
    """Acting only: agent a acts with member a // E.

    `start(params)` loads the parameters [M, D] of M members for B = M E agents;
    `simulate` then drives it (through an `EpisodeRecorder`, which scores each agent's
    first episode). Observations are normalized with the statistics frozen at `start`
    (every member sees the same); with `update_normalizer`, the running statistics of
    `observ_normalizer` are updated with every observation.

    With `member_chunk` C > 0 and `skip_finished(finished)`, a step runs the network
    only for the members that still have an agent in its first episode, C members at a
    time in a loop of static shapes (so it compiles under XLA), and the other agents act
    with a zero network output: only first episodes are scored, and without this a
    generation keeps computing every member until the longest episode ends.
    """

    def __init__(
        self,
        network: PopulationNetwork,
        action_space,
        members: int,
        episodes_per_member: int,
        observ_normalizer: StreamingNormalizer | None = None,
        squash: bool = False,
        action_noise: float = 0.0,
        rng: tf.random.Generator | None = None,
        update_normalizer: bool = True,
        member_chunk: int = 0,
        common_noise: bool = False,
    ):
        super().__init__(name="population")
        if member_chunk < 0:
            raise ValueError(f"member_chunk={member_chunk} must be >= 0 (0: no skipping).")
        if common_noise and members % 2:
            raise ValueError(
                f"common_noise=True shares the action noise of member i and its mirror "
                f"i + N, which needs an even number of members, not {members}."
            )
        self._common_noise = bool(common_noise)
        self._chunk = min(int(member_chunk), members)
        self._finished = None
        self._network = network
        self._space = action_space
        self._members = members
        self._per_member = episodes_per_member
        self._normalizer = observ_normalizer
        self._squash = squash
        self._action_noise = action_noise
        self._rng = rng
        self._update_normalizer = update_normalizer
        self.params = tf.Variable(tf.zeros([members, network.num_params]), trainable=False)
        shape = () if observ_normalizer is None else observ_normalizer._shape
        self._mean = tf.Variable(tf.zeros(shape), trainable=False)
        self._std = tf.Variable(tf.ones(shape), trainable=False)

    def __len__(self) -> int:
        return self._members * self._per_member

    def start(self, params: tf.Tensor) -> None:
        self.params.assign(params)
        if self._normalizer is not None:
            self._mean.assign(tf.cast(self._normalizer.mean, tf.float32))
            self._std.assign(tf.cast(self._normalizer.std, tf.float32))

    def skip_finished(self, finished: tf.Variable) -> None:
        """Skips the network for members whose agents all have `finished` [B] set.

        Has an effect only with `member_chunk` > 0.
        """
        if self._chunk:
            self._finished = finished

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        batch = len(self)
        observ = tf.cast(observ, tf.float32)
        if self._normalizer is not None:
            observ = (observ - self._mean) / (self._std + 1e-8)
            observ = tf.clip_by_value(observ, -OBSERV_CLIP, OBSERV_CLIP)
        full_shape = tf.concat([[batch], tf.shape(observ)[1:]], 0)
        full = tf.scatter_nd(agent_indices[:, None], observ, full_shape)  # [B, ...]
        grouped = tf.reshape(
            full, tf.concat([[self._members, self._per_member], full_shape[1:]], 0)
        )
        if self._finished is None:
            output = self._network.apply(self.params, grouped)  # [M, E, size]
        else:
            output = self._apply_running(grouped)  # [M, E, size]
        output = tf.reshape(output, [batch, -1])  # [B, size]
        output = tf.gather(output, agent_indices)  # [K, size]
        if self._action_noise:
            output += self._action_noise * self._noise(agent_indices, tf.shape(output))
        return to_action(output, self._space, self._squash)

    def _noise(self, agent_indices, shape):
        """Standard normal noise [K, size] for the agents `agent_indices`.

        With `common_noise`, agent a and agent a + N E (the same agent of the mirror
        member) draw the same numbers, row a mod N E, so that a pair that routes the
        same demands (`common_streams` pairs the agents alike) also acts with the same
        noise.
        """
        if not self._common_noise:
            return self._rng.normal(shape)
        pair_agents = len(self) // 2  # N E
        noise = self._rng.normal([pair_agents, shape[1]])  # [N E, size]
        return tf.gather(noise, agent_indices % pair_agents)

    def _apply_running(self, grouped):
        """The network's output [M, E, size] for members with a running first episode.

        Those members are sorted first and taken C at a time; the rest output zeros.
        """
        members, chunk = self._members, self._chunk
        running = tf.reduce_any(
            ~tf.reshape(self._finished, [members, self._per_member]), axis=1
        )  # [M]
        order = tf.argsort(tf.cast(~running, tf.int32), stable=True)  # running first
        chunks = -(-members // chunk)
        # Pad with the last member so that every chunk has C rows; computing it twice
        # writes the same output twice.
        order = tf.concat([order, tf.fill([chunks * chunk - members], order[-1])], 0)
        count = -(-tf.reduce_sum(tf.cast(running, tf.int32)) // chunk)
        empty = tf.zeros([members, self._per_member, action_size(self._space)])

        def body(index, output):
            rows = tf.slice(order, [index * chunk], [chunk])  # [C]
            part = self._network.apply(
                tf.gather(self.params, rows), tf.gather(grouped, rows)
            )  # [C, E, size]
            return index + 1, tf.tensor_scatter_nd_update(output, rows[:, None], part)

        _, output = tf.while_loop(lambda index, _: index < count, body, (0, empty))
        return output

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        if self._normalizer is not None and self._update_normalizer:
            self._normalizer.update(observ)

    def end_episodes(self, agent_indices):
        pass


class PopulationEvaluator:
    """Fitness of M members: one graph call runs each agent's first episode, M E agents.

    `evaluator(params [M, D])` returns the fitness [M] (mean return of each member's E
    episodes) and the statistics a `Trainer` returns, with `steps` the steps of those
    episodes. The call steps until every environment finished its first episode or
    `max_steps` steps; with `jit_compile` it is one XLA computation.
    """

    def __init__(self, batch_env, policy: PopulationPolicy, max_steps: int, jit_compile=False):
        if len(batch_env) != len(policy):
            raise ValueError(
                f"{len(policy)} agents need as many environments, not {len(batch_env)}."
            )
        self._env = batch_env
        self._policy = policy
        self._recorder = EpisodeRecorder(policy, len(policy))
        policy.skip_finished(self._recorder.finished)
        self._max_steps = int(max_steps)
        self._call = tf.function(self._run, jit_compile=bool(jit_compile))

    def __call__(self, params) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
        """Call it without a default summary writer when it is compiled with XLA."""
        return self._call(tf.convert_to_tensor(params, tf.float32))

    @property
    def recorder(self) -> EpisodeRecorder:
        """The first episodes of the last call (`finished` says which ended)."""
        return self._recorder

    def _run(self, params):
        policy = self._policy
        policy.start(params)
        returns, lengths = first_episodes(self._env, self._recorder, self._max_steps)  # [B] each
        per_member = tf.reshape(returns, [policy._members, policy._per_member])
        stats = {
            "episodes": tf.size(returns),
            "mean_return": tf.reduce_mean(returns),
            "mean_length": tf.reduce_mean(tf.cast(lengths, tf.float32)),
            "steps": tf.reduce_sum(lengths),
        }
        return tf.reduce_mean(per_member, 1), stats


class GenerationTrainer(Trainer):
    """One generation per `step`: ask, evaluate the 2N members in one call, tell.

    The evaluation is one XLA computation with `train.jit_compile` (environments in
    TensorFlow ops); `ask` and `tell` are plain graph calls around it. The environment
    steps counted are those of the members' first episodes, the episodes the fitness is
    computed from. `tell`'s metrics are written as `es/*` summaries, except under XLA,
    where the train loop calls `step` without a summary writer (`jit_compile`).
    """

    def __init__(self, config, algo: ES, batch_env, seed: int = 0):
        self._algo = algo
        self._evaluator = algo.make_evaluator(batch_env, training=True)
        self.jit_compile = bool(config.train.jit_compile)
        self._env = batch_env
        self._seed = int(seed)
        self._common = bool(config.es.common_random_numbers)
        if self._common:
            check_shared_streams(config, batch_env)
            batch_env.restart_streams(streams=common_streams(algo.strategy.pairs, len(batch_env)))

    def step(self) -> tuple[int, dict]:
        strategy = self._algo.strategy
        if self._common:  # New demands every generation, the same for a member and its mirror.
            self._env.restart_streams(seed=common_seed(self._seed, int(strategy.generation)))
        fitness, stats = self._evaluator(strategy.ask())
        metrics = strategy.tell(fitness)
        for name, value in metrics.items():
            summary.scalar(f"es/{name}", value)
        return int(stats.pop("steps")), stats


def common_streams(pairs: int, agents: int, first_pair: int = 0) -> np.ndarray:
    """The random stream [2 N E] of each agent: agent e of member i and of its mirror
    i + N share one, so that a pair is compared on the same episodes.

    With `first_pair` P, the agents are those of pairs P..P+N-1 of a larger population
    (members P..P+N-1, then their mirrors), as a worker holds them, and get the streams
    they have in the whole population's batch.
    """
    per_member = agents // (2 * pairs)
    agent = np.arange(agents)
    pair = first_pair + agent // per_member % pairs
    return pair * per_member + agent % per_member


def check_shared_streams(config, batch_env) -> None:
    """Raises ConfigError unless `batch_env` can share random streams between agents
    (`restart_streams`), as `es.common_random_numbers` needs."""
    if not hasattr(batch_env, "restart_streams"):
        raise ConfigError(
            "es.common_random_numbers=true needs an environment whose random streams "
            f"can be restarted and shared (batchrl/Routing-*); {type(batch_env).__name__} "
            f"(env.id={config.env.id!r}) has no restart_streams."
        )


def common_seed(seed: int, generation: int) -> int:
    """The seed of the shared streams in `generation` (`es.common_random_numbers`): new
    episodes every generation, the same wherever the generation is evaluated."""
    state = np.random.SeedSequence([int(seed), int(generation)]).generate_state(1)[0]
    return int(state % 2**31)


def _shares_streams(env) -> bool:
    """Whether the environments `env` configures can share random streams (routing's).

    A factory that is no class passes here; `GenerationTrainer` checks what it built.
    """
    if env.backend != "tensorflow":
        return False
    constructor = ENVIRONMENTS.resolve(env.id)
    constructor = getattr(constructor, "func", constructor)  # functools.partial(Routing, ...)
    return not isinstance(constructor, type) or hasattr(constructor, "restart_streams")


class ES(Algorithm, Policy):
    """Evolution strategies (Salimans et al. 2017) for a population acting as one batch.

    A generation reads like the paper:

    1. Ask: 2N members theta +- sigma eps_i, with eps_i regenerated from (seed,
       generation, i) (`Strategy.ask`).
    2. Evaluate: the 2N E environments run the first episode of each agent, agent a with
       member a // E, in one graph call (`PopulationEvaluator`); fitness is the mean
       return of a member's E episodes.
    3. Tell: shape the fitness (centered ranks, the routing paper's separate ranks, or
       raw), estimate g = 1 / (2 N sigma) sum_i (F+_i - F-_i) eps_i, add the coupled L2
       term and take an Adam or SGD step on theta (`Strategy.tell`).
    4. Report fitness, gradient and update norms (`es/*` summaries).

    As a `Policy`, ES acts deterministically with theta; as an `Algorithm` it does the
    same and learns nothing (`simulate` over it is an evaluation). Training goes through
    `make_batch_env` and `make_trainer`, which the train script uses.
    """

    config_section = "es"

    @classmethod
    def check_config(cls, config) -> None:
        cfg = config.es
        check_choice("es.optimizer", cfg.optimizer, OPTIMIZERS)
        check_choice("es.fitness_shaping", cfg.fitness_shaping, SHAPINGS)
        check_choice("es.learning_rate_schedule", cfg.learning_rate_schedule, SCHEDULES)
        check_range(
            cfg,
            "es",
            {
                "population": (lambda x: x >= 1, ">= 1 (mirrored pairs)"),
                "sigma": (lambda x: x > 0, "> 0"),
                "learning_rate": (lambda x: x > 0, "> 0"),
                "beta1": (lambda x: 0 <= x < 1, "in [0, 1)"),
                "beta2": (lambda x: 0 <= x < 1, "in [0, 1)"),
                "epsilon": (lambda x: x > 0, "> 0"),
                "l2_coeff": (lambda x: x >= 0, ">= 0"),
                "episodes_per_member": (lambda x: x >= 1, ">= 1"),
                "action_noise": (lambda x: x >= 0, ">= 0"),
                "member_chunk": (lambda x: x >= 0, ">= 0 (0: every member every step)"),
                "max_episode_steps": (lambda x: x >= 1, ">= 1"),
                "final_learning_rate": (
                    lambda x: 0 <= x <= cfg.learning_rate,
                    f"in [0, es.learning_rate={cfg.learning_rate}]",
                ),
            },
        )
        if cfg.learning_rate_schedule == "linear" and cfg.decay_generations < 1:
            raise ConfigError(
                f"es.decay_generations={cfg.decay_generations} with "
                "es.learning_rate_schedule=linear: the schedule needs the generation where "
                "the rate reaches es.final_learning_rate (>= 1)."
            )
        check_choice("network.name", config.network.name, POPULATION_NETWORKS)
        if config.network.conv_filters:
            raise ConfigError(
                f"network.conv_filters={list(config.network.conv_filters)}: ES's population "
                "networks take vector observations (conv_filters: [])."
            )
        if config.network.name == "graph":
            check_graph_config(config.network, config.env.get("topologies", ()))
        if config.network.name == "graph" and cfg.normalize_observ:
            raise ConfigError(
                "es.normalize_observ=true with network.name=graph: the graph network reads "
                "raw capacities and demands from the observation (es.normalize_observ: false)."
            )
        if cfg.common_action_noise and not cfg.action_noise:
            raise ConfigError(
                "es.common_action_noise=true with es.action_noise=0: there is no action "
                "noise for a member and its mirror to share (set es.action_noise > 0)."
            )
        if cfg.common_random_numbers and not _shares_streams(config.env):
            raise ConfigError(
                "es.common_random_numbers=true needs environments in TensorFlow ops whose "
                "random streams can be restarted and shared (env.backend=tensorflow with "
                f"batchrl/Routing-*); env.id={config.env.id!r} with env.backend="
                f"{config.env.backend!r} has none (use es.common_random_numbers=false)."
            )

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """The training environments: 2 N E of them, in the graph."""
        cfg = config.es
        return make_in_graph_env(config.env, 2 * cfg.population * cfg.episodes_per_member, seed)

    @classmethod
    def make_trainer(cls, config, algo: ES, batch_env, seed: int) -> GenerationTrainer:
        return GenerationTrainer(config, algo, batch_env, seed)

    def __init__(self, batch_env, config, step: tf.Variable | None = None, seed: int = 0):
        """Creates theta, the optimizer state and the observation statistics.

        Args:
          batch_env: the training environments (their spaces are what ES reads).
          config: the run's `Config`; ES reads `config.es` and `config.network`.
          step: unused (ES counts generations).
          seed: the seed of theta's initialization and of the noise.
        """
        super().__init__()
        self.check_config(config)
        del step
        self._config = config
        cfg = self._cfg = config.es
        self._seed = int(seed)
        self._observ_shape = tuple(batch_env.observation_space.shape)
        self._action_space = batch_env.action_space
        network = config.network
        self.network = make_population_network(
            network,
            int(np.prod(self._observ_shape)),
            action_size(self._action_space),
            config.env.get("topologies", ()),
        )
        self.strategy = Strategy(self.network.init_params(seed), cfg, seed)
        self.observ_normalizer = None
        if cfg.normalize_observ:
            self.observ_normalizer = StreamingNormalizer(
                self._observ_shape, clip=OBSERV_CLIP, name="observ"
            )
        self._rng = tf.random.Generator.from_seed(seed + 1)
        self._evaluators = {}

    def make_evaluator(self, batch_env, training: bool = False) -> PopulationEvaluator:
        """An evaluator of len(batch_env) // E members in `batch_env`.

        With `training`, observations update the normalizer and actions get
        `es.action_noise`; without, members are scored as they are.
        """
        cfg = self._cfg
        members, rest = divmod(len(batch_env), cfg.episodes_per_member)
        if rest:
            raise ValueError(f"{len(batch_env)} environments are not a multiple of E.")
        policy = PopulationPolicy(
            self.network,
            self._action_space,
            members,
            cfg.episodes_per_member,
            self.observ_normalizer,
            self._config.network.squash_mean,
            cfg.action_noise if training else 0.0,
            self._rng,
            update_normalizer=training,
            member_chunk=cfg.member_chunk,
            common_noise=cfg.common_action_noise,
        )
        jit = bool(self._config.train.jit_compile)
        return PopulationEvaluator(batch_env, policy, cfg.max_episode_steps, jit)

    def evaluate_members(
        self, start: int, stop: int, generation: int | None = None, batch_env=None
    ):
        """The fitness [stop - start] (NumPy) of members start..stop-1 of `generation`.

        What a worker elsewhere calls: it needs theta of that generation (restored or
        broadcast) and regenerates the noise itself. The members act without action
        noise and without updating the observation statistics.

        Args:
          start, stop: the member slice, in [0, 2N].
          generation: defaults to the current one.
          batch_env: (stop - start) E environments; built from the config when None.
        """
        size = (stop - start) * self._cfg.episodes_per_member
        if batch_env is None:
            key = size
            if key not in self._evaluators:
                env = make_in_graph_env(self._config.env, size, self._seed)
                self._evaluators[key] = self.make_evaluator(env)
            evaluator = self._evaluators[key]
        else:
            evaluator = self.make_evaluator(batch_env)
        fitness, _ = evaluator(self.strategy.members(start, stop, generation))
        return fitness.numpy()

    # Policy: theta, deterministic.

    def act(self, observ, deterministic: bool = True):
        del deterministic  # ES's policy is deterministic.
        observ = tf.cast(observ, tf.float32)
        if self.observ_normalizer is not None:
            observ = self.observ_normalizer.normalize(observ)
        output = self.network.apply(self.strategy.theta[None], observ[None])[0]  # [N, size]
        return to_action(output, self._action_space, self._config.network.squash_mean)

    # Algorithm: acts with theta and learns nothing; training runs through make_trainer.

    def begin_episodes(self, agent_indices):
        pass

    def perform(self, agent_indices, observ):
        return self.act(observ)

    def experience(self, agent_indices, observ, action, reward, terminated, truncated, next_observ):
        pass

    def end_episodes(self, agent_indices):
        pass
