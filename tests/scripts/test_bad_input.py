"""Bad configs and logdirs stop the train script at load: exit code 2, one message, no files."""

import pytest

from batchrl.config import load_run_config
from batchrl.scripts import train as train_script


@pytest.mark.parametrize(
    "args, message",
    [
        # A key of another algorithm's or runner's section.
        (["--config=cartpole_impala", "--set", "ppo.epochs=99"], "ppo.epochs is set, but"),
        (["--config=debug", "--set", "impala.unroll_length=8"], "impala.unroll_length is set"),
        (["--config=debug", "--set", "threads.num_actors=4"], "threads.num_actors is set"),
        # Keys of batchrl 0.1's flat algorithm section say where they went.
        (
            ["--config=debug", "--set", "algorithm.epochs=3"],
            "'algorithm.epochs' has moved: it is ppo",
        ),
        (["--config=debug", "--set", "algorithm.num_actors=2"], "threads.num_actors"),
        (["--config=debug", "--set", "algorithm.network=gru"], "network.name"),
        # Values out of range.
        (["--config=debug", "--set", "ppo.learning_rate=-1"], "ppo.learning_rate=-1.0"),
        (
            ["--config=debug", "--set", "ppo.discount=1.5"],
            "ppo.discount=1.5; it must be in [0, 1]",
        ),
        (["--config=debug", "--set", "ppo.epochs=0"], "ppo.epochs=0"),
        (["--config=debug", "--set", "ppo.rollout_length=0"], "ppo.rollout_length=0"),
        (["--config=debug", "--set", "ppo.rollout_length=-16"], "ppo.rollout_length=-16"),
        (["--config=debug", "--set", "ppo.minibatches=0"], "ppo.minibatches=0"),
        (["--config=debug", "--set", "ppo.update_every=0"], "ppo.update_every=0"),
        (["--config=debug_impala", "--set", "impala.unroll_length=0"], "impala.unroll_length=0"),
        (["--config=debug", "--set", "env.max_episode_steps=-5"], "env.max_episode_steps=-5"),
        (["--config=debug", "--set", "network.policy_layers=[0]"], "network.policy_layers=[0]"),
        (["--config=debug", "--set", "train.total_steps=0"], "train.total_steps=0"),
        (
            ["--config=debug_impala", "--set", "network.core=lstm", "--set", "network.core_size=0"],
            "network.core_size=0; it must be > 0",
        ),
        (
            ["--config=debug_impala", "--set", "network.core=transformer"],
            "network.core='transformer'",
        ),
        (
            ["--config=debug_impala", "--set", "network.core=lstm"]
            + ["--set", "network.core_inputs=[last_reward]"],
            "with impala.normalize_reward=true: the core reads the clipped reward",
        ),
        (
            ["--config=debug_impala", "--set", "network.core_inputs=[last_action]"],
            "network.core_inputs=['last_action'] are inputs of the recurrent core",
        ),
        # Combinations the algorithm or runner cannot train with.
        (["--config=debug", "--set", "network.conv_filters=[16]"], "read by IMPALA only"),
        (["--config=debug", "--set", "network.core=lstm"], "built by IMPALA only"),
        (
            ["--config=debug", "--set", "network.shared_body=true"],
            "network.shared_body=true (one body under the policy and the baseline) is built by "
            "IMPALA only (algorithm.name='impala'), not algorithm.name='ppo'",
        ),
        (
            ["--config=debug", "--set", "network.name=gru", "--set", "ppo.update_mode=episodes"],
            "needs ppo.update_mode='steps'",
        ),
        (["--config=debug", "--set", "runner.name=threads"], "needs an algorithm with a behaviour"),
        (["--config=debug", "--set", "algorithm.name=ppp"], "'ppo'"),
        (["--config=debug", "--set", "algorithm.name=nowhere:Agent"], "nowhere"),
        # Sweeps: malformed, or of a key that must be the same for every member.
        (["--config=debug", "--sweep", "ppo.learning_rate"], "Malformed --sweep"),
        (
            ["--config=debug", "--set", "env.backend=tensorflow", "--sweep", "ppo.epochs=1,2"],
            "--sweep ppo.epochs=1,2: a sweep trains one population whose members differ only "
            "in the swept keys, and members cannot differ in ppo.epochs",
        ),
        # Environments.
        (["--config=debug", "--set", "env.id=CartPol-v1"], "Did you mean CartPole-v1"),
        (["--config=debug", "--set", "env.id=nowhere:Env-v0"], "cannot import the module"),
    ],
)
def test_bad_input_exits_2_with_one_message_and_writes_nothing(
    tmp_path, capsys, monkeypatch, args, message
):
    monkeypatch.chdir(tmp_path)
    code = train_script.main([*args, "--logdir=run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Config error" in err and message in err, err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == [], "wrote files for a bad config"


def test_an_environment_id_may_name_the_module_that_registers_it():
    config = load_run_config(
        "debug", ["env.id=gymnasium.envs.classic_control:CartPole-v1", "env.processes=false"]
    )
    assert config.env.id.endswith(":CartPole-v1")


def test_a_preset_may_be_reused_for_another_algorithm_by_an_override():
    """cartpole.yaml sets ppo keys; choosing impala on the command line leaves them unused."""
    config = load_run_config("cartpole", ["algorithm.name=impala", "train.steps_per_call=64"])
    assert config.algorithm.name == "impala"


def test_an_unwritable_logdir_is_a_config_error(capsys):
    """/proc takes no new files, not even from root."""
    code = train_script.main(["--config=debug", "--logdir=/proc/batchrl-run"])
    assert code == 2
    assert "Cannot write to /proc" in capsys.readouterr().err


def test_a_logdir_that_is_a_file_is_a_config_error(tmp_path, capsys):
    (tmp_path / "run").write_text("not a folder")
    code = train_script.main(["--config=debug", f"--logdir={tmp_path / 'run'}"])
    assert code == 2
    assert "is a file, not a folder" in capsys.readouterr().err
