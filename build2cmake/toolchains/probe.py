"""What one ROCm install builds: its HIP compiler, the GPU targets that compiler lists and the
ROCm libraries kernels include that it has, for the machine's own ROCm and for each toolchain.

Both are asked the same way, through the build's own discovery (rocm_discovery: cmake -P
build2cmake_find_rocm.cmake) and the compiler's `--print-supported-cpus`: here for the host,
inside the toolchain for a toolchain (`python -m build2cmake.toolchains.probe` run there prints
the answer as JSON). A toolchain's answer is kept in the store (`<folder>.probe.json`) until the
toolchain or build2cmake's discovery changes, so doctor and build ask each toolchain once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from build2cmake.generate.render import rocm_discovery_module
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.toolchains import rocm_discovery, sandbox, store
from build2cmake.toolchains.programs import cmake_program
from build2cmake.toolchains.rocm_discovery import RocmLibrary, compiler_targets, find_rocm

_PROBE_LIMIT = 1 << 20


@dataclass(frozen=True)
class Capability:
    """What one ROCm install compiles and has."""

    label: str  # "host" or the toolchain's name (rocm-7.2)
    where: str  # in words: "/usr (distribution packages)", "toolchain /var/cache/..."
    version: str  # its ROCm version ("" when unknown)
    compiler: str = ""  # the HIP compiler ("" when none was found)
    compiler_version: str = ""  # "clang 22.1.0"
    targets: tuple[str, ...] = ()  # the GPU targets the compiler lists
    libraries: tuple[RocmLibrary, ...] = ()
    problem: str = ""  # why it could not be asked, when it could not
    toolchain: store.Toolchain | None = None

    def compiles(self, arch: str) -> bool:
        """Whether its compiler lists `arch` (gfx942; a target feature such as :xnack- is
        ignored)."""
        return arch.split(":")[0] in self.targets

    @property
    def release(self) -> tuple[int, int] | None:
        """major.minor of its ROCm, when known."""
        parts = self.version.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1][:1].isdigit():
            return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
        return None


def probe_here(rocm_path: str | None = None) -> dict[str, object]:
    """This machine's ROCm (or the one at `rocm_path`), as JSON-ready data."""
    try:
        cmake = cmake_program()
    except Build2CMakeError as error:
        return {"problem": str(error)}
    rocm, searched = find_rocm(cmake, rocm_path=rocm_path)
    if rocm is None:
        return {"problem": f"no HIP compiler found (searched {searched or 'nothing'})"}
    version, targets = compiler_targets(rocm.compiler)
    return {
        "where": f"{rocm.root} ({rocm.layout_detail})",
        "version": rocm.version,
        "compiler": rocm.compiler,
        "compiler_version": version,
        "targets": list(targets),
        "libraries": [dataclasses.asdict(lib) for lib in rocm.libraries],
    }


def _from_data(label: str, data: object, toolchain: store.Toolchain | None) -> Capability:
    """A Capability from probe_here's data (checked: it came through a file or a pipe)."""
    if not isinstance(data, dict):
        return Capability(label, "", "", problem="its probe gave no answer")

    def text(key: str) -> str:
        value = data.get(key, "")
        return value if isinstance(value, str) else ""

    targets = data.get("targets", [])
    libraries = []
    for item in data.get("libraries", []) if isinstance(data.get("libraries"), list) else []:
        if isinstance(item, dict) and all(isinstance(v, str) for v in item.values()):
            with contextlib.suppress(TypeError):
                libraries.append(RocmLibrary(**item))
    return Capability(
        label=label,
        where=text("where"),
        version=text("version"),
        compiler=text("compiler"),
        compiler_version=text("compiler_version"),
        targets=tuple(t for t in targets if isinstance(t, str))
        if isinstance(targets, list)
        else (),
        libraries=tuple(libraries),
        problem=text("problem"),
        toolchain=toolchain,
    )


def host(rocm_path: str | None = None) -> Capability:
    """The machine's own ROCm, as a build here would use it."""
    return _from_data("host", probe_here(rocm_path), None)


def _key(toolchain: store.Toolchain) -> str:
    """What a toolchain's probe depends on: its recipe and version, and the discovery module."""
    digest = hashlib.sha256()
    parts = (toolchain.folder / store.STAMP, toolchain.folder / store.VERSION)
    code = (rocm_discovery_module(), Path(rocm_discovery.__file__), Path(__file__))
    for part in (*parts, *code):
        with contextlib.suppress(OSError):
            digest.update(part.read_bytes())
    return digest.hexdigest()


def of_toolchain(
    toolchain: store.Toolchain,
    *,
    mode: sandbox.Mode | None = None,
    env: Mapping[str, str] | None = None,
) -> Capability:
    """What `toolchain` compiles and has, asked inside it: once, kept in the store, unless
    `env` (default os.environ) names include folders, which a library may be found in."""
    env = os.environ if env is None else env
    includes = {
        name: env[name]
        for name in (*sandbox.COMPILER_INCLUDE_VARIABLES, sandbox.INCLUDE_VARIABLE)
        if env.get(name)
    }
    cache = toolchain.folder.parent / f"{toolchain.folder.name}.probe.json"
    key = _key(toolchain)
    with contextlib.suppress(OSError, ValueError):
        if not includes and not cache.is_symlink() and cache.stat().st_size < _PROBE_LIMIT:
            kept = json.loads(cache.read_text("utf-8"))
            if isinstance(kept, dict) and kept.get("key") == key:
                return _with_where(_from_data(toolchain.name, kept.get("data"), toolchain))
    try:
        result = sandbox.run(
            toolchain,
            ["python", "-P", "-m", "build2cmake.toolchains.probe"],
            cwd=Path("/"),
            env=includes,
            mode=mode,
            notes=io.StringIO(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (Build2CMakeError, OSError, ValueError) as error:
        return Capability(toolchain.name, str(toolchain.folder), toolchain.version,
                          problem=str(error), toolchain=toolchain)  # fmt: skip
    try:
        data = json.loads(result.stdout[-_PROBE_LIMIT:].strip().splitlines()[-1])
    except (ValueError, IndexError):
        why = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        return Capability(toolchain.name, str(toolchain.folder), toolchain.version,
                          problem=f"asking it failed: {why}", toolchain=toolchain)  # fmt: skip
    with contextlib.suppress(OSError):
        if includes:
            raise OSError("not kept: it depends on the include folders")
        temporary = cache.with_name(f"{cache.name}.{os.getpid()}")
        temporary.write_text(json.dumps({"key": key, "data": data}), encoding="utf-8")
        os.replace(temporary, cache)
    return _with_where(_from_data(toolchain.name, data, toolchain))


def _with_where(capability: Capability) -> Capability:
    """A toolchain's capability says where the toolchain is, and its recorded version."""
    toolchain = capability.toolchain
    assert toolchain is not None
    return dataclasses.replace(
        capability,
        where=f"toolchain {toolchain.folder}",
        version=toolchain.version,
    )


def toolchains(
    installed: list[store.Toolchain] | None = None,
    *,
    mode: sandbox.Mode | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Capability]:
    """Every installed toolchain's capability."""
    installed = store.installed() if installed is None else installed
    return [of_toolchain(t, mode=mode, env=env) for t in installed]


if __name__ == "__main__":
    # Inside a toolchain: this ROCm, as one JSON line.
    print(json.dumps(probe_here()))
    sys.exit(0)
