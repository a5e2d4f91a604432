"""Restarts of failed actors against a budget: what the threads and Ray runners share."""

from __future__ import annotations

import logging

logger = logging.getLogger("batchrl.runners")


class Restarts:
    """Counts a runner's failed actors, and the work their failures lost, up to `limit`.

    Each `count` is one actor that failed and is about to be replaced: it is logged with
    what it raised, or, once actors have failed more than `limit` times in all, it raises.
    `noun` names the actors in messages ("actor", "Ray replay shard"); `setting` is the
    config key of the limit ("threads.max_actor_restarts").

        restarts = Restarts(10, "actor", "threads.max_actor_restarts")
        restarts.count(3, "WorkerDiedError: ...", error)  # Logged; raises on the 11th.
    """

    def __init__(self, limit: int, noun: str = "actor", setting: str = "max_actor_restarts"):
        self.limit = limit
        self.noun = noun
        self.setting = setting
        self.restarts = 0
        self.lost = 0  # Calls (unrolls, rollouts, blocks) whose results failures lost.

    def count(self, index: int, what: str, error: BaseException, detail: str = "") -> None:
        """Counts the failure of actor `index`, which raised `what` ('Type: message').

        Args:
          index: the actor's index in its group.
          what: its error, one line.
          error: the exception, chained to the RuntimeError.
          detail: more lines for the log (a remote traceback), or ''.

        Raises:
          RuntimeError: actors failed more than `limit` times; names the actor and its error.
        """
        self.restarts += 1
        name = self.noun[0].upper() + self.noun[1:]
        if self.restarts > self.limit:
            raise RuntimeError(
                f"{name} {index} failed, and {self.noun}s have failed {self.restarts} times in "
                f"all, more than {self.setting}={self.limit}. Its error: {what}"
            ) from error
        logger.warning(
            "%s %d failed (%s); replacing it (restart %d of at most %d).%s",
            name,
            index,
            what,
            self.restarts,
            self.limit,
            detail,
        )

    def lose(self, calls: int = 1) -> None:
        """Counts `calls` whose work a failure lost (a block, a rollout in flight)."""
        self.lost += calls


def first_line(error: BaseException) -> str:
    """'Type: first line of the message' of `error`."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"
