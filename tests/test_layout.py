"""The layout stays the architecture: at most 8 modules directly in `dprelease/`, no import
cycles between its modules (lazy and TYPE_CHECKING imports included), a family of modules
is a subpackage rather than a file-name prefix, no private name is imported from another
module, and installing the package installs only `dprelease`."""

from __future__ import annotations

import ast
from graphlib import TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dprelease"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package modules it imports."""
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
                targets = [t if t in modules else node.module for t in targets]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def test_at_most_eight_modules_directly_in_the_package():
    assert len(list(PACKAGE.glob("*.py"))) <= 8


def test_no_import_cycles_between_modules():
    graph = _import_graph()
    assert sum(map(len, graph.values())) > 50  # the imports were really read
    TopologicalSorter(graph).prepare()  # graphlib.CycleError names the cycle


def test_a_family_of_modules_is_a_subpackage_not_a_file_name_prefix():
    families = []
    for directory in {path.parent for path in PACKAGE.rglob("*.py")}:
        names = [p.stem for p in directory.glob("*.py") if p.stem != "__init__"]
        for name in names:
            kin = [other for other in names if other.startswith(f"{name}_")]
            if kin:
                families.append((directory.name, name, kin))
    assert not families


def test_no_private_name_is_imported_from_another_module():
    private = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dprelease"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append((path.name, node.module, alias.name))
    assert not private


def test_only_the_dprelease_package_is_installed():
    text = (PACKAGE.parent / "pyproject.toml").read_text()
    assert 'include = ["dprelease*"]' in text
    assert not (PACKAGE.parent / "flows").exists() and not (PACKAGE.parent / "tasks").exists()
