"""The `es` config section, declared in es.yaml beside this file (keys, defaults, docs);
`ES.check_config` checks it."""

from pathlib import Path

from batchrl.config.section import Section

SECTION = Section("es", Path(__file__).with_name("es.yaml"))
