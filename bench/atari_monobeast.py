"""Pong frames per second: batchrl's threads runner against TorchBeast's MonoBeast and ALE.

    python -m bench.atari_monobeast --json bench/results/atari_monobeast.json  # 60 s each
    python -m bench.atari_monobeast --seconds 5 --warmup 1 --torsos shallow   # a check
    python -m bench.atari_monobeast --engines gymnasium                # without EnvPool
    python -m bench.atari_monobeast --rows ray --seconds 5 --warmup-updates 1 --torsos shallow

Run from the repository root (`bench` is found as a namespace package). One invocation
measures, one after another on the same cores, PongNoFrameskip-v4 with TorchBeast's
preprocessing, `--envs` games (default 4), unrolls of 80 steps and learner batches of 8
unrolls (MonoBeast's defaults; the same as `atari_impala`'s 2 x 4):

- `ALE ceiling`: the games alone, each in its own worker process (spawned), uniformly
  random actions, no network and no learner, all started together and run for
  `--seconds`: the most frames per second these cores give with this preprocessing.
- `EnvPool ceiling` (with `--engines` envpool): the same, but the `--envs` games in one
  EnvPool (`EnvPoolBatchEnv`, as `env.engine: envpool` trains: the same preprocessing
  in C++, episodic life, EnvPool's threads min(games, cores)) stepped all at once in
  this process, ended episodes reset before the next step, for `--seconds`.
- `MonoBeast`: TorchBeast's monobeast.py `train`, in a subprocess (its own process
  group, killed at the end): `--num_actors` = `--envs` actor processes of one game each
  (MonoBeast's actor is one game), `--batch_size 8 --unroll_length 80`, its default 2
  learner threads and 8 buffers, no LSTM, no CUDA, no checkpoints. Its rate comes from
  its own log, logs.csv, which has one row per learner update with its time and its step
  counter (T x B = 640 steps per update): from the first update `--warmup` seconds after
  its first update to the first update `--seconds` later.
- `batchrl AxE`: `atari_impala` with the threads runner as `bench/atari_inference.py`
  runs it (its `rate`, per-actor inference): A = `--envs / --envs-per-actor` actor
  threads, each stepping E = `--envs-per-actor` games in worker processes
  (`env.processes`, one game each) with its own policy copy, and learner batches of
  `8 / E` actor unrolls of [80, E], so 8 unrolls of 80 steps, as MonoBeast's. A row per
  value of `--envs-per-actor` (default 4: one actor thread of 4 games, atari_impala's
  layout). `--warmup-updates` learner updates (tracing, the queue's first fill), then
  updates for `--seconds`; steps counted as MonoBeast counts them (steps in the
  learner's batches). A row per `--engines` value too: gymnasium as described,
  envpool with `env.engine=envpool` (each actor's games in an EnvPool of its own
  instead of worker processes).
- `batchrl ray AxE` (only with `--rows ray`): the same layout (Gymnasium's games in
  worker processes) with the Ray runner (`runner.name=ray`, Ray started on this machine
  for the row and shut down after it) and dynamic batching (`ray.inference=dynamic`): A
  Ray actors of E games each only step their games; the learner's process acts for
  whichever actors wait, in one forward pass (`--ray-batch` actors at most, 0: all;
  `--ray-timeout` seconds), and learns from batches of `8 / E` actor unrolls. It also
  prints the mean actors per forward pass. Each actor reserves `--ray-cpus` Ray CPUs.

- `compute ceiling AxE` (only with `--rows compute`): batchrl's computation without
  the games. The threads runner makes 8 real Pong unrolls of 80 steps and stops; then,
  each for `--seconds` with the cores to itself, the learner's update on that batch, and
  the behaviour policy's forward pass on E games' observations (per-actor inference).
  Learner and inference share the cores in any training loop, so the row is their
  harmonic sum, 1 / (1 / learner + 1 / inference) steps per second (both printed): the
  most a loop of this network, update and batching reaches on these cores, with games
  that cost nothing.

Networks (`--torsos`): shallow, the Nature ConvNet (MonoBeast's `AtariNet`: 3
convolutions, dense 512, linear policy and baseline; batchrl's `NatureConvNet`), and
deep, IMPALA's ResNet (16, 32, 32 channels, dense 256; batchrl's `ImpalaResNet`, and
PolyBeast's `Net` run inside MonoBeast: changes 4 and 5 below). TorchBeast's heads also
read the clipped reward (and, shallow, the one-hot last action); batchrl's do not: 7 or 1
inputs more on a 512- or 256-wide layer. Both share one torso between the policy and
the baseline (batchrl's `network.shared_body: true`, the Atari presets' setting since
f0aa28f; before it batchrl ran a torso for each, so its learner did about twice the
convolutions).

Frames are environment steps x 4 (frame skip 4). Threads: MonoBeast runs with
OMP_NUM_THREADS=1 (it sets that itself on import, as its README asks), so each of its
actor processes and each of its 2 learner threads computes on one thread; batchrl runs
with TensorFlow's default thread pools (intra-op threads = cores), its games in their
own processes.

TorchBeast comes from `--torchbeast` (default /work/torchbeast): the folder that
`git archive HEAD` of facebookresearch/torchbeast (0af07b0, 2021-09-15) extracts to, put
on the subprocess's PYTHONPATH; nothing of it is copied into batchrl or installed. Its
files are unchanged. Changes made to it in the subprocess at run time (`run_monobeast`),
1 to 3 for environment creation (it needs gym, not installed, and Baselines' wrappers
over gym's Atari), 4 and 5 for the deep network only:

1. `sys.modules["gym"] = gymnasium` before importing `torchbeast.monobeast`, which
   imports `torchbeast.atari_wrappers`, which imports gym; those wrappers are then never
   used (its classes only subclass Gymnasium's at import).
2. `monobeast.create_env` is replaced by `make_monobeast_env`: batchrl's
   `batchrl.tools.atari.make_atari(flags.env, episodic_life=True)`, the same
   environments the batchrl and ceiling rows step: `gymnasium.make` of
   PongNoFrameskip-v4 through ale-py (no sticky actions, minimal action set),
   `AtariPreprocessing` (up to 30 no-ops, frame skip 4 with the max of the last two
   frames, 84 x 84 grayscale, cv2's INTER_AREA), Baselines' `EpisodicLife` and
   `FireReset` as TorchBeast's `wrap_deepmind` applies them (Pong has no lives),
   `FrameStackObservation` of 4, but without its last wrapper (`FramesLast`): frames
   stay [4, 84, 84] uint8, as TorchBeast's `ImageToPyTorch` gives them. Rewards are not
   clipped by the environment in either (TorchBeast: `clip_rewards=False`). Gymnasium's
   stack returns an array where Baselines' returns `LazyFrames`.
3. `OldGymApi` adapts Gymnasium's API to the old gym one MonoBeast's `Environment`
   calls: `seed(s)` keeps the seed for the next `reset()`, `reset()` returns the
   observation only, `step(a)` returns 4 values with done = terminated or truncated.
4. Deep only: empty modules stand in for `nest` and `libtorchbeast` (TorchBeast's C++
   extensions, not built here), so that `torchbeast.polybeast_learner` imports; its
   `Net` uses them only with the LSTM, which is off.
5. Deep only: `monobeast.Net` is replaced by `polybeast_net(polybeast_learner.Net)`, a
   subclass that takes MonoBeast's constructor arguments and returns MonoBeast's dict
   (policy_logits, baseline, action) where PolyBeast's returns a tuple.

Cleanup: MonoBeast's process group is sent SIGTERM, then SIGKILL, at the end, on
Ctrl-C and on SIGTERM; batchrl's trainer closes its environment workers; the ceiling's
workers are terminated. The script prints any child process of its own left at the end.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench import harness

REPO = Path(__file__).resolve().parents[1]
ENV_ID = "PongNoFrameskip-v4"
FRAME_SKIP = 4
UNROLL_LENGTH = 80
BATCH_SIZE = 8  # Unrolls per learner update: MonoBeast's default, atari_impala's 2 x 4.
ROWS = ("ceiling", "monobeast", "batchrl", "ray", "compute")  # What --rows chooses.


class OldGymApi:
    """A Gymnasium environment with the old gym API that MonoBeast's `Environment` calls."""

    def __init__(self, env):
        self.env = env
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self._seed = None

    def seed(self, seed: int) -> None:
        self._seed = int(seed)

    def reset(self) -> np.ndarray:
        observ, _ = self.env.reset(seed=self._seed)
        self._seed = None
        return observ

    def step(self, action: int):
        observ, reward, terminated, truncated, info = self.env.step(action)
        return observ, reward, terminated or truncated, info

    def close(self) -> None:
        self.env.close()


def make_monobeast_env(flags) -> OldGymApi:
    """MonoBeast's `create_env`: batchrl's Atari game, frames first [4, 84, 84] uint8."""
    from batchrl.tools.atari import FramesLast, make_atari, register_envs

    register_envs()
    env = make_atari(flags.env, episodic_life=True)
    assert isinstance(env, FramesLast), type(env)
    return OldGymApi(env.env)  # Without FramesLast: Gymnasium's stack, frames first.


def polybeast_net(net_class):
    """PolyBeast's `Net` (IMPALA's ResNet) as MonoBeast builds and calls its `Net`."""

    class PolyBeastNet(net_class):
        def __init__(self, observation_shape, num_actions, use_lstm=False):
            del observation_shape  # PolyBeast's takes [4, 84, 84] frames only.
            super().__init__(num_actions, use_lstm)

        def forward(self, inputs, core_state=()):
            (action, logits, baseline), core_state = super().forward(inputs, core_state)
            return dict(policy_logits=logits, baseline=baseline, action=action), core_state

    return PolyBeastNet


def run_monobeast(torso: str, argv: list[str]) -> None:
    """In the subprocess: MonoBeast's `train(flags)` with the changes the docstring lists."""
    import types

    import gymnasium

    sys.modules["gym"] = gymnasium  # Change 1: atari_wrappers imports gym.
    from torchbeast import monobeast

    monobeast.create_env = make_monobeast_env  # Changes 2 and 3.
    if torso == "deep":  # Changes 4 and 5.
        for name in ("nest", "libtorchbeast"):  # Used by PolyBeast's LSTM and actors only.
            sys.modules[name] = types.ModuleType(name)
        from torchbeast import polybeast_learner

        monobeast.Net = polybeast_net(polybeast_learner.Net)
    monobeast.train(monobeast.parser.parse_args(argv))


def _log_points(logs: Path) -> list[tuple[float, int]]:
    """(time, steps before it) of each learner update in MonoBeast's logs.csv."""
    if not logs.exists():
        return []
    lines = logs.read_text().splitlines()
    if not lines or not lines[0].startswith("# "):
        return []
    reader = csv.DictReader(lines[1:], fieldnames=lines[0][2:].split(","))
    return [(float(row["_time"]), int(row["step"])) for row in reader if row.get("step")]


def monobeast_rate(torchbeast: str, torso: str, envs: int, warmup: float, seconds: float) -> dict:
    """MonoBeast's learner steps per second over `seconds`, from its own logs.csv."""
    savedir = tempfile.mkdtemp(prefix="monobeast-")
    command = [
        sys.executable,
        "-m",
        "bench.atari_monobeast",
        "--monobeast-child",
        torso,
        *("--env", ENV_ID, "--num_actors", str(envs), "--batch_size", str(BATCH_SIZE)),
        *("--unroll_length", str(UNROLL_LENGTH), "--total_steps", str(10**12)),
        *("--savedir", savedir, "--xpid", "bench", "--disable_checkpoint", "--disable_cuda"),
    ]
    path = os.pathsep.join([torchbeast, str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path.rstrip(os.pathsep), OMP_NUM_THREADS="1")
    tail = []  # Its last lines of stderr, for errors.
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Its own process group, with its forked actors.
    )

    def read() -> None:
        for line in process.stderr:
            tail[:] = [*tail[-30:], line]

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300.0 + warmup + seconds
        logs = Path(savedir) / "bench" / "logs.csv"
        while True:  # One row per learner update: its time, and the steps before it.
            points = _log_points(logs)
            begin = next((p for p in points if p[0] >= points[0][0] + warmup), None)
            end = begin and next((p for p in points if p[0] >= begin[0] + seconds), None)
            if end:
                break
            if process.poll() is not None:
                raise RuntimeError("MonoBeast ended:\n" + "".join(tail))
            if time.monotonic() > deadline:
                raise TimeoutError("MonoBeast's log stalled:\n" + "".join(tail))
            time.sleep(0.5)
        steps = (end[1] - begin[1]) / (end[0] - begin[0])
        return {"steps_per_second": steps, "seconds": end[0] - begin[0]}
    finally:
        stop_group(process)
        reader.join(timeout=5.0)
        shutil.rmtree(savedir, ignore_errors=True)


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the process group of `process` (its own session), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            process.poll()
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return  # Everyone in the group is gone.
            time.sleep(0.1)


def _ceiling_worker(seed: int, barrier, seconds: float, results) -> None:
    from batchrl.tools.atari import make_atari, register_envs

    register_envs()
    env = make_atari(ENV_ID, episodic_life=True)
    rng = np.random.default_rng(seed)
    actions = env.action_space.n
    env.reset(seed=seed)
    for _ in range(100):  # Warm-up: the emulator's first steps.
        _, _, terminated, truncated, _ = env.step(int(rng.integers(actions)))
        if terminated or truncated:
            env.reset()
    barrier.wait()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(actions)))
        steps += 1
        if terminated or truncated:
            env.reset()
    results.put((steps, time.perf_counter() - start))
    env.close()


def ceiling_rate(envs: int, seconds: float) -> dict:
    """Steps per second of `envs` games in worker processes, random actions, no learner."""
    context = multiprocessing.get_context("spawn")  # Imports no TensorFlow, forks none.
    barrier, results = context.Barrier(envs), context.Queue()
    workers = [
        context.Process(target=_ceiling_worker, args=(seed, barrier, seconds, results))
        for seed in range(envs)
    ]
    try:
        for worker in workers:
            worker.start()
        counts = [results.get(timeout=seconds + 120.0) for _ in workers]
        for worker in workers:
            worker.join(timeout=10.0)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
                worker.join(timeout=5.0)
    # All started together; each divides its own steps by its own time.
    return {"steps_per_second": sum(steps / elapsed for steps, elapsed in counts)}


def envpool_ceiling_rate(envs: int, seconds: float) -> dict:
    """Steps per second of one EnvPool of `envs` games, random actions, no learner."""
    from batchrl.tools.atari import register_envs
    from batchrl.tools.envpool_batch_env import EnvPoolBatchEnv

    register_envs()
    rng = np.random.default_rng(0)
    with EnvPoolBatchEnv(ENV_ID, envs, episodic_life=True) as batch_env:
        actions = batch_env.action_space.n
        batch_env.reset(seed=0)

        def step() -> None:
            _, _, terminated, truncated, _ = batch_env.step(rng.integers(actions, size=envs))
            ended = np.flatnonzero(terminated | truncated)
            if len(ended):
                batch_env.reset(ended)

        for _ in range(100):  # Warm-up: the emulators' first steps.
            step()
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            step()
            steps += envs
        return {"steps_per_second": steps / (time.perf_counter() - start)}


def batchrl_rate(
    torso: str, envs: int, envs_per_actor: int, warmup: int, seconds: float, engine: str
):
    """batchrl's threads runner on `atari_impala`: learner steps per second."""
    from bench.atari_inference import rate

    if envs % envs_per_actor or BATCH_SIZE % envs_per_actor:
        raise ValueError(f"--envs-per-actor {envs_per_actor} must divide {envs} and 8.")
    steps, _ = rate(
        torso,
        envs // envs_per_actor,
        "actor",
        0.005,
        warmup,
        seconds,
        overrides=(
            f"env.id={ENV_ID}",
            f"env.num_envs={envs_per_actor}",
            f"threads.learner_batch={BATCH_SIZE // envs_per_actor}",
            f"impala.unroll_length={UNROLL_LENGTH}",
            f"env.engine={engine}",
        ),
    )
    return {"steps_per_second": steps}


def compute_rate(torso: str, envs_per_actor: int, warmup: int, seconds: float) -> dict:
    """batchrl's computation alone, no games: the learner's updates on one batch of real
    Pong unrolls, and the forward passes of per-actor inference on `envs_per_actor`
    games' observations, each timed for `seconds` with the cores to itself. Both share
    the cores in a training loop, so their steps per second combine as a harmonic sum:
    1 / (1 / learner + 1 / inference) is the most any loop of this network reaches here."""
    import tensorflow as tf

    from batchrl.config import load_run_config
    from batchrl.runners.threads import ThreadsTrainer
    from batchrl.runners.train import make_algorithm
    from batchrl.runners.unrolls import concatenate

    config = load_run_config(
        "atari_impala",
        [
            f"network.torso={torso}",
            f"env.id={ENV_ID}",
            "env.num_envs=4",
            "threads.num_actors=1",
            f"threads.learner_batch={BATCH_SIZE // 4}",
            f"impala.unroll_length={UNROLL_LENGTH}",
        ],
    )
    algo = make_algorithm(config, ThreadsTrainer.make_batch_env(config, 0))
    trainer = ThreadsTrainer(config, algo)
    try:  # Real unrolls (frames of a playing policy), then the games stop.
        for _ in range(warmup):
            trainer.step()
        batch = concatenate([trainer.runner.next_unroll() for _ in range(BATCH_SIZE // 4)])
    finally:
        trainer.close()

    def timed(call) -> float:  # Calls per second.
        for _ in range(3):
            call()
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            call()
            calls += 1
        return calls / (time.perf_counter() - start)

    learn = tf.function(algo.learn)
    learner = timed(lambda: learn(batch)) * int(np.prod(batch["reward"].shape))
    policy = algo.make_behaviour_policy(0)
    policy.load([variable.numpy() for variable in algo.behaviour_variables()])
    observ = batch["observ"][0, :envs_per_actor]
    inference = timed(lambda: policy(observ)) * envs_per_actor
    return {
        "steps_per_second": 1.0 / (1.0 / learner + 1.0 / inference),
        "learner_steps_per_second": learner,
        "inference_steps_per_second": inference,
    }


def ray_rate(
    torso: str,
    envs: int,
    envs_per_actor: int,
    warmup: int,
    seconds: float,
    max_batch: int = 0,
    timeout: float = 0.005,
    cpus: float = 0.5,
) -> dict:
    """batchrl's Ray runner with dynamic batching on `atari_impala`: learner steps per
    second, and the mean actors per forward pass."""
    from batchrl.config import load_run_config
    from batchrl.runners.ray import RayTrainer
    from batchrl.runners.train import make_algorithm

    if envs % envs_per_actor or BATCH_SIZE % envs_per_actor:
        raise ValueError(f"--envs-per-actor {envs_per_actor} must divide {envs} and 8.")
    config = load_run_config(
        "atari_impala",
        [
            f"network.torso={torso}",
            f"env.id={ENV_ID}",
            f"env.num_envs={envs_per_actor}",
            f"impala.unroll_length={UNROLL_LENGTH}",
            "runner.name=ray",
            "ray.inference=dynamic",
            f"ray.num_actors={envs // envs_per_actor}",
            f"ray.learner_batch={BATCH_SIZE // envs_per_actor}",
            f"ray.inference_batch={max_batch}",
            f"ray.inference_timeout={timeout}",
            f"ray.cpus_per_actor={cpus}",
        ],
    )
    algo = make_algorithm(config, RayTrainer.make_batch_env(config, 0))
    trainer = RayTrainer(config, algo)  # Starts Ray here; `close` shuts it down.
    try:
        for _ in range(warmup):
            trainer.step()
        sizes = trainer.runner.batcher.batch_sizes
        passes = len(sizes)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            steps += trainer.step()[0]
        elapsed = time.perf_counter() - start
        per_pass = float(np.mean(sizes[passes:])) if len(sizes) > passes else float("nan")
        return {"steps_per_second": steps / elapsed, "actors_per_pass": per_pass}
    finally:
        trainer.close()


def leftover_children() -> list[str]:
    """Processes whose parent is this one (from /proc), as 'pid command line'.

    Leaves out multiprocessing's resource tracker (the ceiling's spawn context starts it;
    it ends when this process does).
    """
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            stat = (proc / "stat").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if parent == os.getpid() and "resource_tracker" not in command:
            found.append(f"{proc.name} {command}")
    return found


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    if sys.argv[1:2] == ["--monobeast-child"]:
        run_monobeast(sys.argv[2], sys.argv[3:])
        return
    # Ctrl-C, even when started in the background (which ignores it), and SIGTERM both
    # end the measurement through the `finally` clauses that stop the children.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchbeast", default="/work/torchbeast", help="extracted folder")
    parser.add_argument("--envs", type=int, default=4, help="games (MonoBeast's actors)")
    parser.add_argument(
        "--envs-per-actor", type=int, nargs="*", default=[4], help="batchrl env.num_envs"
    )
    parser.add_argument("--torsos", nargs="*", default=["shallow", "deep"])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0, help="MonoBeast, seconds")
    parser.add_argument("--warmup-updates", type=int, default=5, help="batchrl")
    parser.add_argument(
        "--engines", nargs="+", default=["gymnasium", "envpool"], choices=["gymnasium", "envpool"]
    )
    parser.add_argument(
        "--rows", nargs="*", default=["ceiling", "monobeast", "batchrl"], choices=ROWS
    )
    parser.add_argument("--skip", nargs="*", default=[], choices=ROWS, help="of --rows")
    parser.add_argument("--ray-batch", type=int, default=0, help="ray.inference_batch")
    parser.add_argument("--ray-timeout", type=float, default=0.005, help="ray.inference_timeout")
    parser.add_argument("--ray-cpus", type=float, default=0.5, help="ray.cpus_per_actor")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    rows_wanted = [row for row in args.rows if row not in args.skip]
    if (
        "monobeast" in rows_wanted
        and not (Path(args.torchbeast) / "torchbeast" / "monobeast.py").is_file()
    ):
        parser.error(f"--torchbeast {args.torchbeast}: no torchbeast/monobeast.py there.")
    engine_rows = {"ceiling", "batchrl"} & set(rows_wanted)  # The rows --engines chooses.
    if engine_rows and "envpool" in args.engines and importlib.util.find_spec("envpool") is None:
        parser.error(
            "--engines envpool: pip install -e '.[atari,envpool]', or --engines gymnasium."
        )
    run = harness.Run("atari_monobeast")
    machine = run.header["machine"]
    print(f"{machine['cpu']}, {machine['cores']} cores; load {run.header['load_before']}")
    rows = []  # (name, network, result)

    def record(name: str, network: str, result: dict) -> None:
        result["load_average"] = harness.load()
        rows.append((name, network, result))
        steps = result["steps_per_second"]
        per_pass = result.get("actors_per_pass")
        parts = result.get("learner_steps_per_second"), result.get("inference_steps_per_second")
        print(
            f"{name} {network}: {steps:.1f} steps/s, {FRAME_SKIP * steps:.0f} frames/s "
            + (f"{per_pass:.2f} actors a pass " if per_pass is not None else "")
            + (f"learner {parts[0]:.0f}, inference {parts[1]:.0f} " if parts[0] else "")
            + f"(load {result['load_average']:.2f})",
            flush=True,
        )

    try:
        if "ceiling" in rows_wanted:
            if "gymnasium" in args.engines:
                record("ALE ceiling", "-", ceiling_rate(args.envs, args.seconds))
            if "envpool" in args.engines:
                record("EnvPool ceiling", "-", envpool_ceiling_rate(args.envs, args.seconds))
        for torso in args.torsos:
            if "monobeast" in rows_wanted:
                result = monobeast_rate(
                    args.torchbeast, torso, args.envs, args.warmup, args.seconds
                )
                record("MonoBeast", torso, result)
            for engine in args.engines if "batchrl" in rows_wanted else []:
                for per_actor in args.envs_per_actor:
                    result = batchrl_rate(
                        torso, args.envs, per_actor, args.warmup_updates, args.seconds, engine
                    )
                    suffix = "" if engine == "gymnasium" else f" {engine}"
                    record(f"batchrl {args.envs // per_actor}x{per_actor}{suffix}", torso, result)
            for per_actor in args.envs_per_actor if "compute" in rows_wanted else []:
                result = compute_rate(torso, per_actor, args.warmup_updates, args.seconds)
                record(f"compute ceiling {args.envs // per_actor}x{per_actor}", torso, result)
            for per_actor in args.envs_per_actor if "ray" in rows_wanted else []:
                result = ray_rate(
                    torso,
                    args.envs,
                    per_actor,
                    args.warmup_updates,
                    args.seconds,
                    args.ray_batch,
                    args.ray_timeout,
                    args.ray_cpus,
                )
                record(f"batchrl ray {args.envs // per_actor}x{per_actor}", torso, result)
    finally:
        left = leftover_children()
        print(f"leftover child processes: {', '.join(left) if left else 'none'}", flush=True)
    print_table(rows)
    if args.json:
        results = [{"run": name, "network": network, **result} for name, network, result in rows]
        run.save({"args": vars(args), "rows": results}, args.json)


def print_table(rows: list) -> None:
    """The markdown table: frames/s, and batchrl's rows over MonoBeast's and the ceilings."""
    rates = {(name, network): result["steps_per_second"] for name, network, result in rows}
    ceilings = [name for name in ("ALE ceiling", "EnvPool ceiling") if (name, "-") in rates]
    print(
        "\n| run | network | steps/s | frames/s | / MonoBeast |"
        + "".join(f" / {c} |" for c in ceilings)
    )
    print("|---|---|---:|---:|---:|" + "---:|" * len(ceilings))
    for name, network, result in rows:
        steps = result["steps_per_second"]
        beast = rates.get(("MonoBeast", network))
        ours = name.startswith(("batchrl", "compute"))
        versus_beast = f"{steps / beast:.2f}" if beast and ours else ""
        versus = [
            f"{steps / rates[(ceiling, '-')]:.2f}" if name != ceiling else ""
            for ceiling in ceilings
        ]
        print(
            f"| {name} | {network} | {steps:,.0f} | {FRAME_SKIP * steps:,.0f} | "
            f"{versus_beast} |" + "".join(f" {cell} |" for cell in versus)
        )


if __name__ == "__main__":
    main()
