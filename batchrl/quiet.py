"""TensorFlow imported without its C++ start-up log lines, for every process's entry point.

Importing TensorFlow 2.21 on a machine without a GPU prints lines such as

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795641484.287230 3132 cudart_stub.cc:31] Could not find cuda drivers ...
    E0000 00:00:1795641486.731897 3132 cuda_platform.cc:52] failed call to cuInit: ...

from static initializers that run before absl's logging is set up, so
`TF_CPP_MIN_LOG_LEVEL` cannot hide them (measured: with it set to 3 the first two
kinds still print). `import_tensorflow` and `describe_devices` therefore send file
descriptor 2 to a temporary file while TensorFlow loads and while it finds its devices,
and write back every line that is not one of TensorFlow's C++ log lines: Python warnings
and errors still show.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

# absl's prefix: severity letter, MMDD, time, thread id, file:line].
_LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:[\d.]+ +\d+ [\w./-]+:\d+\] ")
_NOISE = (
    "WARNING: All log messages before absl::InitializeLog() is called",
    "To enable the following instructions:",  # The second line of cpu_feature_guard's.
)


def is_tensorflow_log_line(line: str) -> bool:
    """True for a line of TensorFlow's C++ logging (absl's format) and its known tails."""
    return bool(_LOG_LINE.match(line)) or line.startswith(_NOISE)


def import_tensorflow(init_devices: bool = True):
    """Imports TensorFlow with its C++ start-up log lines hidden (see the module docstring).

    Does nothing special if TensorFlow is already imported or the user set
    `TF_CPP_MIN_LOG_LEVEL=0` (they asked to see every line). Otherwise keeps the user's
    `TF_CPP_MIN_LOG_LEVEL` or sets it to 2 for the rest of the process (C++ errors still
    print), and drops the lines TensorFlow prints while it loads, which no level hides.

    Args:
      init_devices: also find the devices now (CUDA's initialisation logs then). The train
        script passes False: XLA reads `TF_XLA_FLAGS`, which name the compilation cache,
        when the devices are set up, so it calls `describe_devices` after setting them.

    Returns:
      The `tensorflow` module.
    """
    global _quiet
    if "tensorflow" in sys.modules or os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0":
        import tensorflow as tf

        return tf
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _quiet = True
    with _without_tensorflow_logs():
        import tensorflow as tf

        if init_devices:
            tf.config.list_physical_devices()
    return tf


def quiet_worker() -> None:
    """Imports TensorFlow quietly in a worker process (Ray's `worker_process_setup_hook`)."""
    import_tensorflow()


def describe_devices() -> str:
    """One line naming the devices TensorFlow will use, e.g. 'Devices: CPU (no GPU found)'.

    Sets up the devices if that has not happened yet, hiding CUDA's log lines when
    `import_tensorflow` hid TensorFlow's.
    """
    import tensorflow as tf

    with _without_tensorflow_logs() if _quiet else contextlib.nullcontext():
        gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return "Devices: CPU (no GPU found)"
    names = ", ".join(gpu.name.removeprefix("/physical_device:") for gpu in gpus)
    return f"Devices: {names} and CPU"


_quiet = False  # Whether import_tensorflow hides TensorFlow's C++ lines in this process.


@contextlib.contextmanager
def _without_tensorflow_logs():
    """Sends file descriptor 2 to a temporary file; writes back the lines that are not
    TensorFlow's C++ log lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            kept = [line for line in text.splitlines() if not is_tensorflow_log_line(line)]
            if kept:
                print("\n".join(kept), file=sys.stderr)
