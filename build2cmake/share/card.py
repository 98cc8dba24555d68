"""The kernel card: the project's CARD.md, filled in after a build and written as build/CARD.md.

build/CARD.md is where kernel-builder writes the filled-in card (its CI reads result/CARD.md) and
where its `upload` takes it from, as the repository's README.md; a build/ of either tool carries
its card to the other's upload. (build2cmake before 2026-11-28 wrote build/README.md: `upload`
still takes that one when there is no build/CARD.md.)

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
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from build2cmake.config import load_project
from build2cmake.config.model import Project
from build2cmake.ground import bounded
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.ground.safefs import ProjectFolder, write_user_file

CARD_NAME = "CARD.md"
BUILT_CARD = "build/CARD.md"
# Where build2cmake wrote the card until 2026-11-28; upload still reads it.
OLD_BUILT_CARD = "build/README.md"
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


# The variant folder names build2cmake and kernel-builder make (ASCII); other names under
# build/ are not variants, and are never passed on to a card, a test run or an upload.
_VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}", re.ASCII)


def is_variant_name(name: str) -> bool:
    """Whether `name` could be a build/<variant>/ folder (never hidden, one component)."""
    return _VARIANT_NAME.fullmatch(name) is not None


def built_variants(project: Project, project_dir: Path) -> list[Variant]:
    """The variant folders under build/ whose metadata.json names this kernel, sorted.

    metadata.json is read bounded (a regular file of at most 1 MiB inside the project); one
    that cannot be read or is not JSON (too deep for the parser included) is an error naming it.
    """
    build = project_dir / "build"
    if not build.is_dir() or build.is_symlink():
        return []
    found = []
    for folder in sorted(build.iterdir()):
        metadata_file = folder / "metadata.json"
        if (
            not _VARIANT_NAME.fullmatch(folder.name)
            or folder.is_symlink()
            or metadata_file.is_symlink()
            or not metadata_file.exists()
        ):
            continue
        metadata = bounded.read_json_record(metadata_file, "metadata.json", root=project_dir)
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


def _python_tree(path: Path, project_dir: Path) -> ast.Module | None:
    """A package file parsed (bounded read, never run); None when absent."""
    if not path.is_file() or path.is_symlink():
        return None
    source = bounded.read_text(path, "package file", root=project_dir)
    return bounded.parse_python(path, source)


def _all_names(init_py: Path, project_dir: Path) -> list[str]:
    """The string entries of `__all__ = [...]` in a Python file (no import: it is not ours)."""
    tree = _python_tree(init_py, project_dir)
    for node in tree.body if tree is not None else []:
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


def _layer_classes(package_dir: Path, project_dir: Path) -> list[str]:
    for candidate in (package_dir / "layers" / "__init__.py", package_dir / "layers.py"):
        tree = _python_tree(candidate, project_dir)
        if tree is not None:
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
        # Bounded and regular files only: a FIFO planted as the binding must not hang the card.
        text = bounded.read_text(path, "torch binding source", root=project_dir)
        for match in _OP_DEF.finditer(text):
            if match.group(1) not in schemas:
                schemas.append(match.group(1))
    return schemas


def card_context(project: Project, project_dir: Path) -> dict[str, Any]:
    """Everything a CARD.md can use."""
    package_dir = project_dir / project.python_source_dir / project.package_name
    names = _all_names(package_dir / "__init__.py", project_dir)
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
        "layers": _layer_classes(package_dir, project_dir) if "layers" in names else [],
        "ops": registered_ops(project, project_dir),
        "has_benchmark": (project_dir / "benchmarks" / "benchmark.py").is_file(),
        "upstream": project.upstream,
        "source": project.source,
    }


# What filling in a card may take. CARD.md is the clone's, and Jinja's sandbox bounds what a
# template can reach, not what it costs: `range` gives 100000 items, so two nested loops run
# 10**10 times, and `'x' * 10**10`, `"x"|center(10**10)` or `9**9**9` are single C calls no
# timer interrupts. So a card is filled in by a child Python with its own memory and CPU limits,
# a wall-clock limit, and a cap on what it may output; whatever goes wrong is one error naming
# CARD.md (and the line, when the child can tell).
CARD_SECONDS = 10
CARD_MEMORY_BYTES = 1 << 30
CARD_OUTPUT_CHARS = 4 << 20

# The child: reads {"text", "context", limits} on stdin, writes {"text"} or {"error", "line"}.
# It imports nothing of build2cmake (it runs in "/", so nothing of the project either).
_CHILD = r"""
import json, resource, signal, sys, traceback
payload = json.load(sys.stdin)
memory, seconds, cap = payload["memory"], payload["seconds"], payload["cap"]
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (seconds + 1, seconds + 2))
import jinja2, jinja2.sandbox

class CardEnvironment(jinja2.sandbox.ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context, operator, left, right):
        # Refused before Python allocates: a repeated string/list or a power too big to print.
        if operator == "*":
            for sized, count in ((left, right), (right, left)):
                if isinstance(sized, (str, list, tuple)) and isinstance(count, int):
                    if len(sized) * count > cap:
                        raise jinja2.sandbox.SecurityError(
                            f"a repetition of {len(sized)} x {count} items is over the limit")
        if operator == "**" and isinstance(left, int) and isinstance(right, int):
            if abs(left) > 1 and right > 4096:
                raise jinja2.sandbox.SecurityError(f"the power {left} ** {right} is too large")
        return super().call_binop(context, operator, left, right)

class Stop(Exception):
    pass

def on_alarm(signum, frame):
    raise Stop(f"took longer than {seconds} s (a loop too long?)")

signal.signal(signal.SIGALRM, on_alarm)
signal.alarm(seconds)
result = {}
try:
    env = CardEnvironment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                          autoescape=False)
    out, size = [], 0
    for chunk in env.from_string(payload["text"]).generate(payload["context"]):
        size += len(chunk)
        if size > cap:
            raise Stop(f"the filled-in card is over {cap} characters")
        out.append(chunk)
    result["text"] = "".join(out)
except jinja2.TemplateSyntaxError as error:
    result = {"syntax": True, "error": str(error.message), "line": error.lineno}
except BaseException as error:
    signal.alarm(0)
    lines = [f.lineno for f in traceback.extract_tb(error.__traceback__)
             if f.filename == "<template>"]
    if isinstance(error, MemoryError):
        message = "needs more than the memory limit"
    elif isinstance(error, RecursionError):
        message = "nests too deeply"
    elif isinstance(error, Stop):
        message = str(error)
    else:
        message = f"{type(error).__name__}: {error}"
    result = {"error": message[:2000], "line": lines[-1] if lines else None}
signal.alarm(0)
sys.stdout.write(json.dumps(result))
"""


def render_card(project: Project, project_dir: Path) -> str | None:
    """The filled-in card, or None when the project has no CARD.md.

    Rendered in Jinja's sandbox in a child process bounded in time (CARD_SECONDS), memory
    (CARD_MEMORY_BYTES) and output (CARD_OUTPUT_CHARS); every failure is one Build2CMakeError
    naming CARD.md and, where known, the line.
    """
    card = project_dir / CARD_NAME
    if not card.exists() and not card.is_symlink():
        return None
    try:
        resolved = card.resolve()
    except (OSError, RuntimeError):  # a symlink loop: RuntimeError before Python 3.13
        raise Build2CMakeError(
            f"{card}: a symlink loop; it must be a file inside the project"
        ) from None
    if not resolved.is_file() or not resolved.is_relative_to(project_dir.resolve()):
        raise Build2CMakeError(f"{card}: must be a file inside the project folder")
    if resolved.stat().st_size > _MAX_CARD_BYTES:
        raise Build2CMakeError(f"{card}: larger than 1 MiB; a card is a short README")
    text = bounded.read_text(resolved, CARD_NAME, root=project_dir, limit_bytes=_MAX_CARD_BYTES)
    payload = {
        "text": text,
        "context": card_context(project, project_dir),
        "memory": CARD_MEMORY_BYTES,
        "seconds": CARD_SECONDS,
        "cap": CARD_OUTPUT_CHARS,
    }
    try:
        child = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            cwd="/",
            timeout=CARD_SECONDS + 10,
            check=False,
        )
        result = json.loads(child.stdout)
    except subprocess.TimeoutExpired:
        raise Build2CMakeError(
            f"{card}: cannot be filled in: took longer than {CARD_SECONDS} s"
        ) from None
    except ValueError:
        # Killed (CPU limit) or out of memory before it could answer.
        raise Build2CMakeError(
            f"{card}: cannot be filled in: the template ran past the limits "
            f"({CARD_SECONDS} s of CPU, {CARD_MEMORY_BYTES >> 20} MiB of memory)"
        ) from None
    if "text" in result:
        return str(result["text"])
    line = result.get("line")
    if result.get("syntax"):
        raise Build2CMakeError(f"{card}:{line}: template error: {result['error']}")
    where = f" (line {line})" if line is not None else ""
    raise Build2CMakeError(f"{card}: cannot be filled in{where}: {result['error']}")


def write_card(project: Project, project_dir: Path) -> Path | None:
    """Fill CARD.md and write it as build/CARD.md; None when there is no CARD.md."""
    content = render_card(project, project_dir)
    if content is None:
        return None
    # Through the one gate: a planted build/ link is refused, a build/CARD.md link replaced.
    with ProjectFolder(project_dir) as folder:
        folder.write_atomic(BUILT_CARD, content.encode("utf-8", "replace"))
    return project_dir / BUILT_CARD


def fill_card(build_toml: Path) -> str:
    """kernel-builder's `fill-card`: the project's CARD.md filled in, as `build` writes it."""
    project = load_project(build_toml)
    content = render_card(project, build_toml.parent)
    if content is None:
        raise Build2CMakeError(
            f"{build_toml.parent / CARD_NAME}: missing; the card is filled in from it "
            "(`build2cmake init` writes one)"
        )
    return content


def write_filled_card(output: Path, content: str) -> None:
    """Write `fill-card`'s OUTPUT through safefs (from the current folder, no symlinked folder on
    the way; a link at its name is replaced, never followed)."""
    write_user_file(output, content.encode("utf-8", "replace"), [Path.cwd()])
