"""Steps per second of the routing twin in TensorFlow ops against the paper's own environment.

    python bench/routing_twin.py --json bench/results/routing_twin.json
    python bench/routing_twin.py --seconds 0.05 --repeats 1 --steps-per-call 5   # a check

The reference is the environment of the paper's own code (Güemes-Palau et al. 2022,
"Accelerating Deep Reinforcement Learning for Digital Twin Network Optimization with
Evolutionary Strategies", arXiv 2202.00360; BNN-UPC/DRL-ES-OTN @ 5a7459cf): `Env1` in
gym_environments/gym_environments/envs/environment1.py, which its
train_ES_agent_multipleEnvs.py and train_PPO_agent.py step one episode at a time.

Where it comes from: `--snapshot`, by default /work/.mirror/BNN-UPC+DRL-ES-OTN/repo, the
bare git directory the search tool's fetch of that repository made (a checkout of it
works too). At run time the script extracts the snapshot's gym_environments/ and
dataset_Topologies/ (`git archive HEAD`) into a temporary directory and runs them with
`--reference-python` in a subprocess: nothing of the reference is copied into batchrl,
installed, or imported into this process.

Changes to the reference code: none. Its package is imported unchanged, from the
extracted folder on the subprocess's PYTHONPATH (not installed with its setup.py), and
its environment made as train_ES_agent_multipleEnvs.py makes it: `gym.make('GraphEnv-v1')`,
`seed(9)`, `generate_environment([8, 32, 64], <dataset_Topologies>/, name, 4)`. The
interpreter is the one its Prerequisites/requirements.txt implies (Python 3.6: it pins
dataclasses==0.8) with its pins of what environment1.py imports (pandas is imported but
unused; tensorflow converts two index lists in generate_environment):

    /root/.pyenv/versions/3.6.15/bin/python -m venv /work/otnvenv
    /work/otnvenv/bin/python -m pip install pip==21.3.1   # 18.1 finds no TF 2.4 wheel
    /work/otnvenv/bin/python -m pip install gym==0.18.3 numpy==1.19.5 networkx==2.5.1 \
        pandas==1.1.5 tensorflow==2.4.0

Columns, steps per second (one step: one demand routed):
- `ref env`: one `Env1` in a Python loop, `env.step(action, demand, source,
  destination)` with a uniform random candidate path, `env.reset()` when the episode
  ends. The reference's step checks the path's capacity and draws the next demand; it
  builds no observation.
- `ref observe`: the same plus what the reference's agents do to observe each step, with
  the environment's own method: `env.mark_action_k_path(k, ...)` for every candidate path
  k, reading the capacities and the marks as NumPy arrays, then clearing the marks. Its
  agents then build TF tensors and call the graph network; both are left out.
- `random`, `sap` at B: batchrl's `Routing` of B networks, driven by `simulate` with
  `Heuristic('random')` or `Heuristic('sap')` (shortest available path),
  `--steps-per-call` batched steps per `tf.function(jit_compile=True)` call. A step
  includes the observation [B, L + 3] (the state, as the reference's `step` builds no
  more; until 2026-11-27 it was [B, (K + 1) L + 3] with each candidate path's marks) and
  the resets of ended episodes. SAP reads the candidate paths' links from the topology.

Every measurement runs for `--seconds` after a warm-up (the XLA compile, timed apart), and
is repeated `--repeats` times, interleaved, so that a slow moment of the shared machine
hits every column alike; the table shows medians, the ratio column divides a batchrl
rate by `ref env` of the same topology. The mean episode lengths of both random policies
are printed as a check that both sides route the same problem (one episode ends at the
first demand that does not fit; at large B it counts only episodes that end within a
measurement, which short runs bias toward short ones). The reference's setup (every
simple path up to twice the diameter: tens of seconds) is timed apart and not in any
rate. `--intra-op-threads 1` gives TensorFlow one core, as the reference's loop has.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import harness

SNAPSHOT = "/work/.mirror/BNN-UPC+DRL-ES-OTN/repo"
REFERENCE_PYTHON = "/work/otnvenv/bin/python"
DEMANDS, K, SEED = [8, 32, 64], 4, 9  # The reference's list_of_demands, K and SEED.

# Runs in the reference's interpreter (Python 3.6): sets its environment up, then answers
# each line "<env|observe> <seconds>" on stdin with one JSON line of counts.
WORKER = """
import json, random, sys, time
start = time.perf_counter()
import gym
import gym_environments  # Registers GraphEnv-v1.
folder, name, seed, demands, k = sys.argv[1:]
env = gym.make("GraphEnv-v1")
env.seed(int(seed))
env.generate_environment(json.loads(demands), folder, name, int(k))
import networkx, numpy
print(json.dumps({
    "setup_seconds": time.perf_counter() - start, "nodes": env.numNodes,
    "links": env.numEdges, "python": sys.version.split()[0], "gym": gym.__version__,
    "numpy": numpy.__version__, "networkx": networkx.__version__,
}), flush=True)
rng = random.Random(int(seed))

def run(observe, seconds):
    steps = episodes = lengths = length = 0
    demand, source, destination = env.reset()
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            paths = len(env.allPaths[str(source) + ":" + str(destination)])
            if observe:
                for path in range(paths):
                    env.mark_action_k_path(path, source, destination, demand)
                    capacities = env.edge_state[:, 0] / env.maxCapacity
                    marks = env.bw_allocated_feature.copy()
                    env.edge_state[:, 1] = 0
            action = rng.randrange(paths)
            _, done, demand, source, destination = env.step(action, demand, source, destination)
            steps += 1
            length += 1
            if done:
                episodes += 1
                lengths += length
                length = 0
                demand, source, destination = env.reset()
    seconds = time.perf_counter() - start
    return {"steps": steps, "episodes": episodes, "lengths": lengths, "seconds": seconds}

for line in sys.stdin:
    mode, seconds = line.split()
    print(json.dumps(run(mode == "observe", float(seconds))), flush=True)
"""


def extract_reference(snapshot: str, into: str) -> tuple[Path, str]:
    """The reference's gym_environments/ and dataset_Topologies/ under `into`, and its commit.

    `snapshot` is a bare git directory (git archive of HEAD) or a checkout (copied as is).
    """
    parts = ["gym_environments", "dataset_Topologies"]
    if (Path(snapshot) / "gym_environments").is_dir():
        for part in parts:
            shutil.copytree(Path(snapshot) / part, Path(into) / part)
        git = ["git", "-C", snapshot]
    else:
        git = ["git", f"--git-dir={snapshot}"]
        archive = subprocess.run([*git, "archive", "HEAD", *parts], check=True, capture_output=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(into, filter="data")
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
    return Path(into), commit.stdout.strip() or "unknown"


class Reference:
    """One `Env1` of a topology in a subprocess of the reference's interpreter."""

    def __init__(self, python: str, root: Path, topology: str):
        environ = dict(os.environ, PYTHONPATH=str(root / "gym_environments"))
        environ.update(CUDA_VISIBLE_DEVICES="-1", TF_CPP_MIN_LOG_LEVEL="3")
        folder = f"{root / 'dataset_Topologies'}/"
        arguments = [folder, topology, str(SEED), json.dumps(DEMANDS), str(K)]
        self._process = subprocess.Popen(
            [python, "-c", WORKER, *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environ,
            text=True,
        )
        self.info = self._answer()

    def measure(self, mode: str, seconds: float) -> dict:
        self._process.stdin.write(f"{mode} {seconds}\n")
        self._process.stdin.flush()
        return self._answer()

    def _answer(self) -> dict:
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the reference's worker exited ({self._process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        self._process.stdin.close()
        self._process.wait()


class Twin:
    """batchrl's `Routing` of B networks driven by a heuristic, one XLA call per block."""

    def __init__(
        self, topology: str, batch_size: int, policy: str, steps_per_call: int, table=True
    ):
        """`table=False`: the paths' link masks built from their links each step, not
        looked up in `Routing`'s table (bench/routing_masks.py compares the two)."""
        import tensorflow as tf

        from batchrl.envs.routing import Heuristic, Routing, path_masks
        from batchrl.tools.simulate import simulate

        limit = path_masks.MASK_TABLE_LIMIT
        path_masks.MASK_TABLE_LIMIT = limit if table else 0
        try:
            env = Routing(batch_size, seed=SEED, topology=topology)
            algo = Heuristic(policy, topology, seed=SEED)
        finally:
            path_masks.MASK_TABLE_LIMIT = limit
        assert (env.path_masks.table is not None) == table, "the table is over its limit"
        self._call = tf.function(
            lambda: simulate(env, algo, steps=steps_per_call), jit_compile=True
        )
        start = time.perf_counter()
        self._call()
        self.compile_seconds = time.perf_counter() - start

    def measure(self, seconds: float) -> dict:
        steps = episodes = lengths = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            stats = self._call()
            steps += int(stats["steps"])
            if int(stats["episodes"]):  # Else mean_length is NaN.
                episodes += int(stats["episodes"])
                lengths += float(stats["mean_length"]) * int(stats["episodes"])
        seconds = time.perf_counter() - start
        return {"steps": steps, "episodes": episodes, "lengths": lengths, "seconds": seconds}


def summarize(runs: list[dict]) -> dict:
    """Median steps/s over runs, and the mean length of the episodes that ended in them."""
    lengths, episodes = sum(r["lengths"] for r in runs), sum(r["episodes"] for r in runs)
    return {
        "steps_per_s": statistics.median(r["steps"] / r["seconds"] for r in runs),
        "mean_length": lengths / episodes if episodes else None,
        "episodes": episodes,
        "runs": len(runs),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", default=SNAPSHOT, help="the reference: bare git dir")
    parser.add_argument("--reference-python", default=REFERENCE_PYTHON)
    parser.add_argument("--topologies", nargs="+", default=["nsfnet", "geant2"])
    parser.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 16, 256, 4096])
    parser.add_argument("--policies", nargs="+", default=["random", "sap"])
    parser.add_argument("--steps-per-call", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--intra-op-threads", type=int, default=0, help="0: TF's default")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if not Path(args.reference_python).exists():
        parser.error(f"no {args.reference_python}: make the reference's venv (see the docstring)")
    if not Path(args.snapshot).exists():
        parser.error(f"no snapshot {args.snapshot}: fetch github:BNN-UPC/DRL-ES-OTN")

    import tensorflow as tf

    if args.intra_op_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    run = harness.Run("routing_twin")
    load = [run.header["load_before"]]
    results = {"reference": {}, "batchrl": {}}
    with tempfile.TemporaryDirectory() as directory:
        root, commit = extract_reference(args.snapshot, directory)
        for topology in args.topologies:
            reference = Reference(args.reference_python, root, topology)
            print(f"{topology}: reference set up {reference.info}", file=sys.stderr)
            twins = {}
            for policy in args.policies:
                for size in args.batch_sizes:
                    twins[policy, size] = Twin(topology, size, policy, args.steps_per_call)
                    print(
                        f"{topology} {policy} B={size}: compiled in "
                        f"{twins[policy, size].compile_seconds:.1f} s",
                        file=sys.stderr,
                    )
            runs = {"env": [], "observe": [], **{key: [] for key in twins}}
            for _ in range(args.repeats):
                for mode in ("env", "observe"):
                    runs[mode].append(reference.measure(mode, args.seconds))
                for key, twin in twins.items():
                    runs[key].append(twin.measure(args.seconds))
                load.append(harness.load())
            reference.close()
            results["reference"][topology] = {
                **reference.info,
                "commit": commit,
                **{mode: summarize(runs[mode]) for mode in ("env", "observe")},
            }
            rows = results["batchrl"][topology] = {}
            for (policy, size), twin in twins.items():
                row = summarize(runs[policy, size])
                row["compile_seconds"] = twin.compile_seconds
                row["ratio_to_ref_env"] = (
                    row["steps_per_s"] / results["reference"][topology]["env"]["steps_per_s"]
                )
                rows.setdefault(policy, {})[size] = row
            print(markdown(topology, results), flush=True)
    results["settings"] = {
        key: getattr(args, key)
        for key in ("steps_per_call", "seconds", "repeats", "intra_op_threads", "snapshot")
    }
    results["settings"]["tensorflow"] = tf.__version__
    results["load_average"] = load  # Before the run and after each repeat.
    print(json.dumps(results))
    if args.json:
        run.save(results, args.json)


def markdown(topology: str, results: dict) -> str:
    reference = results["reference"][topology]
    env, observe = reference["env"], reference["observe"]
    lines = [
        f"{topology} ({reference['links']} links): reference setup "
        f"{reference['setup_seconds']:.1f} s; ref env {env['steps_per_s']:,.0f} steps/s "
        f"(mean length {env['mean_length'] or float('nan'):.1f}), ref observe "
        f"{observe['steps_per_s']:,.0f} steps/s",
        "",
        "| policy | B | steps/s | ÷ ref env | ÷ ref observe | mean length | compile s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for policy, rows in results["batchrl"][topology].items():
        for size, row in rows.items():
            lines.append(
                f"| {policy} | {size} | {row['steps_per_s']:,.0f} | "
                f"{row['ratio_to_ref_env']:,.1f} | "
                f"{row['steps_per_s'] / observe['steps_per_s']:,.1f} | "
                f"{row['mean_length'] or float('nan'):.1f} | {row['compile_seconds']:.1f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
