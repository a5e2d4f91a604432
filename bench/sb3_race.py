"""Wall-clock to solve a task: batchrl's configs beside Stable-Baselines3 with the zoo's settings.

    python bench/sb3_race.py                             # --task pendulum_ppo, seeds 0 1 2
    python bench/sb3_race.py --task cartpole_ppo --seeds 0 1 2 3 4 --torch-threads 1
    python bench/sb3_race.py --task cartpole_dqn --seeds 0 1 2 3 4 --torch-threads 1
    python bench/sb3_race.py --task pendulum_sac --seeds 0 --json pendulum_sac.json

A task (`TASKS` below) names the environment, the target return, how often to evaluate,
Stable-Baselines3's algorithm with rl-baselines3-zoo's tuned hyperparameters for it, and
batchrl's configs. For each seed, one after another (so that a slow moment of this
shared machine hits every method alike), each run in a fresh process of its own that
imports only its own side's libraries, as a user's run would:

- `SB3 <algorithm> (zoo)`: Stable-Baselines3 with the zoo's settings, on the CPU, for up
  to `--sb3-steps` environment steps (default: the task's; SB3 finishes the rollout that
  crosses it), with torch's default number of threads unless `--torch-threads` is given;
  `--sb3-steps 0` leaves SB3 out, to compare configs (`--configs`) alone.
- `batchrl <config> (cold)` and `(warm)`: each of the task's configs, for its own
  `train.total_steps` unless `--batchrl-steps` is given. `--configs` names the configs,
  each optionally with overrides after colons (`pendulum_tf:train.jit_compile=false`).
  Cold runs start with an empty XLA compilation cache (a machine's first run of the
  config); warm runs with the cache that a warm-up run of the config (seed 1000, not
  counted) filled, as `train.xla_cache` serves a user's later runs, any seed. `--xla`
  picks either.

Every `eval_every` environment steps, right after an update, the deterministic policy
plays `--eval-episodes` episodes of the Gymnasium environment, one in each of as many
environments, and a run is solved when their mean return reaches the target. Evaluation
k of seed s starts from the same initial states for every method. Two clocks stand still
while evaluating: the training clock starts before the training environments and the
model are built and includes batchrl's graph tracing and XLA's compilation; the process
clock starts before the process does, so it adds the imports (torch and SB3, or
TensorFlow and batchrl) and the set-up. The run stops when it is solved. batchrl is
driven as `batchrl.runners.train` drives it: the config's runner (`LocalTrainer`, one graph
call of `simulate` for `train.steps_per_call` batched steps per `step()`) builds the
environments and takes one step after another, and `PolicyEvaluator` plays the
deterministic policy; but neither side writes summaries or checkpoints.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import harness
import numpy as np
from medians import cell, median_to_target

# Each run is a process of its own that imports only its side's libraries: SB3's imports
# torch and Stable-Baselines3, batchrl's TensorFlow (quietly, as the train script does).


SB3 = "sb3"  # The method name of Stable-Baselines3's runs for --child.
WARM_UP_SEED = 1000  # The warm-up run that fills a config's XLA cache for warm runs.


@dataclasses.dataclass(frozen=True)
class Task:
    env_id: str
    target: float
    eval_every: int
    sb3_algorithm: str  # A class of stable_baselines3.
    sb3_envs: int  # The zoo's n_envs.
    sb3_kwargs: dict
    sb3_steps: int  # SB3's default budget: at least the zoo's n_timesteps.
    configs: tuple[str, ...]

    @property
    def sb3_method(self) -> str:
        return f"SB3 {self.sb3_algorithm} (zoo)"


TASKS = {
    # rl-baselines3-zoo, hyperparams/ppo.yml, Pendulum-v1 ("Tuned"); batch_size is PPO's
    # default of 64, which the zoo keeps. The zoo builds the environments with make_vec_env.
    "pendulum_ppo": Task(
        "Pendulum-v1",
        -200.0,
        4096,
        "PPO",
        4,
        {
            "n_steps": 1024,
            "gae_lambda": 0.95,
            "gamma": 0.9,
            "n_epochs": 10,
            "ent_coef": 0.0,
            "learning_rate": 1e-3,
            "clip_range": 0.2,
            "use_sde": True,
            "sde_sample_freq": 4,
            "batch_size": 64,
        },
        100_000,
        ("pendulum", "pendulum_tf"),
    ),
    # hyperparams/ppo.yml, CartPole-v1 (n_timesteps 1e5, 8 environments); 'lin_X' is the
    # zoo's linear schedule from X at the start to 0 at the end of the budget.
    "cartpole_ppo": Task(
        "CartPole-v1",
        475.0,
        2048,
        "PPO",
        8,
        {
            "n_steps": 32,
            "batch_size": 256,
            "gae_lambda": 0.8,
            "gamma": 0.98,
            "n_epochs": 20,
            "ent_coef": 0.0,
            "learning_rate": "lin_1e-3",
            "clip_range": "lin_0.2",
        },
        100_000,
        ("cartpole", "cartpole_tf"),
    ),
    # hyperparams/dqn.yml, CartPole-v1 (n_timesteps 5e4, one environment).
    "cartpole_dqn": Task(
        "CartPole-v1",
        475.0,
        2048,
        "DQN",
        1,
        {
            "learning_rate": 2.3e-3,
            "batch_size": 64,
            "buffer_size": 100_000,
            "learning_starts": 1000,
            "gamma": 0.99,
            "target_update_interval": 10,
            "train_freq": 256,
            "gradient_steps": 128,
            "exploration_fraction": 0.16,
            "exploration_final_eps": 0.04,
            "policy_kwargs": {"net_arch": [256, 256]},
        },
        100_000,
        ("cartpole_dqn", "cartpole_dqn_tf"),
    ),
    # hyperparams/sac.yml, Pendulum-v1 (n_timesteps 2e4, learning rate 1e-3, else SAC's
    # defaults, one environment).
    "pendulum_sac": Task(
        "Pendulum-v1",
        -200.0,
        1024,
        "SAC",
        1,
        {"learning_rate": 1e-3},
        40_000,
        ("pendulum_sac", "pendulum_sac_tf"),
    ),
}


class Stopwatch:
    """Seconds that ran between `resume()` and `pause()` calls."""

    def __init__(self):
        self._total = 0.0
        self._since = None

    def resume(self) -> None:
        self._since = time.perf_counter()

    def pause(self) -> None:
        self._total += time.perf_counter() - self._since
        self._since = None

    @property
    def seconds(self) -> float:
        running = time.perf_counter() - self._since if self._since is not None else 0.0
        return self._total + running


class Run:
    """The evaluations of one training run and whether they reached the task's target.

    `watch` is the training clock; `evaluate(steps, play)` stops it while `play(seed)`
    returns the mean evaluation return from initial states drawn from `seed`.
    """

    def __init__(self, task: Task, method: str, seed: int, budget: int, eval_episodes: int):
        self.task, self.method, self.seed, self.budget = task, method, seed, budget
        self.watch = Stopwatch()
        self.evals = []  # [steps, training seconds, mean return]
        self.first_call = None  # Seconds to the end of batchrl's first call, tracing included.
        self._eval_seed = 10**6 * (seed + 1)
        self._eval_episodes = eval_episodes
        self._next = task.eval_every
        self._start = time.perf_counter()
        # The process's start (the parent's clock before it started this process), and
        # the seconds spent evaluating since, which the process clock leaves out.
        self._process_start = float(os.environ.get("RACE_START", time.time()))
        self._eval_seconds = 0.0
        self.process_seconds = None  # From process start to the solving evaluation.

    @property
    def solved(self) -> bool:
        return bool(self.evals) and self.evals[-1][2] >= self.task.target

    def should_evaluate(self, steps: int) -> bool:
        return steps >= self._next and not self.solved

    def evaluate(self, steps: int, play) -> bool:
        """Records `play`'s mean return at `steps`, off the clock; True once solved."""
        self.watch.pause()
        started = time.time()
        seed = self._eval_seed + len(self.evals) * self._eval_episodes
        mean_return = float(play(seed))
        if mean_return >= self.task.target and self.process_seconds is None:
            self.process_seconds = started - self._process_start - self._eval_seconds
        self._eval_seconds += time.time() - started
        self.evals.append([steps, self.watch.seconds, mean_return])
        self._next = (steps // self.task.eval_every + 1) * self.task.eval_every
        print(
            f"{self.method} seed {self.seed}: step {steps:,}, eval {mean_return:.1f}, "
            f"{self.watch.seconds:.1f} s",
            file=sys.stderr,
        )
        if not self.solved:
            self.watch.resume()
        return self.solved

    def finish(self, steps: int, play) -> dict:
        """Evaluates the final policy if it was not yet; returns the results."""
        if not self.solved and (not self.evals or self.evals[-1][0] != steps):
            self.evaluate(steps, play)
        if not self.solved:
            self.watch.pause()
        solved = self.evals[-1] if self.solved else None
        if solved:  # SB3 takes one more batched step before `learn` returns.
            steps = solved[0]
        return {
            "method": self.method,
            "seed": self.seed,
            "budget": self.budget,
            "solved": self.solved,
            "steps": solved[0] if solved else None,
            "seconds": solved[1] if solved else None,
            "best_return": max(mean_return for _, _, mean_return in self.evals),
            "final_steps": steps,
            "train_seconds": self.watch.seconds,
            "wall_seconds": time.perf_counter() - self._start,
            "first_call_seconds": self.first_call,
            "process_seconds": self.process_seconds if self.solved else None,
            "evals": self.evals,
        }


def run_sb3(task: Task, seed: int, args) -> dict:
    """SB3 until solved or `args.sb3_steps`; the timing and evaluation results.

    TensorFlow and gym, which this environment has for batchrl but an environment with
    SB3 alone would not, are kept from loading: torch's tensorboard support imports
    TensorFlow when it is there, which took SB3's imports from 1.4 s to 5.2 s.
    """
    sys.modules.setdefault("tensorflow", None)  # An import of it raises ImportError.
    sys.modules.setdefault("gym", None)
    import stable_baselines3
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv

    class Evaluations(BaseCallback):
        """Evaluates at the start of each rollout once due, i.e. right after an update."""

        def __init__(self, run: Run, play):
            super().__init__()
            self._run, self._play = run, play

        def _on_rollout_start(self) -> None:
            if self._run.should_evaluate(self.model.num_timesteps):
                self._run.evaluate(self.model.num_timesteps, self._play)

        def _on_step(self) -> bool:
            return not self._run.solved  # False ends `learn`.

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    eval_env = make_vec_env(task.env_id, n_envs=args.eval_episodes, vec_env_cls=DummyVecEnv)

    def play(eval_seed):
        eval_env.seed(eval_seed)
        eval_env.reset()  # Seeds each stream; evaluate_policy's reset draws the states.
        returns, _ = evaluate_policy(
            model, eval_env, args.eval_episodes, deterministic=True, return_episode_rewards=True
        )
        return np.mean(returns)

    run = Run(task, task.sb3_method, seed, args.sb3_steps, args.eval_episodes)
    env = None
    try:
        run.watch.resume()
        env = make_vec_env(task.env_id, n_envs=task.sb3_envs, seed=seed, vec_env_cls=DummyVecEnv)
        algorithm = getattr(stable_baselines3, task.sb3_algorithm)
        kwargs = {key: _schedule(value) for key, value in task.sb3_kwargs.items()}
        model = algorithm("MlpPolicy", env, seed=seed, device="cpu", **kwargs)
        model.learn(args.sb3_steps, callback=Evaluations(run, play))
        return run.finish(model.num_timesteps, play)
    finally:
        for each in (env, eval_env):
            if each is not None:
                each.close()


def _schedule(value):
    """The zoo's 'lin_X' as SB3's schedule (X times the fraction of the budget left)."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value.removeprefix("lin_"))
        return lambda progress_remaining: start * progress_remaining
    return value


def run_batchrl(task: Task, method: str, seed: int, args) -> dict:
    """batchrl's config until solved or its budget; the timing and eval results.

    `method` is a config name, optionally with overrides after colons:
    `pendulum_tf:train.jit_compile=false`.
    """
    from batchrl.quiet import describe_devices, import_tensorflow

    # As the train script: TensorFlow's devices, which read XLA's flags, are set up after.
    tf = import_tensorflow(init_devices=False)
    from batchrl.runners.train import use_xla_cache

    use_xla_cache(args.xla_cache)
    describe_devices()
    from batchrl.config import load_run_config
    from batchrl.runners import LocalTrainer, make_algorithm
    from batchrl.tools.environments import make_batch_env
    from batchrl.tools.in_graph_batch_env import InGraphBatchEnv
    from batchrl.training import Evaluation, PolicyEvaluator

    name, *overrides = method.split(":")
    overrides = [*overrides, f"train.seed={seed}"]
    if args.batchrl_steps:
        overrides.append(f"train.total_steps={args.batchrl_steps}")
    config = load_run_config(name, overrides)  # Checks every value, as train() does.
    if config.runner.name != "local":
        raise ValueError(f"Config {name!r} uses runner {config.runner.name!r}, not 'local'.")
    if config.env.id != task.env_id:
        raise ValueError(f"Config {name!r} trains on {config.env.id}, not {task.env_id}.")
    cfg = config.train
    # As train(): Python's, NumPy's, TensorFlow's and Keras's seeds.
    tf.keras.utils.set_random_seed(seed)
    # Gymnasium's environment in this process, whatever the config's backend.
    eval_env = InGraphBatchEnv(make_batch_env(config.env, args.eval_episodes, processes=False))
    run = Run(task, f"batchrl {method}", seed, cfg.total_steps, args.eval_episodes)
    batch_env = trainer = None
    try:
        run.watch.resume()
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        batch_env = LocalTrainer.make_batch_env(config, seed)
        algo = make_algorithm(config, batch_env, step)
        trainer = LocalTrainer(config, algo, batch_env, seed=seed)
        run.watch.pause()
        evaluation = Evaluation(eval_env, PolicyEvaluator(algo, len(eval_env)), args.eval_episodes)

        def play(eval_seed):
            eval_env.batch_env.reset(seed=eval_seed)  # Evaluation's own reset draws the states.
            return evaluation.run()["mean_return"]

        run.watch.resume()
        while int(step) < cfg.total_steps:
            per_call, stats = trainer.step()
            int(stats["steps"])  # Reads a result: the call has finished.
            step.assign_add(per_call)
            if run.first_call is None:
                run.first_call = run.watch.seconds
            if run.should_evaluate(int(step)) and run.evaluate(int(step), play):
                break
        return run.finish(int(step), play)
    finally:
        if trainer is not None:
            trainer.close()
        for env in (batch_env, eval_env):
            if env is not None:
                env.close()


def versions(args) -> dict[str, str]:
    """The versions, torch's threads and the CPU, for the table's last line."""
    import torch

    machine = harness.machine()
    threads = args.torch_threads or torch.get_num_threads()
    return {**machine["versions"], "torch threads": str(threads),
            "cpus": str(machine["cores"]), "cpu": machine["cpu"]}  # fmt: skip


def run_in_process(task_name: str, method: str, seed: int, args, xla_cache: str = "") -> dict:
    """One run in a fresh process, timed from before the process starts."""
    command = [
        sys.executable,
        __file__,
        "--child",
        method,
        "--task",
        task_name,
        "--seeds",
        str(seed),
        "--eval-episodes",
        str(args.eval_episodes),
        "--sb3-steps",
        str(args.sb3_steps),
        "--batchrl-steps",
        str(args.batchrl_steps),
        "--torch-threads",
        str(args.torch_threads),
        "--xla-cache",
        xla_cache,
    ]
    env = dict(os.environ, RACE_START=repr(time.time()))
    result = subprocess.run(
        command, env=env, stdout=subprocess.PIPE, text=True, timeout=3600, check=False
    )
    if result.returncode:
        raise RuntimeError(f"{method} seed {seed} failed (exit {result.returncode}).")
    return json.loads(result.stdout.strip().splitlines()[-1])


def markdown(task: Task, results: list[dict], info: dict[str, str], args) -> str:
    sb3_method = task.sb3_method
    sb3 = {r["seed"]: r for r in results if r["method"] == sb3_method}
    methods = list(dict.fromkeys(r["method"] for r in results))
    lines = [
        f"{task.env_id}, target {task.target:.0f}: mean return of the deterministic policy "
        f"over {args.eval_episodes} Gymnasium episodes, evaluated every {task.eval_every:,} "
        "steps. Seconds of training: evaluation excluded, tracing and compilation included; "
        "from process start: the same and the process's imports and set-up. Each run is a "
        "process of its own; batchrl's (cold) start with an empty XLA cache, (warm) with "
        f"the cache a run of seed {WARM_UP_SEED} filled.",
        "",
        "| method | seed | steps to target | seconds to target | SB3 s ÷ this s "
        "| from process start (s) | best eval | steps run | first call (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if r["solved"]:
            steps, seconds = f"{r['steps']:,}", f"{r['seconds']:.1f}"
            process = f"{r['process_seconds']:.1f}"
        else:
            steps, seconds, process = f"not reached in {r['budget']:,}", "—", "—"
        ratio = "" if r["method"] == sb3_method else _ratio(sb3.get(r["seed"]), r)
        first = "" if r["first_call_seconds"] is None else f"{r['first_call_seconds']:.1f}"
        lines.append(
            f"| {r['method']} | {r['seed']} | {steps} | {seconds} | {ratio} | {process} "
            f"| {r['best_return']:.1f} | {r['final_steps']:,} | {first} |"
        )
    lines += [
        "",
        "| method | solved | median steps | median seconds | SB3 median s ÷ this "
        "| median s from process start | SB3 ÷ this, from process start |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    sb3_runs = [r for r in results if r["method"] == sb3_method]
    sb3_median = _to_target(sb3_runs, "seconds") if sb3_runs else math.nan
    sb3_process = _to_target(sb3_runs, "process_seconds") if sb3_runs else math.nan
    for method in methods:
        runs = [r for r in results if r["method"] == method]
        steps, seconds = _to_target(runs, "steps"), _to_target(runs, "seconds")
        process = _to_target(runs, "process_seconds")
        ratio = process_ratio = ""
        if method != sb3_method:
            ratio, process_ratio = _over(sb3_median, seconds), _over(sb3_process, process)
        lines.append(
            f"| {method} | {sum(r['solved'] for r in runs)}/{len(runs)} | {cell(steps, ',.0f')} "
            f"| {cell(seconds, '.1f')} | {ratio} | {cell(process, '.1f')} | {process_ratio} |"
        )
    lines += ["", "Versions: " + ", ".join(f"{key} {value}" for key, value in info.items()) + "."]
    return "\n".join(lines)


def _over(sb3: float, this: float) -> str:
    return f"{sb3 / this:.2f}" if math.isfinite(sb3) and math.isfinite(this) else ""


def _to_target(runs: list[dict], key: str) -> float:
    return median_to_target(r[key] if r["solved"] else None for r in runs)


def _ratio(sb3: dict | None, run: dict) -> str:
    """SB3's seconds over `run`'s; a lower bound (>) when SB3 did not reach the target."""
    if sb3 is None or not run["solved"]:
        return "—"
    if sb3["solved"]:
        return f"{sb3['seconds'] / run['seconds']:.2f}"
    return f"> {sb3['train_seconds'] / run['seconds']:.2f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="pendulum_ppo")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--sb3-steps", type=int, default=None, help="default: the task's; 0: no SB3 runs"
    )
    parser.add_argument(
        "--batchrl-steps", type=int, default=0, help="default: each config's train.total_steps"
    )
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument(
        "--configs",
        nargs="+",
        default=None,
        help="default: the task's; config names, each optionally with overrides "
        "(pendulum_tf:train.jit_compile=true)",
    )
    parser.add_argument(
        "--torch-threads", type=int, default=0, help="torch.set_num_threads; default: torch's"
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument(
        "--xla",
        nargs="+",
        choices=["cold", "warm"],
        default=["cold", "warm"],
        help="batchrl's runs: cold, each with an empty XLA cache (a machine's first run of "
        "the config); warm, with the cache a warm-up run of the config (seed "
        f"{WARM_UP_SEED}, not counted) filled (a later run, any seed)",
    )
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # One run, as JSON.
    parser.add_argument("--xla-cache", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    task = TASKS[args.task]
    if args.sb3_steps is None:
        args.sb3_steps = task.sb3_steps
    if args.child:
        run = run_sb3 if args.child == SB3 else functools.partial(run_batchrl, method=args.child)
        print(json.dumps(run(task, seed=args.seeds[0], args=args)))
        return
    args.configs = args.configs or list(task.configs)
    info = versions(args)
    run = harness.Run(f"sb3_race_{args.task}")
    print(f"Versions: {info}; load average {run.header['load_before']}", file=sys.stderr)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        warm = {name: os.path.join(folder, f"warm-{i}") for i, name in enumerate(args.configs)}
        if "warm" in args.xla:
            for name in args.configs:  # Fills each config's cache; not counted.
                run_in_process(args.task, name, WARM_UP_SEED, args, warm[name])
        for seed in args.seeds:
            if args.sb3_steps:
                results.append(run_in_process(args.task, SB3, seed, args))
            for name in args.configs:
                for mode in args.xla:
                    cache = warm[name]
                    if mode == "cold":
                        cache = tempfile.mkdtemp(dir=folder, prefix="cold-")
                    result = run_in_process(args.task, name, seed, args, cache)
                    result["method"] += f" ({mode})"
                    results.append(result)
    print(markdown(task, results, info, args))
    print(f"Load average at the end: {harness.load()}", file=sys.stderr)
    if args.json:
        task = dataclasses.asdict(task)
        run.save(
            {"versions": info, "args": vars(args), "task": task, "results": results}, args.json
        )


if __name__ == "__main__":
    main()
