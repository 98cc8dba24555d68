"""The `kernels` loader's contract where build2cmake decides: which `python-depends` it accepts,
and the archs metadata.json declares in the form the loader compares.

kernels (0.17 and later) refuses at load time a variant whose metadata.json `python-depends`
names a dependency outside its own list, `kernels/python_depends.json`: the names of its
`general` table for any backend, those of `backends.<backend>` for the backend it runs on
("uses unsupported kernel dependency"). kernel-builder resolves build.toml's python-depends
through the same list (kernels-data's python_dependencies.json: `[general].python-depends` from
`general`, `[general.<backend>].python-depends` from that backend's table) and refuses a name it
lacks. build2cmake holds build.toml to the list of the installed kernels package when kernels is
importable, else to the copy it carries (kernels_python_depends.json beside this module; its
`provenance` names the kernels release and the upstream commit it came from), so a kernel no
loader would load is refused when build.toml is read, not when a user loads it.

The installed list is a file of the environment, not of build2cmake: it is read bounded (size,
regular file, no symlink out of its package) and validated (types, name shapes, counts), and a
broken one falls back to the carried copy, the reason named wherever the list is quoted.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from build2cmake.config.archs import did_you_mean
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.ground.safefs import read_regular_file

CARRIED_LIST = Path(__file__).with_name("kernels_python_depends.json")
# The file kernels reads, in the folder of its package.
INSTALLED_LIST_NAME = "python_depends.json"
# kernels 0.17.2's list is under 1 KiB; the bounds leave room for many releases to come.
LIST_LIMIT_BYTES = 64 << 10
NAMES_LIMIT = 256
# Dependency names and pip package names: what a build.toml may write (schema's requirement
# names), at most 100 characters. Backends: kernels' backend names.
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
_BACKEND = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_RELEASE = re.compile(r"[0-9A-Za-z.+!_-]{1,40}")


@dataclass(frozen=True)
class PythonDependencies:
    """The names kernels accepts in python-depends, each with the pip packages it stands for:
    `general` ones for every backend, `backends[b]` ones for backend b only."""

    general: Mapping[str, tuple[str, ...]]
    backends: Mapping[str, Mapping[str, tuple[str, ...]]]
    # Whose list this is, for messages: "kernels 0.17.2".
    origin: str
    # Where it came from when that is not the installed kernels: " (build2cmake's copy of
    # its list: <why>)", said at the end of every refusal.
    source_note: str = ""

    def backends_of(self, name: str) -> tuple[str, ...]:
        """The backends whose own list holds `name` (sorted)."""
        return tuple(sorted(b for b, names in self.backends.items() if name in names))

    def problem(self, name: str, backend: str | None) -> str | None:
        """Why `name` may not stand in `[general].python-depends` (`backend` None) or in
        `[general.<backend>].python-depends`; None when kernels accepts it there."""
        why = self._problem(name, backend)
        return None if why is None else why + self.source_note

    def _problem(self, name: str, backend: str | None) -> str | None:
        if backend is None:
            if name in self.general:
                return None
            owners = self.backends_of(name)
            if owners:
                where = " or ".join(f"[general.{b}].python-depends" for b in owners)
                return (
                    f"{name!r} is a dependency {self.origin} accepts for {', '.join(owners)} "
                    f"only; list it in {where}"
                )
            return (
                f"{name!r} is not a dependency {self.origin} accepts"
                f"{did_you_mean(name, self._all_names())}; for every backend: "
                f"{self._listed(self.general)}; per backend, in "
                f"[general.<backend>].python-depends: {self._per_backend()}"
            )
        own = self.backends.get(backend)
        if own is not None and name in own:
            return None
        if name in self.general:
            return (
                f"{name!r} is a dependency for every backend in {self.origin}'s list; list it "
                "in [general].python-depends"
            )
        owners = self.backends_of(name)
        if owners:
            where = " or ".join(f"[general.{b}].python-depends" for b in owners)
            return (
                f"{name!r} is a dependency {self.origin} accepts for {', '.join(owners)} only, "
                f"not for {backend}; list it in {where}"
            )
        listed = self._listed(own) if own is not None else f"none (its list has no {backend} table)"
        return (
            f"{name!r} is not a dependency {self.origin} accepts for {backend}"
            f"{did_you_mean(name, self._all_names())}; for {backend}: {listed}; for every "
            f"backend, in [general].python-depends: {self._listed(self.general)}"
        )

    def split(
        self, names: Iterable[str]
    ) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
        """`names` of a format without per-backend tables: those for every backend, and per
        backend (sorted) the ones only that backend's list holds."""
        general: list[str] = []
        per_backend: dict[str, list[str]] = {}
        for name in names:
            if name in self.general:
                general.append(name)
                continue
            for backend in self.backends_of(name):
                per_backend.setdefault(backend, []).append(name)
        return tuple(general), tuple((b, tuple(n)) for b, n in sorted(per_backend.items()))

    def pip_packages(self, names: Iterable[str], backend: str | None = None) -> tuple[str, ...]:
        """The pip packages `names` stand for (`tvm-ffi` is `apache-tvm-ffi`), each once: what
        a wheel's requirements list, as kernel-builder writes them. `backend`: where the names
        were listed (None: [general]); a name of neither list stands for itself."""
        own = self.backends.get(backend, {}) if backend is not None else {}
        packages: list[str] = []
        for name in names:
            listed = own if name in own else self.general
            for package in listed.get(name, (name,)):
                if package not in packages:
                    packages.append(package)
        return tuple(packages)

    def _all_names(self) -> list[str]:
        return [*self.general, *(n for names in self.backends.values() for n in names)]

    def _per_backend(self) -> str:
        listed = [f"{b}: {self._listed(n)}" for b, n in sorted(self.backends.items()) if n]
        return "; ".join(listed) or "none"

    @staticmethod
    def _listed(names: Mapping[str, tuple[str, ...]] | None) -> str:
        """`einops, tvm-ffi (pip apache-tvm-ffi)`: the names, with their pip packages where
        those differ; `none` for an empty list."""
        if not names:
            return "none"
        return ", ".join(
            name if packages in ((), (name,)) else f"{name} (pip {' + '.join(packages)})"
            for name, packages in sorted(names.items())
        )


def parse_list(
    data: Any,
) -> tuple[dict[str, tuple[str, ...]], dict[str, dict[str, tuple[str, ...]]]]:
    """The general and per-backend tables of a python_depends.json document, validated (shapes
    as kernels reads them; names that a build.toml could write; bounded counts). Raise
    ValueError saying what is wrong."""
    if not isinstance(data, Mapping):
        raise ValueError("not a JSON object")
    count = [0]
    general = _entries(data.get("general", {}), "general", count)
    backends_data = data.get("backends", {})
    if not isinstance(backends_data, Mapping):
        raise ValueError("'backends' is not an object")
    backends: dict[str, dict[str, tuple[str, ...]]] = {}
    for backend, entries in backends_data.items():
        if not isinstance(backend, str) or not _BACKEND.fullmatch(backend):
            raise ValueError("a backend name is not lowercase letters, digits, '-' or '_'")
        backends[backend] = _entries(entries, f"backends.{backend}", count)
    return general, backends


def _entries(value: Any, where: str, count: list[int]) -> dict[str, tuple[str, ...]]:
    """One table of names: {name: {"python": [{"pkg": ...}, ...], ...}}."""
    if not isinstance(value, Mapping):
        raise ValueError(f"'{where}' is not an object")
    result: dict[str, tuple[str, ...]] = {}
    for name, entry in value.items():
        count[0] += 1
        if count[0] > NAMES_LIMIT:
            raise ValueError(f"more than {NAMES_LIMIT} dependencies")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"a name in '{where}' is not a Python package name")
        if not isinstance(entry, Mapping):
            raise ValueError(f"'{where}.{name}' is not an object")
        python = entry.get("python", [])
        if not isinstance(python, list) or len(python) > NAMES_LIMIT:
            raise ValueError(f"'{where}.{name}.python' is not a list")
        packages: list[str] = []
        for package in python:
            pkg = package.get("pkg") if isinstance(package, Mapping) else None
            if not isinstance(pkg, str) or not _NAME.fullmatch(pkg):
                raise ValueError(f"'{where}.{name}.python' holds an entry without a valid 'pkg'")
            packages.append(pkg)
        result[name] = tuple(packages)
    return result


def _read_json(path: Path, root: Path) -> Any:
    """The JSON document of one list file (a regular file of at most LIST_LIMIT_BYTES inside
    `root`); Build2CMakeError or ValueError say what is wrong."""
    text = read_regular_file(path, LIST_LIMIT_BYTES, "kernels' dependency list", root=root)
    try:
        return json.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except RecursionError:
        # (json.JSONDecodeError is a ValueError and says itself what is wrong.)
        raise ValueError("JSON nested too deeply") from None


def installed_list() -> PythonDependencies | str:
    """The list of the kernels package that `import kernels` would import here, or why there
    is none to use (not installed, no such file, unreadable, malformed). Nothing of kernels
    runs: its package folder is found without importing it."""
    try:
        spec = find_spec("kernels")
    except (ImportError, ValueError) as error:
        return f"kernels cannot be imported here ({printable(str(error))[:200]})"
    if spec is None or spec.origin is None:
        # (No origin: a namespace package, a folder named kernels without __init__.py on the
        # path, such as this repository's own kernels/ when run from its root.)
        return "kernels is not importable here"
    folders = [Path(p) for p in spec.submodule_search_locations or ()]
    if not folders:
        return "the kernels importable here is not a package"
    for folder in folders:
        path = folder / INSTALLED_LIST_NAME
        try:
            if not path.exists() and not path.is_symlink():
                continue
            general, backends = parse_list(_read_json(path, folder))
        except (Build2CMakeError, ValueError, OSError) as error:
            said = printable(str(error))
            why = said if said.startswith(str(path)) else f"{path}: {said}"
            return f"the installed kernels' list is unusable: {why[:400]}"
        return PythonDependencies(general, backends, f"kernels {_installed_release(folder)}")
    return f"the kernels importable here ({folders[0]}) has no {INSTALLED_LIST_NAME}"


def _installed_release(folder: Path) -> str:
    """The release of the kernels distribution whose package is `folder`; "(release unknown)"
    when none is recorded for that folder (a kernels found elsewhere on the path, a checkout)."""
    try:
        distribution = importlib.metadata.distribution("kernels")
        located = Path(str(distribution.locate_file("kernels"))).resolve()
        release = distribution.version if located == folder.resolve() else None
    except (importlib.metadata.PackageNotFoundError, ValueError, OSError):
        release = None
    if isinstance(release, str) and _RELEASE.fullmatch(release):
        return release
    return "(release unknown)"


def carried_list(reason: str) -> PythonDependencies:
    """The copy build2cmake carries (a broken one is a bug of build2cmake's: it raises)."""
    data = _read_json(CARRIED_LIST, CARRIED_LIST.parent)
    general, backends = parse_list(data)
    release = data["provenance"]["kernels-release"]
    return PythonDependencies(
        general, backends, f"kernels {release}", f" (build2cmake's copy of kernels' list: {reason})"
    )


@functools.lru_cache(maxsize=1)
def python_dependencies() -> PythonDependencies:
    """The list build.toml's python-depends are held to: the installed kernels' own, else the
    carried copy (read once per process)."""
    found = installed_list()
    return found if isinstance(found, PythonDependencies) else carried_list(found)


def metadata_archs(backend: str, archs: Sequence[str]) -> list[str]:
    """`backend.archs` of metadata.json in the form kernels compares: a ROCm device's arch
    without its target features (kernels strips `gfx90a:sramecc+:xnack-` to `gfx90a` and looks
    for that in the list), each once; CUDA capabilities as written (`9.0a`, `10.0f`, `8.0+PTX`)."""
    result: list[str] = []
    for arch in archs:
        written = arch.split(":")[0] if backend == "rocm" else arch
        if written not in result:
            result.append(written)
    return result
