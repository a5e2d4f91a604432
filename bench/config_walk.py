"""Follows a run's config as data: which modules read it, and how often the reads climb
back up the house, during one short training run.

    python bench/config_walk.py [--preset debug] [--set key=value ...]

Every read of a `Config` (attribute or item) is recorded with the module whose code made
it. A room is a module of batchrl that reads the config; a climb back up is a read in a
module of a higher floor (tests/test_layout.py's MAY_IMPORT order: config, parts, replay,
tools, envs, networks, training, algorithms, runners, scripts) right after a read in a
lower one, in the order the reads happen. The run is `runners.train.train` on the preset
for two training calls, in a temporary logdir.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import tempfile
from pathlib import Path

FLOORS = [
    "config",
    "core",
    "parts",
    "replay",
    "tools",
    "envs",
    "networks",
    "training",
    "algorithms",
    "runners",
    "scripts",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="debug")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()

    import batchrl
    from batchrl.config import config as config_module
    from batchrl.config import load_run_config
    from batchrl.runners.train import train

    package = Path(batchrl.__file__).parent
    reads: list[str] = []
    originals = {
        name: getattr(config_module.Config, name) for name in ("__getitem__", "__getattr__")
    }

    def record():
        frame = inspect.currentframe().f_back.f_back
        while frame is not None and frame.f_code.co_filename == config_module.__file__:
            frame = frame.f_back  # Config's own methods (attribute reads go through here).
        if frame is not None:
            path = Path(frame.f_code.co_filename)
            if path.is_relative_to(package):
                reads.append(str(path.relative_to(package).with_suffix("")))

    def recording(original):
        def read(self, key):
            record()
            return original(self, key)

        return read

    overrides = [
        "train.total_steps=512",
        "train.steps_per_call=256",
        "train.eval_every=0",
        *args.overrides,
    ]
    config = load_run_config(args.preset, overrides)
    for name, original in originals.items():
        setattr(config_module.Config, name, recording(original))
    try:
        with tempfile.TemporaryDirectory() as logdir:
            train(config, logdir, progress=lambda line, final=False: None)
    finally:
        for name, original in originals.items():
            setattr(config_module.Config, name, original)

    def floor(module: str) -> int:
        top = module.split("/")[0]
        return FLOORS.index(top) if top in FLOORS else len(FLOORS)

    rooms = sorted(set(reads))
    changes = [(a, b) for a, b in zip(reads, reads[1:]) if a != b]
    climbs = [(a, b) for a, b in changes if floor(b) > floor(a)]
    result = {
        "preset": args.preset,
        "overrides": overrides,
        "reads": len(reads),
        "rooms": len(rooms),
        "rooms_list": rooms,
        "folders": sorted({room.split("/")[0] for room in rooms}),
        "climbs_back_up": len(climbs),
        "climbs": sorted({f"{a} -> {b}" for a, b in climbs}),
    }
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
