"""The Ray presets train one training call through the train script and exit 0."""

import pytest

from tests.scripts.test_presets import RAY, tier_mark, train_one_call


@pytest.mark.slow
@pytest.mark.parametrize("preset", [pytest.param(name, marks=tier_mark(name)) for name in RAY])
def test_a_ray_preset_trains_one_call_and_exits_0(ray_cluster, tmp_path, capsys, preset):
    """On the session's two-node cluster, which the run joins (ray.address '')."""
    train_one_call(preset, tmp_path, capsys)
