"""Whole processes at the same settings: batchrl's train script against PureJaxRL's PPO.

    python bench/purejaxrl_race.py --preset pendulum_tf --seeds 0 1 2 3 4 \
        --jax-python /work/jaxvenv/bin/python --purejaxrl /work/purejaxrl/purejaxrl

For each seed, one after another (so that a slow moment of this shared machine hits
every side alike), three processes, each timed by this script's clock from before it
starts until it exits:

- `batchrl, evaluations`: `python -m batchrl.scripts.train --config=PRESET --seed=S`, as
  a user runs it, with an empty XLA cache (cold: the program is compiled). It evaluates
  every `train.eval_every` steps on the TF port and once at the end on Gymnasium's own
  environment, writes checkpoints and exports the policy.
- `batchrl, no evaluations`: the same with `train.eval_every=0` (no evaluation at all; it
  still writes its checkpoints and exports the policy).
- `PureJaxRL`: `bench/purejaxrl_seeds.py` under `--jax-python` with one seed (key
  `PRNGKey(S)`), its `jax.jit(jax.vmap(make_train(config)))` lowered, compiled and run.
  PureJaxRL compiles every run (JAX keeps no cache unless asked) and never evaluates:
  its return is that of its training episodes (stochastic policy) over the last 256
  steps of each environment.

The settings are the preset's, translated by `population_seeds.purejaxrl_config` (the
environments, rollout length, epochs, minibatches, learning rate and its schedule,
discount, GAE, clipping, coefficients); what PureJaxRL cannot take is said beside the
table (gSDE, observation normalization's details, time limits). A process that fails
or hangs (JAX 0.10.2 did, in `block_until_ready`) stops the script with its output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
from population_seeds import purejaxrl_config, run_train

HERE = Path(__file__).resolve().parent


def batchrl_run(preset: str, seed: int, evaluate: bool, folder: str) -> dict:
    """A cold train-script process: its seconds and final evaluation (nan without one)."""
    cache = tempfile.mkdtemp(dir=folder, prefix="xla-")
    overrides = [f"train.seed={seed}", f"train.xla_cache={cache}"]
    if not evaluate:
        overrides.append("train.eval_every=0")
    logdir = tempfile.mkdtemp(dir=folder, prefix="run-")
    result = run_train(preset, overrides, logdir)
    return {"seconds": result["seconds"], "return": result["evals"][-1]}


def purejaxrl_run(config: dict, seed: int, jax_python: str, folder: str) -> dict:
    """A PureJaxRL process of one seed: its seconds, compile and run seconds, and return."""
    command = [jax_python, str(HERE / "purejaxrl_seeds.py"), "--purejaxrl", folder]
    command += ["--config", json.dumps(config), "--seeds", "1", "--seed", str(seed)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"PureJaxRL seed {seed} did not finish in 900 s: {command}") from None
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"PureJaxRL seed {seed} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "seconds": seconds,
        "compile_seconds": out["compile_seconds"],
        "run_seconds": out["run_seconds"],
        "return": out["final_train_returns"][0],
        "jax": out["jax"],
    }


def markdown(preset: str, runs: dict[str, list[dict]], seeds: list[int]) -> str:
    theirs = statistics.median(r["seconds"] for r in runs["PureJaxRL"])
    lines = [
        f"`{preset}`, seeds {' '.join(map(str, seeds))}; seconds from before each process "
        "starts until it exits.",
        "",
        "| side | seconds per seed | median | PureJaxRL ÷ this | returns |",
        "|---|---|---:|---:|---|",
    ]
    for side, results in runs.items():
        median = statistics.median(r["seconds"] for r in results)
        each = " ".join(f"{r['seconds']:.1f}" for r in results)
        returns = " ".join(f"{r['return']:.1f}" for r in results)
        lines.append(f"| {side} | {each} | {median:.1f} | {theirs / median:.2f}x | {returns} |")
    jax = runs["PureJaxRL"]
    compile_ = statistics.median(r["compile_seconds"] for r in jax)
    run = statistics.median(r["run_seconds"] for r in jax)
    lines += [
        "",
        f"PureJaxRL (JAX {jax[0]['jax']}): compilation {compile_:.1f} s and training "
        f"{run:.1f} s (medians); the rest of its process is Python's and JAX's start.",
    ]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="pendulum_tf")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--jax-python", required=True, help="a Python with JAX and gymnax")
    parser.add_argument("--purejaxrl", required=True, help="the purejaxrl/ folder of a checkout")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    config = purejaxrl_config(args.preset)
    print(f"PureJaxRL's config: {config}", file=sys.stderr)
    run = harness.Run("purejaxrl_race")
    print(f"CPU: {run.header['machine']['cpu']}; load {run.header['load_before']}", file=sys.stderr)
    runs = {"batchrl, evaluations": [], "batchrl, no evaluations": [], "PureJaxRL": []}
    with tempfile.TemporaryDirectory() as folder:
        for seed in args.seeds:
            runs["batchrl, evaluations"].append(batchrl_run(args.preset, seed, True, folder))
            runs["batchrl, no evaluations"].append(batchrl_run(args.preset, seed, False, folder))
            runs["PureJaxRL"].append(purejaxrl_run(config, seed, args.jax_python, args.purejaxrl))
            print(f"seed {seed}: {json.dumps({k: v[-1] for k, v in runs.items()})}", flush=True)
    print(markdown(args.preset, runs, args.seeds))
    print(f"Load average at the end: {harness.load()}", file=sys.stderr)
    if args.json:
        run.save({"preset": args.preset, "config": config, "runs": runs}, args.json)


if __name__ == "__main__":
    main()
