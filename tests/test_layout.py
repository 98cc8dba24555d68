"""The package's layout: wings by stage, each importing only from the floors below it.

Read from the source with ast (every import, at the top of a module or inside a function, type
checking ones too), so an import that runs up a floor or closes a circle, between wings or
between the modules of one wing, fails here before anyone has to untangle it. ARCHITECTURE.md
draws the same floors.
"""

from __future__ import annotations

import ast
from pathlib import Path

import build2cmake

PACKAGE = Path(build2cmake.__file__).parent

# Bottom up. A module may import from its own wing and from the wings of lower floors only.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("ground",),
    ("config",),
    ("generate",),
    ("toolchains",),
    ("builds",),
    ("share",),
    ("top",),
)
# The top of the package: the library's face over the wings (api.py) and the command line (cli/).
TOP_MODULES = frozenset({"__main__", "api", "cli"})


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """The build2cmake modules `path` imports (a name imported from a package counts as the
    module of that name when there is one, else as the package)."""
    names = set(_modules())
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "build2cmake":
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in names else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "build2cmake"}
    return found


def _wing(module: str) -> str:
    """The wing a module belongs to: its sub-package, "top" for api.py and the cli/ package, and
    "ground" for the package itself (its __init__ holds only the version)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "ground"
    if parts[1] in TOP_MODULES:
        return "top"
    return parts[1]


def _floor(wing: str) -> int:
    for number, wings in enumerate(FLOORS):
        if wing in wings:
            return number
    raise AssertionError(f"wing {wing!r} has no floor in FLOORS; add it there")


def test_every_module_sits_in_a_wing_with_a_floor() -> None:
    for module in _modules():
        _floor(_wing(module))


def test_no_import_runs_up_a_floor_or_across_to_another_wing_of_the_same_floor() -> None:
    wrong = [
        f"{module} ({_wing(module)}) imports {imported} ({_wing(imported)})"
        for module, path in _modules().items()
        for imported in sorted(_imports(path))
        if _wing(imported) != _wing(module) and _floor(_wing(imported)) >= _floor(_wing(module))
    ]
    assert not wrong, "imports that run up:\n" + "\n".join(wrong)


def _assert_no_circle(edges: dict[str, set[str]]) -> None:
    """Depth-first search for a back edge of `edges` (each node to the nodes it imports)."""
    state: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for below in sorted(edges.get(node, ())):
            assert state.get(below) != "open", "circle: " + " -> ".join([*trail, node, below])
            if below not in state:
                visit(below, [*trail, node])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [])


def test_the_wings_import_one_another_without_a_circle() -> None:
    edges: dict[str, set[str]] = {}
    for module, path in _modules().items():
        for imported in _imports(path):
            if _wing(imported) != _wing(module):
                edges.setdefault(_wing(module), set()).add(_wing(imported))
    _assert_no_circle(edges)


def test_the_modules_of_each_wing_import_one_another_without_a_circle() -> None:
    """Inside a wing too, each module has a floor: an import deferred into a function to dodge
    a circle is still a circle."""
    edges: dict[str, set[str]] = {}
    for module, path in _modules().items():
        for imported in _imports(path):
            if imported != module and _wing(imported) == _wing(module):
                edges.setdefault(module, set()).add(imported)
    _assert_no_circle(edges)


def test_the_package_itself_imports_nothing_of_build2cmake() -> None:
    assert not _imports(PACKAGE / "__init__.py")


def test_each_wing_says_in_one_line_what_it_is_for() -> None:
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text("utf-8")))
        assert docstring, f"{init.relative_to(PACKAGE.parent)}: no docstring"
        first = docstring.splitlines()[0]
        assert first.endswith("."), f"{init.relative_to(PACKAGE.parent)}: {first!r}"
