"""Trains an algorithm from a config: `python -m batchrl.scripts.train --config=pendulum`."""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
from pathlib import Path

from batchrl.quiet import describe_devices, import_tensorflow


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
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="train every combination of the swept values as one population, e.g. --sweep "
        "ppo.learning_rate=1e-4,3e-4 --sweep train.seed=0,1,2 (repeatable; PPO; only keys "
        "the members may differ in: train.seed and the numeric ppo settings README lists; "
        'list values in brackets, e.g. "KEY=[1, 2],[3, 4]")',
    )
    return parser.parse_args(argv)


class _Terminated(BaseException):
    """SIGTERM before training started (a BaseException, as KeyboardInterrupt is)."""


class _Interrupted(KeyboardInterrupt):
    """Ctrl-C before training started.

    A subclass, not KeyboardInterrupt itself: CPython 3.11 marks a KeyboardInterrupt that
    leaves an `eval` of a string (namedtuple's, say, while TensorFlow imports) as unhandled
    even when it is caught later, and at exit kills the process with SIGINT (exit status
    -2, no message) instead of returning 130. It checks for that exact type.
    """


_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_early_signals: list[int] = []


def _stop_now(signum, frame):
    """Ctrl-C or SIGTERM before training starts: stop at once.

    The signal is recorded too: a raise that lands in a weakref callback or a `__del__`
    (as one can while TensorFlow imports) is reported as unraisable and dropped, so
    `_raise_if_signalled` looks again before training starts.
    """
    _early_signals.append(signum)
    raise _exception(signum)


def _exception(signum: int) -> type[BaseException]:
    return _Interrupted if signum == signal.SIGINT else _Terminated


def _raise_if_signalled() -> None:
    if _early_signals:
        raise _exception(_early_signals[0])


def _quiet_about_signals(hook):
    """An unraisable hook that drops our own signal exceptions (recorded above)."""

    def quiet(unraisable):
        if not isinstance(unraisable.exc_value, (KeyboardInterrupt, _Terminated)):
            hook(unraisable)

    return quiet


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
    _early_signals.clear()
    previous = {signum: signal.getsignal(signum) for signum in _SIGNALS}
    previous_hook = sys.unraisablehook
    try:
        # Inside the try: a signal caught from here on raises at the next line of Python.
        sys.unraisablehook = _quiet_about_signals(previous_hook)
        for signum in _SIGNALS:
            signal.signal(signum, _stop_now)
        # Imported here, so that Ctrl-C while TensorFlow loads exits quietly too.
        import_tensorflow(init_devices=False)
        from batchrl.config import ConfigError
        from batchrl.config.run_config import load_run_config
        from batchrl.config.sweeps import sweep_overrides
        from batchrl.runners.train import train, use_xla_cache
        from batchrl.training.checkpoints import CheckpointError
        from batchrl.training.train_loop import Interrupted

        try:
            if args.sweep:
                swept = sweep_overrides(args.sweep, args.set)
                print(f"Sweep: {' '.join(swept)}", file=sys.stderr)
            config = load_run_config(args.config, args.set, sweeps=args.sweep)
            _raise_if_signalled()
            if config.train.jit_compile or config.train.eval_jit_compile:
                # Before `describe_devices`: setting up the devices reads TF_XLA_FLAGS.
                try:
                    use_xla_cache(config.train.xla_cache)
                except ConfigError:
                    pass  # `train` says what is wrong, or turns the default's cache off.
            logdir = (
                args.logdir or f"runs/{Path(args.config).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
            )
            print(f"Logging to {logdir}", file=sys.stderr)
            print(describe_devices(), file=sys.stderr)
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
        sys.unraisablehook = previous_hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
