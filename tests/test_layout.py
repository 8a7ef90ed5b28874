"""The layout stays the architecture: at most 8 modules directly in `dprelease/`, no import
cycles between its modules (lazy and TYPE_CHECKING imports included), a family of modules
is a subpackage rather than a file-name prefix, no private name is imported from another
module, installing the package installs only `dprelease`, and the code, tests and
benchmarks state the method without narrating how it was built."""

from __future__ import annotations

import ast
import re
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


# Narration of how the code was built: work periods, issue numbers, experiment diaries, work
# dates. Each piece is split so that this file does not match itself.
WORD = "sess" + "ion"
NARRATION = re.compile(
    "|".join(
        [
            WORD,
            "issue [0-9]",
            "tried " + "and not",
            "not " + "adopted",
            "20[0-9]{2}" + "-[0-9]{2}-[0-9]{2}",
        ]
    ),
    re.IGNORECASE,
)
# The technical uses of WORD, each allowed by a pattern of its own (case-sensitive).
TECHNICAL_USES = {
    "pytest's fixture scope": rf'scope="{WORD}"',
    "pytest's own test run": rf"\bpytest {WORD}(?:s|'s)?\b",
    "a POSIX process group's setsid unit": rf"\bprocess {WORD}\b",
    "subprocess.Popen's argument": rf"\bstart_new_{WORD}\b",
    "cli/server.py's signal to the server's process group": rf"\b_signal_{WORD}\b",
    "a SQLAlchemy or requests object of that class": rf"\b(?:{WORD.title()}\(|{WORD}maker\b)",
    "a library's object of that class, bound to a variable": rf"\b(?:as {WORD}\b|{WORD}\.\w+\()",
    "pytest's run hooks and their argument": rf"\bpytest_{WORD}(?:start|finish)\b|\b{WORD}"
    rf"(?:: pytest\.{WORD.title()}\b|\.config\b)",
}
NARRATED_TREES = ("dprelease", "tests", "benchmarks")
TEXT_SUFFIXES = {".py", ".pyi", ".yaml", ".yml", ".md", ".txt", ".toml", ".cfg", ".ini", ".sh"}
UNTRACKED = {"__pycache__", "out"}  # bytecode; benchmarks/out/ holds generated results


def _narration(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every narration left after the technical uses are removed."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for allowed in TECHNICAL_USES.values():
            line = re.sub(allowed, "", line)
        if NARRATION.search(line):
            found.append((number, line.strip()))
    return found


def test_the_narration_check_allows_only_the_technical_uses():
    assert not _narration(f'@pytest.fixture(scope="{WORD}")')
    assert not _narration(f"subprocess.Popen(command, start_new_{WORD}=True)")
    assert not _narration(f"# the server leads its own process {WORD} and group")
    assert not _narration(f"with {WORD.title()}(engine) as {WORD}: {WORD}.commit()")
    assert not _narration("schemas documented for 1988 and 2003-2009")
    for narration in (
        f"measured in the twelfth {WORD}",
        f"the {WORD}'s numbers",
        "(issue " + "19, item 5)",
        "Tried " + "and not " + "adopted: a soft threshold",
        "added on " + "2026-11" + "-27",
    ):
        assert _narration(narration), narration


def test_code_tests_and_benchmarks_do_not_narrate_how_they_were_built():
    root = PACKAGE.parent
    found = []
    for tree in NARRATED_TREES:
        for path in sorted((root / tree).rglob("*")):
            relative = path.relative_to(root)
            if path.suffix in TEXT_SUFFIXES and not UNTRACKED & set(relative.parts):
                found += [f"{relative}:{n}: {line}" for n, line in _narration(path.read_text())]
    assert not found, "\n".join(found)
