"""Ape-X DQN over Ray: epsilon-ladder actors, prioritized replay shards, one learner."""

from __future__ import annotations

import logging
import time
from typing import Unpack

import numpy as np
import ray
import tensorflow as tf

from batchrl.config import ConfigError
from batchrl.config.run_config import algorithm_section
from batchrl.parts import summary
from batchrl.runners.ray.actors import merge_episode_stats
from batchrl.runners.ray.apex_actor import ApexActor, acting_config, check_apex_config, epsilons
from batchrl.runners.ray.group import ActorOptions, RayRunner, options_of
from batchrl.runners.ray.replay_shards import ReplayShard, ShardContents, item_spec
from batchrl.tools.environments import EnvSpaces

logger = logging.getLogger("batchrl.runners.ray")


class RayApex(RayRunner):
    """Ape-X DQN (Horgan et al. 2018): actors and replay shards as Ray actors, the learner here.

    Each of `ray.num_actors` `ApexActor`s collects blocks of `apex.block_length` batched
    steps with its own epsilon (`epsilons`) and the newest weights it was sent; each block,
    with its priorities, goes from the actor's object store to a replay shard (`ReplayShard`,
    `apex.num_shards` of them, taken in turn), never through this process. The learner
    keeps `apex.requests_per_shard` sample requests in flight per shard and learns on
    whichever batch arrives first, so that it never waits on one shard; it sends the new
    priorities back to the shard the batch came from, which drops those of slots that
    blocks overwrote since the sample (`ShardBuffer`), and puts its weights into the
    object store every `apex.weights_every` updates. Blocks that arrived are handed to shards
    between updates; until the shards hold `dqn.learning_starts` transitions, `step` only
    collects. With `apex.steps_per_update` > 0 an actor whose block arrives while the
    actors are that many environment steps per update ahead of the learner waits for
    its next request until the learner caught up (a replay ratio; 0 lets them run free,
    as in the paper).

    An actor that dies is replaced, and the request it failed counted as a lost block
    (`apex/lost_blocks`): its block in flight, or, for an actor that died while held back
    (nothing in flight, its death unseen until asked), the request that found it dead. A
    shard that dies is replaced empty, its transitions counted as lost and logged, and
    the learner samples from the others meanwhile. Every wait has `timeout` and names
    whom it awaits.
    """

    @classmethod
    def check_config(cls, config, algo_cls) -> None:
        """Raises ConfigError for an off-policy algorithm other than DQN, or an `apex`
        section that cannot work."""
        name = config.algorithm.name
        if algorithm_section(config) != "dqn":
            raise ConfigError(
                f"algorithm.name={name!r} is off-policy, and runner.name='ray' runs only "
                "DQN's off-policy path (Ape-X: epsilon-greedy actors feeding prioritized "
                "replay shards); SAC's and TD3's actors would need their continuous-action "
                "policies there, which are not written. Use runner.name='local'."
            )
        check_apex_config(config)
        super().check_config(config, algo_cls)

    @classmethod
    def algorithm_config(cls, config):
        """Ape-X's learner samples from the shards, so its own replay buffer is the least
        its checks allow (`acting_config`)."""
        return acting_config(config)

    @classmethod
    def make_batch_env(cls, config, seed: int):
        """The spaces of an actor's environments: the learner steps none."""
        return EnvSpaces(config.env, config.env.num_envs)

    @classmethod
    def cpus_needed(cls, config) -> float:
        """The actors' CPUs and the replay shards' (`apex.num_shards` x `apex.cpus_per_shard`)."""
        return super().cpus_needed(config) + config.apex.num_shards * config.apex.cpus_per_shard

    @classmethod
    def from_config(cls, config, algo, seed: int) -> RayApex:
        return cls(config, algo, config.ray.num_actors, **options_of(config, seed))

    def __init__(self, config, learner, num_actors: int, **options: Unpack[ActorOptions]):
        """Starts the actors and shards; Ray must be connected (`connect`).

        Args:
          config: the run's config: its `dqn` and `apex` sections.
          learner: the `DQN` that learns (built for `env.num_envs` environments).
          num_actors: Ray actors, each with `env.num_envs` environments.
          **options: of the actors and shards (`ActorOptions`; restarts counted apart for
            actors and for shards). Actor i's environments are reset with seeds
            `seed + 1000 * i` (plus 100,000 per restart so far); shard j samples with seed
            `seed + j` (plus as much).
        """
        super().__init__(**options)
        cfg = self._cfg = config.apex
        self._dqn = config.dqn
        self._learner = learner
        self._learn = tf.function(self._learn_step)
        self._beta = tf.function(learner.beta)
        self.version = int(learner.updates)
        self.env_steps = int(learner.env_steps)
        self.added = 0  # Transitions the shards took.
        self.lost_transitions = 0
        self._weights = ray.put(self._snapshot())
        self._weights_version = self.version  # The update `_weights` are of.
        self._rates = epsilons(num_actors, cfg.epsilon, cfg.epsilon_alpha)
        spec = item_spec(config)
        capacity = cfg.buffer_size // cfg.num_shards
        # dqn.prioritized false samples uniformly through the same shards (alpha 0).
        alpha = self._dqn.priority_alpha if self._dqn.prioritized else 0.0
        priority = (alpha, self._dqn.priority_epsilon)

        self._collecting: dict = {}  # info ref -> (actor index, handle, block ref)
        self._adding: dict = {}  # ref -> (shard index, handle, transitions, time sent)
        self._sampling: dict = {}  # ref -> (shard index, handle)
        self._updating: dict = {}  # ref -> (shard index, handle)
        self._sizes = [0] * cfg.num_shards  # Each shard's size, as its last add said.
        self._next_shard = 0
        self._idle: list[int] = []  # Actors held back by apex.steps_per_update.
        self._start = None  # (env steps, version) where learning started.
        self._first_steps = self.env_steps  # Where this runner started collecting.
        self._steps = 0  # Environment steps collected since the last `step`.
        self._episodes: list[tuple[list, list]] = []
        with self.closing_on_error():
            self._actors = self.start_group(
                ApexActor,
                lambda index, seed: (config, self._rates[index], seed, self.tf_threads),
                num_actors,
            )
            self._shards = self.start_group(
                ReplayShard,
                lambda index, seed: (capacity, spec, *priority, seed),
                cfg.num_shards,
                cpus_per_actor=cfg.cpus_per_shard,
                seed_stride=1,
                kind="replay shard",
            )
            if cfg.checkpoint_shards:  # Restores the shards' contents, if the checkpoint has them.
                learner.apex_shards = ShardContents(self)
            for index in range(num_actors):
                self._request(index)

    @property
    def lost_blocks(self) -> int:
        """Blocks lost with the actors that died collecting them."""
        return self._actors.lost

    @property
    def shards(self) -> list:
        return self._shards.handles

    @property
    def shard_restarts(self) -> int:
        return self._shards.restarts

    @property
    def rates(self) -> list[float]:
        """Each actor's epsilon, by index."""
        return list(self._rates)

    def step(self) -> tuple[int, dict]:
        """One learner update, or, until the shards hold enough, one round of collecting.

        Writes `apex/*` scalars (policy lag, sample age, restarts, losses, fill) and the
        learner's `dqn/*` metrics to the default summary writer, if there is one.

        Returns:
          The environment steps collected since the last call and their episodes' statistics.

        Raises:
          RuntimeError: actors or shards failed more than `max_actor_restarts` times.
          TimeoutError: no actor or shard answered for `timeout` seconds; names them.
        """
        self._poll(wait=False)
        if self._can_learn():
            self._start = self._start or (self.env_steps, self.version)
            self._update()
        else:
            self._poll(wait=True)
        self._release()
        summary.scalar("apex/actor_restarts", float(self.restarts))
        summary.scalar("apex/shard_restarts", float(self.shard_restarts))
        summary.scalar("apex/lost_blocks", float(self.lost_blocks))
        summary.scalar("apex/lost_transitions", float(self.lost_transitions))
        summary.scalar("apex/buffer_size", float(sum(self._sizes)))
        steps, self._steps = self._steps, 0
        parts = [_episode_part(returns, lengths) for returns, lengths in self._episodes]
        self._episodes = []
        _, stats = merge_episode_stats(parts or [_episode_part([], [])])
        return steps, stats

    def contents(self) -> dict[str, np.ndarray]:
        """All shards' transitions and priorities, shard after shard, each oldest first."""
        parts = self._shards.gather(lambda _, shard: shard.contents.remote(), "shard contents")
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}

    def load(self, contents: dict[str, np.ndarray]) -> None:
        """Fills the shards with `contents`, item k into shard k mod `apex.num_shards`."""
        shards = len(self._sizes)
        count = len(contents["priority"])
        for index in range(min(shards, count)):
            items = {key: value[index::shards] for key, value in contents.items()}
            priorities = items.pop("priority")
            self._adding[self._shards.handles[index].add.remote((items, priorities))] = (
                index,
                self._shards.handles[index],
                len(priorities),
                time.monotonic(),
            )
        if count:
            logger.info("Restored %d transitions into %d replay shards.", count, shards)

    def close(self) -> None:
        """Kills the actors and shards (environment workers exit with them); safe twice."""
        if getattr(self._learner, "apex_shards", None) is not None:
            del self._learner.apex_shards  # Its shards are gone.
        self._collecting, self._adding, self._sampling, self._updating = {}, {}, {}, {}
        super().close()

    # Collecting.

    def _request(self, index: int) -> None:
        handle = self._actors.handles[index]
        length = self._cfg.block_length
        block, info = handle.collect.remote(self._weights, self._weights_version, length)
        self._collecting[info] = (index, handle, block)

    def _poll(self, wait: bool) -> None:
        """Takes every finished block, add and priority update; with `wait`, waits until
        at least one block or add finished. Before a wait, held-back actors that may go
        are sent their requests: a shard's death drops its adds in flight, and with every
        actor held back there was then nothing to wait for (in CI: `ray.timeout` of
        waiting, then a TimeoutError)."""
        if wait:
            self._release()
            refs = list(self._collecting) + list(self._adding)
            if not refs:
                raise RuntimeError(
                    f"Ape-X: nothing in flight to wait for (actors held back: {self._idle}, "
                    f"shard sizes: {self._sizes}); a bug in RayApex's bookkeeping."
                )
            deadline = time.monotonic() + self._actors.timeout
            self._actors.wait(refs, "blocks of transitions", deadline, self._awaited())
        ready = _ready(list(self._collecting))
        for ref in ready:
            self._take_block(ref)
        # A failed shard drops its other calls, so a ready ref may be gone already.
        for ref in _ready(list(self._adding)):
            if ref not in self._adding:
                continue
            index, handle, count, _ = self._adding.pop(ref)
            try:
                self._sizes[index] = ray.get(ref)
            except ray.exceptions.RayError as error:
                self._shard_failed(index, handle, error, count)
            else:
                self.added += count
        for ref in _ready(list(self._updating)):
            if ref not in self._updating:
                continue
            index, handle = self._updating.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayError as error:
                self._shard_failed(index, handle, error)
        self._check_adds()

    def _check_adds(self) -> None:
        """Raises TimeoutError naming the shard when a block sent to it has waited
        `timeout` seconds to be stored: the actors' blocks keep arriving meanwhile, so no
        other wait would notice a shard that is alive but stuck, or never placed."""
        if not self._adding:
            return
        index, _, _, sent = min(self._adding.values(), key=lambda value: value[3])
        if time.monotonic() - sent > self._shards.timeout:
            raise self._shards.timeout_error("it to store a block of transitions", [index])

    def _awaited(self) -> list[int]:
        return [index for index, _, _ in self._collecting.values()]

    def _take_block(self, ref) -> None:
        """Sends a finished block to the next shard, and the actor a new request."""
        index, handle, block = self._collecting.pop(ref)
        try:
            info = ray.get(ref)
        except ray.exceptions.RayError as error:
            if self._actors.replace(index, handle, error):
                self._request(index)
            return
        if self._ahead():
            self._idle.append(index)
        else:
            self._request(index)
        self._steps += info["steps"]
        self.env_steps += info["steps"]
        self._episodes.append((info["returns"], info["lengths"]))
        if info["transitions"]:
            shard = self._next_shard
            self._next_shard = (shard + 1) % len(self._sizes)
            target = self._shards.handles[shard]
            sent = time.monotonic()
            self._adding[target.add.remote(block)] = (shard, target, info["transitions"], sent)

    def _shard_failed(self, index: int, handle, error: BaseException, count: int = 0) -> None:
        """Replaces a dead shard with an empty one; its transitions are counted as lost."""
        self.lost_transitions += count  # A block on its way to the dead shard.
        if not self._shards.replace(index, handle, error):
            return
        lost = self._sizes[index]
        self.lost_transitions += lost
        self._sizes[index] = 0
        for calls in (self._adding, self._sampling, self._updating):
            for ref, value in list(calls.items()):
                if value[1] is handle:
                    del calls[ref]
                    if calls is self._adding:
                        self.lost_transitions += value[2]
        logger.warning(
            "Replay shard %d died: %d transitions lost (%d in all so far); it was replaced by "
            "an empty shard, and the learner samples from the others meanwhile.",
            index,
            lost,
            self.lost_transitions,
        )

    def _release(self) -> None:
        """Sends the actors held back a request, once the learner caught up."""
        while self._idle and not self._ahead():
            self._request(self._idle.pop())

    def _ahead(self) -> bool:
        """Whether the actors collected `apex.steps_per_update` steps per update or more
        since learning started (never with 0). Before learning starts, whether they
        collected what it needs (`dqn.learning_starts`) and the shards have yet to take
        some of it: on a loaded machine the shards' acknowledgements lag, and actors let
        run until then collected 8,064 steps where 1,000 were needed, so the run learned
        on half the updates its steps call for."""
        ratio = self._cfg.steps_per_update
        if not ratio:
            return False
        if self._start is None:
            needed = self._learning_needs()
            return bool(self._adding) and self.env_steps - self._first_steps >= needed
        if not self._can_learn():
            return False
        steps, version = self._start
        return self.env_steps - steps >= ratio * (self.version - version + 1)

    # Learning.

    def _learning_needs(self) -> int:
        """The transitions the shards hold before learning starts."""
        return max(self._dqn.batch_size, self._dqn.learning_starts)

    def _can_learn(self) -> bool:
        needed = self._learning_needs()
        return sum(self._sizes) >= needed and max(self._sizes) >= self._dqn.batch_size

    def _update(self) -> None:
        """One gradient step on the first batch any shard gives; priorities go back to it."""
        index, handle, (indices, weights, items, ages, writes) = self._next_batch()
        batch = {key: tf.convert_to_tensor(value) for key, value in items.items()}
        self._learner.env_steps.assign(self.env_steps)  # Target copies and beta follow it.
        metrics, td_error = self._learn(tf.convert_to_tensor(weights), batch)
        self._send_priorities(index, handle, indices, np.abs(td_error.numpy()), writes)
        lag = self.version - items["version"]
        self.version += 1
        if self.version % self._cfg.weights_every == 0:
            self._weights = ray.put(self._snapshot())
            self._weights_version = self.version
        for name, value in metrics.items():
            summary.scalar(f"dqn/{name}", value)
        summary.scalar("apex/policy_lag", float(np.mean(lag)))
        summary.scalar("apex/policy_lag_max", float(np.max(lag)))
        summary.scalar("apex/sample_age", float(np.mean(ages)))
        summary.scalar("apex/sample_age_max", float(np.max(ages)))
        summary.scalar("apex/beta", float(self._beta()))

    def _send_priorities(self, index: int, handle, indices, priorities, writes) -> None:
        """Sends a batch's new priorities to its shard, which drops those of slots that
        actors' blocks overwrote since the sample (`writes`, the slots' write counts then)."""
        update = handle.update_priorities.remote(indices, priorities, writes)
        self._updating[update] = (index, handle)

    def _learn_step(self, weights, batch):
        self._learner.before_learning()
        return self._learner.learn_on(weights, batch)

    def _next_batch(self) -> tuple[int, object, tuple]:
        """The first sampled batch to arrive, with the shard that gave it."""
        deadline = time.monotonic() + self._shards.timeout
        while True:
            self._fill_requests()
            if not self._sampling:  # Every shard that held a batch died: collect more.
                self._release()
                self._poll(wait=True)
                continue
            awaited = [index for index, _ in self._sampling.values()]
            for ref in self._shards.wait(
                list(self._sampling), "sampled batches", deadline, awaited
            ):
                if ref not in self._sampling:  # Dropped with its failed shard.
                    continue
                index, handle = self._sampling.pop(ref)
                try:
                    batch = ray.get(ref)
                except ray.exceptions.RayError as error:
                    self._shard_failed(index, handle, error)
                    continue
                if batch is None:  # A shard smaller than it was (a replacement).
                    self._sizes[index] = min(self._sizes[index], self._dqn.batch_size - 1)
                    continue
                return index, handle, batch
            self._poll(wait=False)

    def _fill_requests(self) -> None:
        """Keeps `requests_per_shard` sample requests on every shard that holds a batch."""
        beta = float(self._beta())
        for index, handle in enumerate(self._shards.handles):
            if self._sizes[index] < self._dqn.batch_size:
                continue
            pending = sum(1 for i, _ in self._sampling.values() if i == index)
            for _ in range(self._cfg.requests_per_shard - pending):
                ref = handle.sample.remote(self._dqn.batch_size, beta)
                self._sampling[ref] = (index, handle)

    def _snapshot(self) -> list[np.ndarray]:
        variables = self._learner.q.variables + self._learner.target_q.variables
        return [variable.numpy() for variable in variables]


def _ready(refs: list) -> list:
    if not refs:
        return []
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
    return ready


def _episode_part(returns: list, lengths: list) -> dict:
    """`merge_episode_stats`'s part of one block's finished episodes."""
    return {
        "steps": 0,
        "episodes": len(returns),
        "mean_return": float(np.mean(returns)) if returns else float("nan"),
        "mean_length": float(np.mean(lengths)) if lengths else float("nan"),
    }
