"""The code's structure (issue 40): no import cycle among the project's modules, no module
over 600 lines (the engine node's under 400), and no real time or file read in the I/O-free
core (cqengine/core/ and chord's protocol modules): a shell lends time (chord.protocol.host.Host)
and reads the files.

Each rule is a function over source text, checked here on the real tree and on small
sources that break it, so that a rule that could not fail would show."""

import ast
from pathlib import Path

from support.repo import ROOT
from support.rooms import ROOMS

PACKAGES = ("chord", "cqengine")
GENERATED = "proto"  # protoc's output (make protos; tests/project/test_protos keeps it fresh)
MAX_LINES = 600
NODE_MODULE, NODE_MAX = "cqengine/core/node.py", 400
# chord's rooms that run inside the protocol or its simulation: no real time, no file
CHORD_PROTOCOL = ["protocol", "simulation"]
CLOCKS = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "sleep"}
FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "iterdir", "glob"}


def sources() -> dict[str, Path]:
    """The project's modules by dotted name (generated code aside)."""
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if GENERATED in parts:
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports(name: str, text: str, modules: set[str], package: bool = False) -> set[str]:
    """The project's modules this module's source imports, by every import statement in it
    (at the top, inside functions and under TYPE_CHECKING alike)."""
    here = name if package else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                out.add(full if full in modules else base)
    return (out & modules) - {name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def import_graph() -> dict[str, set[str]]:
    found = sources()
    names = set(found)
    return {
        name: imports(name, path.read_text(), names, path.name == "__init__.py")
        for name, path in found.items()
    }


def io_calls(text: str) -> list[str]:
    """Where a source reads real time or touches a file: calls of time's clocks (however
    imported), datetime's now, open(), and a path's reading or writing methods."""
    tree = ast.parse(text)
    from_time = {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "time"
        for a in n.names
        if a.name in CLOCKS
    }
    found = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if isinstance(f, ast.Attribute):
            owner = f.value.id if isinstance(f.value, ast.Name) else ""
            clock = (owner == "time" and f.attr in CLOCKS) or (
                owner in ("datetime", "date") and f.attr in ("now", "utcnow", "today")
            )
            if clock:
                found.append(f"{owner}.{f.attr}() at line {n.lineno}")
            elif f.attr in FILE_CALLS:
                found.append(f".{f.attr}() at line {n.lineno}")
        elif isinstance(f, ast.Name) and (f.id == "open" or f.id in from_time):
            found.append(f"{f.id}() at line {n.lineno}")
    return found


def core_modules() -> list[Path]:
    """The I/O-free core: cqengine/core and its packages (the home's log among them), and
    chord's protocol modules."""
    return sorted((ROOT / "cqengine" / "core").rglob("*.py")) + sorted(
        path for room in CHORD_PROTOCOL for path in (ROOT / "chord" / room).glob("*.py")
    )


# ---- the rules, on the real tree --------------------------------------------------------


def test_no_import_cycle_among_the_projects_modules():
    found = cycles(import_graph())
    assert not found, f"modules that import each other, directly or around a loop: {found}"


def longer(paths, most: int) -> dict[str, int]:
    """The files of these with more than `most` lines, and their lines."""
    return {path.name: n for path in paths if (n := len(path.read_text().splitlines())) > most}


def test_no_module_is_over_600_lines_and_the_engine_node_under_400():
    long = longer(sources().values(), MAX_LINES)
    assert not long, f"modules over {MAX_LINES} lines: {long}"
    node = len((ROOT / NODE_MODULE).read_text().splitlines())
    assert node < NODE_MAX, f"{NODE_MODULE} has {node} lines"


def test_the_core_reads_no_real_time_and_no_file():
    assert all(path.exists() for path in core_modules())
    found = {
        str(path.relative_to(ROOT)): calls
        for path in core_modules()
        if (calls := io_calls(path.read_text()))
    }
    assert not found, f"the core asks its host for time, and shells read files: {found}"


MAX_MODULES = 15  # in one folder of a package, directly


def upward_imports(graph: dict[str, set[str]], rooms: list[str], top: str) -> list[str]:
    """Imports of a module in room i (top.<room>...) of a module in a room after i."""

    def room(name: str) -> int | None:
        parts = name.split(".")
        prefix = top.split(".")
        if parts[: len(prefix)] != prefix or len(parts) <= len(prefix):
            return None
        return rooms.index(parts[len(prefix)]) if parts[len(prefix)] in rooms else None

    found = []
    for name, deps in sorted(graph.items()):
        mine = room(name)
        if mine is None:
            continue
        for dep in sorted(deps):
            theirs = room(dep)
            if theirs is not None and theirs > mine:
                found.append(f"{name} imports {dep}")
    return found


def test_each_packages_rooms_import_only_the_rooms_before_them():
    graph = import_graph()
    for top, rooms in ROOMS.items():
        folder = ROOT.joinpath(*top.split("."))
        present = {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
        assert present - {GENERATED} == set(rooms), f"{top}: rooms unlisted, or gone"
        found = upward_imports(graph, rooms, top)
        assert not found, f"a room imports a later one: {found}"


def crowded(folders) -> dict[str, int]:
    """The folders holding more than MAX_MODULES modules directly, and how many."""
    return {
        str(f.relative_to(ROOT) if f.is_relative_to(ROOT) else f): n
        for f in folders
        if (n := len([p for p in f.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES
    }


def test_no_folder_of_the_packages_holds_more_than_15_modules():
    folders = {path.parent for path in sources().values()}
    assert len(folders) > len(ROOMS), "the packages' folders were not found"
    found = crowded(folders)
    assert not found, f"folders of more than {MAX_MODULES} modules: {found}"


def experiments_problems(folder: Path) -> dict[str, list[str]]:
    """Per module of experiments/: the benchmarks it imports (bench_*, profile_*), and
    `sys.path` if it names it. A benchmark takes the code it shares with others from a
    module of experiments/ (live_ring, inputs, subscribers, ...), never from another
    benchmark; none needs sys.path (run as a script, Python puts its folder there, and the
    tests' pythonpath does for them)."""
    modules = {p.stem for p in folder.glob("*.py")}
    benchmarks = {m for m in modules if m.startswith(("bench_", "profile_"))}
    found = {}
    for path in sorted(folder.glob("*.py")):
        text = path.read_text()
        bad = sorted(imports(path.stem, text, modules) & benchmarks)
        bad += ["sys.path"] if "sys.path" in text else []
        if bad:
            found[path.name] = bad
    return found


def test_benchmarks_share_code_through_modules_not_each_other():
    found = experiments_problems(ROOT / "experiments")
    assert not found, f"benchmarks importing benchmarks, or sys.path: {found}"


# ---- the rules can fail -------------------------------------------------------------------


def test_a_cycle_is_found_whatever_way_its_imports_are_written():
    modules = {"p", "p.a", "p.b", "p.c", "p.d"}
    graph = {
        "p": set(),
        "p.a": imports("p.a", "from p.b import X", modules),
        "p.b": imports(
            "p.b",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import c",
            modules,
        ),
        "p.c": imports("p.c", "def f():\n    import p.a", modules),
        "p.d": imports("p.d", "from p import a", modules),
    }
    assert graph["p.b"] == {"p.c"} and graph["p.c"] == {"p.a"} and graph["p.d"] == {"p.a"}
    assert cycles(graph) == [["p.a", "p.b", "p.c"]]
    graph["p.c"] = set()
    assert cycles(graph) == []


def test_real_time_and_files_are_found_however_they_are_reached():
    calls = io_calls(
        "import time\nfrom time import monotonic as clock\nfrom datetime import datetime\n"
        "def f(path):\n    time.time(); clock(); datetime.now(); open('x')\n"
        "    path.read_text()\n    time.sleep(1)\n"
    )
    assert len(calls) == 6, calls
    assert io_calls("def f(host):\n    return host.now() + host.clock()\n") == []


def test_a_long_module_is_found(tmp_path):
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    assert longer(tmp_path.glob("*.py"), MAX_LINES) == {"long.py": MAX_LINES + 1}


def test_a_benchmark_importing_another_is_found(tmp_path):
    (tmp_path / "bench_a.py").write_text("def main(): pass\n")
    (tmp_path / "shared.py").write_text("X = 1\n")
    (tmp_path / "bench_b.py").write_text("from bench_a import main\nfrom shared import X\n")
    (tmp_path / "profile_c.py").write_text("import sys\nsys.path.insert(0, '.')\n")
    assert experiments_problems(tmp_path) == {
        "bench_b.py": ["bench_a"],
        "profile_c.py": ["sys.path"],
    }


def test_an_import_of_a_later_room_is_found():
    graph = {
        "p.a.x": {"p.b.y"},  # a comes before b: upward
        "p.b.y": {"p.a.z", "q.r"},
        "p.a.z": set(),
        "p.node": {"p.b.y"},  # the top imports any
    }
    assert upward_imports(graph, ["a", "b"], "p") == ["p.a.x imports p.b.y"]


def test_a_crowded_folder_is_found(tmp_path):
    for i in range(MAX_MODULES + 1):
        (tmp_path / f"m{i}.py").write_text("")
    (tmp_path / "__init__.py").write_text("")
    calm = tmp_path / "room"
    calm.mkdir()
    (calm / "a.py").write_text("")
    assert list(crowded([tmp_path]).values()) == [MAX_MODULES + 1]
    assert crowded([calm]) == {}
