"""Each member's own PPO settings: the keys given as lists, and those PBT changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import tensorflow as tf

from batchrl.algorithms.ppo.section import MEMBER_KEYS, PBT_KEYS
from batchrl.parts import pbt
from batchrl.parts.schedules import learning_rate


class MemberSettings:
    """The `ppo` settings of a population of M members: each key a float or a tensor [M].

    A key the config gives as a list of M values (`MEMBER_KEYS`) is a constant [M]; a key
    population-based training changes is a variable [M] (`variables`, which the algorithm
    tracks, so that checkpoints hold them): those it perturbs (`pbt.perturb`) and, with
    PBT on (`inherit`), the listed keys too, which a copied member takes from its parent
    (`explore`). Any other key is the config's float, which every member shares.

        settings = MemberSettings(config.ppo, ("learning_rate",), members=4)
        settings.get("discount")         # 0.99, or [M] if listed
        settings.get("learning_rate")    # variable's value [M]
        settings.varying()               # {'learning_rate': [M], ...}

    Not a `tf.Module`: its constants are rebuilt from the config, and its variables are
    tracked by whoever holds `variables` (`PopulationPPO.pbt_settings`).
    """

    def __init__(
        self,
        cfg: Mapping,
        pbt_keys: Sequence[str],
        members: int,
        resample_probability: float = 0.0,
        inherit: bool = False,
    ):
        """Args:
        cfg: the `ppo` section; a key of `MEMBER_KEYS` may be a tuple of M values.
        pbt_keys: the keys population-based training perturbs (`pbt.perturb`, or ()).
        members: M.
        resample_probability: `pbt.resample_probability`, the chance that PBT's explore
          step draws a copied member's value of a key afresh (`explore`).
        inherit: population-based training is on (`pbt.interval` > 0): the listed keys
          are variables too, which a copied member takes from its parent.
        """
        self._cfg = cfg
        self.members = members
        self.pbt_keys = tuple(pbt_keys)
        self.resample_probability = float(resample_probability)
        # What a resampled key draws from: the distinct values the config gave members.
        self.choices = {key: sorted(set(_as_tuple(cfg[key]))) for key in self.pbt_keys}
        listed = [key for key in MEMBER_KEYS if _listed(cfg[key])]
        # The keys a copied member only takes from its parent, then those it perturbs.
        changed = [key for key in listed if key not in self.pbt_keys] if inherit else []
        changed += self.pbt_keys
        self._listed = {
            key: tf.constant(cfg[key], tf.float32) for key in listed if key not in changed
        }  # [M] each
        self.variables = {
            key: tf.Variable(
                tf.broadcast_to(tf.constant(cfg[key], tf.float32), [members]),
                trainable=False,
                name=key,
            )
            for key in changed
        }  # [M] each

    def get(self, key: str):
        """`ppo.<key>`: a float the members share, or each member's value [M]."""
        if key in self.variables:
            return self.variables[key].read_value()
        return self._listed.get(key, self._cfg[key])

    def live(self, key: str):
        """As `get`, but a key PBT changes is its variable [M], read where it is used."""
        if key in self.variables:
            return self.variables[key]
        return self.get(key)

    def varying(self) -> dict[str, tf.Tensor]:
        """The settings that differ by member (listed, or changed by PBT), [M] each."""
        keys = [k for k in MEMBER_KEYS if k in self.variables or k in self._listed]
        return {key: tf.convert_to_tensor(self.get(key)) for key in keys}

    def clip(self, key: str):
        """A clip bound: a float (0: off), or each member's [M], inf where it is 0."""
        value = self.get(key)
        if isinstance(value, tf.Tensor):
            return tf.where(value > 0, value, float("inf"))
        return value

    def explore(
        self,
        source: tf.Tensor,
        copied: tf.Tensor,
        factors: Sequence[float],
        rng: tf.random.Generator,
    ) -> None:
        """PBT's explore step: copied members take their parent's values, perturbed.

        A copied member takes all its parent's settings (`variables`: with `inherit`,
        those the config listed too), as in Jaderberg et al. 2017. Then its value of each
        key of `pbt_keys` becomes the parent's times a factor drawn from `factors`
        (`pbt.perturb`); then, with probability `resample_probability`, one of
        `choices[key]` instead (`pbt.resample`), clipped to the key's valid range
        (`PBT_KEYS`). All draws come from `rng`, so that the members' own streams stay as
        a single run's; with probability 0 nothing is drawn for resampling.

        Args:
          source: [M] int32, the member whose state member m took (`pbt.exploit`).
          copied: [M] bool, the members that took another's.
          factors: e.g. (0.8, 1.2), drawn uniformly for each copied member and key.
          rng: the population's PBT random stream.
        """
        for key, variable in self.variables.items():
            if key not in self.pbt_keys:
                variable.assign(tf.gather(variable, source))
        for key in self.pbt_keys:
            variable = self.variables[key]
            low, high = PBT_KEYS[key]
            parent = tf.gather(variable, source)
            new = pbt.perturb(parent, copied, factors, rng, low, high)
            if self.resample_probability > 0:
                choices, probability = self.choices[key], self.resample_probability
                new = pbt.resample(new, copied, choices, probability, rng, low, high)
            variable.assign(new)

    def learning_rate(self, step: tf.Variable | None, total_steps: int):
        """The learning rate at `step` (`ppo.learning_rate_schedule`), or each member's [M].

        A rate PBT changes is the schedule's factor times each member's variable.
        """
        cfg = self._cfg
        schedule = cfg["learning_rate_schedule"]
        if "learning_rate" in self.variables:
            factor = learning_rate(1.0, schedule, step, total_steps)
            return factor * self.variables["learning_rate"]
        return learning_rate(cfg["learning_rate"], schedule, step, total_steps)

    def values(self) -> dict[str, list[float]]:
        """Each member's current value of every setting PBT changes, {'ppo.<key>': [M]}."""
        return {f"ppo.{key}": variable.numpy().tolist() for key, variable in self.variables.items()}


def _listed(value) -> bool:
    return isinstance(value, tuple)


def _as_tuple(value) -> tuple:
    return value if _listed(value) else (value,)
