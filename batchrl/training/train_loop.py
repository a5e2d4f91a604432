"""The train loop: a Trainer's steps with summaries, evaluations, checkpoints and signals."""

from __future__ import annotations

import json
import math
import numbers
import signal
import sys
import threading
import time
from pathlib import Path

import tensorflow as tf

from batchrl.core import Trainer
from batchrl.parts import summary
from batchrl.tools.environments import restart_streams
from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
from batchrl.training.checkpoints import Checkpoints
from batchrl.training.evaluation import Evaluation
from batchrl.training.export import METADATA, export_policy
from batchrl.training.member_logs import MemberLogs, describe_aggregate
from batchrl.training.policy_evaluator import PolicyEvaluator

_clock = time.monotonic  # Of `train.max_seconds`; tests replace it.


class Interrupted(Exception):
    """Training stopped on SIGINT (Ctrl-C) or SIGTERM, after saving a checkpoint."""

    def __init__(self, signum: int, message: str):
        super().__init__(message)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopSignals:
    """Turns SIGINT and SIGTERM into a request to stop at the next safe point.

    Inside the context, the first signal sets `received`; the loop checks it between
    training calls, where the step counter and the variables agree, saves and stops. A
    second signal raises KeyboardInterrupt at once (for a call that hangs), and no
    checkpoint is written then. Outside the main thread it does nothing.
    """

    def __init__(self):
        self.received: int | None = None
        self._previous = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, frame) -> None:
        if self.received is not None:
            raise SecondSignal
        self.received = signum


class SecondSignal(KeyboardInterrupt):
    """A second SIGINT or SIGTERM while training: stop at once.

    Not KeyboardInterrupt itself: CPython 3.11 marks that exact type as unhandled when it
    leaves an `eval` of a string, even if it is caught later, and then ends the process
    with SIGINT at exit instead of the train script's exit code.
    """


def run(
    trainer: Trainer,
    policy,
    eval_env,
    step: tf.Variable,
    checkpoints: Checkpoints,
    logdir: str | Path,
    train_config,
    progress,
    final_eval_env=None,
    members: list[dict] | None = None,
    pbt=None,
) -> dict[str, float]:
    """Steps `trainer` to `total_steps` or `max_seconds`; evaluates, saves and exports.

    Args:
      trainer: the runner's `Trainer`.
      policy: the algorithm, as a `Policy` (act) for evaluation and export; None skips both.
      eval_env: the in-graph environments of evaluation episodes.
      step: int64 variable of environment steps, in the checkpoint; advanced here.
      checkpoints: where the state is saved every `checkpoint_every` steps and at the end.
      logdir: the run's folder (TensorBoard `train/` and `eval/`, `policy/`).
      train_config: the `train` section.
      progress: callable(text, final=False) for status lines.
      final_eval_env: the environments of the final evaluation, if not `eval_env` (e.g.
        Gymnasium's, where `eval_env` is the TensorFlow port).
      members: a population's members, each a dict of its `seed` and its own settings
        (`batchrl.config.members.member_settings`); None: seeds `seed + m`. With `pbt`,
        the settings PBT changes are read from `policy` (`pbt_values`), as restored.
      pbt: the `pbt` section, for population-based training of a population
        (`pbt.interval` > 0): after the evaluation at every multiple of the interval,
        `policy.exploit` replaces the worst members; `pbt.jsonl` logs the lineage.

    A population (`trainer.members` M > 1) writes each member's scalars to
    `member-<m>/train` and `member-<m>/eval` and their means to `train/` and `eval/`
    (with the interquartile mean and a bootstrap interval of the evaluations), prints a
    table of the members at the start and at the end, and exports each member's policy
    to `policies/member-<m>` and the best one's to `policy/`.

    Returns:
      The final `step`, and the latest `train_return` and `eval_return` (NaN if none);
      for a population their means over members, `members`, each member's, and
      `aggregate`, the `aggregate` of their final evaluations.

    Raises:
      Interrupted: on SIGINT or SIGTERM, after a checkpoint of the last finished call.
    """
    cfg, logdir = train_config, Path(logdir)
    train_writer = tf.summary.create_file_writer(str(logdir / "train"))
    eval_writer = tf.summary.create_file_writer(str(logdir / "eval"))
    population = getattr(trainer, "members", 1)
    logs = None
    if population > 1:
        rows = members or [{"seed": cfg.seed + m} for m in range(population)]
        settings = [{k: v for k, v in row.items() if k != "seed"} for row in rows]
        logs = MemberLogs(logdir, [row["seed"] for row in rows], settings)
        if pbt is not None and policy is not None:  # As PBT left them (a resumed run).
            logs.update_settings(policy.pbt_values())
        progress(f"Members of the population:\n{logs.table(returns=False)}", final=True)
    evaluation = None
    if policy is not None and cfg.eval_every:
        evaluator = PolicyEvaluator(policy, len(eval_env))
        # Environments in TensorFlow ops may evaluate a whole round in one XLA program.
        in_tensorflow = not isinstance(eval_env, InGraphBatchEnv)
        jit_compile = bool(cfg.eval_jit_compile) and in_tensorflow
        evaluation = Evaluation(
            eval_env, evaluator, cfg.eval_episodes, jit_compile=jit_compile, members=population
        )
    best = None
    if evaluation is not None and cfg.export_best:
        best = BestPolicy(policy, eval_env.observation_space, logdir / "policy_best")
    last = {"train_return": math.nan, "eval_return": math.nan}
    start_step, start_time = int(step), time.time()
    next_eval = _next_multiple(int(step), cfg.eval_every) if evaluation else None
    next_checkpoint = _next_multiple(int(step), cfg.checkpoint_every)
    next_pbt = None
    if pbt is not None and pbt.interval and logs is not None and evaluation is not None:
        next_pbt = _next_multiple(int(step), pbt.interval)
    first_call, evaluated_at = True, None
    out_of_time, budget_start = False, _clock()
    with StopSignals() as signals:
        while int(step) < cfg.total_steps and not out_of_time:
            if trainer.jit_compile:  # Without a default writer: no summary ops to compile.
                per_call, stats = trainer.step()
            else:
                with train_writer.as_default(step=step):
                    per_call, stats = trainer.step()
            step.assign_add(per_call)
            if first_call:
                first_call = False
                took = time.time() - start_time
                progress(f"First training call, tracing included: {took:.1f} s.", final=True)
            if logs is not None:  # Each member's [M] statistics; their means below.
                stats = logs.train(stats, step)
            if int(stats["episodes"]):
                last["train_return"] = float(stats["mean_return"])
            with train_writer.as_default(step=step):
                if not trainer.in_graph_logging:
                    if int(stats["episodes"]):
                        for name in ("mean_return", "mean_length", "episodes"):
                            summary.scalar(f"simulate/{name}", stats[name])
                    for name, value in stats.items():  # The algorithm's, e.g. 'ppo/kl'.
                        if "/" in name:
                            summary.scalar(name, value)
                rate = (int(step) - start_step) / max(time.time() - start_time, 1e-9)
                summary.scalar("steps_per_second", rate)
            if signals.received is not None:
                checkpoints.save(int(step))
                name = signal.Signals(signals.received).name
                message = f"{name}: saved a checkpoint at step {int(step)} in {logdir}."
                progress(message, final=True)
                raise Interrupted(signals.received, message)
            if next_eval is not None and int(step) >= next_eval:
                restart_streams(eval_env, _eval_seed(cfg.seed, int(step)))
                last["eval_return"] = _evaluate(evaluation, eval_writer, step, logs)
                next_eval = _next_multiple(int(step), cfg.eval_every)
                evaluated_at = int(step)
                if best is not None:
                    best.offer(int(step), last["eval_return"], progress)
            if next_pbt is not None and int(step) >= next_pbt and evaluated_at == int(step):
                _exploit(policy, logs, pbt, int(step), progress)
                next_pbt = _next_multiple(int(step), pbt.interval)
                # Should the run end here, a final evaluation scores the new members. (At
                # the end too, so that a resumed run with another total_steps exploits
                # where the uninterrupted one did.)
                evaluated_at = None
            if int(step) >= next_checkpoint:
                checkpoints.save(int(step))
                next_checkpoint = _next_multiple(int(step), cfg.checkpoint_every)
            progress(_status(int(step), cfg.total_steps, rate, last))
            out_of_time = bool(cfg.max_seconds) and _clock() - budget_start >= cfg.max_seconds
    if out_of_time:
        took = _clock() - budget_start
        progress(f"train.max_seconds={cfg.max_seconds} reached after {took:.1f} s.", final=True)
    if not (checkpoints.latest or "").endswith(f"-{int(step)}"):
        checkpoints.save(int(step))
    final_env = eval_env
    if final_eval_env is not None and evaluation is not None:
        final_env = final_eval_env
        evaluator = PolicyEvaluator(policy, len(final_eval_env))
        evaluation = Evaluation(final_eval_env, evaluator, cfg.eval_episodes, members=population)
        evaluated_at = None
    if evaluation is not None and evaluated_at != int(step):  # A final one, unless just done.
        restart_streams(final_env, _eval_seed(cfg.seed, int(step)))
        last["eval_return"] = _evaluate(evaluation, eval_writer, step, logs)
        if best is not None and final_eval_env is None:  # Comparable with the others.
            best.offer(int(step), last["eval_return"], progress)
    if policy is not None and logs is None:
        export_policy(policy, eval_env.observation_space, logdir / "policy")
    elif policy is not None:
        _export_members(policy, eval_env.observation_space, logdir, logs, progress)
    train_writer.flush()
    eval_writer.flush()
    if logs is not None:
        logs.flush()
        progress(f"Members of the population:\n{logs.table()}", final=True)
        last["members"] = logs.members()
        last["aggregate"] = logs.aggregate()
        if last["aggregate"]["members"]:
            progress(describe_aggregate(last["aggregate"]), final=True)
    elapsed = time.time() - start_time
    rate = (int(step) - start_step) / max(elapsed, 1e-9)
    status = _status(int(step), cfg.total_steps, None, last)
    progress(f"{status} | {elapsed:.1f} s at {rate:,.0f} steps/s", final=True)
    return {"step": int(step), **last}


class BestPolicy:
    """Exports the policy to `path` whenever an evaluation beats the best so far.

    The step and mean return go into the folder's `batchrl.json`, with the model, so a
    resumed run knows the best it must beat. Evaluations draw new episodes, so the best of
    many is biased upwards; score the export again on episodes of your own.
    """

    def __init__(self, policy, observation_space, path: Path):
        self._policy, self._space, self.path = policy, observation_space, path
        self.best = -math.inf
        if (path / METADATA).exists():
            self.best = json.loads((path / METADATA).read_text())["eval_return"]

    def offer(self, step: int, eval_return: float, progress) -> bool:
        if not eval_return > self.best:  # NaN never wins.
            return False
        metadata = {"step": step, "eval_return": eval_return}
        export_policy(self._policy, self._space, self.path, metadata)
        self.best = eval_return
        progress(f"Best evaluation so far, {eval_return:.2f}: exported to {self.path}.", final=True)
        return True


def _evaluate(evaluation: Evaluation, writer, step, logs: MemberLogs | None) -> float:
    """Runs `evaluation`, writes its summaries (each member's too); returns the mean return.

    For a population also the interquartile mean and the 95% bootstrap interval of the
    mean over members (`aggregate`): `eval/iqm_return`, `eval/mean_return_ci_low` and
    `eval/mean_return_ci_high`.
    """
    result = evaluation.run(writer, step)
    if logs is not None:
        logs.eval(result, step)
        values = logs.aggregate()
        if values["members"]:
            with writer.as_default(step=step):
                summary.scalar("eval/iqm_return", values["iqm"])
                summary.scalar("eval/mean_return_ci_low", values["ci_low"])
                summary.scalar("eval/mean_return_ci_high", values["ci_high"])
    return result["mean_return"]


def _exploit(population, logs: MemberLogs, pbt, step: int, progress) -> None:
    """A step of population-based training on the members' latest evaluations; logs it."""
    source = population.exploit(logs.eval_returns, pbt.quantile, tuple(pbt.factors))
    records = logs.exploit(step, source.numpy(), population.pbt_values())
    moves = ", ".join(f"{r['member']} <- {r['parent']}" for r in records)
    progress(f"Population-based training at step {step:,}: member <- parent: {moves}.", final=True)


def _export_members(population, observation_space, logdir: Path, logs: MemberLogs, progress):
    """Exports `policies/member-<m>` for every member, and `policy/` for the best one.

    The best is the member with the highest final evaluation (or, without evaluations,
    latest training return). Each export's `batchrl.json` names its member, its seed,
    its settings and its returns.
    """
    # Each policy's batchrl.json names its member, seed, settings and returns; a return
    # this run did not see (a resumed run that trained nothing) is left out, not NaN.
    rows = [{k: v for k, v in row.items() if not _is_nan(v)} for row in logs.members()]
    for member, metadata in enumerate(rows):
        path = logdir / "policies" / f"member-{member:02d}"
        export_policy(population.member_policy(member), observation_space, path, metadata)
    best = logs.best()
    row = logs.members()[best]
    metadata = rows[best]
    export_policy(population.member_policy(best), observation_space, logdir / "policy", metadata)
    by = f"final evaluation {row['eval_return']:.1f}"
    if not math.isfinite(row["eval_return"]):
        by = f"no evaluation; latest training return {row['train_return']:.1f}"
        if not math.isfinite(row["train_return"]):
            by = "no return seen by this process; the checkpoint's parameters"
    progress(
        f"Member {best} is the best ({by}): exported to {logdir / 'policy'}; every "
        f"member's policy is in {logdir / 'policies'}.",
        final=True,
    )


def _is_nan(value) -> bool:
    return isinstance(value, numbers.Real) and math.isnan(value)


def _eval_seed(seed: int, step: int) -> int:
    """The seed of the evaluation at `step`: equal weights at a step evaluate equally,
    whether the run was resumed or not (the training environments use `seed + step`)."""
    return seed + 10**6 + step


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


class Progress:
    """A live status line on a terminal; a line every 10 seconds elsewhere."""

    def __init__(self, stream=None):
        self._stream = stream or sys.stderr  # The one of the moment, not of the import.
        self._tty = self._stream.isatty()
        self._last = 0.0

    def __call__(self, text: str, final: bool = False) -> None:
        if self._tty:
            self._stream.write("\r\033[K" + text + ("\n" if final else ""))
        elif final or time.time() - self._last > 10:
            self._stream.write(text + "\n")
            self._last = time.time()
        self._stream.flush()
