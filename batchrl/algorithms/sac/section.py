"""The `sac` and `td3` config sections, declared in sac.yaml and td3.yaml beside this file
(keys, defaults, docs); `SAC.check_config` and `TD3.check_config` check them."""

from pathlib import Path

from batchrl.config.section import Section

SAC_SECTION = Section("sac", Path(__file__).with_name("sac.yaml"))
TD3_SECTION = Section("td3", Path(__file__).with_name("td3.yaml"))
