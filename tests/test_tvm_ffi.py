"""[tvm-ffi] kernels: generated, compiled, laid out as upstream's tvm-ffi variants and loaded.

The fixture tests/fixtures/relu_tvm_ffi is a ReLU bound to Apache TVM FFI with a cpu and a cuda
kernel. Its sources #error when a section's flags miss their sources or reach another section's,
so every compile below also proves the flags went where build.toml says.
"""

from __future__ import annotations

import importlib.metadata
import json
import struct
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import default_ops_id, generate_torch, list_variants
from build2cmake.builds.variant import tvm_ffi_variant
from build2cmake.config.hub_variants import parse_variant
from build2cmake.ground.errors import Build2CMakeError, BuildConfigError
from build2cmake.toolchains.offload import elf_section
from tests.conftest import BuildEnv, requires_nvcc, run_cli

pytest.importorskip("tvm_ffi", reason="apache-tvm-ffi is not installed (pip install -e .[test])")

FIXTURE = "relu_tvm_ffi"
# The variant folders of this machine's apache-tvm-ffi release.
TVM_FFI_RELEASE = ".".join(importlib.metadata.version("apache-tvm-ffi").split(".")[:2])
CPU_VARIANT = tvm_ffi_variant(TVM_FFI_RELEASE, "cpu", None)


def build(root: Path, *args: str) -> Path:
    """`build2cmake build` of the project; the variant folder it reports."""
    result = run_cli("build", root / "build.toml", *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("built "), line
    return root / line.split()[1]


def run_python(code: str, **env: str) -> str:
    """Run code in a fresh interpreter, from a neutral folder."""
    import os

    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd="/",
        env={**os.environ, **env},
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


# Called on fresh random data (both signs) against numpy's own maximum, float32 and float64, then
# with a dtype the kernel refuses: the error must name the op and the dtype.
CHECK_RELU = """
    import numpy as np
    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal(4099).astype(dtype)
        out = np.full_like(x, 42)
        relu(x, out)
        assert (x < 0).sum() > 1000 and (x > 0).sum() > 1000
        np.testing.assert_array_equal(out, np.maximum(x, 0))
    try:
        relu(np.ones(4, np.int32), np.ones(4, np.int32))
    except TypeError as error:
        assert "relu_cpu" in str(error) and "int32" in str(error), error
    else:
        raise AssertionError("an int32 tensor was accepted")
    print("relu ok")
"""


def test_generate_writes_a_tvm_ffi_build_without_torch_glue(
    project: Callable[[str], Path],
) -> None:
    root = project(FIXTURE)
    report = generate_torch(root / "build.toml")
    assert "tvm-ffi-ext/ffi_relu/_ops.py" in report.written
    assert "cmake/build2cmake_tvm_ffi.cmake" in report.written
    assert not (root / "torch-ext").exists()
    cmake = (root / "CMakeLists.txt").read_text()
    assert "build2cmake_add_tvm_ffi_library" in cmake
    assert "build2cmake_find_torch" not in cmake
    ops = (root / "tvm-ffi-ext/ffi_relu/_ops.py").read_text()
    assert '"_ffi_relu_cpu_' in ops and '"_ffi_relu_cuda_' in ops
    pyproject = (root / "pyproject.toml").read_text()
    assert '"apache-tvm-ffi"' in pyproject and '"torch"' not in pyproject


def test_list_variants_prints_the_tvm_ffi_variants_upstream_builds(
    project: Callable[[str], Path],
) -> None:
    root = project(FIXTURE)
    specs = [v.spec for v in list_variants(root / "build.toml")]
    assert specs == ["tvm-ffi0.1-cpu", "tvm-ffi0.1-cu126", "tvm-ffi0.1-cu130", "tvm-ffi0.1-cu132"]
    folders = [v.folder("x86_64") for v in list_variants(root / "build.toml")]
    assert folders[0] == "tvm-ffi01-cpu-x86_64-linux"
    assert folders[2] == "tvm-ffi01-cu130-x86_64-linux"
    # Both spellings read back as the same variant; [general.cuda] bounds apply as for torch.
    assert parse_variant("tvm-ffi01-cu130-x86_64-linux", "x86_64") == parse_variant(
        "tvm-ffi0.1-cu130"
    )
    text = (root / "build.toml").read_text()
    (root / "build.toml").write_text(
        text.replace("[tvm-ffi]", '[general.cuda]\nminver = "13.0"\n\n[tvm-ffi]')
    )
    assert [v.spec for v in list_variants(root / "build.toml")] == [
        "tvm-ffi0.1-cpu",
        "tvm-ffi0.1-cu130",
        "tvm-ffi0.1-cu132",
    ]


def test_build_refuses_torch_variants_for_a_tvm_ffi_kernel(
    project: Callable[[str], Path],
) -> None:
    root = project(FIXTURE)
    result = run_cli("build", root / "build.toml", "--variants", "torch2.13-cpu", "--no-isolation")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "torch2.13-cpu" in result.stderr and "[tvm-ffi]" in result.stderr
    assert not (root / "build").exists()


def test_ops_id_covers_the_tvm_ffi_binding(project: Callable[[str], Path]) -> None:
    root = project(FIXTURE)
    before = default_ops_id(root / "build.toml")
    binding = root / "tvm-ffi-ext" / "binding.cpp"
    binding.write_text(binding.read_text() + "// changed\n")
    # Two builds from different binding sources must not share a library name.
    assert default_ops_id(root / "build.toml") != before


def test_generate_refuses_a_torch_dependency_of_a_built_tvm_ffi_kernel(
    project: Callable[[str], Path],
) -> None:
    root = project(FIXTURE)
    text = (root / "build.toml").read_text()
    # xpu is skipped, so its torch dependency (as in upstream's examples) is no obstacle.
    (root / "build.toml").write_text(
        text + '[kernel.relu_xpu]\nbackend = "xpu"\ndepends = ["torch"]\nsrc = ["checks.h"]\n'
    )
    text = (root / "build.toml").read_text()
    text = text.replace('backends = ["cpu", "cuda"]', 'backends = ["cpu", "cuda", "xpu"]')
    (root / "build.toml").write_text(text)
    assert generate_torch(root / "build.toml").skipped_backends == ("xpu",)
    (root / "build.toml").write_text(text.replace("depends = []", 'depends = ["torch"]', 1))
    with pytest.raises(BuildConfigError, match=r"\[kernel.relu_cpu\].depends: 'torch'"):
        generate_torch(root / "build.toml", force=True)


def test_rocm_is_skipped_for_a_tvm_ffi_kernel(project: Callable[[str], Path]) -> None:
    root = project(FIXTURE)
    text = (root / "build.toml").read_text()
    (root / "build.toml").write_text(text.replace('["cpu", "cuda"]', '["cpu", "cuda", "rocm"]'))
    report = generate_torch(root / "build.toml")
    assert report.skipped_backends == ("rocm",)
    with pytest.raises(Build2CMakeError, match="--backend rocm"):
        generate_torch(root / "build.toml", backend="rocm")


@pytest.mark.compile
def test_cpu_build_loads_through_kernels_and_matches_numpy(
    project: Callable[[str], Path],
) -> None:
    root = project(FIXTURE)
    variant = build(root, "--backend", "cpu")
    assert variant.name == CPU_VARIANT
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cpu"}
    library = variant / f"{metadata['id']}.so"
    assert library.is_file()
    assert {p.name for p in variant.iterdir()} == {
        "__init__.py",
        "_ops.py",
        "metadata.json",
        library.name,
    }
    # kernels resolves the variant by its own rules (tvm-ffi release, cpu, machine, OS).
    output = run_python(
        textwrap.dedent(f"""
        import pathlib, kernels
        module = kernels.get_local_kernel(pathlib.Path({str(root)!r}), backend="cpu")
        assert module.BACKEND == "cpu", module.BACKEND
        assert pathlib.Path(module.__file__).parent.name == {CPU_VARIANT!r}, module.__file__
        relu = module.relu
        """)
        + textwrap.dedent(CHECK_RELU)
    )
    assert "relu ok" in output


def _fatbin_sass_archs(library: Path) -> list[int]:
    """The sm_XX of every SASS (ELF) entry in the library's .nv_fatbin section.

    A fatbin is a 16-byte header (magic 0xBA55ED50, version, header size, payload size) and
    entries, each with its own header: kind (1 PTX, 2 ELF) at 0, header size at 4, payload
    size at 8, the sm number at 28. The headers are never compressed; payloads may be.
    """
    section = elf_section(library, ".nv_fatbin")
    assert section is not None, f"{library}: no .nv_fatbin section"
    archs = []
    start = 0
    while start + 16 <= len(section):
        magic, _, header, size = struct.unpack_from("<IHHQ", section, start)
        if magic != 0xBA55ED50:
            start += 8  # fatbins are 8-byte aligned in the section
            continue
        entry, end = start + header, start + header + size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", section, entry)
            if kind == 2:
                archs.append(struct.unpack_from("<I", section, entry + 28)[0])
            entry += entry_header + payload
        start = end
    return sorted(archs)


@pytest.mark.compile
@pytest.mark.cuda
@requires_nvcc
def test_cuda_build_holds_sass_for_exactly_its_capabilities(
    project: Callable[[str], Path],
) -> None:
    root = project(FIXTURE)
    variant = build(root, "--backend", "cuda")
    assert variant.name.startswith(f"tvm-ffi{TVM_FFI_RELEASE.replace('.', '')}-cu")
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cuda", "archs": ["8.0", "9.0"]}
    library = variant / f"{metadata['id']}.so"
    assert _fatbin_sass_archs(library) == [80, 90]


@pytest.mark.compile
def test_pip_editable_install_of_the_cpu_backend_imports_and_computes(
    project: Callable[[str], Path], build_env: BuildEnv
) -> None:
    root = project(FIXTURE)
    generate_torch(root / "build.toml")
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=cpu")
    result = build_env.run(
        "import ffi_relu\nassert ffi_relu.BACKEND == 'cpu'\nrelu = ffi_relu.relu\n"
        + textwrap.dedent(CHECK_RELU)
    )
    assert "relu ok" in result.stdout, result.stdout + result.stderr


@pytest.mark.compile
def test_wheel_requires_the_tvm_ffi_release_it_was_compiled_against(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project(FIXTURE)
    generate_torch(root / "build.toml", backend="cpu")
    command = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q"]
    result = subprocess.run(
        [*command, "-w", str(tmp_path / "wheels"), str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = (tmp_path / "wheels").iterdir()
    # The library uses no Python API: one wheel for every Python 3.
    assert "-py3-none-linux_x86_64" in wheel.name or "-py3-none-manylinux" in wheel.name, wheel
    major, minor = (int(p) for p in TVM_FFI_RELEASE.split("."))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        requires = archive.read(meta).decode()
        archive.extractall(tmp_path / "site")
    assert f"Requires-Dist: apache-tvm-ffi<{major}.{minor + 1},>={major}.{minor}" in requires
    assert "torch" not in requires
    assert any(n.startswith("ffi_relu/_ffi_relu_cpu_") and n.endswith(".so") for n in names)
    output = run_python(
        "import ffi_relu\nrelu = ffi_relu.relu\n" + textwrap.dedent(CHECK_RELU),
        PYTHONPATH=str(tmp_path / "site"),
    )
    assert "relu ok" in output
