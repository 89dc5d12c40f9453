"""The tests' own layout (issue 40): each test module sits in the folder of what it tests,
and tests share helpers only through tests/support, so that a test module can be moved,
split or deleted without breaking another."""

import ast
from pathlib import Path

from support.repo import ROOT

TESTS = ROOT / "tests"

# chord/ and cqengine's packages (core, text, live, spark, evaluation), the command line
# (cli), the benchmarks in experiments/ (bench), and the repository as a whole (project)
FOLDERS = {"chord", "core", "text", "live", "spark", "evaluation", "cli", "bench", "project"}


def collected_modules() -> list[Path]:
    """Every file pytest collects tests from (its default python_files patterns)."""
    return sorted({*TESTS.rglob("test_*.py"), *TESTS.rglob("*_test.py")})


def imported(path: Path) -> set[str]:
    """Every module name `path` imports, at the top or inside a function; for `from a
    import b`, both a and a.b (b may be a module)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


# tests/core mirrors the core's rooms (cqengine/core/<room>/): a room's tests sit in
# tests/core/<room>/; those of the whole engine node (cqengine/core/node.py) at tests/core/
CORE_ROOMS = {
    p.name for p in (ROOT / "cqengine" / "core").iterdir() if (p / "__init__.py").exists()
}


def placed(path: Path) -> bool:
    """Is a test module in tests/<folder>/, or in tests/core/<room>/?"""
    folder = path.parent
    if folder.parent == TESTS:
        return folder.name in FOLDERS
    return folder.parent == TESTS / "core" and folder.name in CORE_ROOMS


def test_every_test_module_lives_in_a_package_folder():
    assert len(CORE_ROOMS) >= 10
    misplaced = [str(p.relative_to(TESTS)) for p in collected_modules() if not placed(p)]
    assert not misplaced, f"test modules outside tests/<{'|'.join(sorted(FOLDERS))}>/: {misplaced}"
    top = sorted(p.name for p in TESTS.glob("*.py"))
    assert top == ["conftest.py"], f"only conftest.py belongs at tests/ top level: {top}"


def test_no_test_module_imports_another_or_conftest():
    """Shared helpers live in tests/support; conftest.py holds fixtures, which pytest hands
    to tests by name (importing conftest works only by accident of the import mode)."""
    forbidden = {p.stem for p in collected_modules()} | {"conftest"}
    wrong = {
        str(path.relative_to(TESTS)): sorted(
            name for name in imported(path) if forbidden & set(name.split("."))
        )
        for path in sorted(TESTS.rglob("*.py"))
    }
    wrong = {path: names for path, names in wrong.items() if names}
    assert not wrong, f"import helpers from tests/support instead: {wrong}"


SLOW_REASONS = ("paper scale", "soak")  # what alone may keep a test out of `make test`


def unexplained_slow_marks(source: str) -> list[int]:
    """The lines of `pytest.mark.slow` marks that do not say, by a reason naming paper scale
    or a soak, why the test stays out of `make test`."""
    nodes = list(ast.walk(ast.parse(source)))
    calls = {id(n.func): n for n in nodes if isinstance(n, ast.Call)}
    out = []
    for node in nodes:
        if not (isinstance(node, ast.Attribute) and node.attr == "slow"):
            continue
        call = calls.get(id(node))
        reason = next((k.value for k in call.keywords if k.arg == "reason"), None) if call else None
        text = reason.value if isinstance(reason, ast.Constant) else ""
        if not any(word in str(text) for word in SLOW_REASONS):
            out.append(node.lineno)
    return out


def test_a_test_stays_slow_only_for_paper_scale_or_a_soak():
    """`make test` runs everything else (issue 55): a slow test says why in its marker."""
    assert unexplained_slow_marks("@pytest.mark.slow\ndef test_a(): pass\n") == [1]
    assert unexplained_slow_marks('@pytest.mark.slow(reason="budget")\ndef t(): pass\n') == [1]
    assert unexplained_slow_marks("S = pytest.mark.slow\n") == [1]
    assert not unexplained_slow_marks('@pytest.mark.slow(reason="a soak: 1 h")\ndef t(): pass\n')
    wrong = {
        str(path.relative_to(TESTS)): lines
        for path in collected_modules()
        if (lines := unexplained_slow_marks(path.read_text()))
    }
    assert not wrong, f"slow marks without a paper-scale or soak reason: {wrong}"
