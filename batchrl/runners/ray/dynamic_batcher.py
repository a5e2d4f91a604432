"""Dynamic batching over Ray actors: the learner acts for whichever actors wait, in one call."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import ray

from batchrl.core import BehaviourPolicy
from batchrl.runners.ray.group import ActorGroup
from batchrl.runners.unrolls import Unroll, carry_state, stack

logger = logging.getLogger(__name__)
# Seconds one `ray.wait` (or a wait on the queue of unrolls) blocks before the batcher
# checks its deadlines and whether it is closing.
_WAIT_INTERVAL = 1.0
# Seconds `close` waits for the batcher's thread to end.
_JOIN_TIMEOUT = 30.0


class _Closed(Exception):
    """Raised inside the batcher's thread when `close` stops it."""


@dataclass
class _ActorSteps:
    """What the learner holds of one actor: its unroll so far and its next observations."""

    handle: object
    finisher: BehaviourPolicy  # Completes its unrolls: per-actor state (running returns).
    steps: list[dict] = field(default_factory=list)  # Transitions, samples and outputs.
    version: int | None = None  # The learner version of its unroll's first step.
    log_stds: list = field(default_factory=list)  # The Gaussian's log std of each step.
    returns: list[float] = field(default_factory=list)  # Episodes ended in the unroll.
    lengths: list[int] = field(default_factory=list)
    observ: np.ndarray | None = None  # [B, ...] to act on; None while a call is in flight.
    since: float = 0.0  # When `observ` arrived.
    acted: dict | None = None  # The sample, output (and states) of the step in flight.
    first: np.ndarray | None = None  # Recurrent: whether the next step begins an episode.
    state: np.ndarray | None = None  # Recurrent: the core states [B, S] to act from.
    start_state: np.ndarray | None = None  # Recurrent: the states its unroll started from.


class RayDynamicBatcher:
    """TorchBeast's dynamic batching for `EnvActor`s that only step environments.

    Every actor has one call in flight (`observ` first, then `step`). Results are taken as
    they arrive (`ray.wait`); once `max_batch` actors' observations are in hand, or
    `timeout` seconds after the first of them arrived, or when no call is left in flight,
    `policy` acts for them in one batched call and each actor is sent its own rows of the
    actions. Each actor's steps (transition, sample, output) are kept apart; its T-th makes
    an `Unroll` of its [T, B] steps, completed by that actor's own `finisher` (a copy of
    the behaviour policy: `finish_unroll` carries per-environment state, such as IMPALA's
    running discounted returns, which a shared copy would mix between actors). An
    unroll's version is that of its first step, the oldest weights that acted in it.

    A recurrent policy gets the rows of each actor's core states and episode starts; the
    batcher carries them per actor as `UnrollCollector` does, and each unroll holds the
    states it started from (`core_state` [B, S]) and `first` [T, B].

    Without `start`, the batcher runs only inside `next_unroll`: while the learner learns,
    actors finish their step in flight and wait (lockstep central inference wants this).
    After `start(capacity)` it runs in a thread of its own, so that actors keep stepping
    while the learner learns: finished unrolls go to a queue of `capacity`, which
    `next_unroll` takes from; when the queue is full, the thread waits and so do the
    actors. Weights given to `load` are loaded by whichever runs the batcher, before its
    next forward pass, so the policy is used by one thread only. An error in the thread
    (an actor failing too often, a timeout) is raised by the next `next_unroll`.

    An actor whose call fails is replaced (`ActorGroup`) and its unroll so far dropped; its
    replacement starts a new one.
    """

    def __init__(
        self,
        actors: ActorGroup,
        policy: BehaviourPolicy,
        make_finisher: Callable[[int], BehaviourPolicy],
        unroll_length: int,
        max_batch: int,
        timeout: float,
    ):
        """Sends every actor of `actors` (started) its first call.

        Args:
          actors: the `EnvActor`s, without policies of their own.
          policy: acts for them all, holding the weights of version 0 (see `load`).
          make_finisher: a policy copy for actor i, used only for its `finish_unroll`.
          unroll_length: T.
          max_batch: the most actors one call of `policy` serves, >= 1.
          timeout: seconds to wait for more actors after the first arrived, >= 0
            (`math.inf`: until `max_batch` have, or no call is in flight).
        """
        if max_batch < 1 or timeout < 0:
            raise ValueError(f"max_batch={max_batch} must be >= 1, timeout={timeout} >= 0.")
        self._actors = actors
        self.policy = policy
        self._make_finisher = make_finisher
        self._length = unroll_length
        self._max_batch = max_batch
        self._timeout = timeout
        self._recurrent = policy.initial_state(1) is not None
        self.version = 0  # The learner version of the weights `policy` holds.
        self._published: tuple | None = None  # (weights, version) for the next pass.
        self.batch_sizes: list[int] = []  # Actors per call of `policy`, for statistics.
        self._pending: dict = {}  # ObjectRef -> (actor index, sent at)
        self._ready: list[int] = []  # Actors whose observations wait, in order of arrival.
        self._finished: list[Unroll] = []
        self._slots = [self._start(index) for index in range(len(actors.handles))]
        self._thread: threading.Thread | None = None
        self._queue: queue.Queue | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None

    def start(self, capacity: int) -> None:
        """Runs the batcher in a thread of its own from now on, `capacity` unrolls ahead.

        Args:
          capacity: finished unrolls the queue holds before the thread waits, >= 1.
        """
        if capacity < 1:
            raise ValueError(f"capacity={capacity} must be >= 1.")
        self._queue = queue.Queue(capacity)
        self._thread = threading.Thread(target=self._run, name="ray dynamic batcher", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stops the thread (see `start`), if there is one; safe to call twice."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(_JOIN_TIMEOUT)
            if self._thread.is_alive():
                logger.warning(
                    "The Ray dynamic batcher's thread did not stop in %ss.", _JOIN_TIMEOUT
                )

    def next_unroll(self) -> Unroll:
        """The next finished unroll of any actor; acts and steps until there is one, or,
        after `start`, waits for the thread to queue one.

        Raises:
          RuntimeError: as `ActorGroup.replace`, or the batcher is closed.
          TimeoutError: an actor gave no result for `ActorGroup.timeout` seconds; names it.
        """
        if self._thread is None:
            return self._step_until_unroll()
        while True:
            try:
                return self._queue.get(timeout=_WAIT_INTERVAL)
            except queue.Empty:
                if self._error is not None:
                    raise self._error from None
                if not self._thread.is_alive():
                    raise RuntimeError("The Ray dynamic batcher is closed.") from None

    def _run(self) -> None:
        """The thread of `start`: unrolls into the queue until `close`, or an error."""
        try:
            while True:
                unroll = self._step_until_unroll()
                while True:
                    self._check_open()
                    try:
                        self._queue.put(unroll, timeout=_WAIT_INTERVAL)
                        break
                    except queue.Full:
                        pass
        except _Closed:
            pass
        except BaseException as error:  # Raised to the learner by `next_unroll`.
            self._error = error

    def _check_open(self) -> None:
        if self._stop.is_set():
            raise _Closed

    def _step_until_unroll(self) -> Unroll:
        """Acts and steps until an actor finishes an unroll; returns it."""
        while not self._finished:
            waiting = len(self._ready)
            due = self._slots[self._ready[0]].since + self._timeout if waiting else None
            if waiting and (
                waiting >= self._max_batch or not self._pending or time.monotonic() >= due
            ):
                self._act(self._ready[: self._max_batch])
                continue
            for ref in self._wait(self._max_batch - waiting if waiting else 1, due):
                self._receive(ref)
        return self._finished.pop(0)

    def load(self, weights: list[np.ndarray], version: int) -> None:
        """The learner's weights of `version` for the next forward passes (loaded before
        the next one, unless they are loaded)."""
        self._published = (weights, version)

    def _load_published(self) -> None:
        published = self._published  # One read: `load` may replace it meanwhile.
        if published is not None and published[1] != self.version:
            self.policy.load(published[0])
            self.version = published[1]

    def _start(self, index: int) -> _ActorSteps:
        """A fresh record of actor `index`'s handle, and its first call, for observations."""
        handle = self._actors.handles[index]
        slot = _ActorSteps(handle, self._make_finisher(index))
        self._pending[handle.observ.remote()] = (index, time.monotonic())
        return slot

    def _act(self, indices: list[int]) -> None:
        """One call of the policy for the actors `indices`; sends each its actions."""
        self._load_published()
        slots = [self._slots[index] for index in indices]
        observ = np.concatenate([slot.observ for slot in slots])  # [N, ...]
        splits = np.cumsum([len(slot.observ) for slot in slots])[:-1]
        if self._recurrent:
            for slot in slots:
                if slot.state is None:
                    slot.state = self.policy.initial_state(len(slot.observ))
                    slot.first = np.ones(len(slot.observ), bool)
            first = np.concatenate([slot.first for slot in slots])  # [N]
            state = np.concatenate([slot.state for slot in slots])  # [N, S]
            action, sample, output, new_state = self.policy(observ, first, state)
            new_states = np.split(new_state, splits)
        else:
            action, sample, output = self.policy(observ)
            new_states = [None] * len(slots)
        log_std = getattr(self.policy, "log_std", None)  # [size]; None: discrete actions.
        rows = zip(slots, np.split(action, splits), np.split(sample, splits),
                   np.split(output, splits), new_states)  # fmt: skip
        now = time.monotonic()
        for index, (slot, action_i, sample_i, output_i, state_i) in zip(indices, rows):
            slot.acted = dict(sample=sample_i, output=output_i, version=self.version)
            slot.acted.update(log_std=log_std, state=slot.state, new_state=state_i)
            slot.observ = None
            self._pending[slot.handle.step.remote(action_i)] = (index, now)
        self._ready = self._ready[len(indices) :]
        self.batch_sizes.append(len(indices))

    def _receive(self, ref) -> None:
        """Takes one actor's result: keeps the step, finishes an unroll, queues the actor."""
        index, _ = self._pending.pop(ref)
        slot = self._slots[index]
        try:
            result = ray.get(ref)
        except ray.exceptions.RayError as error:
            self._actors.replace(index, slot.handle, error)
            self._ready = [other for other in self._ready if other != index]
            self._slots[index] = self._start(index)  # Its unroll so far is dropped.
            return
        if slot.acted is None:  # The first observations of the actor.
            slot.observ = result
        else:
            transition, slot.observ, (returns, lengths) = result
            acted, slot.acted = slot.acted, None
            step = dict(transition, sample=acted["sample"], output=acted["output"])
            if self._recurrent:
                if not slot.steps:
                    slot.start_state = acted["state"]
                step["first"] = slot.first
                slot.first, slot.state = carry_state(transition, acted["new_state"], self.policy)
            slot.steps.append(step)
            if slot.version is None:  # Versions only grow: the first is the oldest.
                slot.version = acted["version"]
            slot.log_stds.append(acted["log_std"])
            slot.returns += returns
            slot.lengths += lengths
            if len(slot.steps) == self._length:
                self._finished.append(self._finish(index, slot))
        slot.since = time.monotonic()
        self._ready.append(index)

    def _finish(self, index: int, slot: _ActorSteps) -> Unroll:
        arrays = slot.finisher.finish_unroll(stack(slot.steps))
        if "behaviour_log_std" in arrays and slot.log_stds[0] is not None:
            # The finisher's weights are its first ones: each step's instead, [T, 1, size].
            arrays["behaviour_log_std"] = np.stack(slot.log_stds)[:, None]
        if self._recurrent:
            arrays["core_state"] = slot.start_state  # [B, S]
        unroll = Unroll(arrays, index, slot.version, slot.returns, slot.lengths)
        slot.steps, slot.log_stds, slot.returns, slot.lengths = [], [], [], []
        slot.version = None
        return unroll

    def _wait(self, wanted: int, until: float | None) -> list:
        """Up to `wanted` ready refs: as soon as that many are, or at `until` (perhaps none),
        or, without `until`, as soon as one is.

        Raises:
          TimeoutError: a call has been in flight for longer than `ActorGroup.timeout`; names
            its actors.
        """
        refs = list(self._pending)
        wanted = min(wanted, len(refs))
        while True:
            self._check_open()
            left = _WAIT_INTERVAL if until is None else until - time.monotonic()
            ready, _ = ray.wait(refs, num_returns=wanted, timeout=min(_WAIT_INTERVAL, max(0, left)))
            now = time.monotonic()
            late = [
                ref for ref, (_, sent) in self._pending.items() if now - sent > self._actors.timeout
            ]
            if late:  # Not answered for `timeout` seconds, even if others keep answering.
                _, late = ray.wait(late, num_returns=len(late), timeout=0)
                if late:
                    indices = [self._pending[ref][0] for ref in late]
                    raise self._actors.timeout_error("a step (dynamic batching)", indices)
            if len(ready) == wanted or (ready and until is None):
                return ready
            if until is not None and now >= until:
                return ready
