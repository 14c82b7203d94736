"""The package's rooms and the direction of its imports.

napkin is laid out by role (README, "The library"): the CLI on top, then the API, the live checks, the
engines, the results, the systems (profiles and their catalog), the domain objects and the file layer.
A module may import its own room or any room below it, never one above: an engine that imports the
API, or a profile that imports an engine, is the coupling this layout exists to prevent.
"""

from __future__ import annotations

import ast
from pathlib import Path

import napkin

ROOMS = ("io", "domain", "systems", "results", "engines", "live", "api", "cli")  # bottom to top
FOUNDATION = {"errors", "units", "sources", "lazy"}  # imported by every room; they import nothing above them
PACKAGE = Path(napkin.__file__).parent


def _rank(module: str) -> int | None:
    """A module's room as a height: -1 for the foundation, None for the package root and its entry points."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "napkin":
        return None
    if parts[1] in FOUNDATION:
        return -1
    return ROOMS.index(parts[1]) if parts[1] in ROOMS else None


def _imports(path: Path) -> list[str]:
    """The napkin modules a file imports at run time (imports under ``if TYPE_CHECKING:`` are for types only)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "napkin":
            if node.module == "napkin":
                found.extend(f"napkin.{alias.name}" for alias in node.names)
            else:
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names if alias.name.split(".")[0] == "napkin")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _modules() -> list[tuple[str, Path]]:
    return [
        (".".join(("napkin", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"), path)
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def test_every_module_lives_in_a_room() -> None:
    loose = [name for name, _ in _modules() if _rank(name) is None]
    assert sorted(loose) == ["napkin", "napkin.__main__", "napkin._entry", "napkin._startup"]


def test_imports_only_point_down() -> None:
    upward = []
    for name, path in _modules():
        mine = _rank(name)
        if mine is None:
            continue
        for target in _imports(path):
            theirs = _rank(target)
            if theirs is not None and theirs > mine:
                upward.append(f"{name} imports {target}")
    assert upward == []


def test_the_foundation_imports_no_room() -> None:
    for name, path in _modules():
        if _rank(name) == -1:
            assert [t for t in _imports(path) if (_rank(t) or -1) >= 0] == [], name


#: Modules allowed past about 400 lines, each with its reason; any other module over the limit fails, and an entry
#: whose module is no longer long fails too (drop it).
LONG_MODULES = {
    "napkin.engines.comm": "one α-β model of NCCL: algorithms, protocols and the two fabrics, each used by the others",
    "napkin.units": "one grammar for every quantity napkin reads and writes (SI/IEC prefixes, rates, lengths)",
    "napkin.live.bench": "one measurement protocol (budget planner, timing, checks, result) around torch",
    "napkin.live.bench_comm": "one multi-process protocol (launcher, worker, result) around torch.distributed",
    "napkin.live.verify": "a list of independent checks against torch, one per formula",
}
LINE_LIMIT = 430  # "about 400": a module a reader can hold in their head


def test_no_module_is_long_without_a_stated_reason() -> None:
    lines = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _modules()}
    over = {name: n for name, n in lines.items() if n > LINE_LIMIT and name not in LONG_MODULES}
    assert over == {}, f"split these, or state why not in LONG_MODULES: {over}"
    short = [name for name in LONG_MODULES if lines.get(name, 0) <= LINE_LIMIT]
    assert short == [], f"no longer long (or gone): drop from LONG_MODULES: {short}"


#: Calls that read or probe files: the file layer's (napkin.io) and pathlib's and the builtins'.
FILE_CALLS = {"open", "read_text", "read_bytes", "is_file", "is_dir", "exists", "iterdir", "glob", "rglob", "stat"}
#: Modules of the file layer a domain object may call for a convenience that reads (``Model.from_hf_config``).
FILE_LAYER = {"napkin.io.hf_files"}


def test_the_domain_reads_no_file() -> None:
    """Domain objects parse what they are given: no module in napkin/domain opens, reads or probes a file itself
    (a file's text comes from napkin.io, a Hub config from napkin.systems), and only the file layer's config reader
    is imported there, by ``Model.from_hf_config``."""
    found = []
    for name, path in _modules():
        if not name.startswith("napkin.domain"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in FILE_CALLS:
                    found.append(f"{name} calls {called}")
        found += [f"{name} imports {t}" for t in _imports(path) if t.startswith("napkin.io") and t not in FILE_LAYER]
    assert found == []
