"""Seeds of a preset trained as one population, against one run per seed and PureJaxRL.

    python bench/population_seeds.py                              # cartpole_tf, 16 seeds
    python bench/population_seeds.py --preset pendulum_tf --runs 4
    python bench/population_seeds.py --parts scaling --scaling 1 4 16 64 256
    python bench/population_seeds.py --parts purejaxrl --jax-python /work/jaxvenv/bin/python
    python bench/population_seeds.py --preset cheetah --members 4 --parts runs \
        --set train.total_steps=32768 --set train.eval_every=32768 \
        --set-population ppo.jit_update=false

Three parts, in this order in one invocation, so that they share the machine's state:

- `runs`: what a user runs. `python -m batchrl.scripts.train` once with
  `train.population=M` (seeds 0..M-1) and once per seed with the preset as it is, in
  separate processes, the population between the first and second halves of the single
  runs. Each clock runs from the process's start to its end: imports, construction, XLA
  compilation (all runs share a fresh `train.xla_cache`, so single runs after the first
  load their program from it), the preset's evaluations and checkpoints, and the export.
  With `--runs K < M` only seeds 0..K-1 run singly and their mean is multiplied by M
  (the table says so). Each run's final evaluation is its own (the preset's, on
  Gymnasium), the same on both sides. `--set KEY=VALUE` overrides both sides' runs,
  `--set-population KEY=VALUE` the population's only (a setting it refuses, such as
  `ppo.jit_update=false`, so that the single runs keep their preset's best).
- `purejaxrl`: training alone, no evaluation, on both sides. batchrl builds the
  population as the train script does and makes the training calls of the whole budget
  (`train.xla_cache` off, so that it compiles); PureJaxRL's `jax.jit(jax.vmap(train))`
  over the same M seeds runs in a subprocess under `--jax-python`
  (`bench/purejaxrl_seeds.py`, whose docstring lists every change made to PureJaxRL).
  Both with the preset's hyperparameters; steps per second with and without compilation.
- `scaling`: training calls of populations of each size in `--scaling` (compilation
  excluded: the median of `--calls` calls after the first), all members' steps counted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import tensorflow as tf

from batchrl.config import load_run_config
from batchrl.runners import LocalTrainer, make_algorithm

PUREJAXRL = "/work/purejaxrl/purejaxrl"
FINAL = re.compile(r"\| eval (-?[\d.]+|nan) \| ([\d.]+) s at")
MEMBER = re.compile(r"^\s+(\d+)\s+(\d+)\s+(-?[\d.]+|nan)\s+(-?[\d.]+|nan)\s*$")


def run_train(preset: str, overrides: list[str], logdir: str) -> dict:
    """One train-script process: wall seconds and final evaluations (one per member)."""
    command = [sys.executable, "-m", "batchrl.scripts.train", f"--config={preset}"]
    command += [f"--logdir={logdir}", *(f"--set={o}" for o in overrides)]
    with harness.timer() as clock:
        done = subprocess.run(command, capture_output=True, text=True, timeout=7200)
    seconds = clock.seconds
    output = done.stdout + done.stderr
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{output[-3000:]}")
    members = [float(m.group(4)) for m in map(MEMBER.match, output.splitlines()) if m]
    final = FINAL.findall(output)
    evals = members or [float(final[-1][0])]
    return {"seconds": seconds, "evals": evals}


def runs_part(
    preset: str, members: int, runs: int, target: float, overrides=(), population_overrides=()
) -> dict:
    """The population against single runs, each a train-script process."""
    singles, population = [], None
    with tempfile.TemporaryDirectory() as folder:
        common = [*overrides, f"train.xla_cache={folder}/xla"]
        order = [*range(runs // 2), "population", *range(runs // 2, runs)]
        for item in order:
            logdir = f"{folder}/{item}"
            if item == "population":
                own = [*common, *population_overrides, f"train.population={members}"]
                population = run_train(preset, own, logdir)
                print(f"population of {members}: {population['seconds']:.1f} s", flush=True)
            else:
                singles.append(run_train(preset, [*common, f"train.seed={item}"], logdir))
                print(f"seed {item}: {singles[-1]['seconds']:.1f} s", flush=True)
    single_seconds = [s["seconds"] for s in singles]
    total = sum(single_seconds) * members / runs
    return {
        "members": members,
        "runs_timed": runs,
        "single_seconds": single_seconds,
        "singles_total_seconds": total,
        "population_seconds": population["seconds"],
        "speedup": total / population["seconds"],
        "single_evals": [s["evals"][0] for s in singles],
        "member_evals": population["evals"],
        "target": target,
    }


def build(preset: str, overrides: list[str]):
    """The population's environments and trainer, as `batchrl.runners.train` builds them."""
    config = load_run_config(preset, [*overrides, "train.xla_cache=''"])
    tf.keras.utils.set_random_seed(config.train.seed)
    step = tf.Variable(0, dtype=tf.int64)
    env = LocalTrainer.make_batch_env(config, config.train.seed)
    return config, env, LocalTrainer(config, make_algorithm(config, env, step), env)


def train_calls(preset: str, members: int) -> dict:
    """The whole budget's training calls of a population: seconds with and without the first."""
    start = time.perf_counter()
    config, env, trainer = build(preset, [f"train.population={members}"])
    try:
        calls = -(-config.train.total_steps // (config.train.steps_per_call * config.env.num_envs))
        for call in range(calls):
            steps, stats = trainer.step()
            tf.reduce_sum(stats["episodes"]).numpy()  # Waits for the call.
            if call == 0:
                first = time.perf_counter()
        end = time.perf_counter()
    finally:
        env.close()
    return {
        "steps": members * calls * steps,
        "with_compile_seconds": end - start,
        "after_first_seconds": end - first,
        "steps_after_first": members * (calls - 1) * steps,
    }


def purejaxrl_config(preset: str) -> dict:
    """PureJaxRL's config keys for the preset's PPO settings."""
    config = load_run_config(preset, [])
    ppo, env = config.ppo, config.env
    keys = {
        "LR": ppo.learning_rate,
        "NUM_ENVS": env.num_envs,
        "NUM_STEPS": ppo.rollout_length,
        "TOTAL_TIMESTEPS": config.train.total_steps,
        "UPDATE_EPOCHS": ppo.epochs,
        "NUM_MINIBATCHES": ppo.minibatches,
        "GAMMA": ppo.discount,
        "GAE_LAMBDA": ppo.gae_lambda,
        "CLIP_EPS": ppo.clip_ratio,
        "ENT_COEF": ppo.entropy_coef,
        "VF_COEF": ppo.value_coef,
        "MAX_GRAD_NORM": ppo.max_grad_norm,
        "ACTIVATION": config.network.activation,
        "ENV_NAME": env.id,
        "ANNEAL_LR": ppo.learning_rate_schedule == "linear",
    }
    if env.id != "CartPole-v1":
        keys["NORMALIZE_ENV"] = bool(ppo.normalize_observ and ppo.normalize_reward)
    return keys


def purejaxrl_part(preset: str, members: int, jax_python: str, folder: str) -> dict:
    """batchrl's population and PureJaxRL's vmap, training calls only."""
    ours = train_calls(preset, members)
    print(f"batchrl: {ours}", flush=True)
    here = Path(__file__).resolve().parent
    command = [jax_python, str(here / "purejaxrl_seeds.py"), "--purejaxrl", folder]
    command += ["--config", json.dumps(purejaxrl_config(preset)), "--seeds", str(members)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    try:  # JAX 0.10.2 on CPU has hung here (0% CPU, in block_until_ready) twice in 10 runs.
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"PureJaxRL did not finish in 900 s (a hung JAX?): {command}") from None
    if done.returncode:
        raise SystemExit(f"PureJaxRL failed:\n{done.stderr[-3000:]}")
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"PureJaxRL: {theirs}", flush=True)
    steps = theirs["seeds"] * theirs["steps_per_seed"]
    return {
        "batchrl": ours,
        "purejaxrl": theirs,
        "batchrl_rate_with_compile": ours["steps"] / ours["with_compile_seconds"],
        "batchrl_rate": ours["steps_after_first"] / ours["after_first_seconds"],
        "purejaxrl_rate_with_compile": steps / (theirs["compile_seconds"] + theirs["run_seconds"]),
        "purejaxrl_rate": steps / theirs["run_seconds"],
    }


def scaling_part(preset: str, sizes: list[int], calls: int) -> list[dict]:
    """All members' steps per second of the median training call after the first."""
    rows = []
    for members in sizes:
        config, env, trainer = build(preset, [f"train.population={members}"])
        try:
            seconds = []
            for _ in range(1 + calls):
                with harness.timer() as clock:
                    steps, stats = trainer.step()
                    tf.reduce_sum(stats["episodes"]).numpy()
                seconds.append(clock.seconds)
        finally:
            env.close()
        rate = members * steps / statistics.median(seconds[1:])
        rows.append({"members": members, "first_seconds": seconds[0], "rate": rate})
        print(f"{members} members: {rate:,.0f} steps/s (first call {seconds[0]:.1f} s)", flush=True)
    return rows


def _row(*cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown(preset: str, results: dict) -> str:
    lines = []
    if "runs" in results:
        r = results["runs"]
        members, timed = r["members"], r["runs_timed"]
        note = "" if timed == members else f" ({timed} timed, x{members}/{timed})"
        lines += [
            _row(f"`{preset}`, {members} seeds", "seconds", f"finals >= {r['target']:g}", "median"),
            "|---|---:|---:|---:|",
        ]
        for name, seconds, evals in (
            (
                f"{members} single runs one after another{note}",
                r["singles_total_seconds"],
                r["single_evals"],
            ),
            (f"one population of {members}", r["population_seconds"], r["member_evals"]),
        ):
            reached = sum(e >= r["target"] for e in evals)
            median = statistics.median(evals)
            lines.append(_row(name, f"{seconds:.0f}", f"{reached}/{len(evals)}", f"{median:.1f}"))
        lines += [_row("speed-up", f"{r['speedup']:.1f}x", "", ""), ""]
    if "purejaxrl" in results:
        p = results["purejaxrl"]
        compiled = p["batchrl_rate_with_compile"] / p["purejaxrl_rate_with_compile"]
        lines += [
            _row("training only, all seeds' steps", "steps/s with compilation", "after it"),
            "|---|---:|---:|",
            _row(
                "batchrl population (XLA)",
                f"{p['batchrl_rate_with_compile']:,.0f}",
                f"{p['batchrl_rate']:,.0f}",
            ),
            _row(
                f"PureJaxRL `vmap` (JAX {p['purejaxrl']['jax']})",
                f"{p['purejaxrl_rate_with_compile']:,.0f}",
                f"{p['purejaxrl_rate']:,.0f}",
            ),
            _row("ratio", f"{compiled:.2f}", f"{p['batchrl_rate'] / p['purejaxrl_rate']:.2f}"),
            "",
        ]
    if "scaling" in results:
        first = results["scaling"][0]
        alone = first["rate"] / first["members"]
        lines += [
            _row("members", "steps/s, all members", "per member / one alone"),
            "|---:|---:|---:|",
        ]
        for row in results["scaling"]:
            per_member = row["rate"] / row["members"] / alone
            lines.append(_row(row["members"], f"{row['rate']:,.0f}", f"{per_member:.2f}"))
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cartpole_tf")
    parser.add_argument("--members", type=int, default=16)
    parser.add_argument("--runs", type=int, default=0, help="single runs timed (0: all)")
    parser.add_argument("--target", type=float, default=None, help="default: 475 or -200")
    parser.add_argument("--parts", nargs="+", default=["runs", "purejaxrl", "scaling"])
    parser.add_argument("--scaling", nargs="+", type=int, default=[1, 4, 16, 64, 256])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--jax-python", default="/work/jaxvenv/bin/python")
    parser.add_argument("--purejaxrl", default=PUREJAXRL, help="its purejaxrl/ folder")
    parser.add_argument(
        "--set", action="append", default=[], help="an override of both sides' runs"
    )
    parser.add_argument(
        "--set-population", action="append", default=[], help="an override of its run only"
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    target = (
        args.target if args.target is not None else (475.0 if "cartpole" in args.preset else -200.0)
    )
    run = harness.Run("population_seeds")
    results = {"preset": args.preset}
    if "runs" in args.parts:
        results["runs"] = runs_part(
            args.preset,
            args.members,
            args.runs or args.members,
            target,
            args.set,
            args.set_population,
        )
    if "purejaxrl" in args.parts:
        results["purejaxrl"] = purejaxrl_part(
            args.preset, args.members, args.jax_python, args.purejaxrl
        )
    if "scaling" in args.parts:
        results["scaling"] = scaling_part(args.preset, args.scaling, args.calls)
    print(markdown(args.preset, results))
    if args.json:
        run.save(results, args.json)


if __name__ == "__main__":
    main()
