"""Trains an algorithm from a config: `python -m batchrl.scripts.train --config=pendulum`."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import tensorflow as tf

from batchrl.algorithms import IMPALA, PPO
from batchrl.algorithms.impala import impala as impala_module
from batchrl.algorithms.impala import utility as impala_utility
from batchrl.algorithms.impala.actor_learner import ActorLearner
from batchrl.algorithms.ppo import ppo as ppo_module
from batchrl.tools import InGraphBatchEnv, simulate, summary
from batchrl.tools.config import (
    Config,
    ConfigError,
    load_config,
    load_resolved_config,
    save_config,
)
from batchrl.tools.environments import EnvSpaces, check_tensorflow_env_id, make_in_graph_env
from batchrl.tools.evaluation import Evaluation
from batchrl.tools.export import export_policy
from batchrl.tools.networks import ACTIVATIONS

ALGORITHMS = {"ppo": PPO, "impala": IMPALA}
# Keys whose valid values are a fixed list, checked when the config is loaded.
CHOICES = {
    "algorithm.name": sorted(ALGORITHMS),
    "algorithm.objective": ppo_module.OBJECTIVES,
    "algorithm.update_mode": ppo_module.UPDATE_MODES,
    "algorithm.network": ppo_module.NETWORKS,
    "algorithm.learning_rate_schedule": ppo_module.SCHEDULES,
    "algorithm.activation": sorted(ACTIVATIONS),
    "algorithm.optimizer": impala_module.OPTIMIZERS,
    "algorithm.reward_clipping": impala_utility.REWARD_CLIPPINGS,
    "env.backend": ["gymnasium", "tensorflow"],
}
# Sections that shape the model; a resumed run must keep them as they were.
FIXED_SECTIONS = ("env", "algorithm")


def make_algorithm(config: Config, batch_env, step: tf.Variable):
    """The algorithm named by `config.algorithm.name`."""
    name = config.algorithm.name
    if name not in ALGORITHMS:
        raise ConfigError(
            f"Unknown algorithm.name={name!r}; valid choices are {sorted(ALGORITHMS)}."
        )
    return ALGORITHMS[name](batch_env, config, step, seed=config.train.seed)


def check_config(config: Config) -> None:
    """Raises ConfigError for values that no single key's type can rule out."""
    algo, train = config.algorithm, config.train
    ppo_rollout = algo.name == "ppo" and algo.update_mode == "steps"
    if ppo_rollout and train.steps_per_call % algo.rollout_length:
        raise ConfigError(
            f"train.steps_per_call={train.steps_per_call} must be a multiple of "
            f"algorithm.rollout_length={algo.rollout_length}, so that every checkpoint "
            "falls on a rollout boundary."
        )
    if is_async(config):
        _check_async(config)
    elif algo.name == "impala" and train.steps_per_call % algo.unroll_length:
        raise ConfigError(
            f"train.steps_per_call={train.steps_per_call} must be a multiple of "
            f"algorithm.unroll_length={algo.unroll_length}, so that every checkpoint "
            "falls on an unroll boundary."
        )
    for key in ("total_steps", "steps_per_call", "checkpoint_every"):
        if train[key] <= 0:
            raise ConfigError(f"train.{key}={train[key]} must be positive.")
    if config.env.backend == "tensorflow":
        check_tensorflow_env_id(config.env.id)
    elif train.jit_compile:
        raise ConfigError(
            "train.jit_compile=true needs env.backend='tensorflow': XLA cannot compile the "
            "Python callback that steps Gymnasium environments."
        )
    if train.eval_episodes <= 0 or config.env.eval_envs <= 0 or config.env.num_envs <= 0:
        raise ConfigError(
            "env.num_envs, env.eval_envs and train.eval_episodes must be positive, got "
            f"{config.env.num_envs}, {config.env.eval_envs} and {train.eval_episodes}."
        )


def is_async(config: Config) -> bool:
    """Whether the config asks for IMPALA's asynchronous actor-learner mode."""
    return config.algorithm.name == "impala" and config.algorithm.num_actors > 0


def _check_async(config: Config) -> None:
    algo = config.algorithm
    for key in ("learner_batch", "queue_size", "unroll_length"):
        if algo[key] < 1:
            raise ConfigError(f"algorithm.{key}={algo[key]} must be at least 1.")
    if algo.max_actor_restarts < 0:
        raise ConfigError(f"algorithm.max_actor_restarts={algo.max_actor_restarts} must be >= 0.")
    if config.env.backend != "gymnasium" or config.train.jit_compile:
        raise ConfigError(
            f"algorithm.num_actors={algo.num_actors} (asynchronous IMPALA) steps Gymnasium "
            "environments in actor threads: it needs env.backend='gymnasium' and "
            "train.jit_compile=false. Use algorithm.num_actors=0 for environments in "
            "TensorFlow ops."
        )


def resolve_run_config(config: Config, logdir: Path) -> Config:
    """The config of the run in `logdir`: the saved one on resume, else `config`, saved."""
    path = logdir / "config.yaml"
    if not path.exists():
        logdir.mkdir(parents=True, exist_ok=True)
        save_config(config, path)
        return config
    saved = load_resolved_config(path, choices=CHOICES)
    changed = [
        f"{section}.{key}"
        for section in FIXED_SECTIONS
        for key in saved[section]
        if saved[section][key] != config[section][key]
    ]
    if changed:
        raise ConfigError(
            f"{logdir} holds a run with a different config: {', '.join(changed)} differ. "
            "Only train.* keys may change on resume; use a new --logdir for a new run."
        )
    if saved != config:
        save_config(config, path)
    return config


def train(config: Config, logdir: str | Path, progress=None) -> dict[str, float]:
    """Trains until `config.train.total_steps` environment steps; resumes from `logdir`.

    Args:
      config: the resolved config.
      logdir: folder for config.yaml, checkpoints, TensorBoard events and the exported
        policy. A folder with a checkpoint resumes from it.
      progress: callable receiving a one-line status string; None prints to stderr.

    Returns:
      The final `step`, and the latest `train_return` and `eval_return` (NaN if none).
    """
    logdir = Path(logdir)
    check_config(config)
    config = resolve_run_config(config, logdir)
    progress = progress or _Progress()
    cfg = config.train
    # Python's, NumPy's, TensorFlow's and Keras's seeds; the weight initializers use Keras's.
    tf.keras.utils.set_random_seed(cfg.seed)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    batch_env = eval_env = None
    try:
        env = config.env
        eval_backend = "gymnasium" if env.eval_on_gymnasium else env.backend
        if is_async(config):  # The actors build their own environments.
            batch_env = EnvSpaces(env, env.num_envs)
        else:
            batch_env = make_in_graph_env(env, env.num_envs, cfg.seed)
        eval_env = make_in_graph_env(env, env.eval_envs, cfg.seed + 10**6, eval_backend)
        algo = make_algorithm(config, batch_env, step)
        checkpoint = tf.train.Checkpoint(step=step, algo=algo)
        manager = tf.train.CheckpointManager(checkpoint, logdir / "checkpoints", max_to_keep=3)
        if manager.latest_checkpoint:
            checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
            progress(f"Resumed from {manager.latest_checkpoint} at step {int(step)}.", final=True)
        # New seeds after a resume, so that environments do not replay the same episodes.
        _reseed(batch_env, cfg.seed + int(step))
        _reseed(eval_env, cfg.seed + int(step) + 10**6)
        if not is_async(config):
            collect = _simulate_collector(config, algo, batch_env)
            return _train_loop(config, logdir, algo, collect, eval_env, step, manager, progress)
        with ActorLearner(config, algo, seed=cfg.seed + int(step)) as runner:
            collect = _Collector(runner.update, in_graph_logging=False)
            return _train_loop(config, logdir, algo, collect, eval_env, step, manager, progress)
    finally:
        for env in (batch_env, eval_env):
            if env is not None:
                env.close()


def _reseed(env, seed: int) -> None:
    """Restarts the random streams of `env` from `seed` (before any graph is traced)."""
    if isinstance(env, InGraphBatchEnv):
        env.batch_env.reset(seed=seed)
    elif not isinstance(env, EnvSpaces):
        env.seed = seed % 2**31


class _Collector:
    """One training call: `call()` returns (environment steps, `simulate`'s statistics).

    Attributes:
      in_graph_logging: the call writes its own `simulate/*` summaries. When false, the
        train loop writes them from the statistics, and an XLA call (`jit_compile`) runs
        without a default summary writer, since XLA compiles no summary ops.
    """

    def __init__(self, call, in_graph_logging, jit_compile=False):
        self.call = call
        self.in_graph_logging = in_graph_logging
        self.jit_compile = jit_compile


def _simulate_collector(config, algo, batch_env) -> _Collector:
    cfg = config.train
    per_call = cfg.steps_per_call * len(batch_env)
    if cfg.jit_compile:
        call = tf.function(
            lambda: simulate(batch_env, algo, steps=cfg.steps_per_call), jit_compile=True
        )
    else:
        call = tf.function(lambda: simulate(batch_env, algo, log=True, steps=cfg.steps_per_call))
    return _Collector(
        lambda: (per_call, call()),
        in_graph_logging=not cfg.jit_compile,
        jit_compile=cfg.jit_compile,
    )


def _train_loop(config, logdir, algo, collect, eval_env, step, manager, progress):
    cfg = config.train
    train_writer = tf.summary.create_file_writer(str(logdir / "train"))
    eval_writer = tf.summary.create_file_writer(str(logdir / "eval"))
    evaluation = Evaluation(eval_env, algo.evaluator(len(eval_env)), cfg.eval_episodes)
    last = {"train_return": math.nan, "eval_return": math.nan}
    start_step, start_time = int(step), time.time()
    next_eval = _next_multiple(int(step), cfg.eval_every) if cfg.eval_every else None
    next_checkpoint = _next_multiple(int(step), cfg.checkpoint_every)
    first_call = True
    evaluated_at = None
    try:
        while int(step) < cfg.total_steps:
            if collect.jit_compile:  # Without a default writer: no summary ops to compile.
                per_call, stats = collect.call()
            else:
                with train_writer.as_default(step=step):
                    per_call, stats = collect.call()
            if first_call:
                first_call = False
                progress(
                    f"First training call, tracing included: {time.time() - start_time:.1f} s.",
                    final=True,
                )
            step.assign_add(per_call)
            if int(stats["episodes"]):
                last["train_return"] = float(stats["mean_return"])
            with train_writer.as_default(step=step):
                if not collect.in_graph_logging and int(stats["episodes"]):
                    for name in ("mean_return", "mean_length", "episodes"):
                        summary.scalar(f"simulate/{name}", stats[name])
                rate = (int(step) - start_step) / max(time.time() - start_time, 1e-9)
                summary.scalar("steps_per_second", rate)
            if next_eval is not None and int(step) >= next_eval:
                last["eval_return"] = evaluation.run(eval_writer, step)["mean_return"]
                next_eval = _next_multiple(int(step), cfg.eval_every)
                evaluated_at = int(step)
            if int(step) >= next_checkpoint:
                manager.save(checkpoint_number=int(step))
                next_checkpoint = _next_multiple(int(step), cfg.checkpoint_every)
            progress(_status(int(step), cfg.total_steps, rate, last))
    except KeyboardInterrupt:
        manager.save(checkpoint_number=int(step))
        progress(f"Interrupted: saved a checkpoint at step {int(step)} in {logdir}.", final=True)
        raise
    if not (manager.latest_checkpoint or "").endswith(f"-{int(step)}"):
        manager.save(checkpoint_number=int(step))
    if cfg.eval_every and evaluated_at != int(step):  # A final evaluation, unless just done.
        last["eval_return"] = evaluation.run(eval_writer, step)["mean_return"]
    export_policy(algo, eval_env.observation_space, logdir / "policy")
    train_writer.flush()
    eval_writer.flush()
    elapsed = time.time() - start_time
    rate = (int(step) - start_step) / max(elapsed, 1e-9)
    status = _status(int(step), cfg.total_steps, None, last)
    progress(f"{status} | {elapsed:.1f} s at {rate:,.0f} steps/s", final=True)
    return {"step": int(step), **last}


def _next_multiple(value: int, every: int) -> int:
    return (value // every + 1) * every


def _status(step, total, rate, last) -> str:
    parts = [f"step {step:,}/{total:,} ({100 * step / total:.0f}%)"]
    if rate:
        left = max(total - step, 0) / rate
        parts.append(f"{rate:,.0f} steps/s")
    parts.append(f"train {last['train_return']:.1f}")
    parts.append(f"eval {last['eval_return']:.1f}")
    if rate:
        parts.append(f"left {time.strftime('%H:%M:%S', time.gmtime(left))}")
    return " | ".join(parts)


class _Progress:
    """A live status line on a terminal; a line every 10 seconds elsewhere."""

    def __init__(self, stream=sys.stderr):
        self._stream = stream
        self._tty = stream.isatty()
        self._last = 0.0

    def __call__(self, text: str, final: bool = False) -> None:
        if self._tty:
            self._stream.write("\r\033[K" + text + ("\n" if final else ""))
        elif final or time.time() - self._last > 10:
            self._stream.write(text + "\n")
            self._last = time.time()
        self._stream.flush()


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True, help="a name in configs/ or a YAML path")
    parser.add_argument("--logdir", default=None, help="default: runs/<config>-<time>")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one key, e.g. --set algorithm.learning_rate=3e-4 (repeatable)",
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        config = load_config(args.config, args.set, choices=CHOICES)
        logdir = args.logdir or f"runs/{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        print(f"Logging to {logdir}", file=sys.stderr)
        train(config, logdir)
    except ConfigError as error:
        print(f"Config error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
