"""docs/architecture.md's path of a document through the code is the code's: every module
a step names exists, and every class, method or function it names there is defined in that
module (a bare name may be one the module imports), so the one description cannot drift
from what it describes. And the path never steps back in the core: its rooms come in the
order the structure test keeps them (tests/project/test_structure.py), and no module is
come back to."""

import ast
import re
from pathlib import Path

from support.repo import ROOT
from support.rooms import CORE_ROOMS

DOC = ROOT / "docs" / "architecture.md"
PATH_SECTION = "## A document's path in the code"
TOKENS = re.compile(r"`([^`]+)`|([()])")  # a ticked name, or a parenthesis


def steps(text: str) -> list[str]:
    """The numbered steps of the path section, each joined onto one line."""
    section = text.split(PATH_SECTION, 1)[1].split("\n## ", 1)[0]
    out: list[str] = []
    for line in section.splitlines():
        if re.match(r"\d+\. ", line):
            out.append(line)
        elif line.startswith("   ") and out:
            out[-1] += " " + line.strip()
    return out


def defined(source: str) -> dict[str, set[str]]:
    """A module's top-level names (defined or imported), each class with its members."""
    names: dict[str, set[str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            members = {
                n.name
                for n in node.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            }
            names[node.name] = members
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names[node.name] = set()
        elif isinstance(node, ast.ImportFrom | ast.Import):
            for a in node.names:
                names[(a.asname or a.name).split(".")[0]] = set()
    return names


def problems(text: str, package: Path) -> list[str]:
    """What a path's steps name that its modules do not hold. A name is looked for in the
    module named last before it; a module named within parentheses holds only to their
    end."""
    found = []
    for number, step in enumerate(steps(text), 1):
        if not step.startswith(f"{number}. "):
            found.append(f"step {number} is numbered otherwise: {step[:30]}")
        module: dict[str, set[str]] | None = None
        outer: list[dict[str, set[str]] | None] = []
        for ticked, paren in TOKENS.findall(step):
            if paren:
                if paren == "(":
                    outer.append(module)
                elif outer:
                    module = outer.pop()
            elif ticked.endswith(".py"):
                path = package / ticked
                module = defined(path.read_text()) if path.exists() else None
                if module is None:
                    found.append(f"step {number}: no module {ticked}")
            elif module is not None and re.fullmatch(r"[A-Za-z_][\w.]*", ticked):
                owner, _, member = ticked.partition(".")
                if owner not in module or (member and member not in module[owner]):
                    found.append(f"step {number}: {ticked} is not in its module")
    return found


def test_every_step_of_the_documents_path_names_code_that_exists():
    text = DOC.read_text()
    assert len(steps(text)) >= 9
    assert problems(text, ROOT / "cqengine") == []


def test_a_step_naming_code_that_is_gone_is_found(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "dn.py").write_text(
        "from x import Resolution\nclass DN:\n    def publish_batch(self): pass\n"
    )
    text = (
        f"{PATH_SECTION}\n\n1. `core/dn.py`: `DN.publish_batch` (a `Resolution`; in\n"
        "   `core/qn.py`: `QN.x`), `DN.gone`\n2. `core/qn.py`: `QN.heard`\n"
        "3. `core/dn.py`: `missing`\n"
    )
    assert problems(text, tmp_path) == [
        "step 1: no module core/qn.py",
        "step 1: DN.gone is not in its module",
        "step 2: no module core/qn.py",
        "step 3: missing is not in its module",
    ]


def main_modules(text: str) -> list[str]:
    """The modules the path's steps name outside parentheses (a call aside is in them), in
    the steps' order."""
    out = []
    for step in steps(text):
        depth = 0
        for ticked, paren in TOKENS.findall(step):
            depth += {"(": 1, ")": -1}.get(paren, 0)
            if not paren and depth == 0 and ticked.endswith(".py"):
                out.append(ticked)
    return out


def steps_back(modules: list[str], rooms: list[str]) -> list[str]:
    """Where a path of core modules (core/<room>/<module>.py) goes back: to an earlier room,
    or to a module it had left."""
    found, left, last = [], set(), None
    core = [m for m in modules if m.startswith("core/")]
    for module in core:
        if module == last:
            continue
        room = rooms.index(module.split("/")[1])
        if last is not None and room < rooms.index(last.split("/")[1]):
            found.append(f"{last} -> {module}: an earlier room")
        if module in left:
            found.append(f"{module} is come back to")
        if last is not None:
            left.add(last)
        last = module
    return found


def test_the_path_never_steps_back_in_the_core():
    modules = main_modules(DOC.read_text())
    assert len([m for m in modules if m.startswith("core/")]) >= 5
    assert steps_back(modules, CORE_ROOMS) == []


def test_a_step_back_is_found():
    rooms = ["a", "b", "c"]
    assert steps_back(["core/a/x.py", "core/b/y.py", "core/b/y.py", "core/c/z.py"], rooms) == []
    assert steps_back(["core/b/y.py", "core/a/x.py"], rooms) == [
        "core/b/y.py -> core/a/x.py: an earlier room"
    ]
    assert steps_back(["core/b/y.py", "core/b/w.py", "core/b/y.py"], rooms) == [
        "core/b/y.py is come back to"
    ]
    text = f"{PATH_SECTION}\n\n1. `core/b/y.py`: `f` (`core/a/x.py`: `g`)\n2. `core/c/z.py`: `h`\n"
    assert main_modules(text) == ["core/b/y.py", "core/c/z.py"]
