"""Projects laid out as the kernel-builder ecosystem's are: edition 5, hipified CUDA sources,
backends build2cmake skips, header-only kernel sections, stable-ABI bindings, noarch kernels.

The fixtures are ours (tests/fixtures/edition5, stable_abi, noarch), written in the formats of
huggingface/kernels-community; the tests generate, compile with the real toolchains, load and
call the result.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import generate_torch, validate
from build2cmake.toolchains.offload import rocm_targets
from tests.conftest import BuildEnv, requires_nvcc, requires_rocm_toolchain, run_cli

GOLDEN = Path(__file__).parent / "golden"


def test_edition5_project_generates_its_buildable_backends_and_names_the_rest(
    project: Callable[[str], Path],
) -> None:
    root = project("edition5")
    model = validate(root / "build.toml")
    assert model.source_format == "edition 5"
    assert model.hub_branch == "main" and model.cuda_minver == "12.0"
    report = generate_torch(root / "build.toml", ops_id="golden")
    assert report.skipped_backends == ("metal", "xpu")
    # The rocm kernel's CUDA source is hipified by a script generate writes beside the CMake.
    assert "cmake/build2cmake_hipify.py" in report.written
    cmake = (root / "CMakeLists.txt").read_text()
    assert "relu_metal" not in cmake and "relu_xpu" not in cmake
    assert "build2cmake_add_rocm_kernel(${EXTENSION} kernel_relu_rocm" in cmake
    # The duplicate source is used once (and was a warning).
    assert cmake.count("[[relu_cpu/relu_cpu.cpp]]") == 1
    assert any("listed twice" in w for w in report.warnings)
    golden = GOLDEN / "edition5" / "CMakeLists.txt"
    if not golden.exists():  # first run writes it; review the diff
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(cmake)
    assert cmake == golden.read_text(), "CMakeLists.txt differs from tests/golden/edition5"


CHECK_RELU = """
import torch, edition5
torch.manual_seed(1)
x = torch.randn(4097)
assert torch.equal(edition5.relu(x), torch.relu(x)), "relu differs from torch.relu"
print("ok", edition5.ops)
"""


@pytest.mark.compile
def test_edition5_cpu_backend_builds_with_header_only_kernel_and_csrc(
    project: Callable[[str], Path], build_env: BuildEnv
) -> None:
    root = project("edition5")
    generate_torch(root / "build.toml")
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=cpu")
    result = build_env.run(CHECK_RELU)
    assert result.returncode == 0 and result.stdout.startswith("ok"), result.stderr
    # The first import after the install is silent (no import came before it); so is one with
    # nothing to rebuild; after an edit it rebuilds, saying so once.
    assert "was rebuilt since the last import" not in result.stderr, result.stderr
    quiet = build_env.run("import edition5")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == "", quiet
    source = root / "relu_cpu" / "relu_cpu.cpp"
    source.write_text(source.read_text() + "\n// edited\n")
    rebuilt = build_env.run("import edition5")
    assert rebuilt.returncode == 0 and rebuilt.stdout == "", rebuilt
    assert rebuilt.stderr.splitlines() == [
        f"build2cmake: {next(iter(_extension_names(root)))} was rebuilt since the last import"
    ], rebuilt.stderr
    # A reinstall after an edit rebuilds in pip, not at the import: the next import is silent.
    source.write_text(source.read_text() + "\n// edited again\n")
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=cpu")
    reinstalled = build_env.run("import edition5")
    assert reinstalled.returncode == 0 and reinstalled.stderr == "", reinstalled
    # The install requires the torch it was compiled against (torch's C++ ABI changes between
    # minor releases), and the package refuses to load into another one.
    requires = build_env.run("import importlib.metadata as m; print(m.requires('edition5'))")
    assert "'torch<2.14,>=2.13'" in requires.stdout, requires
    other = build_env.run("import torch; torch.__version__ = '2.15.0'; import edition5")
    assert other.returncode != 0
    assert "was compiled against torch 2.13" in other.stderr and "2.15.0" in other.stderr


def _extension_names(root: Path) -> list[str]:
    found = (root / "build" / "cmake").rglob("_edition5_cpu_*.so")
    return sorted({p.name.split(".")[0] for p in found})


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_hipified_cuda_source_compiles_for_each_buildable_rocm_arch(
    project: Callable[[str], Path],
) -> None:
    root = project("edition5")
    result = run_cli("build", root / "build.toml", "--backend", "rocm", "-j", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    log = result.stdout + result.stderr
    # Debian 12's ROCm 5.2 cannot build gfx942, and ships no device library for gfx1100: each is
    # named and left out, the rest is built.
    for dropped in ("gfx942", "gfx1100"):
        assert f"kernel_relu_rocm: skipping '{dropped}'" in log
    assert "Hipifying relu_cuda/relu.cu" in log
    (variant,) = (root / "build").glob("torch*-rocm*")
    (library,) = variant.glob("_edition5_rocm_*.so")
    assert sorted(rocm_targets(library)) == ["gfx90a", "gfx940"]
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "rocm", "archs": ["gfx90a", "gfx940"]}
    # The project itself is untouched: the hipified sources live in the build folder only.
    assert not list(root.glob("relu_cuda/*.hip")) and not (root / "relu_hip").exists()
    hipified = next((root / "build").glob("cmake*/hipified/relu_cuda/relu.hip"))
    text = hipified.read_text()
    assert "hipGetLastError" in text and "cudaGetLastError" not in text


@pytest.mark.compile
@pytest.mark.rocm
@requires_rocm_toolchain
def test_editing_a_cuda_source_rehipifies_and_recompiles_only_it(
    project: Callable[[str], Path],
) -> None:
    root = project("edition5")
    first = run_cli("build", root / "build.toml", "--backend", "rocm", "-j", "2")
    assert first.returncode == 0, first.stderr
    (build_dir,) = [p for p in (root / "build").glob("cmake*") if (p / "build.ninja").exists()]
    source = root / "relu_cuda" / "relu.cu"
    source.write_text(source.read_text() + "\n// edited\n")
    plan = subprocess.run(
        ["ninja", "-C", str(build_dir), "-n", "-d", "explain"],
        capture_output=True,
        text=True,
        check=False,
    )
    if plan.returncode != 0:  # the ninja module's binary, when no system ninja
        ninja = str(Path(sys.executable).parent / "ninja")
        plan = subprocess.run([ninja, "-C", str(build_dir), "-n"], capture_output=True, text=True)
    steps = [line for line in plan.stdout.splitlines() if line.startswith("[")]
    assert any("Hipifying relu_cuda/relu.cu" in s for s in steps), plan.stdout
    compiles = [s for s in steps if "Building" in s]
    assert len(compiles) == 1 and "relu.hip" in compiles[0], steps


@pytest.mark.compile
@pytest.mark.cuda
@requires_nvcc
def test_cuda_capabilities_nvcc_cannot_build_are_left_out(project: Callable[[str], Path]) -> None:
    root = project("edition5")
    result = run_cli("build", root / "build.toml", "--backend", "cuda", "-j", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kernel_relu: skipping '10.1'" in result.stdout + result.stderr
    (variant,) = (root / "build").glob("torch*-cu*")
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cuda", "archs": ["8.0", "9.0a"]}


@pytest.mark.compile
def test_stable_abi_binding_builds_and_runs_on_cpu(
    project: Callable[[str], Path], build_env: BuildEnv
) -> None:
    root = project("stable_abi")
    generate_torch(root / "build.toml")
    build_env.pip_install(root)
    result = build_env.run(
        "import torch, stable_relu\n"
        "x = torch.randn(1000)\n"
        "assert torch.equal(stable_relu.relu(x), torch.relu(x))\n"
        "print('ok')\n"
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    (info,) = (root / "build" / "cmake").glob("build2cmake-build.json")
    assert json.loads(info.read_text())["stable_abi"] == "2.10"
    # build lays it out as the stable-ABI variant kernels looks for, which kernels then loads.
    result = run_cli("build", root / "build.toml", "--backend", "cpu")
    assert result.returncode == 0, result.stderr
    assert (root / "build" / "torch-stable-abi210-cpu-x86_64-linux" / "metadata.json").is_file()
    check = (
        "import kernels, torch, pathlib\n"
        f"k = kernels.get_local_kernel(pathlib.Path({str(root)!r}), backend='cpu')\n"
        "x = torch.randn(100)\n"
        "assert torch.equal(k.relu(x), torch.relu(x))\n"
        "print('ok')\n"
    )
    loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert loaded.returncode == 0 and "ok" in loaded.stdout, loaded.stderr


def test_noarch_project_lays_out_a_variant_per_backend_that_kernels_loads(
    project: Callable[[str], Path],
) -> None:
    root = project("noarch")
    for backend in ("cpu", "cuda"):
        result = run_cli("build", root / "build.toml", "--backend", backend)
        assert result.returncode == 0, result.stderr
    cuda = json.loads((root / "build" / "torch-cuda" / "metadata.json").read_text())
    assert cuda["backend"] == {"type": "cuda", "archs": ["8.0", "9.0"]}
    assert (root / "build" / "torch-cpu" / "__init__.py").is_file()
    check = (
        "import kernels, torch\n"
        f"k = kernels.get_local_kernel(__import__('pathlib').Path({str(root)!r}), backend='cpu')\n"
        "x = torch.tensor([-1.0, 2.0])\n"
        "assert torch.equal(k.double_relu(x), torch.tensor([0.0, 4.0]))\n"
        "print('ok')\n"
    )
    loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert loaded.returncode == 0 and "ok" in loaded.stdout, loaded.stderr
    shutil.rmtree(root / "build")
