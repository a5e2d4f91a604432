"""The `dqn` config section, declared in dqn.yaml beside this file (keys, defaults, docs);
`DQN.check_config` checks it."""

from pathlib import Path

from batchrl.config.section import Section

SECTION = Section("dqn", Path(__file__).with_name("dqn.yaml"))
