"""ES on a routing preset: training time to each level of a fixed 300-episode evaluation.

Trains `nsfnet_es` or `geant2_es` (any overrides) generation by generation and every
`--eval-every` generations evaluates theta on a fixed set of episodes: the first episode
of each of `--eval-episodes` networks of a `Routing` batch with seed `--eval-seed`, the
same demand streams at every evaluation (a network's demands do not depend on the
actions). The training time counts generations only (ask, evaluate the population, tell),
as the reference's TrTime does; evaluations are timed apart. SAP is scored on the same set.

    python bench/routing_es.py --config nsfnet_es --seed 0 --minutes 20

With `--checkpoints DIR` every evaluation saves theta, Adam and the generation (the last
three evaluations' in DIR, the best one's in DIR/best for `bench/routing_heldout.py`), and
the same command with a larger `--minutes` continues the run from its last checkpoint, bit for
bit (the noise and the demands derive from the seed and the generation), its log and
training time included; the first generation after a resume compiles again.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import harness
import numpy as np
import tensorflow as tf
from routing_heuristics import MAX_STEPS, finished_returns, topology_name
from routing_heuristics import evaluate as heuristic_returns

from batchrl.algorithms.es import ES
from batchrl.algorithms.es.generation import PopulationEvaluator, PopulationPolicy
from batchrl.config.run_config import load_run_config
from batchrl.envs.routing import Routing
from batchrl.training.checkpoints import Checkpoints

LEVELS = (20.0, 22.2, 25.0, 26.6, 27.0, 28.0)


def mean_text(returns: np.ndarray) -> str:
    """'mean +- standard error' of episode returns, to two decimals."""
    return f"{returns.mean():.2f} +- {returns.std(ddof=1) / np.sqrt(len(returns)):.2f}"


class LevelLog:
    """The fixed-set evaluations of a run, the training time to each of `LEVELS`, and a
    JSON copy of both (rewritten after every evaluation, so a stopped run keeps its log).
    `detail(returns)`, if given, is a line printed under each evaluation's own."""

    def __init__(self, config: str, seed: int, sap: np.ndarray, out: str = "", detail=None):
        self.out = out
        self.detail = detail
        self.sap_text = mean_text(sap)
        self.data = {"config": config, "seed": seed, "sap": float(sap.mean()), "evals": []}
        self.reached = {}
        self.eval_time = 0.0

    def evaluate(self, evaluate, index: int, steps: int, train_time: float, unit: str):
        """Scores the policy with `evaluate()` -> returns [episodes]; logs and prints it."""
        start = time.perf_counter()
        returns = evaluate()
        self.eval_time += time.perf_counter() - start
        mean = float(returns.mean())
        error = float(returns.std(ddof=1) / np.sqrt(len(returns)))
        for level in LEVELS:
            if mean >= level and level not in self.reached:
                self.reached[level] = train_time
        self.data["evals"].append([index, steps, train_time, mean, error])
        print(
            f"{unit} {index:4d} steps {steps:9d} train {train_time:7.1f}s "
            f"eval {mean:6.2f} +- {error:4.2f} (eval time {self.eval_time:5.1f}s) "
            f"load {harness.load()}",
            flush=True,
        )
        if self.detail is not None:
            print(f"  {self.detail(returns)}", flush=True)
        if self.out:
            self.data["reached"] = {str(k): v for k, v in self.reached.items()}
            self.data["eval_time"] = self.eval_time
            with open(self.out + ".tmp", "w") as file:
                json.dump(self.data, file)
            os.replace(self.out + ".tmp", self.out)  # A kill never leaves half a log.

    def resume(self, index: int) -> tuple[int, float]:
        """Reloads the log of `out` that a checkpointed run wrote, up to the evaluation at
        `index` (its checkpoint's); returns that evaluation's (steps, training seconds)."""
        with open(self.out) as file:
            data = json.load(file)
        if (data["config"], data["seed"]) != (self.data["config"], self.data["seed"]):
            raise SystemExit(
                f"{self.out} is the log of {data['config']} seed {data['seed']}, "
                f"not of {self.data['config']} seed {self.data['seed']}."
            )
        self.data["evals"] = [row for row in data["evals"] if row[0] <= index]
        if not self.data["evals"] or self.data["evals"][-1][0] != index:
            raise SystemExit(f"{self.out} has no evaluation at {index}, the checkpoint's.")
        _, steps, train_time = self.data["evals"][-1][:3]
        self.reached = {k: v for k, v in data.get("reached", {}).items() if v <= train_time}
        self.reached = {float(k): v for k, v in self.reached.items()}
        self.eval_time = data.get("eval_time", 0.0)
        return steps, train_time

    def run(self, evaluate, train, limit, eval_every, minutes, unit, checkpoints=None, best=None):
        """Alternates `train()` -> environment steps with an evaluation every `eval_every`
        units and after the last, for `limit` units or `minutes` of training time.

        With `checkpoints` (a `Checkpoints` of the training state), every evaluation also
        saves a checkpoint, and a run that finds one continues from it, its training time
        and log included (the log must be `out`). With `best` (another `Checkpoints`), an
        evaluation above all earlier ones of the log also saves a checkpoint there, which
        the last few in `checkpoints` may no longer hold.
        """
        start_index, steps, train_time = 0, 0, 0.0
        prefix = checkpoints.restore(print) if checkpoints is not None else None
        resumed = prefix is not None
        if resumed:
            start_index = int(prefix.rpartition("-")[2])
            steps, train_time = self.resume(start_index)
            print(f"resumed at {unit} {start_index} after {train_time:.1f}s", flush=True)
        for index in range(start_index, limit + 1):
            done = index == limit or train_time > 60 * minutes
            due = (index % eval_every == 0 or done) and not (resumed and index == start_index)
            if due:
                self.evaluate(evaluate, index, steps, train_time, unit)
                if checkpoints is not None:
                    checkpoints.save(index)
                if best is not None:
                    means = [row[3] for row in self.data["evals"]]
                    if means[-1] > max(means[:-1], default=-np.inf):
                        best.save(index)
            if done:
                break
            start = time.perf_counter()
            steps += train()
            train_time += time.perf_counter() - start
        print("training seconds to reach each fixed-set mean:", self.reached)
        best = max(self.data["evals"], key=lambda row: row[3])
        last = self.data["evals"][-1][3]
        print(f"best {best[3]:.2f} at {unit} {best[0]}; final {last:.2f}", flush=True)


def add_arguments(parser: argparse.ArgumentParser, config: str, eval_every: int) -> None:
    """The arguments routing_es.py and routing_ppo.py share."""
    parser.add_argument("--config", default=config)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--minutes",
        type=float,
        default=20.0,
        help="training-time budget (a resumed run counts its time before)",
    )
    parser.add_argument("--eval-every", type=int, default=eval_every)
    parser.add_argument("--eval-episodes", type=int, default=300)
    parser.add_argument("--eval-seed", type=int, default=12345)
    parser.add_argument("--out", default="", help="JSON file of the log")
    parser.add_argument("overrides", nargs="*", help="config overrides key=value")


def parse_with_checkpoints(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Adds --checkpoints to `parser` and parses, refusing --checkpoints without --out."""
    parser.add_argument(
        "--checkpoints",
        default="",
        help="folder for a checkpoint at every evaluation; a run that finds one there "
        "continues from it (needs --out, the log it continues)",
    )
    args = parser.parse_args()
    if args.checkpoints and not args.out:
        parser.error("--checkpoints needs --out, the log a resumed run continues")
    return args


def fixed_set_evaluator(
    network, topology, episodes: int, seed: int, member_chunk: int, jit_compile=True
):
    """A function theta [D] -> returns [episodes] of `network` (a population network)
    on a fixed set of episodes (XLA with `jit_compile`, the config's `train.jit_compile`
    in these scripts); it raises if an episode outlasts `MAX_STEPS`.

    Each episode is played by its own copy of theta, so that the network runs only for
    the episodes still running (`member_chunk`).
    """
    env = Routing(episodes, seed=seed, topology=topology)
    policy = PopulationPolicy(network, env.action_space, episodes, 1, member_chunk=member_chunk)
    evaluator = PopulationEvaluator(env, policy, max_steps=MAX_STEPS, jit_compile=jit_compile)

    def evaluate(theta):
        env.restart_streams()  # The same demand streams every time.
        _, stats = evaluator(tf.tile(theta[None], [episodes, 1]))
        returns = finished_returns(evaluator.recorder, f"the router on {topology_name(topology)}")
        assert np.isclose(returns.mean(), float(stats["mean_return"]), atol=1e-4)
        return returns

    return evaluate


def per_topology_text(returns: np.ndarray, topology) -> str:
    """The mean of each topology's episodes of a mixed fixed set: network i routes on
    topology i mod T (the streams are the networks' indices)."""
    count = len(topology.topologies)
    return ", ".join(
        f"{t.name} {mean_text(returns[i::count])}" for i, t in enumerate(topology.topologies)
    )


def topology_detail(batch_env):
    """For a mixed batch, the function returns -> per_topology_text (LevelLog's `detail`);
    None for one topology."""
    if not batch_env.mixed:
        return None
    return lambda returns: per_topology_text(returns, batch_env.topology)


def build_es(config_name: str, overrides: list[str], seed: int):
    """The config, ES and its trainer, built as the train script builds them for `seed`."""
    config = load_run_config(config_name, overrides)
    tf.keras.utils.set_random_seed(seed)
    batch_env = ES.make_batch_env(config, seed)
    algo = ES(batch_env, config, seed=seed)
    return config, algo, ES.make_trainer(config, algo, batch_env, seed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=10**6)
    add_arguments(parser, "nsfnet_es", eval_every=5)
    args = parse_with_checkpoints(parser)
    config = load_run_config(args.config, [f"train.seed={args.seed}", *args.overrides])
    tf.keras.utils.set_random_seed(args.seed)
    batch_env = ES.make_batch_env(config, args.seed)
    algo = ES(batch_env, config, seed=args.seed)
    trainer = ES.make_trainer(config, algo, batch_env, args.seed)
    topology = batch_env.topology
    jit = config.train.jit_compile
    evaluate = fixed_set_evaluator(
        algo.network, topology, args.eval_episodes, args.eval_seed, config.es.member_chunk, jit
    )
    sap = heuristic_returns(topology, "sap", args.eval_episodes, args.eval_seed, jit)
    detail = topology_detail(batch_env)
    log = LevelLog(args.config, args.seed, sap, args.out, detail)
    print(
        f"{args.config} seed {args.seed}: {algo.network.num_params} parameters, "
        f"{2 * config.es.population} members; SAP on the fixed {args.eval_episodes} "
        f"episodes {log.sap_text}; load {harness.load()}",
        flush=True,
    )
    if detail is not None:
        print(f"  SAP: {detail(sap)}", flush=True)

    log.run(
        lambda: evaluate(algo.strategy.theta),
        lambda: trainer.step()[0],
        args.generations,
        args.eval_every,
        args.minutes,
        "generation",
        *saved_states(tf.train.Checkpoint(algo=algo), args.checkpoints),
    )


def saved_states(checkpoint: tf.train.Checkpoint, folder: str):
    """The `checkpoints` and `best` of `LevelLog.run` for --checkpoints `folder` ('': none):
    the last three evaluations' states in `folder`, and the best one's in `folder`/best."""
    if not folder:
        return None, None
    return Checkpoints(checkpoint, folder), Checkpoints(checkpoint, Path(folder) / "best", 1)


if __name__ == "__main__":
    main()
