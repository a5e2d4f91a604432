"""The runners' config sections, declared in threads.yaml, ray.yaml and apex.yaml beside
this file (keys, defaults, docs). They are declared here, not in `runners/ray/`, because
that package imports Ray, and a config is read without it; each runner's `check_config`
checks its section when the config chooses it."""

from pathlib import Path

from batchrl.config.section import Section

_HERE = Path(__file__).parent

THREADS_SECTION = Section("threads", _HERE / "threads.yaml")
RAY_SECTION = Section("ray", _HERE / "ray.yaml")
# Ape-X (Horgan et al. 2018): DQN's actors and replay shards on Ray.
APEX_SECTION = Section(
    "apex",
    _HERE / "apex.yaml",
    read_when=lambda config: config.runner.name == "ray" and config.algorithm.name == "dqn",
    read_by="algorithm.name=dqn with runner.name=ray (Ape-X)",
)
