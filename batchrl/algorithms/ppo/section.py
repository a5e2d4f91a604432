"""The `ppo` config section's rules: its choices, ranges, the keys a population's members
may set on their own or population-based training may perturb, and what it needs of the
other sections; and those of the `pbt` section, population-based training of a PPO
population. Their keys, defaults and docs are in ppo.yaml and pbt.yaml beside this file."""

from __future__ import annotations

from pathlib import Path

from batchrl.config import ConfigError, check_choice, require
from batchrl.config.config import check_range
from batchrl.config.run_config import algorithm_class
from batchrl.config.section import Section
from batchrl.networks import is_recurrent
from batchrl.networks.factory import check_graph_config
from batchrl.parts.schedules import SCHEDULES

OBJECTIVES = ("clip", "kl_penalty")
# The keys of the ppo section that each member of a population may set on its own (a
# list of train.population values): numbers the update reads, not shapes or loop counts.
MEMBER_KEYS = (
    "learning_rate",
    "clip_ratio",
    "kl_target",
    "kl_init_penalty",
    "kl_cutoff_factor",
    "kl_cutoff_coef",
    "discount",
    "gae_lambda",
    "max_grad_norm",
    "value_coef",
    "value_clip",
    "entropy_coef",
    "observ_clip",
    "reward_clip",
)
# The keys population-based training may perturb (`pbt.perturb`), with their valid ranges
# (values are clipped to them): numbers a population reads at every update, not only at
# the start (kl_init_penalty) or in its normalizers' clipping (observ_clip, reward_clip).
PBT_KEYS = {
    "learning_rate": (0.0, float("inf")),
    "entropy_coef": (0.0, float("inf")),
    "clip_ratio": (0.0, float("inf")),
    "value_coef": (0.0, float("inf")),
    "value_clip": (0.0, float("inf")),
    "max_grad_norm": (0.0, float("inf")),
    "discount": (0.0, 1.0),
    "gae_lambda": (0.0, 1.0),
    "kl_target": (0.0, float("inf")),
    "kl_cutoff_factor": (0.0, float("inf")),
    "kl_cutoff_coef": (0.0, float("inf")),
}
UPDATE_MODES = ("steps", "episodes")


def check_ppo_config(config) -> None:
    """Raises ConfigError on a `ppo` section PPO cannot train with, naming the key."""
    cfg = config.ppo
    check_choice("ppo.objective", cfg.objective, OBJECTIVES)
    check_choice("ppo.update_mode", cfg.update_mode, UPDATE_MODES)
    check_choice("ppo.learning_rate_schedule", cfg.learning_rate_schedule, SCHEDULES)
    check_range(
        cfg,
        "ppo",
        {
            "rollout_length": (lambda x: x >= 1, ">= 1"),
            "update_every": (lambda x: x >= 1, ">= 1"),
            "max_episode_length": (lambda x: x >= 1, ">= 1"),
            "epochs": (lambda x: x >= 1, ">= 1"),
            "minibatches": (lambda x: x >= 1, ">= 1"),
            "learning_rate": (lambda x: x >= 0, ">= 0"),
            "discount": (lambda x: 0 <= x <= 1, "in [0, 1]"),
            "gae_lambda": (lambda x: 0 <= x <= 1, "in [0, 1]"),
            "clip_ratio": (lambda x: x > 0, "> 0"),
            "kl_target": (lambda x: x > 0, "> 0"),
            "kl_init_penalty": (lambda x: x >= 0, ">= 0"),
            "kl_cutoff_factor": (lambda x: x > 0, "> 0"),
            "kl_cutoff_coef": (lambda x: x >= 0, ">= 0"),
            "max_grad_norm": (lambda x: x > 0, "> 0"),
            "value_coef": (lambda x: x >= 0, ">= 0"),
            "value_clip": (lambda x: x >= 0, ">= 0 (0: off)"),
            "entropy_coef": (lambda x: x >= 0, ">= 0"),
            "observ_clip": (lambda x: x >= 0, ">= 0 (0: off)"),
            "reward_clip": (lambda x: x >= 0, ">= 0 (0: off)"),
            "gsde_every": (lambda x: x >= 1, ">= 1 (batched steps)"),
        },
    )
    if cfg.gsde:
        network = config.network
        if network.name != "feedforward" or not network.policy_layers:
            raise ConfigError(
                f"ppo.gsde=true explores with the policy's last hidden layer, which needs "
                f"network.name='feedforward' with policy_layers, got network.name="
                f"{network.name!r}, policy_layers={list(network.policy_layers)}."
            )
    if is_recurrent(config.network) and cfg.update_mode != "steps":
        raise ConfigError(
            f"network.name={config.network.name!r} needs ppo.update_mode='steps'; "
            "recurrent policies train on fixed-length rollouts."
        )
    if config.network.conv_filters:
        raise ConfigError(
            f"network.conv_filters={list(config.network.conv_filters)} is read by IMPALA "
            "only; PPO's networks take vector observations (use conv_filters: [])."
        )
    if config.network.name == "graph":
        check_graph_config(config.network, config.env.get("topologies", ()))
    population = config.train.population
    if population > 1:
        for key, valid in (("update_mode", "steps"), ("jit_update", False)):
            if cfg[key] != valid:
                raise ConfigError(
                    f"train.population={population} does not support ppo.{key}="
                    f"{cfg[key]!r}; a population needs ppo.{key}={valid!r}, or "
                    "train.population=1."
                )
    steps_per_call = config.train.steps_per_call
    if cfg.update_mode == "steps" and steps_per_call % cfg.rollout_length:
        raise ConfigError(
            f"train.steps_per_call={steps_per_call} must be a multiple of "
            f"ppo.rollout_length={cfg.rollout_length}, so that every checkpoint (and "
            "every exploit of population-based training) falls on a rollout boundary."
        )
    pbt, train = config.pbt, config.train
    if pbt.interval and train.population > 1:
        for key in ("observ_clip", "reward_clip"):
            if isinstance(cfg[key], tuple):
                raise ConfigError(
                    f"ppo.{key}={list(cfg[key])} gives each member its own clip, but "
                    f"with pbt.interval={pbt.interval} a copied member takes all its "
                    "parent's settings, and a member's normalizer clip is fixed when the "
                    f"run starts: give ppo.{key} one value, or set pbt.interval=0."
                )
        # A population's step counts each member's environment steps; PBT exploits
        # between training calls, after the evaluation at each multiple of the interval.
        per_call = steps_per_call * config.env.num_envs
        if pbt.interval % per_call:
            raise ConfigError(
                f"pbt.interval={pbt.interval} must be a multiple of the environment "
                f"steps each member takes per training call, train.steps_per_call="
                f"{steps_per_call} x env.num_envs={config.env.num_envs} = {per_call}, "
                "so that population-based training exploits every interval exactly."
            )


SECTION = Section("ppo", Path(__file__).with_name("ppo.yaml"))  # Checked by PPO.check_config.


def check_pbt_section(config) -> None:
    """Raises ConfigError on `pbt` settings population-based training cannot run with,
    naming the key; the keys it may perturb are the algorithm's `pbt_keys`."""
    pbt, train = config.pbt, config.train
    require(pbt.interval >= 0, "pbt.interval", pbt.interval, ">= 0 (0: off)")
    probability = pbt.resample_probability
    require(0 <= probability <= 1, "pbt.resample_probability", probability, "in [0, 1]")
    if not pbt.interval:
        return
    require(train.population >= 2, "train.population", train.population, ">= 2 with pbt")
    require(
        train.eval_every > 0 and pbt.interval % train.eval_every == 0,
        "pbt.interval",
        pbt.interval,
        f"a multiple of train.eval_every={train.eval_every} (members are ranked by their "
        "latest evaluation)",
    )
    require(0 < pbt.quantile <= 0.5, "pbt.quantile", pbt.quantile, "in (0, 0.5]")
    keys = tuple(getattr(algorithm_class(config), "pbt_keys", ()))
    for key in pbt.perturb:
        if key not in keys:
            raise ConfigError(
                f"Invalid pbt.perturb={list(pbt.perturb)}: {key!r} is not a setting "
                f"population-based training perturbs; valid keys are {list(keys)}."
            )
    require(
        bool(pbt.factors) and all(isinstance(f, float) and f > 0 for f in pbt.factors),
        "pbt.factors",
        list(pbt.factors),
        "a list of positive numbers",
    )


PBT_SECTION = Section("pbt", Path(__file__).with_name("pbt.yaml"), check=check_pbt_section)
