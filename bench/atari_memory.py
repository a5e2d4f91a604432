"""Resident memory of a Pong run with 8 actors: the learner's process and its game workers.

    python bench/atari_memory.py --seconds 90 --json atari_memory.json

Starts the train script as a user would (`--config=pong_impala`, the threads runner,
`threads.num_actors` 8 actor threads of one game each, learner batches of 8 unrolls of
80 steps, as MonoBeast's 8 actors), once per `--engines` value and `--torsos` value, and
samples every 0.5 s the resident set (RSS) of the train script's process and of each of
its descendants (the game worker processes with `env.engine=gymnasium`; none with
envpool, whose games run in threads of the learner's process). After `--seconds` it
stops the run with Ctrl-C (SIGINT, which the train script handles: it checkpoints and
stops its workers) and waits for it to exit. Prints the peak of the learner's process,
of the workers together, and of the whole tree; and the bytes one unroll's observations
take as uint8, the way they stay from the emulator to the network, against float32.

RSS counts shared pages (TensorFlow's libraries, copy-on-write pages) once per process,
so the tree's sum overstates what the processes use together.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time

import harness
import psutil

ACTORS = 8
UNROLL = 80
OBSERV_BYTES = 84 * 84 * 4  # One observation: 4 stacked 84 x 84 grayscale frames, uint8.


def sample_tree(root: psutil.Process) -> tuple[int, int, int]:
    """RSS in bytes of `root`, of its descendants together, and how many of them."""
    try:
        main = root.memory_info().rss
        children = root.children(recursive=True)
    except psutil.NoSuchProcess:
        return 0, 0, 0
    total = 0
    for child in children:
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return main, total, len(children)


def measure(torso: str, engine: str, seconds: float, logdir: str) -> dict:
    command = [
        sys.executable,
        "-m",
        "batchrl.scripts.train",
        "--config=pong_impala",
        f"--logdir={logdir}",
        "--set",
        f"network.torso={torso}",
        "--set",
        f"env.engine={engine}",
        "--set",
        f"threads.num_actors={ACTORS}",
        "--set",
        "env.num_envs=1",
        "--set",
        f"threads.learner_batch={ACTORS}",
        "--set",
        f"impala.unroll_length={UNROLL}",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root = psutil.Process(process.pid)
    peak_main = peak_workers = peak_total = workers_seen = 0
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds and process.poll() is None:
            main, workers, count = sample_tree(root)
            peak_main, peak_workers = max(peak_main, main), max(peak_workers, workers)
            peak_total = max(peak_total, main + workers)
            workers_seen = max(workers_seen, count)
            time.sleep(0.5)
        if process.poll() is not None:
            error = process.stderr.read().decode()[-2000:]
            raise RuntimeError(f"the run ended early ({process.returncode}):\n{error}")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return {
        "torso": torso,
        "engine": engine,
        "learner_process_mb": peak_main / 2**20,
        "workers_mb": peak_workers / 2**20,
        "workers": workers_seen,
        "tree_mb": peak_total / 2**20,
        "exit_code": process.returncode,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--torsos", nargs="+", default=["shallow", "deep"])
    parser.add_argument("--engines", nargs="+", default=["gymnasium", "envpool"])
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    run = harness.Run("atari_memory")
    print(run.header, flush=True)
    unroll = UNROLL * OBSERV_BYTES
    print(
        f"one unroll's observations [{UNROLL}, 84, 84, 4]: {unroll / 2**20:.2f} MB as uint8, "
        f"{4 * unroll / 2**20:.2f} MB as float32",
        flush=True,
    )
    rows = []
    for torso in args.torsos:
        for engine in args.engines:
            with tempfile.TemporaryDirectory() as logdir:
                row = measure(torso, engine, args.seconds, logdir)
            rows.append(row)
            print(
                f"{torso} {engine}: learner process {row['learner_process_mb']:.0f} MB, "
                f"{row['workers']} workers {row['workers_mb']:.0f} MB, tree "
                f"{row['tree_mb']:.0f} MB (exit code {row['exit_code']})",
                flush=True,
            )
    if args.json:
        run.save({"unroll_bytes_uint8": unroll, "rows": rows}, args.json)


if __name__ == "__main__":
    main()
