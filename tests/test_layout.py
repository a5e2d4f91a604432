"""The package's layering: public names import in a fresh interpreter; imports flow one way."""

import ast
import json
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "batchrl"
# Lower layers never import these (a registry may name them in strings).
HIGHER = ("batchrl.algorithms", "batchrl.runners", "batchrl.scripts")
LOWER = ("batchrl.core", "batchrl.tools", "batchrl.networks", "batchrl.envs")


def module_names():
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


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


def test_lower_layers_never_import_higher_ones():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_names()[sorted(PACKAGE.rglob("*.py")).index(path)]
        if not name.startswith(LOWER):
            continue
        for module in imported_modules(path, name):
            if module.startswith(HIGHER):
                wrong.append(f"{name} imports {module}")
    assert not wrong, wrong


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
        "import batchrl.tools.batch_env, batchrl.tools.mock_environment\n"
        "assert 'tensorflow' not in sys.modules, 'a worker-side module loads TensorFlow'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
