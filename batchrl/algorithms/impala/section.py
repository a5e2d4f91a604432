"""The `impala` config section's rules: its choices, ranges, and what it needs of the
other sections. Its keys, defaults and docs are in impala.yaml beside this file."""

from __future__ import annotations

from pathlib import Path

from batchrl.algorithms.impala import rewards
from batchrl.config import ConfigError, check_choice
from batchrl.config.config import check_range
from batchrl.config.section import Section
from batchrl.parts.schedules import SCHEDULES

OPTIMIZERS = ("rmsprop", "adam")


def check_impala_config(config) -> None:
    """Raises ConfigError on an `impala` section IMPALA cannot train with, naming the key."""
    cfg = config.impala
    check_choice("impala.optimizer", cfg.optimizer, OPTIMIZERS)
    check_choice("impala.learning_rate_schedule", cfg.learning_rate_schedule, SCHEDULES)
    check_choice("impala.reward_clipping", cfg.reward_clipping, rewards.REWARD_CLIPPINGS)
    check_range(
        cfg,
        "impala",
        {
            "unroll_length": (lambda x: x >= 1, ">= 1"),
            "discount": (lambda x: 0 <= x <= 1, "in [0, 1]"),
            "learning_rate": (lambda x: x >= 0, ">= 0"),
            "max_grad_norm": (lambda x: x > 0, "> 0"),
            "baseline_cost": (lambda x: x >= 0, ">= 0"),
            "entropy_cost": (lambda x: x >= 0, ">= 0"),
            "rmsprop_alpha": (lambda x: 0 <= x < 1, "in [0, 1)"),
            "rmsprop_momentum": (lambda x: 0 <= x < 1, "in [0, 1)"),
            "rmsprop_epsilon": (lambda x: x > 0, "> 0"),
            "clip_rho_threshold": (lambda x: x >= 0, ">= 0 (0: off)"),
            "clip_pg_rho_threshold": (lambda x: x >= 0, ">= 0 (0: off)"),
            "vtrace_lambda": (lambda x: 0 <= x <= 1, "in [0, 1]"),
            "observ_clip": (lambda x: x >= 0, ">= 0 (0: off)"),
            "reward_clip": (lambda x: x >= 0, ">= 0 (0: off)"),
        },
    )
    if "last_reward" in config.network.core_inputs and cfg.normalize_reward:
        raise ConfigError(
            f"network.core_inputs={list(config.network.core_inputs)} with "
            "impala.normalize_reward=true: the core reads the clipped reward the actors "
            "saw, and the learner's unrolls would hold scaled ones; set "
            "impala.normalize_reward=false."
        )
    if config.network.name != "feedforward":
        raise ConfigError(
            f"network.name={config.network.name!r}: IMPALA's networks are feed-forward "
            "(network.name='feedforward')."
        )
    steps_per_call = config.train.steps_per_call
    if config.runner.name == "local" and steps_per_call % cfg.unroll_length:
        raise ConfigError(
            f"train.steps_per_call={steps_per_call} must be a multiple of "
            f"impala.unroll_length={cfg.unroll_length}, so that every checkpoint falls on "
            "an unroll boundary."
        )


SECTION = Section(
    "impala", Path(__file__).with_name("impala.yaml")
)  # Checked by IMPALA.check_config.
