"""Config sections declared by their components: the schema they make, their docs, the
reference page generated from them, and saved runs of the time before them."""

import warnings
from pathlib import Path

import pytest

from batchrl.config import ConfigError, load_config, load_run_config, load_saved_run_config
from batchrl.config.section import Section, registered_sections
from batchrl.scripts import config_reference

SAVED = Path(__file__).parents[1] / "data" / "saved_configs"


def test_every_section_is_beside_the_code_that_reads_it():
    sections = registered_sections()
    every_run = ["env", "network", "pbt", "train"]
    algorithms = ["dqn", "es", "impala", "ppo", "sac", "td3"]
    assert list(sections) == [*every_run, *algorithms, "ray", "threads", "apex"]
    for name, section in sections.items():
        assert section.path.is_file(), section.path
        assert "configs" not in section.path.parts, f"{name} is declared in the presets"
        modules = list(section.path.parent.glob("*.py"))
        assert modules, f"{section.path} is not in a folder of code"


def test_every_key_has_its_default_and_a_doc():
    for name, section in registered_sections().items():
        docs = section.docs()
        assert list(docs) == list(section.defaults()), name
        undocumented = [key for key, doc in docs.items() if not doc.strip()]
        assert not undocumented, f"{name}: {undocumented}"


def test_the_schema_is_default_yaml_with_every_registered_section():
    config = load_config("default")
    assert list(config)[:2] == ["algorithm", "runner"]
    for name, section in registered_sections().items():
        assert config[name].to_dict() == section.defaults()
    assert set(config) == {"algorithm", "runner", *registered_sections()}


def test_a_section_declared_twice_is_refused(monkeypatch, tmp_path):
    from batchrl.config import loading

    path = tmp_path / "algorithm.yaml"
    path.write_text("algorithm:\n  name: mine  # Mine.\n")
    twice = {**registered_sections(), "algorithm": Section("algorithm", path)}
    monkeypatch.setattr(loading, "registered_sections", lambda: twice)
    with pytest.raises(ConfigError, match=r"'algorithm' .*algorithm.yaml.* already declared in"):
        load_config("default")


def test_an_entry_point_that_is_not_a_section_is_refused(monkeypatch):
    from batchrl.config.registry import SECTIONS

    entries = {**SECTIONS.entries(), "ppo": "batchrl.algorithms.ppo:PPO"}
    monkeypatch.setattr(SECTIONS, "_entries", entries)
    with pytest.raises(ConfigError, match=r"ppo = batchrl.algorithms.ppo:PPO .* must be a"):
        registered_sections()


def test_the_docs_of_a_key_join_its_comment_lines(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "# The file's own comment.\n\nmine:\n  # What the section is for.\n"
        "  rate: 0.1                  # The rate,\n"
        "                             # in [0, 1].\n"
        "  # A comment on the keys below.\n"
        "  size: 3\n"
    )
    section = Section("mine", path)
    assert section.defaults() == {"rate": 0.1, "size": 3}
    assert section.about() == "What the section is for."
    assert section.docs() == {"rate": "The rate, in [0, 1].", "size": ""}


def test_a_section_file_without_its_name_is_refused(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("other:\n  rate: 0.1\n")
    with pytest.raises(ConfigError, match=r"mine.yaml: .*'mine'.*found \['other'\]"):
        Section("mine", path).defaults()


def test_a_key_of_a_section_the_run_does_not_read_is_refused():
    with pytest.raises(ConfigError, match=r"apex.num_shards is set, but only algorithm.name=dqn"):
        load_run_config("cartpole_tf", ["apex.num_shards=3"])
    with pytest.raises(ConfigError, match=r"impala.discount is set, but algorithm.name='ppo'"):
        load_run_config("cartpole_tf", ["impala.discount=0.9"])


def test_the_reference_page_is_what_the_sections_say():
    """docs/config.md is generated; run python -m batchrl.scripts.config_reference."""
    page = config_reference.render()
    assert config_reference.PAGE.read_text() == page
    for name, section in registered_sections().items():
        assert f"## `{name}`" in page
        for key in section.defaults():
            assert f"| `{name}.{key}` |" in page


def test_a_saved_run_of_the_version_before_the_sections_still_loads():
    """A config.yaml that f43fa31 wrote, when default.yaml held every section."""
    path = SAVED / "cartpole_tf_population_f43fa31.yaml"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # No key is missing, none converted.
        config = load_saved_run_config(path)
    assert config.train.population == 2
    assert list(config.ppo.learning_rate) == [1e-3, 3e-4]
    expected = load_run_config(
        "cartpole_tf", ["train.population=2", "ppo.learning_rate=[1e-3, 3e-4]"]
    )
    assert config.to_dict() == expected.to_dict()


def test_a_packages_own_registered_section_joins_the_schema(tmp_path, monkeypatch):
    from batchrl.config.registry import SECTIONS

    (tmp_path / "mine.yaml").write_text("mine:\n  rate: 0.1                  # The rate.\n")
    (tmp_path / "my_section.py").write_text(
        "from pathlib import Path\nfrom batchrl.config import Section\n"
        "SECTION = Section('mine', Path(__file__).with_name('mine.yaml'))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(SECTIONS, "_entries", {**SECTIONS.entries(), "mine": "my_section:SECTION"})
    assert load_config("default", ["mine.rate=0.5"]).mine.rate == 0.5
    with pytest.raises(ConfigError, match=r"mine.rate = 'fast' has type str, expected float"):
        load_config("default", ["mine.rate=fast"])
