"""DynamicBatcher: each caller its own answer, batches of many callers, errors, closing."""

import threading

import numpy as np
import pytest

from batchrl.runners.dynamic_batching import DynamicBatcher


def double(inputs):
    return {"twice": inputs["x"] * 2, "sum": inputs["x"].sum(axis=1)}


def test_concurrent_callers_each_get_the_rows_of_their_own_inputs():
    """8 threads, 25 calls each, batches of different sizes: every answer is the caller's."""
    wrong, errors = [], []
    gate = threading.Barrier(8)

    def actor(index, batcher):
        try:
            gate.wait(timeout=60)
            for call in range(25):
                size = 1 + (index + call) % 3  # Requests of 1 to 3 rows.
                x = np.full([size, 2], 100 * index + call, np.int64)
                x[:, 1] = np.arange(size)
                answer = batcher({"x": x}, wait=60)
                if not (np.array_equal(answer["twice"], 2 * x) and
                        np.array_equal(answer["sum"], x.sum(axis=1))):  # fmt: skip
                    wrong.append((index, call))
        except BaseException as error:
            errors.append(error)

    with DynamicBatcher(double, max_batch=4, timeout=0.01) as batcher:
        threads = [threading.Thread(target=actor, args=(i, batcher)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        sizes = list(batcher.batch_sizes)
    assert not errors and not wrong, (errors, wrong)
    assert sum(sizes) == 8 * 25 and max(sizes) <= 4
    assert max(sizes) > 1  # Callers were batched together.


def test_a_lone_request_is_answered_after_the_timeout_without_others():
    """max_batch 8 but one caller: the server runs the batch of 1 once `timeout` passes."""
    with DynamicBatcher(double, max_batch=8, timeout=0.05) as batcher:
        for _ in range(3):
            answer = batcher({"x": np.ones([2, 2])}, wait=60)
            np.testing.assert_array_equal(answer["twice"], np.full([2, 2], 2.0))
        assert batcher.batch_sizes == [1, 1, 1]


def test_an_error_in_the_function_reaches_every_caller_of_its_batch():
    def fails(inputs):
        raise ValueError(f"bad batch of {len(inputs['x'])}")

    with DynamicBatcher(fails, max_batch=2, timeout=0.01) as batcher:
        with pytest.raises(ValueError, match="bad batch of 3"):
            batcher({"x": np.zeros([3, 1])}, wait=60)
        # The server survives a failed batch.
        batcher._fn = double
        assert batcher({"x": np.ones([1, 1])}, wait=60)["twice"][0, 0] == 2


def test_close_fails_waiting_callers_and_later_calls_instead_of_hanging():
    release = threading.Event()

    def blocked(inputs):
        release.wait(60)
        return double(inputs)

    batcher = DynamicBatcher(blocked, max_batch=1, timeout=0.0, name="test batcher")
    results = []

    def call():
        try:
            results.append(batcher({"x": np.ones([1, 1])}, wait=60))
        except RuntimeError as error:
            results.append(error)

    first, second = threading.Thread(target=call), threading.Thread(target=call)
    first.start()
    second.start()  # One is in `fn`, the other waits in the queue.
    closer = threading.Thread(target=batcher.close)
    closer.start()
    assert batcher._stop.wait(60)  # Closing, before the batch in `fn` may finish.
    release.set()
    for thread in (first, second, closer):
        thread.join(60)
    assert len(results) == 2
    assert sum(isinstance(r, RuntimeError) for r in results) >= 1  # The queued one at least.
    with pytest.raises(RuntimeError, match="test batcher is closed"):
        batcher({"x": np.ones([1, 1])})
    assert not batcher._thread.is_alive()


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_batch=0"):
        DynamicBatcher(double, max_batch=0, timeout=0.1)
