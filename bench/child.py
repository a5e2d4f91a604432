"""A bench script's measurement in a fresh Python process, its answer the last line of JSON.

Shared by the scripts that time what a process's start costs (`first_call.py`,
`train_phases.py`).
"""

from __future__ import annotations

import json
import subprocess
import sys


def run_json(code: str, args: list[str], what: str, env=None, timeout: float = 900) -> dict:
    """Runs `python -c code *args`; the JSON object its stdout ends with.

    Raises:
      RuntimeError: the process failed, naming `what` and giving the end of its stderr.
    """
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(f"{what} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])
