"""Trains the algorithm a config names with the runner it names: `train(config, logdir)`."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import tensorflow as tf

from batchrl.config import Config, ConfigError, peek, save_config
from batchrl.config.members import member_offsets, member_settings
from batchrl.config.run_config import (
    algorithm_class,
    algorithm_section,
    check_run_config,
    load_saved_run_config,
    runner_class,
)
from batchrl.core import Policy
from batchrl.tools.environments import make_in_graph_env, restart_streams
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.training.checkpoints import Checkpoints
from batchrl.training.train_loop import Progress, run

# Sections that shape the model; a resumed run must keep them as they were.
_FIXED_SECTIONS = ("env", "algorithm", "network", "pbt")


def make_algorithm(config: Config, batch_env, step: tf.Variable | None = None):
    """The algorithm `algorithm.name` names, built for `batch_env` as training builds it.

    With `train.population` > 1, the algorithm's `population_class` (PPO's:
    `PopulationPPO`) of that many members. A runner may
    change what the algorithm is built with (`algorithm_config`: Ape-X's learner keeps no
    replay of its own).
    """
    config = getattr(runner_class(config), "algorithm_config", lambda config: config)(config)
    algo_cls = algorithm_class(config)
    if config.train.population > 1:  # The run check saw that it has one.
        algo_cls = algo_cls.population_class
    return algo_cls(batch_env, config, step, seed=config.train.seed)


def train(config: Config, logdir: str | Path, progress=None) -> dict[str, float]:
    """Trains until `config.train.total_steps` environment steps; resumes from `logdir`.

    Args:
      config: the resolved config (`batchrl.config.load_run_config`); checked again here.
      logdir: folder for config.yaml, checkpoints, TensorBoard events and the exported
        policy. A folder with a checkpoint resumes from it.
      progress: callable receiving a one-line status string; None prints to stderr.

    Returns:
      The final `step`, and the latest `train_return` and `eval_return` (NaN if none).

    Raises:
      ConfigError: the config is invalid or differs from the run in `logdir`, or
        `logdir` cannot be written; nothing is written then.
      CheckpointError: `logdir` has checkpoints, but none reads.
      Interrupted: SIGINT or SIGTERM, after a checkpoint was saved.
    """
    logdir = Path(logdir)
    check_run_config(config)
    _check_resume(config, logdir)
    progress = progress or Progress()
    cfg = config.train
    if cfg.jit_compile or cfg.eval_jit_compile:
        _use_xla_cache(cfg.xla_cache, progress)
    # Python's, NumPy's, TensorFlow's and Keras's seeds; the weight initializers use Keras's.
    tf.keras.utils.set_random_seed(cfg.seed)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    runner_cls = runner_class(config)
    algo_cls = algorithm_class(config)
    # An algorithm whose unit of work is not a simulate call (evolution strategies: a
    # generation) brings its own environments and trainer for the runner.
    make_batch_env = getattr(algo_cls, "make_batch_env", None) or runner_cls.make_batch_env
    make_trainer = getattr(algo_cls, "make_trainer", None) or runner_cls
    if getattr(runner_cls, "runs_algorithm_work", False):  # A runner that spreads it (ray).
        make_batch_env, make_trainer = runner_cls.make_batch_env, runner_cls
    batch_env = eval_env = final_eval_env = trainer = None
    try:
        env = config.env
        eval_backend = "gymnasium" if env.eval_on_gymnasium else env.backend
        batch_env = make_batch_env(config, cfg.seed)
        members = cfg.population  # Each evaluates in env.eval_envs of its own.
        offsets = member_offsets(cfg) if cfg.seeds else None
        eval_seed = cfg.seed + 10**6
        eval_env = make_in_graph_env(
            env, env.eval_envs, eval_seed, eval_backend, members, training=False, offsets=offsets
        )
        if env.backend == "tensorflow" and env.eval_on_gymnasium and cfg.jit_compile:
            # Evaluations during training on the port (one XLA program a round with
            # train.eval_jit_compile); the final one on Gymnasium's environment.
            final_eval_env = eval_env
            eval_env = make_in_graph_env(
                env, env.eval_envs, eval_seed, env.backend, members, training=False, offsets=offsets
            )
        algo = make_algorithm(config, batch_env, step)
        tracked = {"step": step, "algo": algo}
        if _holds_its_state(batch_env):  # Environments in TensorFlow ops resume exactly.
            tracked["env"] = batch_env
        checkpoint = tf.train.Checkpoint(**tracked)
        checkpoints = Checkpoints(checkpoint, logdir / "checkpoints")
        earlier_run = (logdir / "config.yaml").exists()
        _write_config(config, logdir)
        report = lambda text: progress(text, final=True)  # noqa: E731
        allow_partial = _allow_partial(checkpoint, algo)
        restored = checkpoints.restore(report, allow_partial=allow_partial)
        if restored:
            progress(f"Resumed from {restored} at step {int(step)}.", final=True)
            if _lacks_inherited_settings(restored, algo):
                keys = ", ".join(f"ppo.{key}" for key in algo.inherited_keys())
                progress(
                    f"The checkpoint predates PBT copies inheriting listed settings: {keys} "
                    "start from the config's values, which that run kept.",
                    final=True,
                )
            if _is_old_checkpoint(restored):
                progress(
                    "The checkpoint is of batchrl 0.1: the model, optimizer and normalizers "
                    "were restored; experience buffers start empty.",
                    final=True,
                )
        elif earlier_run:
            progress(_starting_over(logdir), final=True)
        # New seeds after a resume, so that environments whose state is not in the
        # checkpoint (Gymnasium's) do not replay the same episodes. Each evaluation seeds
        # its environments from the seed and its step (`run`).
        if not _holds_its_state(batch_env):
            restart_streams(batch_env, cfg.seed + int(step))
        trainer = make_trainer(config, algo, batch_env, seed=cfg.seed + int(step))
        policy = algo if isinstance(algo, Policy) else None
        if policy is None:
            progress(
                f"{type(algo).__name__} is not a batchrl.core.Policy: no evaluation, no export.",
                final=True,
            )
        members = None
        if cfg.population > 1:
            members = member_settings(config, algorithm_section(config))
        return run(
            trainer,
            policy,
            eval_env,
            step,
            checkpoints,
            logdir,
            cfg,
            progress,
            final_eval_env,
            members,
            config.pbt if config.pbt.interval else None,
        )
    finally:
        if trainer is not None:
            trainer.close()
        for env in (batch_env, eval_env, final_eval_env):
            if env is not None and hasattr(env, "close"):
                env.close()


def _check_resume(config: Config, logdir: Path) -> None:
    """Refuses a config that differs from the run in `logdir`, or a logdir it cannot write."""
    path = logdir / "config.yaml"
    if path.exists():
        saved = load_saved_run_config(path)
        changed = [
            f"{section}.{key}"
            for section in (*_FIXED_SECTIONS, algorithm_section(saved))
            for key in saved[section]
            if saved[section][key] != config[section][key]
        ]
        if saved.train.population != config.train.population:  # The shape of every variable.
            changed.append("train.population")
        if changed:
            raise ConfigError(
                f"{logdir} holds a run with a different config: {', '.join(changed)} differ. "
                "Only train.* keys (not train.population) and runner keys may change on "
                "resume; use a new --logdir for a new run."
            )
    _check_writable(logdir)


def _starting_over(logdir: Path) -> str:
    """Says that the run in `logdir` lost its checkpoints and starts again from step 0."""
    message = (
        f"{logdir} holds a run (its config.yaml) but no checkpoint: training starts from step 0"
    )
    summaries = [name for name in ("train", "eval") if (logdir / name).is_dir()]
    if not summaries:
        return message + "."
    folders = " and ".join(f"{name}/" for name in summaries)
    return (
        f"{message}; the earlier run's summaries stay in {folders}, where the new curves "
        "will be drawn over them (use another --logdir to keep them apart)."
    )


def _is_old_checkpoint(prefix: str, error=None) -> bool:
    """Whether a checkpoint was written by batchrl 0.1, whose buffers had other names.

    Such a checkpoint is restored without its experience buffers, which are empty at the
    rollout boundaries where checkpoints are written.
    """
    keys = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    return any(key.startswith(("algo/_memory/", "algo/_unroll/")) for key in keys)


def _inherited_settings(algo) -> set[str]:
    """The checkpoint keys of the listed settings a PBT population's copies inherit."""
    keys = getattr(algo, "inherited_keys", tuple)()
    return {f"algo/pbt_settings/{key}/.ATTRIBUTES/VARIABLE_VALUE" for key in keys}


def _lacks_inherited_settings(prefix: str, algo) -> bool:
    saved = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    return not _inherited_settings(algo) <= set(saved)


def _allow_partial(checkpoint: tf.train.Checkpoint, algo):
    """Accepts a checkpoint of batchrl 0.1, or one that lacks only inherited settings.

    A PBT population holds the listed settings its copies inherit (`inherited_keys`) as
    variables; checkpoints written before copies inherited them lack those variables
    alone, and their runs kept the config's values, which the variables start from.
    """
    inherited = _inherited_settings(algo)

    def allow(prefix: str, error=None) -> bool:
        if _is_old_checkpoint(prefix):
            return True
        if not inherited:
            return False
        skip = ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/.ATTRIBUTES/VARIABLE_VALUE")
        saved = set(tf.train.load_checkpoint(prefix).get_variable_to_shape_map())
        with tempfile.TemporaryDirectory() as folder:
            written = checkpoint.write(os.path.join(folder, "model"))
            model = set(tf.train.load_checkpoint(written).get_variable_to_shape_map())
        saved, model = saved - set(skip), model - set(skip)
        missing = model - saved
        return bool(missing) and missing <= inherited and saved <= model

    return allow


def _check_writable(logdir: Path) -> None:
    """Raises ConfigError when `logdir` (or its checkpoints folder) cannot be written."""
    existing = logdir
    while not existing.exists():
        existing = existing.parent
    folders = [logdir, logdir / "checkpoints"]
    for folder in folders:
        probe = folder if folder.exists() else existing
        if not probe.is_dir():
            raise ConfigError(f"--logdir {logdir}: {probe} is a file, not a folder.")
        try:
            handle, name = tempfile.mkstemp(dir=probe, prefix=".write-test-")
        except OSError as error:
            raise ConfigError(
                f"Cannot write to {probe} ({error.strerror}): choose a --logdir you can write."
            ) from None
        os.close(handle)
        os.unlink(name)


def _write_config(config: Config, logdir: Path) -> None:
    path = logdir / "config.yaml"
    if path.exists() and load_saved_run_config(path) == config:
        return
    save_config(config, path)


def _holds_its_state(env) -> bool:
    """Whether the whole state of `env` is in its variables: an environment in TF ops."""
    return isinstance(env, tf.Module) and not isinstance(env, InGraphBatchEnv)


_XLA_CACHE_FLAG = "--tf_xla_persistent_cache_directory"


def use_xla_cache(folder: str) -> None:
    """Turns on XLA's persistent compilation cache in `folder` ('' leaves it off).

    TensorFlow reads `TF_XLA_FLAGS` once, at the first XLA compilation of the process, so
    this takes effect only before it; a cache folder already in `TF_XLA_FLAGS` is kept.

    Raises:
      ConfigError: the folder cannot be created.
    """
    flags = os.environ.get("TF_XLA_FLAGS", "")
    if not folder or _XLA_CACHE_FLAG in flags:
        return
    path = Path(folder).expanduser()
    if " " in str(path):  # TensorFlow splits TF_XLA_FLAGS at spaces.
        raise ConfigError(
            f"train.xla_cache={folder!r} has a space, which TF_XLA_FLAGS cannot carry; name "
            "a folder without one, or '' to compile without the cache."
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(
            f"train.xla_cache={folder!r} cannot be created ({error.strerror}); name a "
            "writable folder, or '' to compile without the cache."
        ) from error
    os.environ["TF_XLA_FLAGS"] = f"{flags} {_XLA_CACHE_FLAG}={path}".strip()


def _use_xla_cache(folder: str, progress) -> None:
    """`use_xla_cache`, except that the default folder, when unusable, only turns it off.

    The TensorFlow-op presets compile with XLA, so a home folder that cannot be written
    (or whose path has a space) must not stop them; a folder the config names must work.
    """
    try:
        use_xla_cache(folder)
    except ConfigError as error:
        if folder != peek("default", "train.xla_cache"):
            raise
        progress(f"{error} Training without the cache: every run compiles.", final=True)
