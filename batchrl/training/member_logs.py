"""Summaries and the final table of a population's members, one TensorBoard run each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import tensorflow as tf

from batchrl.parts import summary

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def aggregate(
    returns, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, float]:
    """The mean, interquartile mean and a 95% bootstrap interval of the mean of returns.

    As rliable reports results over runs (Agarwal et al. 2021, "Deep Reinforcement
    Learning at the Edge of the Statistical Precipice", https://arxiv.org/abs/2108.13264):

        iqm = mean of the sorted returns x_(k+1) .. x_(n-k),  k = floor(n / 4)
              (scipy.stats.trim_mean(x, 0.25), which rliable uses)
        ci  = the 2.5th and 97.5th percentiles of the means of `resamples` samples of n
              returns drawn with replacement (the percentile bootstrap)

    Args:
      returns: one number per member, e.g. each member's final evaluation return; NaNs
        (members never evaluated) are left out.
      resamples: bootstrap samples.
      seed: the seed of NumPy's generator that draws them: the interval of equal returns
        is the same in every run.

    Returns:
      `members` (how many returns counted), `mean`, `iqm`, `ci_low` and `ci_high`; NaN
      where no return counted.
    """
    x = np.asarray(returns, np.float64)
    x = np.sort(x[np.isfinite(x)])
    n = len(x)
    if not n:
        return {"members": 0, **dict.fromkeys(("mean", "iqm", "ci_low", "ci_high"), math.nan)}
    k = n // 4
    rng = np.random.default_rng(seed)
    means = x[rng.integers(n, size=(resamples, n))].mean(axis=1)  # [resamples]
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "members": n,
        "mean": float(x.mean()),
        "iqm": float(x[k : n - k].mean()),
        "ci_low": float(low),
        "ci_high": float(high),
    }


def describe_aggregate(result: dict[str, float]) -> str:
    """One line of an `aggregate` of final evaluations, for the end of a run."""
    return (
        f"Final evaluation over {result['members']} members: mean {result['mean']:.1f}, "
        f"IQM {result['iqm']:.1f}, 95% bootstrap interval of the mean "
        f"[{result['ci_low']:.1f}, {result['ci_high']:.1f}]"
    )


class MemberLogs:
    """Writes each member's scalars to `<logdir>/member-<m>/train` and `.../eval`.

    The train loop hands it the statistics of a population's training call, [M] arrays,
    and writes what it returns, the means over members (over those that finished an
    episode, for returns), to the run's own `train/`, as for a single run:

        logs = MemberLogs(logdir, seeds, settings)
        progress(logs.table(returns=False))        # Who is who.
        stats = logs.train(stats, step)            # [M] each -> scalars
        logs.eval(evaluation.run(...), step)       # member_returns [M]
        progress(logs.table())
    """

    def __init__(self, logdir: str | Path, seeds: list[int], settings: list[dict] | None = None):
        """Args:
        logdir: the run's folder.
        seeds: each member's seed.
        settings: each member's own settings, {'ppo.learning_rate': 1e-4, ...}, shown
          in the table and returned by `members`; None: members differ only in seed.
        """
        self.seeds = list(seeds)
        self.settings = [dict(row) for row in settings or [{} for _ in self.seeds]]
        names = [f"member-{m:02d}" for m in range(len(self.seeds))]
        logdir = self._logdir = Path(logdir)
        self._train = [tf.summary.create_file_writer(str(logdir / n / "train")) for n in names]
        self._eval = [tf.summary.create_file_writer(str(logdir / n / "eval")) for n in names]
        self.train_returns = [math.nan] * len(self.seeds)
        self.eval_returns = [math.nan] * len(self.seeds)

    def train(self, stats: dict, step) -> dict:
        """Writes each member's `simulate/*` and algorithm scalars; returns their means."""
        stats = {name: np.asarray(value) for name, value in stats.items()}
        episodes = stats["episodes"]
        for m, writer in enumerate(self._train):
            with writer.as_default(step=step):
                if episodes[m]:
                    self.train_returns[m] = float(stats["mean_return"][m])
                    for name in ("mean_return", "mean_length", "episodes"):
                        summary.scalar(f"simulate/{name}", stats[name][m])
                for name, value in stats.items():  # The algorithm's, e.g. 'ppo/kl'.
                    if "/" in name:
                        summary.scalar(name, value[m])
        finished = episodes > 0
        mean = {
            name: np.mean(stats[name][finished]) if finished.any() else math.nan
            for name in ("mean_return", "mean_length")
        }
        means = {name: np.mean(value) for name, value in stats.items() if "/" in name}
        return dict(means, episodes=int(episodes.sum()), **mean)

    def eval(self, result: dict, step) -> None:
        """Writes each member's `eval/mean_return` from an evaluation's `member_returns`."""
        for m, writer in enumerate(self._eval):
            self.eval_returns[m] = result["member_returns"][m]
            with writer.as_default(step=step):
                summary.scalar("eval/mean_return", self.eval_returns[m])

    def exploit(self, step: int, source, values: dict[str, list[float]]) -> list[dict]:
        """Logs a step of population-based training: who took whose state, new settings.

        Appends a line to `<logdir>/pbt.jsonl` for each member that took another's state,
        {"step", "member", "parent", "seed", settings...}, writes every member's
        `pbt/parent` and settings (`pbt/learning_rate`, ...) to its `train/`, and keeps
        the new settings for the table.

        Returns:
          The lines written.
        """
        records = []
        self.update_settings(values)
        for m, writer in enumerate(self._train):
            parent = int(source[m])
            settings = {key: value[m] for key, value in values.items()}
            with writer.as_default(step=step):
                summary.scalar("pbt/parent", parent)
                for key, value in settings.items():
                    summary.scalar(f"pbt/{key.rpartition('.')[2]}", value)
            if parent != m:
                records.append({"step": step, "member": m, "parent": parent, **settings})
        with open(self._logdir / "pbt.jsonl", "a", encoding="utf-8") as file:
            file.writelines(json.dumps(record) + "\n" for record in records)
        return records

    def update_settings(self, values: dict[str, list[float]]) -> None:
        """Sets each member's settings to `values`, {'ppo.learning_rate': [M], ...}.

        E.g. those population-based training changed, as a resumed run restored them.
        """
        for m, row in enumerate(self.settings):
            row.update({key: value[m] for key, value in values.items()})

    def aggregate(self) -> dict[str, float]:
        """`aggregate` of the members' latest evaluation returns."""
        return aggregate(self.eval_returns)

    def best(self) -> int:
        """The member with the highest latest evaluation (training) return; 0 if none."""
        for returns in (self.eval_returns, self.train_returns):
            values = np.asarray(returns, np.float64)
            if np.isfinite(values).any():
                return int(np.nanargmax(np.where(np.isfinite(values), values, np.nan)))
        return 0

    def flush(self) -> None:
        for writer in self._train + self._eval:
            writer.flush()

    def members(self) -> list[dict]:
        """Each member's seed, own settings, and latest train and evaluation returns."""
        rows = zip(self.seeds, self.settings, self.train_returns, self.eval_returns)
        return [
            {"member": m, "seed": seed, **settings, "train_return": train, "eval_return": ev}
            for m, (seed, settings, train, ev) in enumerate(rows)
        ]

    def table(self, returns: bool = True) -> str:
        """A line for each member: its seed, own settings and (`returns`) latest returns,
        '-' for a return this process has not seen (a finished run run again)."""
        keys = list(self.settings[0]) if self.settings else []
        widths = {key: max(len(key), 10) for key in keys}
        header = f"{'member':>6}  {'seed':>10}"
        header += "".join(f"  {key:>{widths[key]}}" for key in keys)
        if returns:
            header += f"  {'train return':>12}  {'eval return':>11}"
        lines = [header]
        for row in self.members():
            line = f"{row['member']:>6}  {row['seed']:>10}"
            line += "".join(f"  {row[key]:>{widths[key]}.4g}" for key in keys)
            if returns:
                line += f"  {_seen(row['train_return']):>12}  {_seen(row['eval_return']):>11}"
            lines.append(line)
        return "\n".join(lines)


def _seen(value: float) -> str:
    """A return to one decimal, or '-' if there is none (NaN)."""
    return f"{value:.1f}" if math.isfinite(value) else "-"
