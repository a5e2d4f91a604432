"""Regenerates every number of the README's benchmark table at HEAD.

    python bench/report.py                        # every row; results to bench/results/
    python bench/report.py --headline             # the rows behind README.md's table only
    python bench/report.py --rows presets --presets pendulum cartpole --seeds 0 1 2 3 4
    python bench/report.py --write                # from the saved results: the tables of
                                                  # README.md, docs/benchmarks.md and the
                                                  # algorithms' pages, and docs/plots/

Rows (each saved as bench/results/<row>.json with its command, seeds, machine, load
average before and after, versions and commit, so that `--write` can assemble them):

- `presets`: each preset of `PRESETS` trained with the train script, as a user runs it,
  for its own `train.total_steps`, on seeds 0 to 4 (`--seeds`); the final evaluation (the
  deterministic policy's mean return over the preset's `train.eval_episodes`, on
  Gymnasium's environment also for the TensorFlow-op presets), k of n seeds at or above
  the task's threshold, and the train script's own wall-clock.
- `sb3`: wall-clock to Pendulum-v1 >= -200 (`pendulum`, `pendulum_tf`) and CartPole-v1
  >= 475 (`cartpole`, `cartpole_tf`) against Stable-Baselines3's tuned PPO, through
  `bench/sb3_race.py --task pendulum_ppo` and `--task cartpole_ppo`, each once with one
  torch thread and once with two; batchrl's runs cold (an empty XLA cache) and warm (the
  cache a warm-up run filled). Each ratio is taken in its own invocation, and the table
  quotes the invocation whose SB3 was faster. Unsolved seeds count as infinite time in
  medians.
- `envs`: steps per second of the environments in TensorFlow ops against Gymnasium's
  vector environments (bench/tf_envs.py), best batch size against best batch size.
- `random`: Pendulum-v1's return under uniformly random actions, the floor of the scale.
- `tests`: the README's test command, `python -m pytest -n auto` (the default suite), its
  counts and wall-clock.
- `apex` (only when named): Ape-X's transitions per second into its shards at 1 to 8 actors
  on environments that sleep 2 ms a step, beside single-process DQN on the same ones
  (bench/apex_scaling.py, about 3 minutes).
- `minatar` (only when named): MinAtar Breakout after 180 s of training, Ape-X beside DQN
  and IMPALA, seeds 0 to 2 (bench/minatar_budget.py, about 40 minutes).
- `twin` (only when named): the routing environment's steps per second in TensorFlow ops
  against the routing paper's own environment code, both on one core (`taskset -c 0`
  where there is taskset; bench/routing_twin.py --intra-op-threads 1, about 5 minutes;
  it needs the reference's snapshot and Python 3.6 venv, see that script).

`--write` assembles the saved rows: every row into docs/benchmarks.md (between
`<!-- report:begin -->` and `<!-- report:end -->`), a handful of headline rows into
README.md (`<!-- report:headline:begin -->`), each algorithm's presets into its page
(`<!-- report:presets:ppo:begin -->`, ... in docs/algorithms/), and the figures into
docs/plots/ (`plots`): learning curves over seeds from the races' evaluations (the
interquartile mean and its 95% bootstrap interval, bench/plots.py), and the
speed ratios against each peer as bars. The rows run only when named, apex, minatar and
twin, take minutes of quiet cores each. The default rows take about two hours on two
cores (the 18 presets on 5 seeds about 110 minutes of it; `cartpole_impala_ray`,
`cartpole_dqn` and `pendulum_impala` are the longest); `--headline`, the README's rows
(its presets on seeds 0 to 4 and 5 to 9, `sb3`, `envs`, `random` and `tests`), about
an hour.

Timings are only comparable within a row: run nothing else on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import harness
import sb3_race
from medians import cell, median_to_target

ROOT = harness.ROOT
RESULTS = harness.RESULTS
BEGIN, END = "<!-- report:begin -->", "<!-- report:end -->"
DOCS = ROOT / "docs"

# Preset -> the task's threshold (Pendulum-v1: -200, CartPole-v1: 475; MinAtar Breakout: 10,
# where the MinAtar paper's DQN stands from 1M frames on and its actor-critics, AC(0) and
# AC(0.8), stand at about 11 and 13 by 2M, the preset's budget: Young and Tian 2019, the
# learning curves of the paper and of github.com/kenjyoung/MinAtar's README, a moving
# average of training returns over 100 episodes).
PRESETS = {
    "pendulum": -200.0,
    "pendulum_tf": -200.0,
    "cartpole": 475.0,
    "cartpole_tf": 475.0,
    "cartpole_impala": 475.0,
    "cartpole_es": 475.0,
    "pendulum_es": -200.0,
    "cartpole_dqn": 475.0,
    "cartpole_dqn_tf": 475.0,
    "pendulum_sac": -200.0,
    "pendulum_sac_tf": -200.0,
    "pendulum_td3": -200.0,
    "pendulum_td3_tf": -200.0,
    "pendulum_impala": -200.0,
    "cartpole_ppo_ray": 475.0,
    "cartpole_impala_ray": 475.0,
    "cartpole_es_ray": 475.0,
    "cartpole_apex_ray": 475.0,
    "breakout_minatar": 10.0,
}
# Preset -> the page of docs/algorithms/ whose table of presets shows it.
ALGORITHM_PAGES = {
    "ppo": ("pendulum", "pendulum_tf", "cartpole", "cartpole_tf", "cartpole_ppo_ray"),
    "impala": ("cartpole_impala", "pendulum_impala", "cartpole_impala_ray", "breakout_minatar"),
    "es": ("cartpole_es", "pendulum_es", "cartpole_es_ray"),
    "dqn": ("cartpole_dqn", "cartpole_dqn_tf", "cartpole_apex_ray"),
    "sac": ("pendulum_sac", "pendulum_sac_tf", "pendulum_td3", "pendulum_td3_tf"),
}
# The README's headline: these presets' rows, then the rows named here.
HEADLINE_PRESETS = ("pendulum", "pendulum_tf", "cartpole_tf", "cartpole_impala", "cartpole_es",
                    "cartpole_dqn_tf", "pendulum_sac")  # fmt: skip
_FINAL = re.compile(
    r"step ([\d,]+)/[\d,]+ \(\d+%\) \| train (-?[\d.]+|nan) \| eval (-?[\d.]+|nan) "
    r"\| ([\d.]+) s at"
)


def train_preset(preset: str, seed: int, overrides: list[str] = ()) -> dict:
    """One run of the train script; its final evaluation, wall-clock and curve."""
    with tempfile.TemporaryDirectory() as logdir:
        command = [
            sys.executable, "-m", "batchrl.scripts.train", f"--config={preset}",
            f"--logdir={logdir}", "--set", f"train.seed={seed}",
            *[arg for key in overrides for arg in ("--set", key)],
        ]  # fmt: skip
        with harness.timer() as clock:
            result = subprocess.run(command, capture_output=True, text=True, timeout=3600)
        evals = _evaluations(Path(logdir) / "eval")
    finals = _FINAL.findall(result.stderr)
    if result.returncode or not finals:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    steps, _, final, seconds = finals[-1]
    return {
        "seed": seed,
        "steps": int(steps.replace(",", "")),
        "final": float(final),
        "train_seconds": float(seconds),
        "process_seconds": round(clock.seconds, 2),
        "evals": evals,  # [[step, return], ...]: the learning curve bench/plots.py draws.
    }


def _evaluations(folder: Path) -> list[list[float]]:
    """Every `eval/mean_return` a run wrote to its TensorBoard folder, by step."""
    from batchrl.quiet import import_tensorflow

    import_tensorflow(init_devices=False)  # TensorBoard's reader imports it: no C++ lines.
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util.tensor_util import make_ndarray

    evals = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.tag == "eval/mean_return":
                    evals[event.step] = float(make_ndarray(value.tensor))
    return [[step, evals[step]] for step in sorted(evals)]


def row_presets(args) -> dict:
    rows = []
    for preset in args.presets:
        threshold = PRESETS[preset]
        overrides = [word for key in args.set for word in ("--set", key)]
        command = ["bench/report.py", "--rows", "presets", "--presets", preset,
                   "--seeds", *map(str, args.seeds), *overrides]  # fmt: skip
        runs = []
        # A new XLA cache per preset, as on a new machine: the first seed compiles, the
        # others load the program.
        measured = harness.Run(preset, command)
        with tempfile.TemporaryDirectory() as cache:
            for seed in args.seeds:
                run = train_preset(preset, seed, [f"train.xla_cache={cache}", *args.set])
                runs.append(run)
                print(f"{preset} seed {seed}: {run}", file=sys.stderr, flush=True)
        solved = sum(run["final"] >= threshold for run in runs)
        rows.append(measured.record({
            "preset": preset,
            "threshold": threshold,
            "overrides": list(args.set),
            "runs": runs,
            "solved": solved,
            "median_final": statistics.median(run["final"] for run in runs),
            "median_train_seconds": statistics.median(run["train_seconds"] for run in runs),
        }))  # fmt: skip
        save_preset(rows[-1])
    return _saved_presets()


def save_preset(row: dict) -> None:
    """Merges one preset's row into bench/results/presets.json, replacing an older one of
    the same preset and seeds; rows of other seeds (seeds 5 to 9 beside 0 to 4, so that a
    setting is also judged on seeds nobody tuned on) stay."""
    rows = {_row_key(r): r for r in _saved_presets()["presets"]}
    rows[_row_key(row)] = row
    order = {name: index for index, name in enumerate(PRESETS)}
    ordered = sorted(
        (r for r in rows.values() if r["preset"] in order),
        key=lambda r: (order[r["preset"]], _row_key(r)[1]),
    )
    save("presets", {"presets": ordered})


def _row_key(row: dict) -> tuple[str, tuple[int, ...]]:
    return row["preset"], tuple(run["seed"] for run in row["runs"])


def _saved_presets() -> dict:
    path = RESULTS / "presets.json"
    return json.loads(path.read_text()) if path.exists() else {"presets": []}


def markdown_presets(result: dict) -> list[str]:
    lines = []
    for row in result["presets"]:
        finals = " / ".join(f"{run['final']:.1f}" for run in row["runs"])
        seeds = f"{row['runs'][0]['seed']} to {row['runs'][-1]['seed']}"
        steps = sorted(run["steps"] for run in row["runs"])
        budget = f"{steps[0]:,}" if steps[0] == steps[-1] else f"{steps[0]:,} to {steps[-1]:,}"
        lines.append(
            f"| `{row['preset']}`: final evaluation at its budget ({budget} steps), "
            f"seeds {seeds} | **{row['solved']}/{len(row['runs'])}** at "
            f"{row['threshold']:g} or better; {finals} (median {row['median_final']:.1f}); "
            f"median {row['median_train_seconds']:.0f} s a run by the train script's clock "
            f"(load {row['load_before']} -> {row['load_after']}) |"
        )
    return lines


def _bench(script: str, *args: str, prefix: tuple[str, ...] = ()) -> dict:
    """Runs bench/<script> with `--json` (after the command words `prefix`); its results."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "out.json"
        script = str(ROOT / "bench" / script)
        command = [*prefix, sys.executable, script, *args, "--json", str(path)]
        subprocess.run(command, check=True, timeout=7200, stdout=sys.stderr)
        return json.loads(path.read_text())


SB3_TASKS = {"pendulum_ppo": "Pendulum-v1 >= -200", "cartpole_ppo": "CartPole-v1 >= 475"}


def row_sb3(args) -> dict:
    seeds = [str(seed) for seed in args.seeds]
    tasks = {}
    for task in SB3_TASKS:
        invocations = []
        for threads in (1, 2):
            result = _bench(
                "sb3_race.py", "--task", task, "--seeds", *seeds, "--torch-threads", str(threads)
            )
            invocations.append({"torch_threads": threads, "results": result["results"]})
        tasks[task] = invocations
    return {
        "command": f"python bench/report.py --rows sb3 --seeds {' '.join(seeds)} (runs "
        f"python bench/sb3_race.py --task T --seeds {' '.join(seeds)} --torch-threads 1, "
        f"then 2, for T in {', '.join(SB3_TASKS)})",
        "tasks": tasks,
    }


def _median_seconds(runs: list[dict], key: str = "seconds") -> float:
    """Median seconds to the target, an unsolved run counting as infinite."""
    return median_to_target(r[key] if r["solved"] else None for r in runs)


def markdown_sb3(result: dict) -> list[str]:
    def sb3_runs(invocation):
        return [r for r in invocation["results"] if r["method"].startswith("SB3")]

    lines = []
    for task, invocations in result.get("tasks", {}).items():
        best = min(invocations, key=lambda inv: _median_seconds(sb3_runs(inv)))
        sb3 = sb3_runs(best)
        sb3_median = _median_seconds(sb3)
        sb3_process = _median_seconds(sb3, "process_seconds")
        others = [
            f"{inv['torch_threads']} torch thread(s): SB3 median "
            f"{cell(_median_seconds(sb3_runs(inv)), '.1f', ' s')}"
            for inv in invocations
            if inv is not best
        ]
        parts = []
        for method in dict.fromkeys(r["method"] for r in best["results"]):
            if method.startswith("SB3"):
                continue
            runs = [r for r in best["results"] if r["method"] == method]
            median = _median_seconds(runs)
            process = _median_seconds(runs, "process_seconds")
            parts.append(
                f"`{method.removeprefix('batchrl ')}` **{_times(sb3_median, median)}** "
                f"({sum(r['solved'] for r in runs)}/{len(runs)} solved, median "
                f"{cell(median, '.1f', ' s')}; from process start "
                f"{cell(process, '.1f', ' s')}, {_times(sb3_process, process)})"
            )
        lines.append(
            f"| Wall-clock to {SB3_TASKS[task]} vs Stable-Baselines3's tuned PPO "
            f"(rl-baselines3-zoo), median of {len(sb3)} seeds, same evaluation (32 "
            "episodes), training seconds (tracing and compilation in, evaluation out); "
            "cold: an empty XLA cache, warm: a later run; SB3 at its faster thread count "
            f"({best['torch_threads']}) | "
            + "; ".join(parts)
            + f"; SB3 {sum(r['solved'] for r in sb3)}/{len(sb3)} solved, median "
            f"{cell(sb3_median, '.1f', ' s')}, from process start "
            f"{cell(sb3_process, '.1f', ' s')} ({'; '.join(others)}) |"
        )
    return lines


def _times(sb3: float, this: float) -> str:
    """How many times faster than SB3, or why there is no ratio."""
    if not math.isfinite(this):
        return "not reached"
    if not math.isfinite(sb3):
        return "faster (SB3's median not reached)"
    return f"{sb3 / this:.2f}x"


def row_envs(args) -> dict:
    return {
        "command": "python bench/report.py --rows envs (runs python bench/tf_envs.py "
        "--batch-sizes 1 16 256 4096)",
        "results": _bench("tf_envs.py", "--batch-sizes", "1", "16", "256", "4096")["results"],
    }


def markdown_envs(result: dict) -> list[str]:
    lines = []
    for env_id, rows in result["results"].items():
        gym_size, gym_row = max(rows.items(), key=lambda item: item[1]["gymnasium"])
        tf_size, tf_row = max(rows.items(), key=lambda item: max(item[1]["graph"], item[1]["xla"]))
        tf_rate = max(tf_row["graph"], tf_row["xla"])
        mode = "XLA" if tf_row["xla"] >= tf_row["graph"] else "graph"
        lines.append(
            f"| {env_id} in TensorFlow ops vs Gymnasium's vector env, same policy, each at its "
            f"best batch size (1 to 4,096) | **{tf_rate / gym_row['gymnasium']:.0f}x**: "
            f"{tf_rate:,.0f} steps/s ({mode}, {tf_size} environments) against "
            f"{gym_row['gymnasium']:,.0f} ({gym_size} environments) |"
        )
    return lines


def row_random(args) -> dict:
    """Uniformly random actions on Gymnasium's Pendulum-v1, 1,000 episodes."""
    import gymnasium as gym
    import numpy as np

    env = gym.make("Pendulum-v1")
    env.action_space.seed(0)
    returns = []
    for episode in range(1000):
        env.reset(seed=episode)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total, done = total + reward, terminated or truncated
        returns.append(total)
    return {
        "command": "python bench/report.py --rows random",
        "episodes": len(returns),
        "mean": float(np.mean(returns)),
        "std": float(np.std(returns)),
    }


# pytest's last line, "1229 passed, 173 skipped, 6 warnings in 297.89s (0:04:57)", between
# "=" borders unless -q drops them.
_PYTEST_SUMMARY = re.compile(r"^=*\s*(\d+ \w+.*?) in ([\d.]+)s", re.MULTILINE)


def row_tests(args) -> dict:
    """The README's test command, `python -m pytest -n auto`: the default suite a new user
    runs, its counts and wall-clock (CI's slow stage is not timed here: 20 minutes more)."""
    command = [sys.executable, "-m", "pytest", "-n", "auto", "-q", "-p", "no:cacheprovider"]
    with harness.timer() as clock:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    summary = _PYTEST_SUMMARY.findall(result.stdout)
    if result.returncode or not summary:
        raise RuntimeError(f"python -m pytest -n auto failed:\n{result.stdout[-3000:]}")
    counts, seconds = summary[-1]
    return {
        "command": "python bench/report.py --rows tests (runs python -m pytest -n auto)",
        "counts": counts,  # e.g. "1220 passed, 173 skipped"
        "pytest_seconds": float(seconds),
        "seconds": round(clock.seconds, 1),
    }


def markdown_tests(result: dict) -> list[str]:
    minutes, seconds = divmod(round(result["seconds"]), 60)
    return [
        f"| The default test suite, `python -m pytest -n auto` as the README runs it, on "
        f"{result['machine']['cores']} cores | {result['counts']} in **{minutes} min "
        f"{seconds:02d} s** |"
    ]


def markdown_random(result: dict) -> list[str]:
    return [
        f"| Pendulum-v1 under uniformly random actions ({result['episodes']:,} episodes), "
        f"the bottom of the scale | {result['mean']:,.1f} (standard deviation "
        f"{result['std']:,.1f}) |"
    ]


def row_apex(args) -> dict:
    result = _bench("apex_scaling.py", "--seconds", "20")
    result["command"] = (
        "python bench/report.py --rows apex (runs python bench/apex_scaling.py --seconds 20)"
    )
    return result


def markdown_apex(result: dict) -> list[str]:
    one, most = result["apex"][0], result["apex"][-1]
    linear = most["transitions"] / (most["actors"] * one["transitions"] / one["actors"])
    dqn = result["dqn"]
    return [
        f"| Ape-X on Ray, environments that sleep 2 ms a step (8 per actor), "
        f"{result['shards']} replay shards: transitions into the shards per second at "
        f"{most['actors']} actors against {one['actors']}, and single-process DQN on the "
        f"same environments | {most['transitions']:,.0f} against {one['transitions']:,.0f}: "
        f"**{linear:.2f} of linear**; learner {most['updates']:,.0f} updates/s against "
        f"{one['updates']:,.0f}; single-process DQN {dqn['transitions']:,.0f} transitions/s, "
        f"so Ape-X at {most['actors']} actors collects "
        f"{most['transitions'] / dqn['transitions']:.1f}x as much |"
    ]


def row_minatar(args) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "out.json"
        command = [sys.executable, str(ROOT / "bench" / "minatar_budget.py"), "--output", str(path)]
        subprocess.run(command, check=True, timeout=7200, stdout=sys.stderr)
        result = json.loads(path.read_text())
    result["command"] = (
        "python bench/report.py --rows minatar (runs python bench/minatar_budget.py)"
    )
    return result


def markdown_minatar(result: dict) -> list[str]:
    parts = []
    for preset, runs in result["runs"].items():
        finals = [run["final"] for run in runs]
        name = preset.replace(":", " with ")
        parts.append(
            f"`{name}` {statistics.median(finals):.1f} ({' / '.join(f'{x:.1f}' for x in finals)})"
        )
    seeds = len(next(iter(result["runs"].values())))
    return [
        f"| MinAtar Breakout after {result['seconds']} s of training per run, final "
        f"evaluation (32 greedy episodes), median of {seeds} seeds | {'; '.join(parts)} |"
    ]


def row_twin(args) -> dict:
    prefix = ("taskset", "-c", "0") if shutil.which("taskset") else ()
    arguments = ("--intra-op-threads", "1")
    words = [*prefix, "python", "bench/routing_twin.py", *arguments]
    return {
        "command": f"python bench/report.py --rows twin (runs {' '.join(words)})",
        "results": _bench("routing_twin.py", *arguments, prefix=prefix),
    }


def markdown_twin(result: dict) -> list[str]:
    parts = []
    for topology, policies in result["results"]["batchrl"].items():
        reference = result["results"]["reference"][topology]
        size, best = max(policies["random"].items(), key=lambda item: item[1]["steps_per_s"])
        rate, env = best["steps_per_s"], reference["env"]["steps_per_s"]
        observe = reference["observe"]["steps_per_s"]
        parts.append(
            f"{topology.upper()} ({reference['links']} links) **{rate / env:.0f}x**: "
            f"{rate:,.0f} steps/s (B = {int(size):,}) against {env:,.0f} "
            f"({rate / observe:.0f}x its step with its agent's observation, {observe:,.0f})"
        )
    return [
        "| The routing twin in TensorFlow ops (XLA, random paths, best batch size) vs the "
        "routing paper's own environment's step (DRL-ES-OTN, unchanged, Python 3.6), one "
        f"core each | {'; '.join(parts)} |"
    ]


def markdown_preset_table(result: dict, presets: tuple[str, ...]) -> str:
    """One line per preset: k/n on each group of seeds, median final, when and where."""
    lines = [
        "| preset | threshold | seeds | solved | median final | median seconds | measured |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for row in result["presets"]:
        if row["preset"] not in presets:
            continue
        seeds = f"{row['runs'][0]['seed']} to {row['runs'][-1]['seed']}"
        lines.append(
            f"| `{row['preset']}` | {row['threshold']:g} | {seeds} | "
            f"**{row['solved']}/{len(row['runs'])}** | {row['median_final']:.1f} | "
            f"{row['median_train_seconds']:.0f} | {_date(row)[:10]}, {harness.provenance(row)} |"
        )
    lines += ["", _COMMIT_NOTE]
    for name in presets:  # The curves bench/plots.py draws from rows that kept them.
        if (DOCS / "plots" / f"curves_preset_{name}.png").exists():
            lines += ["", f"![{name}: evaluations over seeds](../plots/curves_preset_{name}.png)"]
    return "\n".join(lines)


_COMMIT_NOTE = (
    "A commit marked + had changes under `batchrl/` or `bench/` that were not committed "
    "when the row ran; which ones is not recorded."
)


def markdown_headline() -> str:
    """The README's handful of rows: the headline presets over seeds 0 to 9, and the
    races against Stable-Baselines3 and Gymnasium in short."""
    presets = _saved_presets()["presets"]
    lines = ["| what | result |", "|---|---|"]
    for name in HEADLINE_PRESETS:
        rows = [row for row in presets if row["preset"] == name]
        if not rows:
            continue
        solved = sum(row["solved"] for row in rows)
        runs = sum(len(row["runs"]) for row in rows)
        seeds = sorted(run["seed"] for row in rows for run in row["runs"])
        lines.append(
            f"| `{name}`: final evaluation at {rows[0]['threshold']:g} or better, seeds "
            f"{seeds[0]} to {seeds[-1]} | **{solved}/{runs}**; median "
            f"{statistics.median(row['median_train_seconds'] for row in rows):.0f} s a run; "
            f"{'; '.join(dict.fromkeys(harness.provenance(row) for row in rows))} |"
        )
    sb3 = RESULTS / "sb3.json"
    if sb3.exists():
        saved = json.loads(sb3.read_text())
        for task, invocations in saved["tasks"].items():
            best = min(invocations, key=lambda inv: _median_seconds(_sb3_runs(inv)))
            sb3_seconds = _median_seconds(_sb3_runs(best))
            sb3_process = _median_seconds(_sb3_runs(best), "process_seconds")
            parts = []
            for method in dict.fromkeys(r["method"] for r in best["results"]):
                if method.startswith("SB3") or "warm" in method:
                    continue
                runs = [r for r in best["results"] if r["method"] == method]
                parts.append(
                    f"`{method.removeprefix('batchrl ').replace(' (cold)', '')}` "
                    f"**{_times(sb3_seconds, _median_seconds(runs))}** training, "
                    f"{_times(sb3_process, _median_seconds(runs, 'process_seconds'))} "
                    "from process start"
                )
            lines.append(
                f"| Wall-clock to {SB3_TASKS[task]} vs Stable-Baselines3's tuned PPO, "
                f"median of {len(_sb3_runs(best))} seeds, an empty XLA cache "
                f"({_when(saved)}) | " + "; ".join(parts) + " |"
            )
    for name in ("envs", "tests"):  # Their rows as the report writes them, with their date.
        path = RESULTS / f"{name}.json"
        if path.exists():
            saved = json.loads(path.read_text())
            rows = ROWS[name][1](saved)  # "| what | result |": the date ends the first cell.
            lines += [row.replace(" | ", f" ({_when(saved)}) | ", 1) for row in rows]
    return "\n".join(lines)


def _when(result: dict) -> str:
    """The date, CPU and code of a saved row, for the cell that quotes it."""
    return f"{_date(result)[:10]}, {result['machine']['cpu']}; {harness.provenance(result)}"


def _date(result: dict) -> str:
    """When a row was measured; rows saved before bench/harness.py kept it in "machine"."""
    return result.get("date") or result["machine"]["date"]


def _commit(result: dict) -> str:
    """The row's commit, " (with uncommitted changes)" appended when the code was dirty."""
    if "commit" not in result:  # Saved before bench/harness.py.
        return result["machine"]["commit"]
    return result["commit"] + (" (with uncommitted changes)" if result["dirty"] else "")


def _sb3_runs(invocation: dict) -> list[dict]:
    return [r for r in invocation["results"] if r["method"].startswith("SB3")]


ROWS = {
    "presets": (row_presets, markdown_presets),
    "sb3": (row_sb3, markdown_sb3),
    "envs": (row_envs, markdown_envs),
    "random": (row_random, markdown_random),
    "tests": (row_tests, markdown_tests),
    "apex": (row_apex, markdown_apex),
    "minatar": (row_minatar, markdown_minatar),
    "twin": (row_twin, markdown_twin),
}
# Rows that `--rows` must name: minutes of quiet cores each (minatar about 40), or a
# reference that only bench/routing_twin.py's setup provides (twin).
LONG_ROWS = ("apex", "minatar", "twin")
# The presets each row trains or loads, saved with it as "presets_used": a change to
# another preset's file leaves the row at HEAD (harness.provenance). The tests row loads
# every preset, and the presets row names its own.
ROW_PRESETS = {
    "sb3": tuple(name for task in SB3_TASKS for name in sb3_race.TASKS[task].configs),
    "envs": (),
    "random": (),
    "apex": ("cartpole_apex_ray", "cartpole_dqn"),  # bench/apex_scaling.py's configs.
    "minatar": ("breakout_minatar_apex_ray", "breakout_minatar_dqn", "breakout_minatar"),
    "twin": (),
}


def save(name: str, result: dict) -> None:
    """Writes bench/results/<name>.json atomically."""
    harness.write_json(RESULTS / f"{name}.json", result)


def markdown(names: list[str]) -> str:
    """The table of every saved row, then when, where and how each row was measured."""
    lines = ["| what | result |", "|---|---|"]
    parts = []
    for name in names:
        path = RESULTS / f"{name}.json"
        if path.exists():
            result = json.loads(path.read_text())
            lines += ROWS[name][1](result)
            parts += [(part.get("preset", name), part) for part in result.get("presets", [result])]
    machines = {_machine_line(part) for _, part in parts}
    notes = [f"- {label}: {_date(part)}, load average {part['load_before']} -> "
             f"{part['load_after']}; `{part['command']}`; {harness.provenance(part)}"
             for label, part in parts]  # fmt: skip
    measured = f"Measured on {'; '.join(sorted(machines))}:"
    return "\n".join(
        [
            *lines,
            "",
            measured,
            "",
            *notes,
            "",
            _COMMIT_NOTE.replace("+", "(with uncommitted changes)"),
        ]
    )


def _machine_line(result: dict) -> str:
    info = result["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in info["versions"].items())
    return f"{info['cpu']} ({info['cores']} cores), commit {_commit(result)}, {versions}"


def write(text: str, path: Path, name: str = "") -> None:
    """Replaces what stands between the report markers in `path`: `<!-- report:begin -->`
    and `<!-- report:end -->`, or with a `name`, `<!-- report:NAME:begin -->` and
    `<!-- report:NAME:end -->`."""
    begin, end_marker = BEGIN, END
    if name:
        begin, end_marker = f"<!-- report:{name}:begin -->", f"<!-- report:{name}:end -->"
    content = path.read_text()
    start, end = content.index(begin) + len(begin), content.index(end_marker)
    new = f"{content[:start]}\n{text}\n{content[end:]}"
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(new)
    os.replace(temporary, path)


def headline_plan() -> list[tuple[str, list[int]]]:
    """What `--headline` runs, in order: (row, seeds); the presets row twice, on seeds 0 to
    4 and 5 to 9, as the rows `markdown_headline` adds up."""
    return [("presets", [0, 1, 2, 3, 4]), ("presets", [5, 6, 7, 8, 9]),
            ("sb3", [0, 1, 2, 3, 4]), ("envs", []), ("random", []), ("tests", [])]  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_rows = [name for name in ROWS if name not in LONG_ROWS]
    parser.add_argument("--rows", nargs="+", default=default_rows, choices=list(ROWS))
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--set", action="append", default=[], help="override for presets")
    parser.add_argument("--write", action="store_true", help="only assemble saved results")
    parser.add_argument(
        "--headline", action="store_true", help="run the rows of README.md's table only"
    )
    args = parser.parse_args(argv)
    if args.write:
        text = markdown(list(ROWS))
        write(text, DOCS / "benchmarks.md")
        write(markdown_headline(), ROOT / "README.md", "headline")
        from plots import write_plots

        try:
            written = write_plots(RESULTS, DOCS / "plots")
        except ImportError as error:  # matplotlib: pip install -e ".[docs]".
            written = []
            print(f"No plots ({error}): pip install -e '.[docs]' brings matplotlib.")
        for path in written:
            print(f"Wrote {path.relative_to(ROOT)}")
        saved = _saved_presets()  # Its tables embed the curves just drawn.
        for page, presets in ALGORITHM_PAGES.items():
            table = markdown_preset_table(saved, presets)
            write(table, DOCS / "algorithms" / f"{page}.md", f"presets:{page}")
        print(text)
        return
    plan = [(name, args.seeds) for name in args.rows]
    if args.headline:
        plan, args.presets = headline_plan(), list(HEADLINE_PRESETS)
    for name, seeds in plan:
        args.seeds = seeds or args.seeds
        run = harness.Run(name)
        result = ROWS[name][0](args)
        if name != "presets":  # Saved preset by preset, each with its machine.
            if name in ROW_PRESETS:
                result["presets_used"] = list(ROW_PRESETS[name])
            result = run.record(result)
            save(name, result)
        print("\n".join(ROWS[name][1](result)), flush=True)


if __name__ == "__main__":
    main()
