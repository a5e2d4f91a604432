"""Where a train script's seconds go: imports, set-up, first call, training, evaluations,
checkpoints, the final evaluation and the export.

    python bench/train_phases.py                          # pendulum_tf, cold and warm
    python bench/train_phases.py --config pendulum --set ppo.gsde=true --runs 3

Each run is a fresh process that does what `python -m batchrl.scripts.train` does, with
timers around the pieces of `batchrl.runners.train` (`Evaluation.run`, `Checkpoints.save`,
`export_policy`, the trainer's calls). The first run of a config starts with an empty XLA
cache (cold) and the later ones with the cache it filled (warm), as a user's first and
later runs on a machine. Evaluations are the in-training ones (`train.eval_every`) and
the final one, which for `env.eval_on_gymnasium` plays Gymnasium's environment.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from child import run_json

CHILD = r"""
import json, sys, time
started = float(sys.argv[1])
from batchrl.quiet import describe_devices, import_tensorflow
tf = import_tensorflow(init_devices=False)
from batchrl.config import load_run_config
import importlib
from batchrl.runners import local
train_module = importlib.import_module("batchrl.runners.train")  # The module, not train().
from batchrl.training import checkpoints, evaluation, train_loop
imported = time.time() - started
seconds = {}
counts = {}
each = {}

def timed(owner, name, label):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            took = time.perf_counter() - start
            seconds[label] = seconds.get(label, 0.0) + took
            counts[label] = counts.get(label, 0) + 1
            each.setdefault(label, []).append(round(took, 3))
    setattr(owner, name, wrapper)

timed(evaluation.Evaluation, "run", "evaluations")
timed(checkpoints.Checkpoints, "save", "checkpoints")
timed(train_loop, "export_policy", "export")
timed(local.LocalTrainer, "step", "training calls")
config = load_run_config(sys.argv[2], json.loads(sys.argv[4]))
train_module.use_xla_cache(config.train.xla_cache)  # As the train script, before devices.
describe_devices()
first = {}
def progress(text, final=False):
    if text.startswith("First training call") and not first:
        first["at"] = time.time() - started
start = time.perf_counter()
train_module.train(config, sys.argv[3], progress=progress)
total = time.time() - started
print(json.dumps({"imports": imported, "total": total, "first_call_done": first.get("at"),
                  "seconds": seconds, "counts": counts, "each": each}))
"""


def run(config: str, overrides: list[str], cache: str) -> dict:
    with tempfile.TemporaryDirectory() as logdir:
        overrides = [*overrides, f"train.xla_cache={cache}"]
        args = [repr(time.time()), config, logdir, json.dumps(overrides)]
        return run_json(CHILD, args, f"{config} {overrides}", timeout=1800)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="pendulum_tf")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--runs", type=int, default=2, help="the first cold, the rest warm")
    args = parser.parse_args(argv)
    print(
        "| run | total s | imports s | to the end of the first call s | training calls s "
        "(calls) | evaluations s (count) | checkpoints s (count) | export s | rest s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as cache:
        for index in range(args.runs):
            r = run(args.config, args.overrides, cache)
            print(f"evaluations one by one (s): {r['each'].get('evaluations')}", file=sys.stderr)
            s, c = r["seconds"], r["counts"]
            parts = ("training calls", "evaluations", "checkpoints", "export")
            rest = r["total"] - r["imports"] - sum(s.get(name, 0.0) for name in parts)
            print(
                f"| {'cold' if index == 0 else 'warm'} | {r['total']:.1f} | {r['imports']:.1f} "
                f"| {r['first_call_done']:.1f} | {s.get('training calls', 0):.1f} "
                f"({c.get('training calls', 0)}) | {s.get('evaluations', 0):.1f} "
                f"({c.get('evaluations', 0)}) | {s.get('checkpoints', 0):.1f} "
                f"({c.get('checkpoints', 0)}) | {s.get('export', 0):.1f} | {rest:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
