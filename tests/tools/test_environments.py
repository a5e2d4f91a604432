"""Environment families register their Gymnasium ids through the registry, not by name in tools."""

import subprocess
import sys

import gymnasium as gym
import pytest

from batchrl.config import GYMNASIUM_FAMILIES, ConfigError
from batchrl.tools.environments import check_env_id, make_env


@pytest.fixture
def probe_family(monkeypatch):
    entries = dict(GYMNASIUM_FAMILIES.entries())
    monkeypatch.setattr(GYMNASIUM_FAMILIES, "_entries", entries)
    GYMNASIUM_FAMILIES.register("Probe/", "tests.tools._envs:register_probe_family")
    yield
    gym.registry.pop("Probe/Count-v0", None)


def test_a_family_registers_when_one_of_its_ids_is_first_asked_for(probe_family):
    assert "Probe/Count-v0" not in gym.registry
    check_env_id("Probe/Count-v0")
    assert "Probe/Count-v0" in gym.registry
    env = make_env("Probe/Count-v0")
    assert env.reset(seed=0)[0] is not None
    env.close()


def test_an_id_of_no_family_is_still_refused_with_suggestions(probe_family):
    with pytest.raises(ConfigError, match=r"env.id='Probe/Cont-v0' is not a registered"):
        check_env_id("Probe/Cont-v0")


def test_a_family_whose_package_is_missing_names_the_id_and_the_package(monkeypatch):
    entries = dict(GYMNASIUM_FAMILIES.entries())
    monkeypatch.setattr(GYMNASIUM_FAMILIES, "_entries", entries)
    GYMNASIUM_FAMILIES.register("Absent/", "no_such_package.gym:register_envs")
    with pytest.raises(ConfigError) as error:
        check_env_id("Absent/Thing-v0")
    message = str(error.value)
    assert "env.id='Absent/Thing-v0'" in message
    assert "no_such_package.gym" in message
    assert "No module named 'no_such_package'" in message


@pytest.mark.slow  # Out of the default suite: 12 s on 2 busy cores (2026-12-06).
def test_routing_ids_register_through_the_registry_in_a_fresh_interpreter():
    code = (
        "import sys\n"
        "from batchrl.tools.environments import check_env_id\n"
        "assert 'batchrl.envs.routing' not in sys.modules\n"
        "check_env_id('batchrl/Routing-GEANT2-v0')\n"
        "assert 'batchrl.envs.routing' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
