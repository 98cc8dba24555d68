"""Read build.toml (with tomlkit) and validate it into a `Project`.

One table of keys per section says which keys exist, their types and which backends they apply to;
validation, error messages and `update-build` all read that table. Two on-disk formats exist: the
older one (no `[general].backends`, backends inferred from the kernel sections) and the current one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import tomlkit
import tomlkit.exceptions

from build2cmake.archs import cuda_capability_problem, did_you_mean, rocm_arch_problem
from build2cmake.errors import BuildConfigError
from build2cmake.model import KNOWN_BACKENDS, Kernel, Project, TorchExtension

# Dependencies a kernel may declare. Header libraries come from PyPI at configure time.
KNOWN_DEPENDS = (
    "torch",
    "cutlass_2_10",
    "cutlass_3_5",
    "cutlass_3_6",
    "cutlass_3_8",
    "cutlass_3_9",
    "cutlass_4_0",
)

_HEADERS = (".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl")
_CXX = (".c", ".cc", ".cpp", ".cxx")
SOURCE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "torch": _CXX + _HEADERS,
    "cpu": _CXX + _HEADERS,
    "rocm": (".hip", *_CXX, *_HEADERS),
    "cuda": (".cu", *_CXX, *_HEADERS),
    # Refused at generate; their sources are only checked to exist.
    "metal": (),
    "xpu": (),
}

# Characters that would break the generated CMake (list separator, quoting, variable references).
_UNSAFE_PATH_CHARS = re.compile(r'[;"$\\\n\r\t]')
_KERNEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_TORCH_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_REQUIREMENT_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class KeySpec:
    """One key a section may hold."""

    kind: str  # "str", "bool", "int", "str-list", "table"
    required: bool = False
    # For kernel keys: the backends whose kernels may set it (None: every backend).
    backends: tuple[str, ...] | None = None
    doc: str = ""


GENERAL_KEYS: dict[str, KeySpec] = {
    "name": KeySpec("str", required=True, doc="kernel name; the Python package name"),
    "backends": KeySpec("str-list", doc="backends the kernel supports"),
    "version": KeySpec("int", doc="major version of the kernel"),
    "universal": KeySpec("bool", doc="a pure-Python kernel with nothing to compile"),
    "python-depends": KeySpec("str-list", doc="extra Python dependencies"),
    "license": KeySpec("str", doc="SPDX license of the kernel, written to metadata.json"),
    "hub": KeySpec("table", doc="Hugging Face Hub settings"),
    "cuda": KeySpec("table", doc="CUDA toolkit version bounds"),
}
HUB_KEYS: dict[str, KeySpec] = {"repo-id": KeySpec("str")}
GENERAL_CUDA_KEYS: dict[str, KeySpec] = {"minver": KeySpec("str"), "maxver": KeySpec("str")}
TORCH_KEYS: dict[str, KeySpec] = {
    "src": KeySpec("str-list", required=True, doc="binding sources and headers"),
    "include": KeySpec("str-list", doc="include directories"),
    "pyext": KeySpec("str-list", doc="Python file extensions to package"),
    "minver": KeySpec("str", doc="oldest torch version"),
    "maxver": KeySpec("str", doc="newest torch version"),
}
KERNEL_KEYS: dict[str, KeySpec] = {
    "backend": KeySpec("str", required=True),
    "depends": KeySpec("str-list", required=True),
    "src": KeySpec("str-list", required=True),
    "include": KeySpec("str-list"),
    "rocm-archs": KeySpec("str-list", backends=("rocm",)),
    "hip-flags": KeySpec("str-list", backends=("rocm",)),
    "cuda-capabilities": KeySpec("str-list", backends=("cuda",)),
    "cuda-flags": KeySpec("str-list", backends=("cuda",)),
    "cuda-minver": KeySpec("str", backends=("cuda",)),
    "cxx-flags": KeySpec("str-list"),
}
TOP_LEVEL_KEYS = ("general", "torch", "kernel")

_TYPE_NAMES = {
    "str": "a string",
    "bool": "true or false",
    "int": "an integer",
    "str-list": "a list of strings",
    "table": "a table",
}


def read_document(build_toml: Path) -> tomlkit.TOMLDocument:
    """Parse build.toml with tomlkit; every read or syntax problem becomes a BuildConfigError."""
    try:
        text = build_toml.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise BuildConfigError(build_toml, "", "file not found") from None
    except IsADirectoryError:
        raise BuildConfigError(
            build_toml, "", "is a directory, expected a build.toml file"
        ) from None
    except PermissionError:
        raise BuildConfigError(build_toml, "", "cannot be read (permission denied)") from None
    except UnicodeDecodeError as e:
        raise BuildConfigError(build_toml, "", f"is not UTF-8 text ({e.reason})") from None
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as e:
        raise BuildConfigError(build_toml, "", f"invalid TOML: {e}") from None
    except (ValueError, RecursionError) as e:
        # tomlkit lets a few malformed values (huge dates, very deep nesting) escape as these.
        raise BuildConfigError(build_toml, "", f"invalid TOML: {e}") from None


def load_project(build_toml: Path) -> Project:
    """Read and validate build.toml; the project folder is the folder holding it."""
    document = read_document(build_toml)
    return parse_project(document.unwrap(), build_toml)


def parse_project(data: Mapping[str, Any], build_toml: Path) -> Project:
    """Validate already-parsed build.toml data into a Project, checking paths on disk."""
    return _Validator(build_toml).project(data)


class _Validator:
    def __init__(self, build_toml: Path) -> None:
        self.file = build_toml
        self.project_dir = build_toml.parent
        self.real_project_dir = Path(os.path.realpath(self.project_dir))

    def error(self, key: str, message: str) -> BuildConfigError:
        return BuildConfigError(self.file, key, message)

    # -- sections -----------------------------------------------------------------------------

    def project(self, data: Mapping[str, Any]) -> Project:
        self.check_keys(data, dict.fromkeys(TOP_LEVEL_KEYS, KeySpec("table")), "")
        general = data.get("general")
        if general is None:
            raise self.error("[general]", 'missing section; it needs at least name = "..."')
        general = self.table(general, "[general]")
        self.check_keys(general, GENERAL_KEYS, "[general]")
        name = self.name(general["name"])
        universal = self.boolean(general.get("universal", False), "[general].universal")
        version = general.get("version")
        if version is not None:
            version = self.integer(version, "[general].version")
            if version < 0:
                raise self.error("[general].version", f"{version} is negative; use 0 or more")
        python_depends = self.python_depends(general.get("python-depends", []))
        license_id = general.get("license")
        if license_id is not None:
            license_id = self.string(license_id, "[general].license")
        hub = self.table(general.get("hub", {}), "[general.hub]")
        self.check_keys(hub, HUB_KEYS, "[general.hub]")
        repo_id = hub.get("repo-id")
        if repo_id is not None:
            repo_id = self.string(repo_id, "[general.hub].repo-id")
        cuda = self.table(general.get("cuda", {}), "[general.cuda]")
        self.check_keys(cuda, GENERAL_CUDA_KEYS, "[general.cuda]")
        cuda_bounds = [
            self.version_string(cuda.get(k), f"[general.cuda].{k}") for k in ("minver", "maxver")
        ]

        kernels_data = self.table(data.get("kernel", {}), "[kernel]")
        kernels = tuple(self.kernel(k, v) for k, v in kernels_data.items())
        torch = None
        if "torch" in data:
            torch = self.torch(self.table(data["torch"], "[torch]"))

        if universal:
            if kernels:
                raise self.error(
                    f"[kernel.{kernels[0].name}]",
                    "a universal kernel (universal = true) has no compiled kernels; "
                    "remove the [kernel.*] sections or set universal = false",
                )
        else:
            if not kernels:
                raise self.error(
                    "[kernel]",
                    "no [kernel.<name>] section; add one, or set universal = true "
                    "in [general] for a pure-Python kernel",
                )
            if torch is None:
                raise self.error(
                    "[torch]",
                    "missing section; it needs src = [...] listing the torch binding sources",
                )

        backends_inferred = "backends" not in general
        if backends_inferred:
            backends = tuple(sorted({k.backend for k in kernels}))
        else:
            backends = self.backends(general["backends"])
            for kernel in kernels:
                if kernel.backend not in backends:
                    raise self.error(
                        f"[kernel.{kernel.name}].backend",
                        f"{kernel.backend!r} is not in [general].backends {list(backends)}; "
                        "add it there or change the kernel's backend",
                    )
        return Project(
            name=name,
            backends=backends,
            torch=torch,
            kernels=kernels,
            universal=universal,
            version=version,
            hub_repo_id=repo_id,
            python_depends=python_depends,
            license=license_id,
            backends_inferred=backends_inferred,
            cuda_minver=cuda_bounds[0],
            cuda_maxver=cuda_bounds[1],
        )

    def torch(self, data: Mapping[str, Any]) -> TorchExtension:
        self.check_keys(data, TORCH_KEYS, "[torch]")
        pyext = tuple(self.str_list(data.get("pyext", ["py", "pyi"]), "[torch].pyext"))
        for i, ext in enumerate(pyext):
            if not re.fullmatch(r"[A-Za-z0-9]+", ext):
                raise self.error(
                    f"[torch].pyext[{i}]",
                    f"{ext!r} is not a file extension (write 'py', not '.py')",
                )
        return TorchExtension(
            sources=self.sources(data["src"], "[torch].src", "torch"),
            includes=self.includes(data.get("include", []), "[torch].include"),
            pyext=pyext,
            minver=self.version_string(data.get("minver"), "[torch].minver"),
            maxver=self.version_string(data.get("maxver"), "[torch].maxver"),
        )

    def kernel(self, name: str, data: Any) -> Kernel:
        section = f"[kernel.{name}]"
        if not _KERNEL_NAME.match(name):
            raise self.error(
                section,
                f"{name!r} is not a valid kernel name "
                "(letters, digits, '_' or '-', not starting with a digit)",
            )
        data = self.table(data, section)
        self.check_keys(data, KERNEL_KEYS, section)
        backend = self.string(data["backend"], f"{section}.backend")
        if backend not in KNOWN_BACKENDS:
            raise self.error(
                f"{section}.backend",
                f"{backend!r} is not a backend{did_you_mean(backend, KNOWN_BACKENDS)}; "
                f"valid: {', '.join(KNOWN_BACKENDS)}",
            )
        for key, spec in KERNEL_KEYS.items():
            if key in data and spec.backends is not None and backend not in spec.backends:
                raise self.error(
                    f"{section}.{key}",
                    f"only applies to {' or '.join(spec.backends)} kernels; "
                    f"this kernel's backend is {backend!r}",
                )
        depends = tuple(self.str_list(data["depends"], f"{section}.depends"))
        for i, dep in enumerate(depends):
            if dep not in KNOWN_DEPENDS:
                raise self.error(
                    f"{section}.depends[{i}]",
                    f"{dep!r} is not a dependency this build2cmake provides"
                    f"{did_you_mean(dep, KNOWN_DEPENDS)}; valid: {', '.join(KNOWN_DEPENDS)}",
                )
        rocm_archs = self.arch_list(data, section, "rocm-archs", rocm_arch_problem)
        if backend == "rocm" and not rocm_archs:
            raise self.error(
                f"{section}.rocm-archs", 'a rocm kernel needs rocm-archs, e.g. ["gfx90a", "gfx942"]'
            )
        return Kernel(
            name=name,
            backend=backend,
            depends=depends,
            sources=self.sources(data["src"], f"{section}.src", backend),
            includes=self.includes(data.get("include", []), f"{section}.include"),
            rocm_archs=rocm_archs,
            cuda_capabilities=self.arch_list(
                data, section, "cuda-capabilities", cuda_capability_problem
            ),
            cuda_flags=self.flags(data, section, "cuda-flags"),
            hip_flags=self.flags(data, section, "hip-flags"),
            cxx_flags=self.flags(data, section, "cxx-flags"),
            cuda_minver=self.version_string(data.get("cuda-minver"), f"{section}.cuda-minver"),
        )

    # -- values -------------------------------------------------------------------------------

    def name(self, value: Any) -> str:
        name = self.string(value, "[general].name")
        package = name.replace("-", "_")
        if not (package.isascii() and package.isidentifier()) or package.startswith("_"):
            raise self.error(
                "[general].name",
                f"{name!r} does not make a Python package name; use ASCII letters, digits, "
                "'_' and '-', starting with a letter (dashes become underscores)",
            )
        return name

    def backends(self, value: Any) -> tuple[str, ...]:
        backends = self.str_list(value, "[general].backends")
        if not backends:
            raise self.error(
                "[general].backends", f"is empty; list one or more of {', '.join(KNOWN_BACKENDS)}"
            )
        for i, backend in enumerate(backends):
            if backend not in KNOWN_BACKENDS:
                raise self.error(
                    f"[general].backends[{i}]",
                    f"{backend!r} is not a backend{did_you_mean(backend, KNOWN_BACKENDS)}; "
                    f"valid: {', '.join(KNOWN_BACKENDS)}",
                )
            if backend in backends[:i]:
                raise self.error(f"[general].backends[{i}]", f"{backend!r} is listed twice")
        return tuple(backends)

    def python_depends(self, value: Any) -> tuple[str, ...]:
        depends = self.str_list(value, "[general].python-depends")
        for i, dep in enumerate(depends):
            if not _REQUIREMENT_NAME.match(dep):
                raise self.error(
                    f"[general].python-depends[{i}]",
                    f"{dep!r} is not a Python requirement (e.g. 'einops')",
                )
        return tuple(depends)

    def version_string(self, value: Any, key: str) -> str | None:
        if value is None:
            return None
        version = self.string(value, key)
        if not _TORCH_VERSION.match(version):
            raise self.error(key, f"{version!r} is not a version; write it like '2.7'")
        return version

    def arch_list(
        self, data: Mapping[str, Any], section: str, key: str, problem: Callable[[str], str | None]
    ) -> tuple[str, ...]:
        archs = self.str_list(data.get(key, []), f"{section}.{key}")
        for i, arch in enumerate(archs):
            why = problem(arch)
            if why is not None:
                raise self.error(f"{section}.{key}[{i}]", why)
            if arch in archs[:i]:
                raise self.error(f"{section}.{key}[{i}]", f"{arch!r} is listed twice")
        return tuple(archs)

    def flags(self, data: Mapping[str, Any], section: str, key: str) -> tuple[str, ...]:
        flags = self.str_list(data.get(key, []), f"{section}.{key}")
        for i, flag in enumerate(flags):
            if not flag.strip() or "\n" in flag or ";" in flag:
                raise self.error(
                    f"{section}.{key}[{i}]",
                    f"{flag!r} is not a compiler flag (no empty flags, ';' "
                    "or newlines; give each flag its own string)",
                )
        return tuple(flags)

    def sources(self, value: Any, key: str, backend: str) -> tuple[PurePosixPath, ...]:
        entries = self.str_list(value, key)
        if not entries:
            raise self.error(key, "is empty; list the source files")
        suffixes = SOURCE_SUFFIXES[backend]
        paths: list[PurePosixPath] = []
        for i, entry in enumerate(entries):
            path = self.project_path(entry, f"{key}[{i}]", want_dir=False)
            if suffixes and path.suffix not in suffixes:
                hint = " (HIP sources end in .hip)" if backend == "rocm" else ""
                raise self.error(
                    f"{key}[{i}]",
                    f"{entry!r} has a suffix a {backend} source cannot have{hint}; "
                    f"valid: {', '.join(suffixes)}",
                )
            if path in paths:
                raise self.error(f"{key}[{i}]", f"{entry!r} is listed twice")
            paths.append(path)
        return tuple(paths)

    def includes(self, value: Any, key: str) -> tuple[PurePosixPath, ...]:
        entries = self.str_list(value, key)
        return tuple(
            self.project_path(e, f"{key}[{i}]", want_dir=True) for i, e in enumerate(entries)
        )

    def project_path(self, entry: str, key: str, *, want_dir: bool) -> PurePosixPath:
        """A path from build.toml: relative, inside the project (symlinks too), and existing."""
        if not entry:
            raise self.error(key, "is an empty path")
        if _UNSAFE_PATH_CHARS.search(entry):
            raise self.error(
                key,
                f"{entry!r} contains a character a build path cannot have "
                "(';', '\"', '$', '\\', tab or newline)",
            )
        if entry.startswith("/") or re.match(r"^[A-Za-z]:", entry):
            raise self.error(
                key, f"{entry!r} is absolute; paths are relative to the folder holding build.toml"
            )
        normalized = PurePosixPath(os.path.normpath(entry))
        if normalized.parts[:1] == ("..",):
            raise self.error(key, f"{entry!r} points outside the project folder")
        on_disk = self.project_dir / normalized
        real = Path(os.path.realpath(on_disk))
        if not real.is_relative_to(self.real_project_dir):
            raise self.error(
                key, f"{entry!r} is a symlink that points outside the project folder (to {real})"
            )
        kind = "directory" if want_dir else "file"
        if not on_disk.exists():
            raise self.error(
                key,
                f"{entry!r} does not exist (expected a {kind} relative to "
                "the folder holding build.toml)",
            )
        if want_dir != on_disk.is_dir():
            raise self.error(key, f"{entry!r} is not a {kind}")
        return normalized

    # -- types --------------------------------------------------------------------------------

    def check_keys(
        self, data: Mapping[str, Any], specs: Mapping[str, KeySpec], section: str
    ) -> None:
        for key in data:
            if key not in specs:
                where = f"{section}.{key}" if section else f"[{key}]"
                raise self.error(
                    where,
                    f"unknown key{did_you_mean(key, list(specs))}; "
                    f"valid keys here: {', '.join(specs)}",
                )
        for key, spec in specs.items():
            if spec.required and key not in data:
                raise self.error(
                    f"{section}.{key}" if section else f"[{key}]",
                    f"missing; expected {_TYPE_NAMES[spec.kind]}",
                )

    def table(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a table, got {_describe(value)}")
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {_describe(value)}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_describe(value)}")
        return value

    def integer(self, value: Any, key: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, f"expected an integer, got {_describe(value)}")
        return value

    def str_list(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of strings, got {_describe(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"{key}[{i}]", f"expected a string, got {_describe(item)}")
        return list(value)


def _describe(value: Any) -> str:
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
