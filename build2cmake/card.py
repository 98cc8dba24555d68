"""The kernel card: the project's CARD.md, filled in after a build and written as build/README.md.

CARD.md is a Jinja template (as kernel-builder's), and it comes with the project, so it is
rendered in Jinja's sandbox: a card can use the values below, not reach into Python. It sees:

    name, package, repo_id, version, license, backends     from build.toml
    variants   [{name, backend, archs}] for each build/<variant>/ of this kernel (metadata.json)
    functions  the package's __all__ (without "layers"), layers: its layers' classes
    ops        the op schemas the binding registers (`ops.def("...")` in [torch].src)
    has_benchmark, upstream, source
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.sandbox

from build2cmake.errors import Build2CMakeError
from build2cmake.model import Project

CARD_NAME = "CARD.md"
README = "build/README.md"
# A card is prose; anything bigger is not one (and is not read into memory).
_MAX_CARD_BYTES = 1 << 20
_OP_DEF = re.compile(r"\.def\(\s*\"((?:[^\"\\]|\\.)*)\"")


@dataclass(frozen=True)
class Variant:
    """One build/<variant>/ folder of this kernel, as its metadata.json describes it."""

    name: str
    backend: str
    archs: tuple[str, ...]
    metadata: dict[str, Any]


def metadata_name(project: Project) -> str:
    """The kernel name metadata.json carries (as builder.metadata_for writes it)."""
    return project.name.lower().replace("_", "-")


def built_variants(project: Project, project_dir: Path) -> list[Variant]:
    """The variant folders under build/ whose metadata.json names this kernel, sorted."""
    build = project_dir / "build"
    if not build.is_dir() or build.is_symlink():
        return []
    found = []
    for folder in sorted(build.iterdir()):
        metadata_file = folder / "metadata.json"
        if (
            folder.name.startswith(".")
            or folder.is_symlink()
            or metadata_file.is_symlink()
            or not metadata_file.is_file()
        ):
            continue
        try:
            metadata = json.loads(metadata_file.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(metadata, dict) or metadata.get("name") != metadata_name(project):
            continue
        backend = metadata.get("backend")
        backend = backend if isinstance(backend, dict) else {}
        archs = backend.get("archs", [])
        found.append(
            Variant(
                name=folder.name,
                backend=str(backend.get("type", "?")),
                archs=tuple(str(a) for a in archs) if isinstance(archs, list) else (),
                metadata=metadata,
            )
        )
    return found


def _all_names(init_py: Path) -> list[str]:
    """The string entries of `__all__ = [...]` in a Python file (no import: it is not ours)."""
    try:
        tree = ast.parse(init_py.read_text("utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        is_all = any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        if is_all and isinstance(node.value, ast.List | ast.Tuple):
            return [
                e.value
                for e in node.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            ]
    return []


def _layer_classes(package_dir: Path) -> list[str]:
    for candidate in (package_dir / "layers" / "__init__.py", package_dir / "layers.py"):
        if candidate.is_file():
            try:
                tree = ast.parse(candidate.read_text("utf-8"))
            except (OSError, SyntaxError, ValueError):
                return []
            return [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    return []


def registered_ops(project: Project, project_dir: Path) -> list[str]:
    """The op schemas the torch binding defines, in source order."""
    schemas: list[str] = []
    sources = project.torch.sources if project.torch is not None else ()
    for source in sources:
        path = project_dir / source
        if path.suffix not in {".cpp", ".cc", ".cxx", ".cu", ".hip", ".h", ".hpp"}:
            continue
        try:
            text = path.read_text("utf-8", errors="replace")
        except OSError:
            continue
        for match in _OP_DEF.finditer(text):
            if match.group(1) not in schemas:
                schemas.append(match.group(1))
    return schemas


def card_context(project: Project, project_dir: Path) -> dict[str, Any]:
    """Everything a CARD.md can use."""
    package_dir = project_dir / "torch-ext" / project.package_name
    names = _all_names(package_dir / "__init__.py")
    return {
        "name": project.name,
        "package": project.package_name,
        "repo_id": project.hub_repo_id or project.name,
        "version": project.version if project.version is not None else 1,
        "license": project.license or "",
        "backends": list(project.backends),
        "variants": [
            {"name": v.name, "backend": v.backend, "archs": list(v.archs)}
            for v in built_variants(project, project_dir)
        ],
        "functions": [n for n in names if n != "layers"],
        "layers": _layer_classes(package_dir) if "layers" in names else [],
        "ops": registered_ops(project, project_dir),
        "has_benchmark": (project_dir / "benchmarks" / "benchmark.py").is_file(),
        "upstream": project.upstream,
        "source": project.source,
    }


def render_card(project: Project, project_dir: Path) -> str | None:
    """The filled-in card, or None when the project has no CARD.md."""
    card = project_dir / CARD_NAME
    if not card.exists() and not card.is_symlink():
        return None
    resolved = card.resolve()
    if not resolved.is_file() or not resolved.is_relative_to(project_dir.resolve()):
        raise Build2CMakeError(f"{card}: must be a file inside the project folder")
    if resolved.stat().st_size > _MAX_CARD_BYTES:
        raise Build2CMakeError(f"{card}: larger than 1 MiB; a card is a short README")
    text = resolved.read_text("utf-8", errors="replace")
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False
    )
    try:
        return env.from_string(text).render(card_context(project, project_dir))
    except jinja2.TemplateSyntaxError as error:
        raise Build2CMakeError(f"{card}:{error.lineno}: template error: {error.message}") from None
    except jinja2.TemplateError as error:
        # SecurityError (the sandbox refused) and UndefinedError both land here.
        raise Build2CMakeError(f"{card}: cannot be filled in: {error}") from None


def write_card(project: Project, project_dir: Path) -> Path | None:
    """Fill CARD.md and write it as build/README.md; None when there is no CARD.md."""
    content = render_card(project, project_dir)
    if content is None:
        return None
    build = project_dir / "build"
    if build.is_symlink():
        raise Build2CMakeError(f"{build}: is a symlink; build/ must be a folder of the project")
    build.mkdir(exist_ok=True)
    destination = project_dir / README
    descriptor, tmp = tempfile.mkstemp(prefix=".README.md.", dir=build)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(content)
        os.chmod(tmp, 0o644)
        os.replace(tmp, destination)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return destination
