"""Population-based training of a PPO population through `train`: short runs of `debug`."""

import json

import numpy as np
import tensorflow as tf

from batchrl.config import load_run_config
from batchrl.runners import train


def quiet(*_, **__):
    pass


def _debug(*overrides):
    """4 members of 2 CartPole environments in TensorFlow ops, PBT at 128 and 256."""
    return load_run_config(
        "debug",
        [
            "env.id=CartPole-v1",
            "env.backend=tensorflow",
            "train.population=4",
            "pbt.interval=128",
            *overrides,
        ],
    )


def _lineage(logdir):
    lines = (logdir / "pbt.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _checkpoint(logdir, name):
    reader = tf.train.load_checkpoint(str(logdir / "checkpoints"))
    return reader.get_tensor(f"algo/{name}/.ATTRIBUTES/VARIABLE_VALUE")


def test_pbt_with_nothing_to_perturb_still_exploits(tmp_path):
    """pbt.perturb [] (the default): the worst member takes the best's weights, unchanged."""
    config = _debug()
    assert config.pbt.perturb == ()
    result = train(config, tmp_path, progress=quiet)
    assert result["step"] == 256
    lines = _lineage(tmp_path)
    assert [line["step"] for line in lines] == [128, 256]  # One member of 4, each time.
    for line in lines:
        assert line["parent"] != line["member"]
        assert set(line) == {"step", "member", "parent"}  # No settings to log.
    # The copy made at 256 holds its parent's parameters (nothing trains after it).
    last = lines[-1]
    params = _checkpoint(tmp_path, "policy_params")
    np.testing.assert_array_equal(params[last["member"]], params[last["parent"]])
