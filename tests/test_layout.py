"""The package's layering: public names import in a fresh interpreter; imports flow one way."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "batchrl"

# Which folder of batchrl may import which, in the order data flows: environments in
# processes and batches (tools), environments in TensorFlow ops (envs), networks, the
# learners' pieces (parts), algorithms, the training loop around them (training), the
# runners that spread a run, and the command lines. Every module may import `batchrl`
# (the face), `batchrl.core` (the interfaces) and `batchrl.quiet` (TensorFlow imported
# without its C++ log lines, for every process's start: scripts, Ray workers, tests);
# neither imports another folder. A new
# folder needs a row here, so that no drawer grows unseen.
MAY_IMPORT = {
    "core": set(),
    "quiet": set(),
    "config": set(),
    "parts": set(),
    "replay": set(),
    "tools": {"config", "parts"},
    "envs": {"config", "parts", "tools"},
    "networks": {"config", "parts"},
    "testing": {"tools"},
    "training": {"config", "parts", "tools"},
    "algorithms": {"config", "parts", "replay", "tools", "envs", "networks"},
    "runners": {"config", "parts", "replay", "tools", "envs", "networks", "algorithms", "training"},
    "scripts": {
        "config",
        "parts",
        "tools",
        "envs",
        "networks",
        "algorithms",
        "training",
        "runners",
    },
}
# The batching pipeline, and nothing else, lives in tools/.
TOOLS = {
    "__init__",
    "external_process",
    "process_worker",  # The other end of ExternalProcess: the environment's process.
    "batch_env",
    "in_graph_env",
    "in_graph_batch_env",
    "simulate",
    "episodes",
    "environments",
    # How `make_env` builds Atari games: Gymnasium's wrappers and TorchBeast's two more.
    # Not in envs/, whose package loads TensorFlow, which environment workers must not.
    "atari",
    # The same games batched in EnvPool's C++ thread pool instead (env.engine: envpool).
    "envpool_batch_env",
}


def module_names():
    return [name for _, name in modules()]


def modules() -> list[tuple[Path, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.append((path, ".".join(parts)))
    return found


def folder(name: str) -> str:
    """'core' for batchrl.core, 'tools' for batchrl.tools.simulate, '' for batchrl."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def imported_modules(path: Path, name: str) -> set[str]:
    """Every module a file imports, at any depth of its code (functions included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def test_every_folder_imports_only_what_its_row_allows():
    wrong = []
    for path, name in modules():
        source = folder(name)
        if not source:
            continue
        assert source in MAY_IMPORT, f"{source}/ has no row in MAY_IMPORT ({name})"
        for module in imported_modules(path, name):
            if not module.startswith("batchrl."):
                continue
            target = folder(module)
            allowed = MAY_IMPORT[source] | {source, "core", "quiet"}
            if target not in allowed:
                wrong.append(f"{name} imports {module}")
    assert not wrong, wrong


def test_config_names_no_component():
    """config/ is generic: it imports no component (its row above) and names none in a
    string ('batchrl.algorithms.ppo:PPO'); components register by entry point (setup.cfg).
    Docstrings may mention them."""
    component = re.compile(r"batchrl\.(algorithms|runners|networks|envs|tools|training)[.:]")
    named = []
    for path in sorted((PACKAGE / "config").glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        named += [
            f"{path.name}: {node.value}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and id(node) not in docstrings
            and component.search(str(node.value))
        ]
    assert not named, named


def test_no_module_is_over_450_lines():
    """A module that grows past this holds two things: split it by what it holds."""
    long = {
        name: count
        for path, name in modules()
        if (count := len(path.read_text().splitlines())) > 450
    }
    assert not long, long


def test_tools_holds_the_batching_pipeline_alone():
    names = {path.stem for path in (PACKAGE / "tools").glob("*.py")}
    assert names == TOOLS, names ^ TOOLS
    assert not [p for p in (PACKAGE / "tools").iterdir() if p.is_dir() and p.name != "__pycache__"]
    # Nor by a name in a string: environment families register through the registry.
    named = [
        f"{path.name}: {node.value}"
        for path in sorted((PACKAGE / "tools").glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and str(node.value).startswith("batchrl.envs")
    ]
    assert not named, named


def test_every_package_says_what_lives_in_it():
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, f"{init} needs a docstring: what lives here"


def test_the_import_check_sees_imports_inside_functions():
    code = "def f():\n    from batchrl.runners import train\n"
    path = Path(__file__).with_name("_probe_imports.py")
    path.write_text(code)
    try:
        assert "batchrl.runners.train" in imported_modules(path, "batchrl.tools.probe")
    finally:
        path.unlink()


# Imports every module named on the command line, each first in a fresh interpreter:
# third-party libraries load once, then a forked child per module imports it with no
# batchrl module loaded yet, so that no earlier import can hide a cycle.
FRESH_IMPORTS = """
import importlib, json, os, sys, traceback
import gymnasium, numpy, tensorflow, tensorflow_probability  # noqa: F401
assert not [m for m in sys.modules if m.startswith("batchrl")]
results = {}
for name in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            module = importlib.import_module(name)
            public = list(getattr(module, "__all__", []))
            missing = [attr for attr in public if not hasattr(module, attr)]
            answer = {"public": public, "missing": missing}
        except BaseException:
            answer = {"error": traceback.format_exc()}
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    results[name] = json.loads(b"".join(chunks) or b'{"error": "no answer"}')
print(json.dumps(results))
"""


@pytest.mark.slow  # Out of the default suite: 36 s on 2 busy cores (2026-12-06).
def test_every_module_and_its_public_names_import_first_in_a_fresh_interpreter():
    names = [name for name in module_names() if not name.endswith("__main__")]
    result = subprocess.run(
        [sys.executable, "-c", FRESH_IMPORTS, *names],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=PACKAGE.parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    failed = {name: answer for name, answer in results.items() if "error" in answer}
    assert not failed, failed
    missing = {name: answer["missing"] for name, answer in results.items() if answer["missing"]}
    assert not missing, missing
    assert len(results) == len(names) > 40


def test_what_environment_workers_import_loads_no_tensorflow():
    """Workers unpickle `make_env` partials: TensorFlow there costs seconds per worker and
    its copy of LLVM crashes Mesa's software renderer (MuJoCo videos)."""
    code = (
        "import sys\n"
        "import batchrl.tools.environments, batchrl.tools.external_process\n"
        "import batchrl.tools.process_worker\n"
        "import batchrl.tools.batch_env, batchrl.testing.mock_environment, batchrl.config\n"
        "from batchrl.testing import MockEnvironment\n"
        "assert 'tensorflow' not in sys.modules, 'a worker-side module loads TensorFlow'\n"
    )
    assert_runs(code)


def test_the_face_exports_the_pipeline_lazily():
    code = (
        "import sys\n"
        "import batchrl\n"
        "from batchrl import BatchEnv, ExternalProcess, MockEnvironment, make_batch_env\n"
        "assert 'tensorflow' not in sys.modules, 'the face loaded TensorFlow too early'\n"
        "from batchrl import Algorithm, InGraphBatchEnv, simulate, load_run_config, train\n"
        "import batchrl.tools.simulate, batchrl.core, batchrl.tools.external_process\n"
        "assert simulate is batchrl.tools.simulate.simulate and callable(batchrl.simulate)\n"
        "assert Algorithm is batchrl.core.Algorithm\n"
        "assert ExternalProcess is batchrl.tools.external_process.ExternalProcess\n"
        "assert set(batchrl.__all__) <= set(dir(batchrl))\n"
        "try:\n"
        "    batchrl.Simulate\n"
        "except AttributeError as error:\n"
        "    assert 'Simulate' in str(error)\n"
        "else:\n"
        "    raise AssertionError('no error for a name batchrl lacks')\n"
    )
    assert_runs(code)


def assert_runs(code: str) -> None:
    """Runs `code` in a fresh interpreter; fails with its error output unless it exits 0."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
