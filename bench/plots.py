"""The report's figures: learning curves over seeds and speed ratios against peers.

`write_plots(results, out)` reads the saved results in bench/results/ and writes PNGs to
docs/plots/, which the documentation's pages embed:

- `curves_<task>.png`: evaluation return over environment steps, one line per method,
  for every race whose runs kept their evaluations (`sb3.json`, `cartpole_dqn_sb3.json`,
  `pendulum_sac_sb3.json`), and for every preset row whose runs kept them
  (`presets.json`: runs of `bench/report.py --rows presets` record every evaluation from
  the run's TensorBoard folder). The
  line is the interquartile mean over seeds and the band its 95% percentile-bootstrap
  interval over seeds (rliable's IQM with its stratified bootstrap, which for one task
  resamples the runs; `iqm_band`). A race stops a run at its first evaluation at the
  threshold; its last evaluation is carried forward after that, so a curve says when
  seeds got there, not where they would have ended.
- `ratios.png`: batchrl's speed against each peer it was measured beside, one bar per
  comparison, from the results files named on each bar's label.
- `routing_vb.png`: the routing paper's experiment V-B, PPO's and ES's fixed-set
  evaluations over training seconds, seed by seed (`bench/results/vb/`).

rliable itself is not imported: its release 1.2.0 needs arch < 8, whose import fails
under pandas 3 (arch 7.2's `deprecate_kwarg`); `iqm_band` computes the same statistics.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

RESAMPLES = 2_000
SEED = 0
# Race files -> (task title, threshold).
RACES = {
    "sb3.json": None,  # Holds several tasks: see _race_groups.
    "cartpole_dqn_sb3.json": ("CartPole-v1, DQN against SB3's DQN (zoo)", 475.0),
    "pendulum_sac_sb3.json": ("Pendulum-v1, SAC against SB3's SAC (zoo)", -200.0),
}
OFF_POLICY_RACES = {"cartpole_dqn_sb3.json": "SB3 DQN", "pendulum_sac_sb3.json": "SB3 SAC"}
SB3_TASKS = {
    "pendulum_ppo": ("Pendulum-v1, PPO against SB3's PPO (zoo)", -200.0),
    "cartpole_ppo": ("CartPole-v1, PPO against SB3's PPO (zoo)", 475.0),
}


def iqm(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """The interquartile mean along `axis`: the mean of the sorted x_(k+1) .. x_(n-k),
    k = floor(n / 4), as scipy.stats.trim_mean(x, 0.25) (and rliable) compute it."""
    x = np.sort(x, axis=axis)
    n = x.shape[axis]
    k = n // 4
    return np.take(x, np.arange(k, n - k), axis=axis).mean(axis=axis)


def iqm_band(runs: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED):
    """The IQM over runs at each step and its 95% percentile-bootstrap interval.

    Args:
      runs: [N, T] returns, run by run, on a common grid of T steps.
      resamples: bootstrap samples of N runs drawn with replacement.
      seed: NumPy's generator seed, so that equal results draw equal bands.

    Returns:
      (iqm [T], low [T], high [T]).
    """
    runs = np.asarray(runs, np.float64)
    rng = np.random.default_rng(seed)
    draws = runs[rng.integers(len(runs), size=(resamples, len(runs)))]  # [S, N, T]
    low, high = np.percentile(iqm(draws, axis=1), [2.5, 97.5], axis=0)  # [T] each
    return iqm(runs), low, high


def on_grid(evals: list[list[float]], grid: np.ndarray) -> np.ndarray:
    """A run's evaluations [[step, seconds, return], ...] at each grid step: the latest
    evaluation at or before it, carried forward past the run's end; NaN before the first."""
    steps = np.array([e[0] for e in evals], np.float64)
    values = np.array([e[-1] for e in evals], np.float64)
    index = np.searchsorted(steps, grid, side="right") - 1  # [T]
    return np.where(index >= 0, values[np.maximum(index, 0)], np.nan)


def curve_groups(results: Path) -> dict[str, tuple[str, float, dict[str, list]]]:
    """name -> (title, threshold, {method: [evals of each run]}) for every saved race and
    every preset row whose runs kept their evaluations."""
    groups = {}
    path = results / "sb3.json"
    if path.exists():
        for task, invocations in json.loads(path.read_text())["tasks"].items():
            # The invocation with the faster SB3, as the report's table quotes.
            invocation = min(invocations, key=lambda inv: _sb3_median(inv["results"]))
            groups[task] = (*SB3_TASKS[task], _by_method(invocation["results"]))
    for name, (title, threshold) in ((n, t) for n, t in RACES.items() if t):
        path = results / name
        if path.exists():
            groups[name.removesuffix(".json")] = (
                title,
                threshold,
                _by_method(json.loads(path.read_text())["results"]),
            )
    path = results / "presets.json"
    if path.exists():
        runs, thresholds = {}, {}  # A preset's runs over all its rows (seeds 0 to 4, 5 to 9).
        for row in json.loads(path.read_text())["presets"]:
            if all(run.get("evals") for run in row["runs"]):
                runs.setdefault(row["preset"], []).extend(row["runs"])
                thresholds[row["preset"]] = row["threshold"]
        for preset, preset_runs in runs.items():
            seeds = sorted(run["seed"] for run in preset_runs)
            title = f"{preset}, {len(seeds)} seeds ({seeds[0]} to {seeds[-1]})"
            method = {preset: [run["evals"] for run in preset_runs]}
            groups[f"preset_{preset}"] = (title, thresholds[preset], method)
    return groups


def _by_method(runs: list[dict]) -> dict[str, list]:
    methods = {}
    for run in runs:
        # A warm run learns as its cold one does (the same steps); only its clock differs.
        if run.get("evals") and "(warm)" not in run["method"]:
            methods.setdefault(run["method"].removeprefix("batchrl "), []).append(run["evals"])
    return methods


def _sb3_median(runs: list[dict]) -> float:
    seconds = [r["seconds"] if r["solved"] else math.inf for r in runs if "SB3" in r["method"]]
    return float(np.median(seconds)) if seconds else math.inf


def plot_curves(title: str, threshold: float, methods: dict[str, list], path: Path) -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    last = max(e[0] for runs in methods.values() for run in runs for e in run)
    grid = np.linspace(0, last, 200)
    for method, runs in methods.items():
        values = np.stack([on_grid(run, grid) for run in runs])  # [N, T]
        seen = ~np.isnan(values).any(axis=0)  # Steps every run has reached.
        middle, low, high = iqm_band(values[:, seen])
        label = f"{method} ({len(runs)} seeds)"
        (line,) = axes.plot(grid[seen], middle, label=label)
        axes.fill_between(grid[seen], low, high, color=line.get_color(), alpha=0.2)
    axes.axhline(threshold, color="grey", linestyle=":", linewidth=1)
    axes.set(title=title, xlabel="environment steps", ylabel="evaluation return (IQM, 95% CI)")
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def speed_ratios(results: Path) -> list[tuple[str, str, float]]:
    """(peer, comparison, ratio) for every peer batchrl was measured beside: how many
    times the peer's time (or 1 / its rate) batchrl's is; above 1, batchrl is faster."""
    ratios = []

    def load(name):
        path = results / name
        return json.loads(path.read_text()) if path.exists() else None

    if sb3 := load("sb3.json"):
        for invocations in sb3["tasks"].values():
            invocation = min(invocations, key=lambda inv: _sb3_median(inv["results"]))
            runs = invocation["results"]
            for key, what in (("seconds", "training"), ("process_seconds", "process")):
                peer = _median(runs, "SB3", key)
                for method in sorted({r["method"] for r in runs if "cold" in r["method"]}):
                    mine = _median(runs, method, key)
                    name = method.removeprefix("batchrl ").replace(" (cold)", "")
                    ratios.append(("SB3 PPO", f"{name}, {what} (sb3.json)", peer / mine))
    for name, peer_name in OFF_POLICY_RACES.items():
        if race := load(name):
            runs, peer = race["results"], _median(race["results"], "SB3", "seconds")
            for method in sorted({r["method"] for r in runs if "SB3" not in r["method"]}):
                mine = _median(runs, method, "seconds")
                label = f"{method.removeprefix('batchrl ')}, training ({name})"
                ratios.append((peer_name, label, peer / mine))
    if race := load("purejaxrl_race.json"):
        peer = np.median([r["seconds"] for r in race["runs"]["PureJaxRL"]])
        for method, runs in race["runs"].items():
            if method != "PureJaxRL":
                mine = np.median([r["seconds"] for r in runs])
                which = method.removeprefix("batchrl, ")
                label = f"pendulum_tf, process, {which} (purejaxrl_race.json)"
                ratios.append(("PureJaxRL", label, peer / mine))
    if atari := load("atari_monobeast.json"):
        rows = {(r["run"], r["network"]): r["steps_per_second"] for r in atari["rows"]}
        for network in ("shallow", "deep"):
            if ("MonoBeast", network) in rows and ("batchrl 1x4", network) in rows:
                ratio = rows[("batchrl 1x4", network)] / rows[("MonoBeast", network)]
                label = f"Pong, {network} network, steps/s (atari_monobeast.json)"
                ratios.append(("TorchBeast MonoBeast", label, ratio))
    if envs := load("envs.json"):
        for env_id, sizes in envs["results"].items():
            gym = max(row["gymnasium"] for row in sizes.values())
            mine = max(max(row["graph"], row["xla"]) for row in sizes.values())
            label = f"{env_id} steps/s, best batch vs best (envs.json)"
            ratios.append(("Gymnasium vector env", label, mine / gym))
    if twin := load("twin.json"):
        for topology, policies in twin["results"]["batchrl"].items():
            mine = max(row["steps_per_s"] for row in policies["random"].values())
            peer = twin["results"]["reference"][topology]["env"]["steps_per_s"]
            label = f"routing twin, {topology.upper()} steps/s (twin.json)"
            ratios.append(("routing paper's env", label, mine / peer))
    return ratios


def _median(runs: list[dict], method: str, key: str) -> float:
    """Median of `key` over the runs whose method contains `method`; unsolved: infinite."""
    values = [r[key] if r["solved"] else math.inf for r in runs if method in r["method"]]
    return float(np.median(values))


def plot_ratios(ratios: list[tuple[str, str, float]], path: Path) -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 0.35 * len(ratios) + 1.5))
    peers = list(dict.fromkeys(peer for peer, _, _ in ratios))
    colors = {peer: f"C{i}" for i, peer in enumerate(peers)}
    labels = [f"{peer}: {what}" for peer, what, _ in ratios]
    values = [ratio for _, _, ratio in ratios]
    y = np.arange(len(ratios))[::-1]
    axes.barh(y, values, color=[colors[peer] for peer, _, _ in ratios])
    for row, value in zip(y, values):
        axes.text(value, row, f" {value:.2f}x", va="center", fontsize="small")
    axes.axvline(1.0, color="black", linewidth=1)
    axes.set_xscale("log")
    axes.set_yticks(y, labels, fontsize="small")
    axes.set_xlabel("peer's time / batchrl's (log; above 1: batchrl faster)")
    axes.set_title("batchrl against peers, 2 CPU cores")
    axes.set_xlim(right=max(values) * 3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plot_routing_vb(folder: Path, path: Path) -> None:
    """PPO's and ES's fixed-set evaluations over training seconds, seed by seed."""
    import matplotlib.pyplot as plt

    logs = folder.glob("ppo_*.json")  # ppo_<topology>_s<seed>.json
    topologies = sorted({p.stem.split("_", 1)[1].rsplit("_s", 1)[0] for p in logs})
    figure, panels = plt.subplots(1, len(topologies), figsize=(5 * len(topologies), 3.8))
    for axes, topology in zip(np.atleast_1d(panels), topologies):
        for side, color in (("ppo", "C0"), ("es", "C1")):
            for index, log in enumerate(sorted(folder.glob(f"{side}_{topology}_s*.json"))):
                evals = np.array(json.loads(log.read_text())["evals"])  # [E, 5]
                label = side.upper() if index == 0 else None
                axes.plot(evals[:, 2], evals[:, 3], color=color, alpha=0.7, label=label)
        axes.set(title=f"{topology}: fixed-set evaluation", xlabel="training seconds (one core)")
        axes.set_ylabel("mean return, 300 fixed episodes")
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_plots(results: Path, out: Path) -> list[Path]:
    """Every figure from the saved results; the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (title, threshold, methods) in curve_groups(results).items():
        path = out / f"curves_{name}.png"
        plot_curves(title, threshold, methods, path)
        written.append(path)
    if ratios := speed_ratios(results):
        plot_ratios(ratios, out / "ratios.png")
        written.append(out / "ratios.png")
    if list((results / "vb").glob("ppo_*.json")):
        plot_routing_vb(results / "vb", out / "routing_vb.png")
        written.append(out / "routing_vb.png")
    return written
