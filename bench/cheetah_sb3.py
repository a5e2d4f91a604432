"""Training throughput on HalfCheetah-v5: batchrl's PPO or SAC beside Stable-Baselines3's.

    python bench/cheetah_sb3.py                            # 100,352 steps each, 2 repeats
    python bench/cheetah_sb3.py --config mujoco            # CleanRL's settings instead
    python bench/cheetah_sb3.py --steps 4096 --repeats 1   # smoke test
    python bench/cheetah_sb3.py --config halfcheetah_sac --steps 20000 \
        --set sac.learning_starts=1000                     # SAC, mostly learning steps

Environment steps per second of training, updates included, over `--steps` environment
steps (rounded up to whole batchrl calls of `env.num_envs * train.steps_per_call` steps,
which are whole SB3 rollouts too). Each repeat runs both, one after the other in this
process, SB3 first in even repeats and batchrl first in odd ones. Neither side evaluates.

- `batchrl`: `batchrl.runners.train` on the `--config` preset (default `cheetah`,
  rl-baselines3-zoo's tuned settings; `mujoco` has CleanRL's) with
  `train.total_steps` the steps, `train.seed` the repeat, `train.eval_every=0` and
  `train.checkpoint_every` past the end, in a temporary logdir. The clock runs from the
  call to the progress hook's report of the last training call: environments, model and
  graph tracing included; the checkpoint and policy export at the end are not (stderr
  shows the seconds with them).
- `SB3 PPO`: SB3's PPO with the config's hyperparameters (`sb3_kwargs`), its environments
  in a `DummyVecEnv` behind `VecNormalize`, on the CPU with `--torch-threads` threads
  (default 1: two spin-wait on the shared cores and slow SB3 many times; see
  docs/lab-log.md). The clock covers building environments and model, and `learn`.
- `SB3 SAC`, for a SAC preset: SB3's SAC with the config's hyperparameters
  (`sb3_sac_kwargs`: the same networks, batch, buffer, learning rate, warm-up, and
  gradient steps per environment step), its environments in a `DummyVecEnv`, no
  normalization (batchrl's SAC has none).

`--set KEY=VALUE` overrides the preset on both sides (e.g. a shorter SAC warm-up, so that
most of the steps measured are learning ones).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time

import harness
import mujoco
import numpy as np
import stable_baselines3
import torch
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from batchrl.config import load_run_config
from batchrl.runners import train

BATCHRL = "batchrl"
SB3 = "SB3"
ACTIVATIONS = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "elu": torch.nn.ELU}


OVERRIDES: list[str] = []  # --set, for both sides.


def load(name: str, steps: int, seed: int):
    """Config `name` for a run of `steps` environment steps without evaluation."""
    overrides = [*OVERRIDES, f"train.total_steps={steps}", f"train.seed={seed}"]
    overrides += [
        "train.eval_every=0",
        f"train.checkpoint_every={steps + 1}",
    ]  # None before the end.
    return load_run_config(name, overrides)


def round_steps(name: str, steps: int) -> int:
    """`steps` rounded up to whole batchrl calls (and SB3 rollouts, for PPO)."""
    config = load(name, steps, 0)
    cfg = config.train
    rollout = config.ppo.rollout_length if config.algorithm.name == "ppo" else 1
    unit = config.env.num_envs * math.lcm(cfg.steps_per_call, rollout)
    return -(-steps // unit) * unit


def linear_schedule(config):
    """SB3's learning rate for batchrl's linear schedule, update for update.

    batchrl sets update k's rate from the step counter at the start of the training call
    that holds it, lr * (1 - step / total); SB3 passes 1 - (k + 1) * rollout / total.
    """
    algo, total = config.ppo, config.train.total_steps
    rollout = config.env.num_envs * algo.rollout_length
    per_call = config.env.num_envs * config.train.steps_per_call

    def schedule(progress_remaining: float) -> float:
        update = max(round((1.0 - progress_remaining) * total / rollout) - 1, 0)
        step = update * rollout // per_call * per_call
        return algo.learning_rate * max(1.0 - step / total, 0.0)

    return schedule if algo.learning_rate_schedule == "linear" else algo.learning_rate


def sb3_kwargs(config) -> dict:
    """Keyword arguments of SB3's PPO with the hyperparameters of a batchrl PPO config."""
    algo, network, num_envs = config.ppo, config.network, config.env.num_envs
    needed = {
        "algorithm.name": "ppo",
        "runner.name": "local",
        "ppo.update_mode": "steps",
        "ppo.objective": "clip",
        "ppo.value_clip": 0.0,
        "network.name": "feedforward",
        "network.squash_mean": False,
    }
    for key, value in needed.items():  # Settings that SB3's PPO has no counterpart for.
        section, name = key.split(".")
        if config[section][name] != value:
            raise ValueError(f"{key}={config[section][name]!r}: this benchmark needs {value!r}.")
    return {
        "n_steps": algo.rollout_length,
        "batch_size": num_envs * algo.rollout_length // algo.minibatches,
        "n_epochs": algo.epochs,
        "learning_rate": linear_schedule(config),
        "gamma": algo.discount,
        "gae_lambda": algo.gae_lambda,
        "clip_range": algo.clip_ratio,
        "ent_coef": algo.entropy_coef,
        # SB3's value loss is the MSE, batchrl's 0.5 * MSE (as CleanRL's).
        "vf_coef": algo.value_coef / 2,
        "max_grad_norm": algo.max_grad_norm,
        "normalize_advantage": algo.normalize_advantage,
        "policy_kwargs": {
            "net_arch": {"pi": list(network.policy_layers), "vf": list(network.value_layers)},
            "activation_fn": ACTIVATIONS[network.activation],
            "log_std_init": network.init_log_std,
        },
    }


def sb3_sac_kwargs(config) -> dict:
    """Keyword arguments of SB3's SAC with the hyperparameters of a batchrl SAC config."""
    algo, network = config.sac, config.network
    for key, value in {"n_step": 1, "target_update_interval": 1}.items():
        if algo[key] != value:  # SB3's SAC has no n-step returns; keep the comparison plain.
            raise ValueError(f"sac.{key}={algo[key]!r}: this benchmark needs {value!r}.")
    auto = ("auto", None)
    ent_coef = "auto" if algo.ent_coef in auto else algo.ent_coef
    if ent_coef == "auto" and algo.ent_coef_init != 1.0:
        ent_coef = f"auto_{algo.ent_coef_init}"
    return {
        "learning_rate": algo.learning_rate,
        "buffer_size": algo.buffer_size,
        "learning_starts": algo.learning_starts,
        "batch_size": algo.batch_size,
        "tau": algo.tau,
        "gamma": algo.discount,
        "train_freq": algo.train_freq,
        "gradient_steps": algo.gradient_steps,
        "ent_coef": ent_coef,
        "target_entropy": "auto" if algo.target_entropy in auto else algo.target_entropy,
        "policy_kwargs": {
            "net_arch": {"pi": list(network.policy_layers), "qf": list(network.value_layers)},
            "activation_fn": ACTIVATIONS[network.activation],
        },
    }


def run_sb3(name: str, steps: int, seed: int) -> dict:
    """SB3's PPO or SAC for `steps` environment steps; the steps taken and the seconds.

    The clock covers building environments and model, and `learn`.
    """
    config = load(name, steps, seed)
    env_cfg = config.env
    limit = env_cfg.max_episode_steps  # 0 keeps Gymnasium's, as in batchrl.
    env_kwargs = {"max_episode_steps": limit} if limit else None
    start = time.perf_counter()
    env = make_vec_env(
        env_cfg.id, env_cfg.num_envs, seed=seed, vec_env_cls=DummyVecEnv, env_kwargs=env_kwargs
    )
    try:
        if config.algorithm.name == "sac":
            model = stable_baselines3.SAC(
                "MlpPolicy", env, seed=seed, device="cpu", **sb3_sac_kwargs(config)
            )
        else:
            algo = config.ppo
            env = VecNormalize(  # batchrl's PPO always normalizes observations.
                env,
                norm_reward=algo.normalize_reward,
                clip_obs=algo.observ_clip or np.inf,  # 0 turns batchrl's clipping off.
                clip_reward=algo.reward_clip or np.inf,
                gamma=algo.discount,
            )
            model = stable_baselines3.PPO(
                "MlpPolicy", env, seed=seed, device="cpu", **sb3_kwargs(config)
            )
        model.learn(steps)
        seconds = time.perf_counter() - start
    finally:
        env.close()
    return {"method": SB3, "repeat": seed, "steps": model.num_timesteps, "seconds": seconds}


def run_batchrl(name: str, steps: int, seed: int) -> dict:
    """batchrl's `train` for `steps` environment steps; the steps taken and the seconds."""
    marks = []  # The time of each status line; `train` prints one after each training call.

    def progress(text: str, final: bool = False) -> None:
        if final:
            print(text, file=sys.stderr)
        else:
            marks.append(time.perf_counter())

    config = load(name, steps, seed)
    with tempfile.TemporaryDirectory(prefix="cheetah_sb3-") as logdir:
        start = time.perf_counter()
        result = train(config, logdir, progress=progress)
        total, seconds = time.perf_counter() - start, marks[-1] - start
    print(f"{BATCHRL}: {total:.1f} s with the final checkpoint and export", file=sys.stderr)
    return {"method": BATCHRL, "repeat": seed, "steps": result["step"], "seconds": seconds}


def versions() -> dict[str, str]:
    """The libraries' versions (MuJoCo's too), torch's threads, the CPU and its cores."""
    machine = harness.machine()
    return {**machine["versions"], "mujoco": mujoco.__version__,
            "torch threads": str(torch.get_num_threads()), "cpus": str(machine["cores"]),
            "cpu": machine["cpu"]}  # fmt: skip


def markdown(results: list[dict], info: dict[str, str]) -> str:
    """The table of runs, the medians and the ratios batchrl ÷ SB3 of steps per second."""
    rate = {(r["method"], r["repeat"]): r["steps"] / r["seconds"] for r in results}
    lines = [
        "| method | repeat | steps | seconds | steps/s | batchrl ÷ SB3 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ratio = ""
        if r["method"] == BATCHRL and (SB3, r["repeat"]) in rate:
            ratio = f"{rate[BATCHRL, r['repeat']] / rate[SB3, r['repeat']]:.2f}"
        lines.append(
            f"| {r['method']} | {r['repeat']} | {r['steps']:,} | {r['seconds']:.1f} "
            f"| {rate[r['method'], r['repeat']]:,.0f} | {ratio} |"
        )
    medians = {
        m: statistics.median(v for (k, _), v in rate.items() if k == m) for m in (SB3, BATCHRL)
    }
    lines.append(f"| {SB3} | median | | | {medians[SB3]:,.0f} | |")
    ratio = medians[BATCHRL] / medians[SB3]
    lines.append(f"| {BATCHRL} | median | | | {medians[BATCHRL]:,.0f} | {ratio:.2f} |")
    lines += ["", "Versions: " + ", ".join(f"{key} {value}" for key, value in info.items()) + "."]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="cheetah", help="a PPO or SAC preset on HalfCheetah-v5")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=100_000, help="rounded up; see above")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--torch-threads", type=int, default=1, help="0: torch's default")
    args = parser.parse_args(argv)
    OVERRIDES[:] = args.set
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    steps = round_steps(args.config, args.steps)
    info = versions()
    print(
        f"--config={args.config} {args.set}, {steps:,} steps per run; "
        f"load average {harness.load()}",
        file=sys.stderr,
    )
    results = []
    for repeat in range(args.repeats):
        runs = (run_sb3, run_batchrl) if repeat % 2 == 0 else (run_batchrl, run_sb3)
        for run in runs:
            results.append(run(args.config, steps, repeat))
            print(results[-1], file=sys.stderr)
    print(markdown(results, info))
    print(f"Load average at the end: {harness.load()}", file=sys.stderr)


if __name__ == "__main__":
    main()
