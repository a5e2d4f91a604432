"""Combines several environments into one that steps and resets them as a batch."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from batchrl.tools.external_process import ExternalProcess


class BatchEnv:
    """A batch of N environments with the same observation and action spaces.

    Environments can be Gymnasium environments or `ExternalProcess`es. With `blocking`
    false, every `ExternalProcess` of the batch is sent its call before any answer is
    awaited, so the workers step in parallel; other environments step in turn. Workers
    that do not answer within `timeout` seconds are terminated and named in a
    `TimeoutError`; without blocking, all workers of a call share one deadline.

        with BatchEnv([ExternalProcess(make_env) for _ in range(8)], blocking=False) as envs:
            observ = envs.reset(seed=0)                        # [8, ...]
            observ, reward, terminated, truncated, infos = envs.step(actions)
            envs.reset(np.where(terminated | truncated)[0])    # [K, ...]

    Environments are never reset automatically.
    """

    def __init__(self, envs: Sequence[Any], blocking: bool, timeout: float = 60.0):
        """Checks that the spaces of the environments match.

        Args:
          envs: the environments; at least one.
          blocking: when false, step and reset `ExternalProcess`es in parallel.
          timeout: seconds to wait for the answers of `ExternalProcess`es to one step or
            reset of the batch: each in turn when blocking, all against one deadline
            otherwise.

        Raises:
          ValueError: no environment, or one whose spaces differ from those of the first.
        """
        if not envs:
            raise ValueError("BatchEnv needs at least one environment.")
        self._envs = list(envs)
        self._blocking = blocking
        self._timeout = timeout
        self.observation_space = self._envs[0].observation_space
        self.action_space = self._envs[0].action_space
        for index, env in enumerate(self._envs[1:], 1):
            for kind, space in [
                ("observation", self.observation_space),
                ("action", self.action_space),
            ]:
                other = getattr(env, f"{kind}_space")
                if other != space:
                    raise ValueError(
                        f"Environment {index} has {kind} space {other!r}, but environment 0 "
                        f"has {space!r}; all environments of a batch need the same spaces."
                    )

    def __len__(self) -> int:
        return len(self._envs)

    def __getitem__(self, index: int) -> Any:
        return self._envs[index]

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
        """Steps every environment with its action.

        Args:
          actions: array [N, *action_space.shape].

        Returns:
          observ [N, ...], reward [N] float32, terminated [N] bool, truncated [N] bool, and
          a list of N info dicts.

        Raises:
          ValueError: the shape of `actions` is wrong, or a Discrete action is not an
            integer of the space; or an environment returned an observation of another
            shape than its space declares, or a reward, terminated or truncated that is
            not a scalar.
        """
        actions = self._check_actions(actions)
        transitions = self._call_all(
            [(index, "step", (action,), {}) for index, action in enumerate(actions)]
        )
        observs, rewards, terminated, truncated, infos = zip(*transitions, strict=True)
        indices = range(len(self))
        shape = tuple(self.observation_space.shape)
        declared = f"its observation_space declares shape {shape}"
        scalar = "it must be a scalar"
        return (
            self._stack(observs, indices, "step", "an observation", shape, declared),
            self._stack(rewards, indices, "step", "a reward", (), scalar, np.float32),
            self._stack(terminated, indices, "step", "a terminated flag", (), scalar, bool),
            self._stack(truncated, indices, "step", "a truncated flag", (), scalar, bool),
            list(infos),
        )

    def reset(self, indices: Sequence[int] | None = None, seed: int | None = None) -> np.ndarray:
        """Resets the environments at `indices`, all of them when None.

        Args:
          indices: K distinct environment indices.
          seed: when given, environment i is reset with seed `seed + i`.

        Returns:
          observ [K, ...], the first observations of the new episodes.

        Raises:
          ValueError: an environment returned an observation of another shape than its
            space declares.
        """
        indices = self._check_indices(indices)
        calls = []
        for index in indices:
            kwargs = {"seed": None if seed is None else seed + index}
            calls.append((index, "reset", (), kwargs))
        observs = [observ for observ, _ in self._call_all(calls)]
        shape = tuple(self.observation_space.shape)
        if not observs:
            return np.zeros((0,) + shape, self.observation_space.dtype)
        declared = f"its observation_space declares shape {shape}"
        return self._stack(observs, indices, "reset", "an observation", shape, declared)

    def _check_indices(self, indices: Sequence[int] | None) -> list[int]:
        if indices is None:
            return list(range(len(self)))
        indices = [int(index) for index in np.asarray(indices).reshape(-1)]
        for index in indices:
            if not 0 <= index < len(self):
                raise IndexError(
                    f"Cannot reset environment {index}: valid indices are 0 to {len(self) - 1}."
                )
        return indices

    def close(self) -> None:
        """Closes every environment; re-raises the first error after trying all."""
        errors = []
        for env in self._envs:
            try:
                env.close()
            except Exception as error:
                errors.append(error)
        if errors:
            raise errors[0]

    def __enter__(self) -> BatchEnv:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _call_all(self, calls: list[tuple[int, str, tuple, dict]]) -> list[Any]:
        """Calls `method(*args, **kwargs)` on each `index`, in parallel unless blocking.

        Raises:
          TimeoutError: naming every worker that did not answer in time.
          Exception: otherwise the first error of an environment.
        """
        results = []
        for index, method, args, kwargs in calls:
            env = self._envs[index]
            if isinstance(env, ExternalProcess):
                promise = env.call(method, *args, blocking=False, **kwargs)
                results.append(promise(self._timeout) if self._blocking else promise)
            else:
                results.append(getattr(env, method)(*args, **kwargs))
        if self._blocking:
            return results
        # Collect every answer before raising, so that no worker is left with one unread.
        # The workers run at once, so one deadline covers them all: a second hung worker
        # adds no wait of its own.
        deadline = time.monotonic() + self._timeout
        failures = []
        for position, (index, *_) in enumerate(calls):
            if isinstance(self._envs[index], ExternalProcess):
                try:
                    results[position] = results[position](max(0.0, deadline - time.monotonic()))
                except Exception as error:
                    failures.append((self._envs[index], error))
        if failures:
            self._raise_failures(failures, calls[0][1])
        return results

    def _raise_failures(self, failures: list[tuple[ExternalProcess, Exception]], call: str) -> None:
        """Raises a TimeoutError naming every worker that timed out, else the first error."""
        late = [worker for worker, error in failures if isinstance(error, TimeoutError)]
        if not late:
            raise failures[0][1]
        names = ", ".join(f"{worker.name!r} (pid {worker.pid})" for worker in late)
        others = [str(error) for _, error in failures if not isinstance(error, TimeoutError)]
        message = (
            f"Environment workers did not answer {call}() within {self._timeout} seconds and "
            f"were terminated: {names}."
        )
        if others:
            message += " Other workers failed as well:\n" + "\n".join(others)
        first_timeout = next(error for _, error in failures if isinstance(error, TimeoutError))
        raise TimeoutError(message) from first_timeout

    def _stack(
        self,
        values: Sequence[Any],
        indices: Sequence[int],
        call: str,
        what: str,
        shape: tuple[int, ...],
        rule: str,
        dtype: Any = None,
    ) -> np.ndarray:
        """Stacks one value per environment into [K, *shape], or raises naming a wrong one.

        Args:
          values: K values, one from each environment at `indices`.
          indices: K environment indices.
          call: the environment call that returned the values, e.g. 'step'.
          what: what a value is, e.g. 'an observation'.
          shape: the shape every value must have.
          rule: the message's reason for `shape`.
          dtype: the dtype of the result; that of the values when None.

        Raises:
          ValueError: naming the first environment whose value has another shape, the
            shape it has and the shape it should have.
        """
        try:
            batch = np.stack(values) if dtype is None else np.asarray(values, dtype)
        except ValueError:  # Values of different shapes, or not numbers.
            batch = None
        if batch is not None and batch.shape[1:] == shape:
            return batch
        for index, value in zip(indices, values):
            if np.shape(value) != shape:
                raise ValueError(
                    f"{self._describe(index)} returned {what} of shape {np.shape(value)} "
                    f"from {call}(), but {rule}."
                )
        # The shapes are right, so the values are not numbers: raise the error of that.
        return np.asarray(values, dtype)

    def _describe(self, index: int) -> str:
        """'Environment 3', with the name of its worker if it has one."""
        env = self._envs[index]
        if isinstance(env, ExternalProcess):
            return f"Environment {index} (worker {env.name!r})"
        return f"Environment {index}"

    def _check_actions(self, actions: Any) -> np.ndarray:
        """Checks the shape of `actions` and, for Discrete spaces, their values."""
        space = self.action_space
        actions = np.asarray(actions)
        expected = (len(self),) + tuple(space.shape)
        if actions.shape != expected:
            raise ValueError(
                f"Actions have shape {actions.shape}, but the batch of {len(self)} "
                f"environments with action space {space!r} needs shape {expected}."
            )
        if isinstance(space, gym.spaces.Box):
            return actions.astype(space.dtype, copy=False)
        if isinstance(space, gym.spaces.Discrete):
            start, stop = int(space.start), int(space.start + space.n)
            if not np.issubdtype(actions.dtype, np.integer):
                raise ValueError(
                    f"Actions for {space!r} must be integers in [{start}, {stop}), "
                    f"got dtype {actions.dtype}: {actions!r}."
                )
            for index, action in enumerate(actions):
                if not start <= action < stop:
                    raise ValueError(
                        f"Action {action} for environment {index} is outside {space!r}; "
                        f"valid actions are integers in [{start}, {stop})."
                    )
            return actions.astype(space.dtype)
        return actions


class GroupedBatchEnv(BatchEnv):
    """Groups of environments, each a batch of its own, stepped as one batch.

    A group is anything with `BatchEnv`'s `step` and `reset`, usually a `BatchEnv` built
    inside an `ExternalProcess` by `make_group`, so that one worker steps several
    environments per round trip. On a machine with few cores this beats one process per
    environment: a round trip to a worker costs about as much as a MuJoCo step.

        groups = [ExternalProcess(functools.partial(make_group, make_env, 4)) for _ in range(2)]
        with GroupedBatchEnv(groups, sizes=[4, 4], blocking=False) as envs:   # 8 environments
            observ = envs.reset(seed=0)                                     # [8, ...]

    Environment i of the batch is environment i - offset of its group, where the offset
    is the sum of the sizes of the groups before it. `envs[i]` is group i.
    """

    def __init__(
        self, groups: Sequence[Any], sizes: Sequence[int], blocking: bool, timeout: float = 60.0
    ):
        """Checks that the spaces of the groups match.

        Args:
          groups: the groups of environments; at least one.
          sizes: the number of environments in each group.
          blocking: when false, step and reset `ExternalProcess` groups in parallel.
          timeout: seconds to wait for the groups in workers; see `BatchEnv`.

        Raises:
          ValueError: sizes do not match the groups, or the spaces of the groups differ.
        """
        super().__init__(groups, blocking, timeout)
        if len(sizes) != len(groups) or any(int(size) < 1 for size in sizes):
            raise ValueError(
                f"sizes={list(sizes)} must give a positive size for each of the "
                f"{len(groups)} groups."
            )
        self._offsets = np.cumsum([0] + [int(size) for size in sizes])

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
        """Steps every environment of every group; see `BatchEnv.step`."""
        actions = self._check_actions(actions)
        bounds = zip(self._offsets[:-1], self._offsets[1:])
        calls = [(group, "step", (actions[lo:hi],), {}) for group, (lo, hi) in enumerate(bounds)]
        parts = self._call_all(calls)
        observ, reward, terminated, truncated = (
            np.concatenate([part[field] for part in parts]) for field in range(4)
        )
        return observ, reward, terminated, truncated, [info for part in parts for info in part[4]]

    def reset(self, indices: Sequence[int] | None = None, seed: int | None = None) -> np.ndarray:
        """Resets the environments at `indices`; see `BatchEnv.reset`."""
        indices = self._check_indices(indices)
        groups = np.searchsorted(self._offsets, indices, side="right") - 1
        calls, order = [], []
        for group in sorted(set(groups.tolist())):
            members = [index for index, owner in zip(indices, groups) if owner == group]
            offset = int(self._offsets[group])
            local = [index - offset for index in members]
            group_seed = None if seed is None else seed + offset
            calls.append((group, "reset", (local,), {"seed": group_seed}))
            order += members
        if not calls:
            return np.zeros((0,) + tuple(self.observation_space.shape), np.float32)
        observ = np.concatenate(self._call_all(calls))
        position = {index: row for row, index in enumerate(order)}
        return observ[[position[index] for index in indices]]  # In the order of `indices`.


def make_group(constructor: Any, size: int) -> BatchEnv:
    """A `BatchEnv` of `size` environments from `constructor`, stepped in turn."""
    return BatchEnv([constructor() for _ in range(size)], blocking=True)


def check_finite(what: str, values: np.ndarray, call: str, indices=None) -> None:
    """Raises ValueError naming the first environment whose values are NaN or infinite.

    Args:
      what: what the values are, e.g. 'observation' or 'reward'.
      values: [N, ...] one row per environment.
      call: the environment call that returned them, e.g. 'step' or 'reset'.
      indices: the environment index of each row; None for rows 0 to N - 1.
    """
    finite = np.isfinite(values.reshape(len(values), -1)).all(axis=1)
    if finite.all():
        return
    row = int(np.argmin(finite))
    index = row if indices is None else int(indices[row])
    raise ValueError(
        f"Environment {index} returned a non-finite {what} from {call}(): {values[row]!r}. "
        "Observations and rewards must be finite numbers."
    )
