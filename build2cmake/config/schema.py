"""What every build.toml format shares: key tables as data, typed value checks, path checks.

Each format edition (v1.py ... v5.py) is a set of key tables plus a small conversion into
`model.Project`; this module holds the `Reader` they use. The reader collects every problem it
finds instead of stopping at the first, so `validate` reports a whole file in one run.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from build2cmake.config import loader_rules
from build2cmake.config.archs import cuda_capability_problem, did_you_mean, rocm_arch_problem
from build2cmake.config.flags import flag_problem
from build2cmake.config.model import BUILDABLE_BACKENDS, KNOWN_BACKENDS, KernelDependency
from build2cmake.ground.errors import BuildConfigError, printable

T = TypeVar("T")


@dataclass(frozen=True)
class KeySpec:
    """One key a section may hold: its type, whether it is required, and what it means."""

    kind: str  # "str", "bool", "int", "str-list", "table", "version", "any"
    required: bool = False
    # For kernel keys: the backends whose kernels may set it (None: every backend).
    backends: tuple[str, ...] | None = None
    doc: str = ""


Keys = Mapping[str, KeySpec]

# Dependencies a kernel may declare. CUTLASS headers come from the nvidia-cutlass PyPI package;
# the others belong to backends this build2cmake does not build (metal-cpp, sycl_tla).
KNOWN_DEPENDS = (
    "torch",
    "cutlass_2_10",
    "cutlass_3_5",
    "cutlass_3_6",
    "cutlass_3_8",
    "cutlass_3_9",
    "cutlass_4_0",
    "cutlass_4_4",
    "cutlass_4_5",
    "metal-cpp",
    "sycl_tla",
)


def cutlass_major(dependencies: Iterable[str]) -> int | None:
    """The CUTLASS major release `dependencies` name (`cutlass_3_9`: 3), the newest where they
    name several; None without one. kernel-builder fetches the release a name gives; PyPI's
    nvidia-cutlass has some releases only (3.3 to 3.8 and 4.2 on 2026-11-29, no 2.x), and
    CUTLASS keeps its API within a major release only, so the newest release of that major is
    the one whose headers build such kernels (kernels-community's vllm-flash-attn3, written for
    3.9, compiles with 3.8's headers and not with 4.2's)."""
    majors = [
        int(match.group(1))
        for d in dependencies
        if (match := re.fullmatch(r"cutlass_(\d+)_\d+", d))
    ]
    return max(majors) if majors else None


_HEADERS = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".tcc")
_CXX = (".c", ".cc", ".cpp", ".cxx")
# What a kernel of each buildable backend may list. ROCm kernels may list CUDA sources, which
# are hipified at build time (as kernel-builder does). Other backends are only checked to exist.
SOURCE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "torch": _CXX + _HEADERS,
    "cpu": _CXX + _HEADERS,
    "rocm": (".hip", ".cu", *_CXX, *_HEADERS),
    "cuda": (".cu", *_CXX, *_HEADERS),
}
HEADER_SUFFIXES = _HEADERS

# Characters a build path may not contain: they would end or split a CMake argument or start a
# variable reference, an unbalanced '[' or ']' joins CMake list elements (the path with the
# next), and control characters (NUL, newline, ...) have no place in a file name.
_UNSAFE_PATH_CHARS = re.compile(r'[;"$\\`\[\]\x00-\x1f\x7f]')
_VERSION = re.compile(r"[0-9]+(\.[0-9]+){0,2}")
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_FILE_EXTENSION = re.compile(r"[A-Za-z0-9]+")
# A compiler flag: printable ASCII, no CMake list separator. Each flag is its own string.
_FLAG = re.compile(r"[\x21-\x3a\x3c-\x7e]([\x20-\x3a\x3c-\x7e]*[\x21-\x3a\x3c-\x7e])?")
# Flags travel through CMake lists, where an unbalanced '[' or ']' joins the following
# elements into one and a '\' before the separator escapes it; CMake splits a flag that starts
# with SHELL: (or LINKER:) into several. No flag a kernel project uses needs them.
_FLAG_LIST_CHARS = re.compile(r"[\[\]\\]")
_FLAG_CMAKE_PREFIXES = ("SHELL:", "LINKER:")
# [torch] stable-abi: the torch release whose stable ABI a build targets, MAJOR.MINOR (a patch
# is allowed and ignored). TORCH_TARGET_VERSION holds major and minor in one byte each, and
# the Hub's variant names (torch-stable-abi<major><minor>) take a one-digit major.
_STABLE_ABI = re.compile(r"([0-9])\.([0-9]{1,3})(\.[0-9]+)?")
# The keywords of every command an include folder reaches in the generated CMake: our kernel
# functions' (cmake_parse_arguments), where one would start a new argument list, and
# target_include_directories', where one is taken as a keyword and the folder silently drops out
# of the include path. (Flags are wrapped by render.cmake_flag instead; sources always have a
# suffix.)
CMAKE_KEYWORDS = frozenset(
    ("ARCHS", "CAPABILITIES", "CUDA_FLAGS", "CXX_FLAGS", "DEPENDS", "HIP_FLAGS", "INCLUDES",
     "MINVER", "SOURCES",
     # target_include_directories'
     "AFTER", "BEFORE", "INTERFACE", "PRIVATE", "PUBLIC", "SYSTEM")
)  # fmt: skip
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*")
# Git URLs as kernel-builder accepts them: a URL with a git scheme, or scp-like user@host:path.
_GIT_URL = re.compile(
    r"((git\+)?(https?|ssh)|git)://[\x21-\x7e]+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[\x21-\x7e]+"
)

_TYPE_NAMES = {
    "str": "a string",
    "bool": "true or false",
    "int": "an integer",
    "str-list": "a list of strings",
    "table": "a table",
    "version": "a version string such as '2.9'",
    "any": "a value",
}


class _Abandon(Exception):
    """Stops reading one value after its problem was recorded; the reader goes on."""


class Reader:
    """Reads one build.toml's values, recording every problem with its key path."""

    def __init__(self, build_toml: Path, source_format: str) -> None:
        self.file = build_toml
        self.source_format = source_format
        self.project_dir = build_toml.parent
        self.real_project_dir = Path(os.path.realpath(self.project_dir))
        self.problems: list[BuildConfigError] = []
        self.warnings: list[str] = []

    # -- recording --------------------------------------------------------------------------

    def fail(self, key: str, message: str) -> _Abandon:
        """Record a problem at `key`; raise the result to abandon the value being read."""
        self.problems.append(BuildConfigError(self.file, key, message))
        return _Abandon()

    def warn(self, key: str, message: str) -> None:
        """Record something worth saying that does not stop the build."""
        self.warnings.append(printable(f"{self.file}: {key}: {message}"))

    @contextlib.contextmanager
    def attempt(self) -> Iterator[None]:
        """Run a block that may abandon its value; the problem is already recorded."""
        with contextlib.suppress(_Abandon):
            yield

    def get(
        self, data: Mapping[str, Any], key: str, where: str, read: Callable[..., T]
    ) -> T | None:
        """`read(value, key_path)` for `data[key]` when present and valid, else None."""
        if key not in data:
            return None
        try:
            return read(data[key], f"{where}.{key}" if where else f"[{key}]")
        except _Abandon:
            return None

    # -- structure ----------------------------------------------------------------------------

    def check_keys(self, data: Mapping[str, Any], keys: Keys, where: str) -> None:
        """Record unknown keys (with a did-you-mean) and missing required ones."""
        for key in data:
            if key not in keys:
                self.fail(
                    f"{where}.{key}" if where else f"[{key}]",
                    f"unknown key{did_you_mean(key, list(keys))} in the {self.source_format} "
                    f"format; valid keys here: {', '.join(keys)}",
                )
        for key, spec in keys.items():
            if spec.required and key not in data:
                self.fail(
                    f"{where}.{key}" if where else f"[{key}]",
                    f"missing; expected {_TYPE_NAMES[spec.kind]}",
                )

    def table(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected a table, got {describe(value)}")
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {describe(value)}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {describe(value)}")
        return value

    def integer(self, value: Any, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(key, f"expected an integer, got {describe(value)}")
        if value < 0:
            raise self.fail(key, f"{value} is negative; use 0 or more")
        return value

    def str_list(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of strings, got {describe(value)}")
        bad = False
        for i, item in enumerate(value):
            if not isinstance(item, str):
                self.fail(f"{key}[{i}]", f"expected a string, got {describe(item)}")
                bad = True
        if bad:
            raise _Abandon()
        return list(value)

    # -- values -------------------------------------------------------------------------------

    def version(self, value: Any, key: str) -> str:
        """A version such as '2.9' or '12.8.1' (ASCII digits); a float is a common mistake."""
        if isinstance(value, float):
            raise self.fail(key, f"{value!r} is a number; write the version as a string: '{value}'")
        text = self.string(value, key)
        if not _VERSION.fullmatch(text):
            raise self.fail(key, f"{text!r} is not a version; write it like '2.9' or '12.8'")
        return text

    def backend_list(self, value: Any, key: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
        backends = self.str_list(value, key)
        if not backends:
            raise self.fail(key, f"is empty; list one or more of {', '.join(allowed)}")
        result: list[str] = []
        for i, backend in enumerate(backends):
            if backend not in allowed:
                self.fail(
                    f"{key}[{i}]",
                    f"{backend!r} is not a backend{did_you_mean(backend, allowed)}; "
                    f"valid: {', '.join(allowed)}",
                )
            elif backend in result:
                self.fail(f"{key}[{i}]", f"{backend!r} is listed twice")
            else:
                result.append(backend)
        return tuple(result)

    def requirement_list(self, value: Any, key: str) -> tuple[str, ...]:
        """Python requirement names (e.g. 'einops'); versions and markers are not allowed."""
        names = self.str_list(value, key)
        for i, name in enumerate(names):
            if not _REQUIREMENT_NAME.fullmatch(name):
                self.fail(
                    f"{key}[{i}]",
                    f"{name!r} is not a Python package name (e.g. 'einops'; "
                    "letters, digits, '.', '_' and '-')",
                )
        return tuple(names)

    def python_depends(
        self, value: Any, key: str, backend: str | None = None, *, any_backend: bool = False
    ) -> tuple[str, ...]:
        """python-depends: names the `kernels` loader accepts (its own list, see loader_rules):
        `backend` None for [general] (names for every backend), else [general.<backend>] (that
        backend's names). `any_backend`: a format without per-backend tables, where a name of
        one backend's list stands in [general] too (see PythonDependencies.split)."""
        names = self.requirement_list(value, key)
        rules = loader_rules.python_dependencies()
        for i, name in enumerate(names):
            if not _REQUIREMENT_NAME.fullmatch(name):
                continue  # requirement_list said why
            if any_backend and rules.backends_of(name):
                continue
            why = rules.problem(name, backend)
            if why is not None:
                self.fail(f"{key}[{i}]", why)
        return names

    def depends(self, value: Any, key: str) -> tuple[str, ...]:
        names = self.str_list(value, key)
        for i, dep in enumerate(names):
            if dep == "cutlass_sycl":
                # Renamed upstream; the old name still appears in older files.
                names[i] = "sycl_tla"
            elif dep not in KNOWN_DEPENDS:
                self.fail(
                    f"{key}[{i}]",
                    f"{dep!r} is not a known dependency{did_you_mean(dep, KNOWN_DEPENDS)}; "
                    f"valid: {', '.join(KNOWN_DEPENDS)}",
                )
        return tuple(names)

    def rocm_archs(self, value: Any, key: str) -> tuple[str, ...]:
        return self._arch_list(value, key, rocm_arch_problem)

    def cuda_capabilities(self, value: Any, key: str) -> tuple[str, ...]:
        return self._arch_list(value, key, cuda_capability_problem)

    def _arch_list(
        self, value: Any, key: str, problem: Callable[[str], str | None]
    ) -> tuple[str, ...]:
        archs = self.str_list(value, key)
        result: list[str] = []
        for i, arch in enumerate(archs):
            why = problem(arch)
            if why is not None:
                self.fail(f"{key}[{i}]", why)
            elif arch in result:
                self.warn(f"{key}[{i}]", f"{arch!r} is listed twice; using it once")
            else:
                result.append(arch)
        return tuple(result)

    def flags(self, value: Any, key: str) -> tuple[str, ...]:
        """Compiler flags, one a string, of the shapes `config.flags` allows (none runs a
        program, loads a plugin, writes a file where it says or reads options from a file);
        each reaches the compiler exactly as written."""
        flags = self.str_list(value, key)
        for i, flag in enumerate(flags):
            if not _FLAG.fullmatch(flag):
                self.fail(
                    f"{key}[{i}]",
                    f"{flag!r} is not a compiler flag (printable ASCII without ';', no "
                    "leading or trailing spaces; give each flag its own string)",
                )
            elif _FLAG_LIST_CHARS.search(flag):
                self.fail(
                    f"{key}[{i}]",
                    f"{flag!r} contains '[', ']' or '\\', which CMake's lists would treat as "
                    "list syntax (joining it with the next flag); write the flag without them",
                )
            elif flag.startswith(_FLAG_CMAKE_PREFIXES):
                self.fail(
                    f"{key}[{i}]",
                    f"{flag!r} starts with {flag.split(':')[0]}:, which CMake would split into "
                    "several options; give each flag its own string, without the prefix",
                )
            elif (why := flag_problem(flag)) is not None:
                # Runs a program, loads a plugin, writes where it says, reads options from a
                # file, or is simply not among the shapes flags.py lets through.
                self.fail(f"{key}[{i}]", why)
        return tuple(flags)

    def stable_abi_version(self, value: Any, key: str) -> str:
        """The torch release of [torch] stable-abi: MAJOR.MINOR such as '2.10'."""
        text = self.version(value, key)
        found = _STABLE_ABI.fullmatch(text)
        if found is None or int(found.group(2)) > 255:
            raise self.fail(
                key,
                f"{text!r} is not a torch release for the stable ABI; write MAJOR.MINOR with a "
                "one-digit major and a minor up to 255, e.g. '2.10'",
            )
        return text

    def pyext(self, value: Any, key: str) -> tuple[str, ...]:
        exts = self.str_list(value, key)
        for i, ext in enumerate(exts):
            if not _FILE_EXTENSION.fullmatch(ext):
                self.fail(f"{key}[{i}]", f"{ext!r} is not a file extension (write 'py', not '.py')")
        return tuple(exts)

    def repo_id(self, value: Any, key: str) -> str:
        text = self.string(value, key)
        if not _REPO_ID.fullmatch(text):
            raise self.fail(key, f"{text!r} is not a Hub repository id (write it as 'org/name')")
        return text

    def git_url(self, value: Any, key: str) -> str:
        text = self.string(value, key)
        if not _GIT_URL.fullmatch(text):
            raise self.fail(key, f"{text!r} is not a git URL (e.g. 'https://github.com/org/repo')")
        return text

    def kernel_depends(self, value: Any, key: str) -> tuple[KernelDependency, ...]:
        """`[{repo-id = "org/name", version = 1}]` or `{repo-id, revision = "..."}` entries."""
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of tables, got {describe(value)}")
        result: list[KernelDependency] = []
        for i, entry in enumerate(value):
            where = f"{key}[{i}]"
            with self.attempt():
                table = self.table(entry, where)
                self.check_keys(table, KERNEL_DEPENDENCY_KEYS, where)
                repo = self.get(table, "repo-id", where, self.repo_id)
                version = self.get(table, "version", where, self.integer)
                revision = self.get(table, "revision", where, self.string)
                if ("version" in table) == ("revision" in table):
                    raise self.fail(where, "give exactly one of version (an integer) or revision")
                if repo is not None:
                    result.append(KernelDependency(repo, version, revision))
        return tuple(result)

    # -- paths --------------------------------------------------------------------------------

    def sources(
        self, value: Any, key: str, backend: str, *, allow_empty: bool = False
    ) -> tuple[PurePosixPath, ...]:
        """Source files: existing, inside the project, with suffixes the backend compiles."""
        entries = self.str_list(value, key)
        if not entries and not allow_empty:
            raise self.fail(key, "is empty; list the source files")
        suffixes = SOURCE_SUFFIXES.get(backend)
        paths: list[PurePosixPath] = []
        for i, entry in enumerate(entries):
            with self.attempt():
                path = self.project_path(entry, f"{key}[{i}]", want_dir=False)
                if suffixes is not None and path.suffix not in suffixes:
                    raise self.fail(
                        f"{key}[{i}]",
                        f"{entry!r} has a suffix a {backend} source cannot have; "
                        f"valid: {', '.join(suffixes)}",
                    )
                if path in paths:
                    self.warn(f"{key}[{i}]", f"{entry!r} is listed twice; using it once")
                    continue
                paths.append(path)
        return tuple(paths)

    def includes(self, value: Any, key: str) -> tuple[PurePosixPath, ...]:
        entries = self.str_list(value, key)
        result: list[PurePosixPath] = []
        for i, entry in enumerate(entries):
            with self.attempt():
                path = self.project_path(entry, f"{key}[{i}]", want_dir=True)
                if str(path) in CMAKE_KEYWORDS:
                    raise self.fail(
                        f"{key}[{i}]",
                        f"{entry!r} is a keyword of the generated CMake's kernel functions "
                        f"({', '.join(sorted(CMAKE_KEYWORDS))}), which would take the folder "
                        "for one; rename the folder",
                    )
                if path not in result:
                    result.append(path)
        return tuple(result)

    def project_path(self, entry: str, key: str, *, want_dir: bool) -> PurePosixPath:
        """A path from build.toml: relative, inside the project (symlinks too), and existing."""
        if not entry:
            raise self.fail(key, "is an empty path")
        if _UNSAFE_PATH_CHARS.search(entry):
            raise self.fail(
                key,
                f"{entry!r} contains a character a build path cannot have "
                "(';', '\"', '$', '\\', '`', '[', ']' or a control character such as a newline)",
            )
        if entry.startswith("/") or re.match(r"[A-Za-z]:", entry):
            raise self.fail(
                key, f"{entry!r} is absolute; paths are relative to the folder holding build.toml"
            )
        normalized = PurePosixPath(os.path.normpath(entry))
        if normalized.parts[:1] == ("..",):
            raise self.fail(key, f"{entry!r} points outside the project folder")
        on_disk = self.project_dir / normalized
        try:
            real = Path(os.path.realpath(on_disk))
            exists = on_disk.exists()
            is_dir = on_disk.is_dir()
            # A FIFO, device or socket listed as a source would block or break the compile
            # (and every read of it): sources and headers are regular files.
            irregular = exists and not is_dir and not on_disk.is_file()
        except (OSError, ValueError) as e:
            raise self.fail(key, f"{entry!r} cannot be examined ({e})") from None
        if not real.is_relative_to(self.real_project_dir):
            raise self.fail(
                key, f"{entry!r} is a symlink that points outside the project folder (to {real})"
            )
        kind = "directory" if want_dir else "file"
        if not exists:
            raise self.fail(
                key,
                f"{entry!r} does not exist (expected a {kind} relative to "
                "the folder holding build.toml)",
            )
        if want_dir != is_dir:
            raise self.fail(key, f"{entry!r} is not a {kind}")
        if irregular:
            raise self.fail(
                key,
                f"{entry!r} is not a regular file (a FIFO, device or socket); a source must be "
                "a regular file",
            )
        return normalized


KERNEL_DEPENDENCY_KEYS: Keys = {
    "repo-id": KeySpec("str", required=True, doc="Hub repository of the kernel"),
    "version": KeySpec("int", doc="major version of that kernel"),
    "revision": KeySpec("str", doc="git revision of that kernel"),
}

# Kernel keys, shared by every format that tags kernels with `backend` (v2 and later).
KERNEL_KEYS: Keys = {
    "backend": KeySpec("str", required=True, doc="which backend compiles this kernel"),
    "depends": KeySpec("str-list", required=True, doc="header libraries the sources need"),
    "src": KeySpec("str-list", required=True, doc="source files (headers included)"),
    "include": KeySpec("str-list", doc="include folders for this kernel's sources"),
    "cxx-flags": KeySpec("str-list", doc="flags for this kernel's C++ sources"),
    "rocm-archs": KeySpec("str-list", backends=("rocm",), doc="gfx targets to compile for"),
    "hip-flags": KeySpec("str-list", backends=("rocm",), doc="flags for HIP sources"),
    "cuda-capabilities": KeySpec(
        "str-list", backends=("cuda",), doc="compute capabilities, e.g. '9.0a', '8.0+PTX'"
    ),
    "cuda-flags": KeySpec("str-list", backends=("cuda",), doc="flags for .cu sources"),
    "cuda-minver": KeySpec("version", backends=("cuda",), doc="skip below this CUDA version"),
    "sycl-flags": KeySpec("str-list", backends=("xpu",), doc="flags for SYCL sources"),
}


def describe(value: Any) -> str:
    """A short description of a wrongly-typed value for error messages."""
    kinds = [
        (bool, "boolean"),
        (int, "integer"),
        (float, "float"),
        (str, "string"),
        (list, "list"),
        (Mapping, "table"),
    ]
    for kind, word in kinds:
        if isinstance(value, kind):
            text = repr(value)
            return f"{word} {text[:40] + '...' if len(text) > 40 else text}"
    return type(value).__name__


__all__ = [
    "BUILDABLE_BACKENDS",
    "KERNEL_KEYS",
    "KNOWN_BACKENDS",
    "KNOWN_DEPENDS",
    "KeySpec",
    "Keys",
    "Reader",
]
