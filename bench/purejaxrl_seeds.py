"""PureJaxRL's PPO over seeds with `jax.vmap`: the other side of `population_seeds.py`.

    /path/to/jax/python bench/purejaxrl_seeds.py --purejaxrl DIR --config JSON [--seeds 16]

Runs under a Python that has JAX, not batchrl (`population_seeds.py` starts it in a
subprocess; docs/benchmarks.md says how to make that environment). DIR is the `purejaxrl`
folder of a checkout of luchris429/purejaxrl (the one measured: commit 31756b1); JSON
holds PureJaxRL's config keys (`LR`, `NUM_ENVS`, ...). Nothing of PureJaxRL is copied
here: its files are read from DIR at run time. The changes made to it, all of them:

1. `wrappers.py` imports brax and navix at the top, which neither script measured here
   uses: empty stand-in modules are registered under those names before the import.
2. gymnax 1.0 (the version installed) returns `terminated` and `truncated` from `step`;
   PureJaxRL was written for gymnax 0.0.x, which returned one `done`. The environment is
   wrapped to return `terminated or truncated` as `done`, which is what gymnax 0.0.x did
   (so a truncated episode is not bootstrapped, as in PureJaxRL's own runs).
3. For Pendulum-v1, `ppo_continuous_action.py` builds Brax environments
   (`BraxGymnaxWrapper`): it gets gymnax's Pendulum-v1 instead, with the same wrapper as
   in 2; its `ClipAction` clips to [-1, 1], Brax's range, and is given Pendulum's [-2, 2];
   and its networks' hidden width, hard-coded 256, is replaced by `--hidden` (64, batchrl's)
   in the source text before the module is executed.

The clock: `jax.jit(jax.vmap(make_train(config)))` is lowered and compiled (compile
seconds), then called on N keys split from `PRNGKey(--seed)`, 0 unless given (run
seconds; `block_until_ready`).
Its return per seed is the mean return of the episodes that ended during the last updates
that span 256 steps of each environment (2 of CartPole's 128-step rollouts, 4 of
Pendulum's 64): PureJaxRL's own metric (training episodes, stochastic policy); there is no
separate evaluation. (With jax 0.10.2 on this machine a run sometimes hangs in
`block_until_ready` at 0% CPU: every run over 2 seeds, and 1 of 5 over 16; rerun it.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path


def _stand_in_modules() -> None:
    """Change 1: empty brax and navix modules, which wrappers.py imports but never calls."""
    names = ["brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training", "navix"]
    for name in names:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["brax"].envs = sys.modules["brax.envs"]
    training = sys.modules["brax.envs.wrappers.training"]
    training.EpisodeWrapper = training.AutoResetWrapper = object


class _OneDone:
    """Change 2: gymnax 1.0's step with `done = terminated or truncated`, as gymnax 0.0.x."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def observation_space(self, params=None):
        return self._env.observation_space(params or self._env.default_params)

    def action_space(self, params=None):
        return self._env.action_space(params or self._env.default_params)

    def step(self, key, state, action, params=None):
        import jax.numpy as jnp

        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, jnp.logical_or(terminated, truncated), info


def _load(folder: Path, env_id: str, hidden: int):
    """PureJaxRL's `make_train` for `env_id`, with the changes of the docstring."""
    import gymnax

    _stand_in_modules()
    sys.path.insert(0, str(folder))
    if env_id == "CartPole-v1":
        import ppo

        ppo.gymnax = types.SimpleNamespace(make=lambda name: _one_done(gymnax, name))
        return ppo.make_train
    # Change 3: gymnax's Pendulum, its action range, and the hidden width.
    source = (folder / "ppo_continuous_action.py").read_text()
    source = source.replace("nn.Dense(\n            256,", f"nn.Dense(\n            {hidden},")
    if "256" in source.split("class Transition")[0]:
        raise SystemExit("ppo_continuous_action.py changed: its hidden width was not found")
    module = types.ModuleType("ppo_continuous_action")
    sys.modules[module.__name__] = module  # Its flax dataclasses look themselves up there.
    exec(compile(source, str(folder / "ppo_continuous_action.py"), "exec"), module.__dict__)
    module.BraxGymnaxWrapper = lambda name: _one_done(gymnax, name)[0]
    clip = module.ClipAction
    module.ClipAction = lambda env: clip(env, low=-2.0, high=2.0)
    return module.make_train


def _one_done(gymnax, name: str):
    env, params = gymnax.make(name)
    return _OneDone(env), params


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--purejaxrl", type=Path, required=True, help="its purejaxrl/ folder")
    parser.add_argument("--config", required=True, help="PureJaxRL's config keys, as JSON")
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0, help="the keys are split from this one")
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args(argv)
    import jax
    import numpy as np

    config = json.loads(args.config)
    make_train = _load(args.purejaxrl, config["ENV_NAME"], args.hidden)
    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.seeds)
    start = time.perf_counter()
    compiled = jax.jit(jax.vmap(make_train(dict(config)))).lower(keys).compile()
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    run_seconds = time.perf_counter() - start
    metrics = out["metrics"]
    # The last updates that span 256 steps of each environment (a Pendulum episode is 200).
    last = -(-256 // config["NUM_STEPS"])
    ended = np.asarray(metrics["returned_episode"][:, -last:])  # [seeds, updates, T, B]
    returns = np.asarray(metrics["returned_episode_returns"][:, -last:])
    finals = [float(r[e].mean()) if e.any() else float("nan") for r, e in zip(returns, ended)]
    steps = int(metrics["returned_episode"].shape[1]) * config["NUM_STEPS"] * config["NUM_ENVS"]
    print(
        json.dumps(
            {
                "seeds": args.seeds,
                "steps_per_seed": steps,
                "compile_seconds": compile_seconds,
                "run_seconds": run_seconds,
                "final_train_returns": finals,
                "jax": jax.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
