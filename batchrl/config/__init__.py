"""Configs: the read-only `Config`, the schema, presets, overrides, the registry.

`config.py` holds the object, its errors and the range checks every section uses;
`section.py` the `Section`, a config section as a component declares it beside its code
(a YAML file of keys, defaults and docs, and a check), registered in the entry-point group
`batchrl.sections`; `schema.py` checks a tree of values against the schema, where a key's
type is its default's; `loading.py` builds the schema (`batchrl/configs/default.yaml`,
the keys that choose components, with every registered section), builds a config from a
preset chain and `dotted.key=value` overrides, and writes a run's resolved config
atomically; `members.py` reads a population's member seeds and per-member lists of
settings; `sweeps.py` turns `--sweep`s into one population and refuses sweeps of keys the
members cannot differ in; `registry.py` resolves the names of algorithms, runners,
networks, environments and sections from the entry points that setup.cfg (or a user's
package) declares, so that nothing here names or imports a component; `run_config.py`
loads the config of a whole run and checks it: that it sets only sections it reads, then
each registered section's check, then the algorithm's and runner's `check_config`. The
YAML presets themselves are package data in `batchrl/configs/`. No module here imports
TensorFlow or a component; reading the schema imports the modules that declare sections.
"""

from batchrl.config.config import (
    Config,
    ConfigError,
    check_choice,
    check_range,
    require,
    require_positive,
)
from batchrl.config.loading import (
    Sources,
    default_config_dir,
    load_config,
    load_resolved_config,
    peek,
    peek_resolved,
    preset_path,
    save_config,
)
from batchrl.config.members import (
    check_member_lists,
    member_offsets,
    member_seeds,
    member_settings,
)
from batchrl.config.registry import (
    ALGORITHMS,
    ENVIRONMENTS,
    GRAPH_FEATURES,
    GYMNASIUM_FAMILIES,
    NETWORKS,
    RUNNERS,
    SECTIONS,
    Registry,
    load_entry_point,
)
from batchrl.config.run_config import (
    algorithm_class,
    algorithm_section,
    check_run_config,
    load_run_config,
    load_saved_run_config,
    runner_class,
)
from batchrl.config.section import Section, registered_sections
from batchrl.config.sweeps import check_swept_keys, parse_sweeps, sweep_overrides

__all__ = [
    "ALGORITHMS",
    "ENVIRONMENTS",
    "GRAPH_FEATURES",
    "GYMNASIUM_FAMILIES",
    "NETWORKS",
    "RUNNERS",
    "SECTIONS",
    "Config",
    "ConfigError",
    "Registry",
    "Section",
    "Sources",
    "algorithm_class",
    "algorithm_section",
    "check_choice",
    "check_member_lists",
    "check_range",
    "check_swept_keys",
    "check_run_config",
    "default_config_dir",
    "load_config",
    "load_entry_point",
    "load_resolved_config",
    "load_run_config",
    "load_saved_run_config",
    "member_offsets",
    "member_seeds",
    "member_settings",
    "parse_sweeps",
    "peek",
    "peek_resolved",
    "preset_path",
    "require",
    "registered_sections",
    "require_positive",
    "runner_class",
    "save_config",
    "sweep_overrides",
]
