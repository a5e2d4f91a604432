"""Evolution strategies with the whole population acting as one batch inside the graph."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from batchrl.algorithms.es.generation import OBSERV_CLIP, PopulationEvaluator, PopulationPolicy
from batchrl.algorithms.es.strategy import OPTIMIZERS, SHAPINGS, Strategy
from batchrl.config import ENVIRONMENTS, ConfigError, check_choice
from batchrl.config.config import check_range
from batchrl.core import Algorithm, Policy, Trainer
from batchrl.networks import action_size, to_action
from batchrl.networks.factory import (
    POPULATION_NETWORKS,
    check_graph_config,
    make_population_network,
)
from batchrl.parts import summary
from batchrl.parts.normalizer import StreamingNormalizer
from batchrl.parts.schedules import SCHEDULES
from batchrl.tools.environments import make_in_graph_env


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
    distribution = "evaluator_pool"  # On Ray: workers evaluate slices of a generation.

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
