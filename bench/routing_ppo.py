"""PPO on a routing preset: training time to each level of the fixed 300-episode evaluation.

Trains `nsfnet_ppo` or `geant2_ppo` (any overrides) with the local runner, one
`train.steps_per_call` call at a time, and every `--eval-every` calls evaluates the actor
(argmax over the K candidate paths) on the fixed set of episodes of `routing_es.py` (the
first episode of each of `--eval-episodes` networks of a `Routing` batch with seed
`--eval-seed`), so PPO's numbers and ES's compare one to one. The training time counts the
training calls only (rollouts and updates); evaluations are timed apart.

    python bench/routing_ppo.py --config nsfnet_ppo --seed 0 --minutes 20

With `--checkpoints DIR` every evaluation saves the step, PPO (networks, Adam) and the
environments in TensorFlow ops, and the same command with a larger `--minutes` continues
the run from the last one, its log and training time included, as `routing_es.py` does.
A run past a session's end is made of such pieces (experiment V-B runs PPO for hours).
"""

from __future__ import annotations

import argparse

import harness
import tensorflow as tf
from routing_es import (
    LevelLog,
    add_arguments,
    parse_with_checkpoints,
    saved_states,
    topology_detail,
)
from routing_heuristics import MAX_STEPS, finished_returns, topology_name
from routing_heuristics import evaluate as heuristic_returns

from batchrl.algorithms.ppo import PPO
from batchrl.config.run_config import load_run_config
from batchrl.envs.routing import Routing
from batchrl.runners.local import LocalTrainer
from batchrl.tools.episodes import EpisodeRecorder, first_episodes
from batchrl.training.policy_evaluator import PolicyEvaluator


def fixed_set_evaluator(policy, topology, episodes: int, seed: int):
    """A function () -> returns [episodes] of `policy`'s deterministic actions (XLA); it
    raises if an episode outlasts `MAX_STEPS`."""
    env = Routing(episodes, seed=seed, topology=topology)
    recorder = EpisodeRecorder(PolicyEvaluator(policy, episodes), episodes)
    run = tf.function(lambda: first_episodes(env, recorder, MAX_STEPS), jit_compile=True)

    def evaluate():
        env.restart_streams()  # The same demand streams every time.
        run()
        return finished_returns(recorder, f"PPO on {topology_name(topology)}")

    return evaluate


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10**6, help="at most this many calls")
    add_arguments(parser, "nsfnet_ppo", eval_every=20)
    args = parse_with_checkpoints(parser)
    config = load_run_config(args.config, [f"train.seed={args.seed}", *args.overrides])
    tf.keras.utils.set_random_seed(args.seed)
    batch_env = LocalTrainer.make_batch_env(config, args.seed)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    algo = PPO(batch_env, config, step, seed=args.seed)
    trainer = LocalTrainer(config, algo, batch_env, args.seed)
    topology = batch_env.topology
    evaluate = fixed_set_evaluator(algo, topology, args.eval_episodes, args.eval_seed)
    sap = heuristic_returns(topology, "sap", args.eval_episodes, args.eval_seed)
    detail = topology_detail(batch_env)
    log = LevelLog(args.config, args.seed, sap, args.out, detail)
    print(
        f"{args.config} seed {args.seed}: {len(batch_env)} environments, "
        f"{config.train.steps_per_call} steps per call; SAP on the fixed "
        f"{args.eval_episodes} episodes {log.sap_text}; load {harness.load()}",
        flush=True,
    )
    if detail is not None:
        print(f"  SAP: {detail(sap)}", flush=True)

    def train():
        count, _ = trainer.step()
        step.assign_add(count)  # For a learning-rate schedule, as the train loop counts.
        return count

    state = tf.train.Checkpoint(step=step, algo=algo, env=batch_env)
    log.run(
        evaluate,
        train,
        args.calls,
        args.eval_every,
        args.minutes,
        "call",
        *saved_states(state, args.checkpoints),
    )


if __name__ == "__main__":
    main()
