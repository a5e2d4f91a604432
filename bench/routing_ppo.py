"""PPO on a routing preset: training time to each level of the fixed 300-episode evaluation.

Trains `nsfnet_ppo` or `geant2_ppo` (any overrides) with the local runner, one
`train.steps_per_call` call at a time, and every `--eval-every` calls evaluates the actor
(argmax over the K candidate paths) on the fixed set of episodes of `routing_es.py` (the
first episode of each of `--eval-episodes` networks of a `Routing` batch with seed
`--eval-seed`), so PPO's numbers and ES's compare one to one. The training time counts the
training calls only (rollouts and updates); evaluations are timed apart.

    python bench/routing_ppo.py --config nsfnet_ppo --seed 0 --minutes 20
"""

from __future__ import annotations

import argparse
import os
import time

import tensorflow as tf
from routing_es import LevelLog, sap_returns

from batchrl.algorithms.ppo import PPO
from batchrl.envs.routing import Routing
from batchrl.runners.local import LocalTrainer
from batchrl.tools.evaluation import EpisodeRecorder, first_episodes
from batchrl.tools.policy_evaluator import PolicyEvaluator
from batchrl.tools.run_config import load_run_config


def fixed_set_evaluator(policy, topology, episodes: int, seed: int):
    """A function () -> returns [episodes] of `policy`'s deterministic actions (XLA)."""
    env = Routing(episodes, seed=seed, topology=topology)
    recorder = EpisodeRecorder(PolicyEvaluator(policy, episodes), episodes)
    run = tf.function(lambda: first_episodes(env, recorder, 10_000), jit_compile=True)

    def evaluate():
        env.restart_streams()  # The same demand streams every time.
        return run()[0].numpy()

    return evaluate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="nsfnet_ppo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=20.0, help="training-time budget")
    parser.add_argument("--calls", type=int, default=10**6, help="at most this many calls")
    parser.add_argument("--eval-every", type=int, default=20, help="calls between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=300)
    parser.add_argument("--eval-seed", type=int, default=12345)
    parser.add_argument("--out", default="", help="JSON file of the log")
    parser.add_argument("overrides", nargs="*", help="config overrides key=value")
    args = parser.parse_args()
    config = load_run_config(args.config, [f"train.seed={args.seed}", *args.overrides])
    tf.keras.utils.set_random_seed(args.seed)
    batch_env = LocalTrainer.make_batch_env(config, args.seed)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    algo = PPO(batch_env, config, step, seed=args.seed)
    trainer = LocalTrainer(config, algo, batch_env, args.seed)
    topology = batch_env.topology
    evaluate = fixed_set_evaluator(algo, topology, args.eval_episodes, args.eval_seed)
    sap = sap_returns(topology, args.eval_episodes, args.eval_seed)
    log = LevelLog(args.config, args.seed, sap, args.out)
    print(
        f"{args.config} seed {args.seed}: {len(batch_env)} environments, "
        f"{config.train.steps_per_call} steps per call; SAP on the fixed "
        f"{args.eval_episodes} episodes {log.sap_text}; load {os.getloadavg()}",
        flush=True,
    )
    train_time = 0.0
    steps = 0
    for call in range(args.calls + 1):
        done = call == args.calls or train_time > 60 * args.minutes
        if call % args.eval_every == 0 or done:  # And after the last one.
            log.evaluate(evaluate, call, steps, train_time, "call")
        if done:
            break
        start = time.perf_counter()
        count, _ = trainer.step()
        train_time += time.perf_counter() - start
        steps += count
        step.assign_add(count)
    log.finish("call")


if __name__ == "__main__":
    main()
