"""Trains an algorithm from a config: `python -m batchrl.scripts.train --config=pendulum`."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from pathlib import Path


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", required=True, help="a preset name or a YAML path")
    parser.add_argument("--logdir", default=None, help="default: runs/<config>-<time>")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one key, e.g. --set ppo.learning_rate=3e-4 (repeatable)",
    )
    return parser.parse_args(argv)


class _Terminated(Exception):
    """SIGTERM before training started."""


def _terminate(signum, frame):
    raise _Terminated


def _one_line(error: BaseException) -> str:
    """The first line of an error; for an error raised in a graph, the Python error inside."""
    lines = str(error).strip().splitlines()
    line = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", lines[0] if lines else "")
    if re.match(r"^\w+(Error|Exception): ", line):  # The original error, named in the text.
        return line
    return f"{type(error).__name__}: {line}"


def main(argv=None) -> int:
    """Exit codes: 0 done, 1 a fault while training, 2 a bad config or logdir, 128+N signal N."""
    args = parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        # Imported here, so that Ctrl-C while TensorFlow loads exits quietly too.
        from batchrl.runners.train import train
        from batchrl.tools.checkpoints import CheckpointError
        from batchrl.tools.config import ConfigError
        from batchrl.tools.run_config import load_run_config
        from batchrl.tools.train_loop import Interrupted

        try:
            config = load_run_config(args.config, args.set)
            logdir = (
                args.logdir or f"runs/{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
            )
            print(f"Logging to {logdir}", file=sys.stderr)
            train(config, logdir)
        except ConfigError as error:
            print(f"Config error: {error}", file=sys.stderr)
            return 2
        except CheckpointError as error:
            print(f"Checkpoint error: {error}", file=sys.stderr)
            return 1
        except Interrupted as interrupt:
            return interrupt.exit_code
        except Exception as error:  # One clear line; BATCHRL_TRACEBACK=1 shows the rest.
            if os.environ.get("BATCHRL_TRACEBACK"):
                raise
            print(
                f"Training failed: {_one_line(error)}\n"
                "(Checkpoints up to the last one saved are kept; rerun the command to resume. "
                "BATCHRL_TRACEBACK=1 prints the traceback.)",
                file=sys.stderr,
            )
            return 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except _Terminated:
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
