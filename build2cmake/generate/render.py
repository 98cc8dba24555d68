"""Render the templates (cmake_templates/ and torch-ext/) for a Project into a FileSet.

Strings from build.toml or from the file system reach the generated files only through the
quoting filters below (CMake bracket arguments, compiler flags escaped for generator
expressions, TOML basic strings, Python literals), so a hostile name cannot become code in
CMakeLists.txt, pyproject.toml or _ops.py.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2

from build2cmake.config import loader_rules
from build2cmake.config.model import Project
from build2cmake.generate.fileset import FileSet
from build2cmake.generate.shared_sources import backend_layout

# Where generated projects put their CMake build (pyproject's build-dir; clean removes it).
BUILD_DIR = "build/cmake"
# The pyproject's metadata provider, alone in its folder (provider-path): Python imports the
# provider and the modules it imports from there first, so nothing else may lie beside it.
METADATA_PROVIDER_FOLDER = "cmake/build2cmake-metadata"
METADATA_PROVIDER = f"{METADATA_PROVIDER_FOLDER}/build2cmake_metadata.py"

# Copied as they are into the cmake/ folder of a project whose ROCm kernels list CUDA sources:
# the build-time script that hipifies them.
HIPIFY_FILES = ("rocm/build2cmake_hipify.py",)
CUDA_SOURCE_SUFFIXES = (".cu", ".cuh")
# Copied as it is into cmake/ when a GPU backend is built: the GPU list a build is narrowed to
# (TORCH_CUDA_ARCH_LIST, PYTORCH_ROCM_ARCH) and the rules narrowing each kernel's list to it.
GPU_TARGETS_MODULE = "common/build2cmake_gpu_targets.cmake"


def needs_hipify(project: Project) -> bool:
    """Whether a ROCm kernel lists CUDA sources (.cu), which the build hipifies."""
    return "rocm" in project.buildable_backends and any(
        source.suffix == ".cu"
        for kernel in project.kernels_for("rocm")
        for source in kernel.sources
    )


def _data_dir(name: str) -> Path:
    """A template folder: inside the installed package, or at the top of a source checkout."""
    packaged = Path(__file__).parents[1] / "_data" / name
    if packaged.is_dir():
        return packaged
    return Path(__file__).parents[2] / name


def rocm_discovery_module() -> Path:
    """The static CMake module that finds ROCm: copied into builds, run by doctor."""
    return _data_dir("cmake_templates") / "rocm" / "build2cmake_find_rocm.cmake"


def schedule_script() -> Path:
    """The static script that orders compiles and records their costs: copied into builds, and
    run by `build` itself to record what a stopped build finished."""
    return _data_dir("cmake_templates") / "common" / "build2cmake_schedule.py"


BACKEND_CHOICE_MODULE = "common/build2cmake_backend.cmake"


def backend_choice_module() -> Path:
    """The static CMake module that picks the GPU backend for a torch of no declared backend:
    copied into builds, run by `build2cmake build` (cmake -P)."""
    return _data_dir("cmake_templates") / BACKEND_CHOICE_MODULE


@functools.cache
def environment() -> jinja2.Environment:
    """The one Jinja2 environment over the CMake templates and the shared torch glue."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(
            [str(_data_dir("cmake_templates")), str(_data_dir("torch-ext"))]
        ),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["cmake_quote"] = cmake_quote
    env.filters["cmake_flag"] = cmake_flag
    env.filters["toml_str"] = toml_str
    env.filters["py_str"] = py_str
    env.filters["comment_safe"] = comment_safe
    return env


_QUOTED_ESCAPES = {"\\": "\\\\", '"': '\\"', "$": "\\$", "\r": "\\r", "\n": "\\n"}


def cmake_quote(value: object) -> str:
    """One CMake argument that is taken literally, whatever it contains: a bracket argument
    (no variables, escapes or list splitting inside), or a quoted argument with escapes for
    text a bracket argument would change."""
    text = str(value)
    if "\r" in text or text.startswith("\n"):
        # CMake drops a newline right after the opening bracket and reads CRLF as LF.
        return '"' + re.sub(r'[\\"$\r\n]', lambda m: _QUOTED_ESCAPES[m.group()], text) + '"'
    level = 0
    while f"]{'=' * level}]" in text or text.endswith("]" + "=" * level):
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


# Compile options are generator expressions (the templates wrap them in
# $<$<COMPILE_LANGUAGE:...>:...>, and COMPILE_OPTIONS evaluates them anyway): these characters
# would open or close one, or split its arguments. `$` has no escape of its own; $<1:$> yields it.
_GENEX_ESCAPES = {"$": "$<1:$>", ">": "$<ANGLE-R>", ",": "$<COMMA>"}
_GENEX_SPECIAL = re.compile("[$>,]")
# An all-caps word could be a keyword of the build2cmake_add_*_kernel functions (SOURCES,
# INCLUDES, ...), which cmake_parse_arguments would take it for.
_KEYWORD_LIKE = re.compile("[A-Z0-9_]+")


def cmake_flag(value: object) -> str:
    """A compiler flag as a bracket argument that reaches the compiler as it is: generator
    expression syntax escaped, and never mistaken for a function keyword."""
    text = _GENEX_SPECIAL.sub(lambda m: _GENEX_ESCAPES[m.group()], str(value))
    if _KEYWORD_LIKE.fullmatch(text):
        text = f"$<1:{text}>"
    return cmake_quote(text)


def toml_str(value: object) -> str:
    """A TOML basic string: JSON's string escapes are TOML's (control characters as \\uXXXX);
    DEL, which JSON leaves alone and TOML refuses, is escaped too."""
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")


def py_str(value: object) -> str:
    """A Python string literal (JSON's escapes are Python's; double quotes, as ruff writes)."""
    return json.dumps(str(value))


def comment_safe(text: str) -> str:
    """Text for a one-line comment: control characters (a newline would end the comment and
    start code) become '?'."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]", "?", text)


@dataclass(frozen=True)
class RenderOptions:
    """What generate-torch decides beyond build.toml."""

    ops_id: str
    default_backend: str  # "auto": the installed torch's backend, chosen at configure time
    build_toml_name: str = "build.toml"
    # The project folder relative to the target folder, "" when generating in place.
    source_prefix: str = ""


def extension_name(project: Project, backend: str, ops_id: str) -> str:
    """The Python module and torch op namespace of one backend's build."""
    return f"_{project.package_name}_{backend}_{ops_id}"


def _stable_abi_min(project: Project, buildable: list[str]) -> str:
    """The torch a wheel needs when every built backend uses the stable ABI ("" otherwise)."""
    if project.torch is None:
        return ""
    versions = [project.torch.stable_abi_for(b) for b in buildable]
    if not versions or None in versions:
        return ""
    return max((v for v in versions if v), key=lambda v: tuple(int(p) for p in v.split(".")))


def render_project(project: Project, options: RenderOptions) -> FileSet:
    """Every file generate-torch writes for `project`, keyed by path in the target folder."""
    env = environment()
    package = project.package_name
    buildable = list(project.buildable_backends)
    dependencies = loader_rules.python_dependencies()
    context: dict[str, Any] = {
        "project": project,
        "package": package,
        "ops_id": options.ops_id,
        "source_prefix": options.source_prefix,
        "backends": list(project.backends),
        "buildable_backends": buildable,
        "toolchain_backends": buildable,
        "default_backend": options.default_backend,
        "build_dir": BUILD_DIR,
        "metadata_provider_folder": METADATA_PROVIDER_FOLDER,
        "project_version": str(project.version) if project.version is not None else "0",
        "extension_names": [(extension_name(project, b, options.ops_id), b) for b in buildable],
        # The pip packages build.toml's python-depends stand for (`tvm-ffi` is
        # `apache-tvm-ffi`), as kernel-builder writes a wheel's requirements; metadata.json
        # keeps build.toml's names, which the kernels loader checks.
        "python_requirements": list(dependencies.pip_packages(project.python_depends)),
        "backend_python_depends": [
            (b, list(dependencies.pip_packages(deps, b)))
            for b, deps in project.backend_python_depends
            if b in buildable
        ],
        # Each backend's kernel sources: what each kernel compiles itself, and the sources
        # several kernels list, compiled once for all of them (shared_sources.py).
        "layouts": {b: backend_layout(project, b) for b in buildable},
        # The dependencies each backend's kernels declare, besides torch: every source of the
        # extension sees them (build2cmake_share_dependencies).
        "shared_dependencies": {
            b: list(
                dict.fromkeys(d for k in project.kernels_for(b) for d in k.depends if d != "torch")
            )
            for b in buildable
        },
        "stable_abi_min": _stable_abi_min(project, buildable),
        "stable_abi": [
            (b, project.torch.stable_abi_for(b))
            for b in buildable
            if project.torch is not None and project.torch.stable_abi_for(b)
        ],
    }
    header = comment_safe(
        f"Generated by build2cmake from {options.build_toml_name}. "
        "Edits are overwritten only with --force."
    )

    def render(template: str) -> str:
        return env.get_template(template).render(context, header=header)

    def copied(static: str) -> str:
        # A script copied as it is, under the header every generated file starts with (a
        # shebang is dropped: the build runs it with its Python).
        text = (_data_dir("cmake_templates") / static).read_text("utf-8")
        if text.startswith("#!"):
            text = text.split("\n", 1)[1]
        return f"# {header}\n{text}"

    files = FileSet()
    if project.universal:
        context["universal_namespace"] = extension_name(project, "universal", options.ops_id)
        files.add("pyproject.toml", render("common/pyproject_universal.toml.j2"))
        files.add(PurePosixPath("torch-ext") / package / "_ops.py", render("_ops_universal.py.j2"))
        return files
    # A [tvm-ffi] kernel has its own top level and Python glue (tvm-ffi/) over the same backend
    # modules and shared machinery (build2cmake_torch.cmake, which builds without torch there).
    tvm_ffi = project.framework == "tvm-ffi"
    top = "tvm-ffi" if tvm_ffi else "common"
    files.add("CMakeLists.txt", render(f"{top}/CMakeLists.txt.j2"))
    files.add("pyproject.toml", render(f"{top}/pyproject.toml.j2"))
    files.add("cmake/build2cmake_torch.cmake", render("common/build2cmake_torch.cmake.j2"))
    if tvm_ffi:
        files.add("cmake/build2cmake_tvm_ffi.cmake", render("tvm-ffi/build2cmake_tvm_ffi.cmake.j2"))
    for backend in buildable:
        files.add(
            f"cmake/build2cmake_{backend}.cmake",
            render(f"{backend}/build2cmake_{backend}.cmake.j2"),
        )
    if needs_hipify(project):
        for static in HIPIFY_FILES:
            files.add(PurePosixPath("cmake") / PurePosixPath(static).name, copied(static))
    if "rocm" in buildable:
        # A static module (no template): ROCm discovery, which doctor also runs (cmake -P).
        static = rocm_discovery_module().read_text(encoding="utf-8")
        files.add("cmake/build2cmake_find_rocm.cmake", f"# {header}\n{static}")
    if {"cuda", "rocm"} & set(buildable):
        files.add("cmake/build2cmake_gpu_targets.cmake", copied(GPU_TARGETS_MODULE))
    files.add("cmake/build2cmake_build_dir.cmake", copied("common/build2cmake_build_dir.cmake"))
    # Static: the compile order and the cores (build2cmake_torch.cmake runs it).
    files.add("cmake/build2cmake_schedule.py", copied("common/build2cmake_schedule.py"))
    # Static too: the check that the linked extension loads (a POST_BUILD step).
    files.add("cmake/build2cmake_symbols.py", copied("common/build2cmake_symbols.py"))
    # Static too: the backend choice for a torch of no declared backend, which `build` also runs.
    files.add("cmake/build2cmake_backend.cmake", copied(BACKEND_CHOICE_MODULE))
    files.add(METADATA_PROVIDER, copied("common/build2cmake_metadata.py"))
    if tvm_ffi:
        files.add(PurePosixPath("tvm-ffi-ext") / package / "_ops.py", render("tvm-ffi/_ops.py.j2"))
        return files
    # Projects made with kernel-builder often ship its registration.h: used as it is when it
    # defines what the binding's macros need (the stable-ABI ones for a stable-ABI build).
    needs: tuple[str, ...] = ("TORCH_LIBRARY_EXPAND", "REGISTER_EXTENSION")
    if project.torch is not None and project.torch.stable_abi:
        needs += ("STABLE_TORCH_LIBRARY_EXPAND",)
    files.add("torch-ext/registration.h", render("registration.h.j2"), own_copy_defines=needs)
    files.add(PurePosixPath("torch-ext") / package / "_ops.py", render("_ops.py.j2"))
    return files
