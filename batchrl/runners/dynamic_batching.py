"""Dynamic batching: calls from many actor threads answered by one batched call.

TorchBeast's PolyBeast sends every actor's inference request to a `DynamicBatcher`, which
runs the policy once on whichever requests are waiting. `DynamicBatcher` does the same
for threads in one process: a caller blocks in `__call__(inputs)`; a server thread takes
the first waiting request, then more until `max_batch` requests are in hand or `timeout`
seconds have passed since it took the first, concatenates them along axis 0, calls the
function once, and hands each caller its own rows of the result.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

# Seconds the server waits for a first request before it checks whether to stop.
_POLL = 0.1


class _Request:
    def __init__(self, inputs: Any):
        self.inputs = inputs
        self.size = len(tf.nest.flatten(inputs)[0])
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class DynamicBatcher:
    """Answers concurrent calls of `fn` with batched calls, as TorchBeast's batcher does.

    `fn` takes a nested structure of arrays [N, ...] and returns one of arrays [N, ...]
    (the same N); each caller gets the rows of its own inputs, in order. An error in `fn`
    is raised in every caller of that batch; after `close` (or with the server gone)
    calls raise RuntimeError instead of waiting.
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        max_batch: int,
        timeout: float,
        name: str = "dynamic batcher",
    ):
        """Starts the server thread.

        Args:
          fn: the batched function, e.g. a policy's sampling on observations [N, ...].
          max_batch: the most requests (callers) one call of `fn` serves, at least 1.
          timeout: seconds the server waits for more requests after taking the first,
            >= 0; 0 runs whatever is waiting at once.
          name: the thread's name, in error messages.
        """
        if max_batch < 1 or timeout < 0:
            raise ValueError(f"max_batch={max_batch} must be >= 1, timeout={timeout} >= 0.")
        self._fn, self._max_batch, self._timeout, self.name = fn, max_batch, timeout, name
        self._requests: queue.Queue[_Request] = queue.Queue()
        self._stop = threading.Event()
        self.batch_sizes: list[int] = []  # Requests per call of `fn`, for statistics.
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def __call__(self, inputs: Any, wait: float | None = None) -> Any:
        """`fn(inputs)`'s rows for `inputs` [B, ...], computed in a batch with others.

        Args:
          wait: the most seconds to wait for the answer; None waits while the server runs.

        Raises:
          RuntimeError: the batcher is closed, or its server stopped.
          TimeoutError: no answer within `wait` seconds.
          Whatever `fn` raised on the batch that held this request.
        """
        if self._stop.is_set():
            raise RuntimeError(f"{self.name} is closed.")
        request = _Request(inputs)
        self._requests.put(request)
        deadline = None if wait is None else time.monotonic() + wait
        while not request.done.wait(_POLL):
            if not self._thread.is_alive():
                raise RuntimeError(f"{self.name} stopped before answering.")
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} gave no answer within {wait} s.")
        if request.error is not None:
            raise request.error
        return request.result

    def close(self, timeout: float = 10.0) -> None:
        """Stops the server; waiting callers get RuntimeError. Safe to call twice."""
        self._stop.set()
        self._thread.join(timeout)
        self._fail_waiting(RuntimeError(f"{self.name} was closed."))

    def __enter__(self) -> DynamicBatcher:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                batch = [self._requests.get(timeout=_POLL)]
            except queue.Empty:
                continue
            deadline = time.monotonic() + self._timeout
            while len(batch) < self._max_batch:
                left = deadline - time.monotonic()
                try:
                    batch.append(self._requests.get(timeout=left) if left > 0 else
                                 self._requests.get_nowait())  # fmt: skip
                except queue.Empty:
                    break
            self._run(batch)

    def _run(self, batch: list[_Request]) -> None:
        self.batch_sizes.append(len(batch))
        try:
            inputs = tf.nest.map_structure(
                lambda *parts: np.concatenate(parts), *[r.inputs for r in batch]
            )
            outputs = self._fn(inputs)
            ends = np.cumsum([r.size for r in batch])
            for request, end in zip(batch, ends, strict=True):
                start = end - request.size
                request.result = tf.nest.map_structure(lambda x, a=start, b=end: x[a:b], outputs)
        except BaseException as error:  # Every caller of the batch raises it.
            for request in batch:
                request.error = error
        for request in batch:
            request.done.set()

    def _fail_waiting(self, error: BaseException) -> None:
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                return
            request.error = error
            request.done.set()
