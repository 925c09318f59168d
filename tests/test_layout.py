"""The package layout stays navigable: no import cycles, a docstring per package, small modules, no old import paths
or aliases.

The import graph is read from the source (AST): every ``import`` and ``from ... import`` anywhere in a
module, function-level ones included, is an edge - a function-level import that dodges a cycle is
still a cycle. A package's ``__init__`` is a module of its own; importing ``a.b.c`` does not count as
importing ``a.b``'s ``__init__`` (Python runs it, but it is not a dependency the code states).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest


LEAP = Path(__file__).resolve().parents[1] / "leap"
MAX_LINES = 400
MAX_MODULES_PER_FOLDER = 10


def _modules(root: Path = LEAP) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The leap modules ``name`` imports (anywhere in its body)."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def import_graph(root: Path = LEAP) -> dict[str, set[str]]:
    mods = _modules(root)
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycles_in_leap():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_check_catches_a_function_level_cycle(tmp_path):
    """Negative control: a cycle closed by an import inside a function is found."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import g\n")
    (pkg / "b.py").write_text("def g():\n    from pkg import a\n    return a\n")
    (pkg / "c.py").write_text("from . import a\n")
    cycle = find_cycle(import_graph(pkg))
    assert cycle is not None and set(cycle) == {"pkg.a", "pkg.b"}
    (pkg / "b.py").write_text("def g():\n    return 1\n")
    assert find_cycle(import_graph(pkg)) is None


def test_every_package_says_what_it_owns():
    for init in LEAP.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 15, f"{init} needs a docstring saying what the package owns"


def test_modules_are_small_and_folders_short():
    for path in LEAP.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        assert lines <= MAX_LINES, f"{path.relative_to(LEAP.parent)} has {lines} lines (> {MAX_LINES})"
    for folder in [LEAP, *(p for p in LEAP.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= MAX_MODULES_PER_FOLDER, f"{folder} has {len(modules)} modules"


def test_there_are_no_old_import_paths_or_aliases():
    """leap has had no users of its pre-0.1 layout: no module of old paths, no environment aliases."""
    assert not (LEAP / "_moved.py").exists()
    import gymnasium as gym

    import leap  # noqa: F401 - registers the environments

    assert not [env_id for env_id in gym.registry if env_id.startswith("Leap") and env_id.endswith("-v1")]


@pytest.mark.parametrize("old", ["leap.core.decoder", "leap.core.calibration", "leap.search.methods"])
def test_an_old_module_path_is_not_importable(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_cli_commands_live_in_their_own_modules():
    from leap.cli import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)
    for name, module in COMMANDS.items():
        assert module.__name__.startswith("leap.cli."), name
        assert callable(module.run) and callable(module.add_parser)


def test_readme_package_table_matches_the_tree():
    readme = (LEAP.parent / "README.md").read_text()
    section = readme[readme.index("## Where things are"):]
    section = section[: section.index("\n## ", 5)] if "\n## " in section[5:] else section
    named = set(re.findall(r"^\| `(leap/[\w/]+?)/(?:\*\.py)?`", section, re.M))
    packages = {str(p.parent.relative_to(LEAP.parent)) for p in LEAP.rglob("__init__.py")} - {"leap"}
    assert named == packages, f"README lacks {sorted(packages - named)}; names missing {sorted(named - packages)}"
