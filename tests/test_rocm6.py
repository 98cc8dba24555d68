"""ROCm 6 for real: builds in the rocm-6.4 toolchain (Debian sid: ROCm 6.4, hipcc 7, clang-21,
sid's CPU torch), where gfx942 compiles, through scripts/rocm-chroot.sh (`ensure`, `run`: the
wrapper over `build2cmake toolchain` this repository's scripts use). Debian 12's own ROCm 5.2
cannot target gfx942.

The toolchain is made once per machine (minutes) and cached under /var/cache/build2cmake; these
tests skip, saying why, where it cannot be made (not root, no network to the Debian mirror, ...).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO
from tests.test_gemm_project import copy_gemm

pytestmark = [pytest.mark.rocm6, pytest.mark.rocm, pytest.mark.compile]

SCRIPT = REPO / "scripts" / "rocm-chroot.sh"

# Run inside the chroot: the code objects of one library, as build2cmake.toolchains.offload reads
# them back, as JSON; each code object is also written to <out>/<target>.co for llvm-objdump.
READ_BACK = """
import json, pathlib, sys
from build2cmake.toolchains.offload import hip_bundles, elf_section
library, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
bundles = []
for bundle in hip_bundles(library):
    for code in bundle.code_objects:
        (out / (code.target.replace(":", "_") + ".co")).write_bytes(code.image)
    bundles.append({"compressed": bundle.compressed,
                    "ids": [c.bundle_id for c in bundle.code_objects],
                    "kernels": sorted(bundle.kernels)})
section = elf_section(library, ".hip_fatbin") or b""
print(json.dumps({"bundles": bundles, "fatbin_bytes": len(section)}))
"""


class Chroot:
    """The cached ROCm chroot: which suite it is, and a way to run commands in it."""

    def __init__(self, description: str) -> None:
        self.description = description
        match = re.search(r"\((\w+), ROCm ([^)]+)\)", description)
        assert match, description
        self.suite = match.group(1)
        self.rocm_version = match.group(2)

    def run(
        self, *command: str, cwd: Path, bind: Path, timeout: int = 1800
    ) -> subprocess.CompletedProcess[str]:
        """Run `command` in the chroot in `cwd`, with `bind` mounted at its own path."""
        return subprocess.run(
            ["bash", str(SCRIPT), "run", "--bind", str(bind), "--", *command],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=timeout,
            check=False,
        )

    def check(self, *command: str, cwd: Path, bind: Path) -> str:
        result = self.run(*command, cwd=cwd, bind=bind)
        assert result.returncode == 0, f"{command}:\n{result.stdout[-4000:]}{result.stderr[-4000:]}"
        return result.stdout


@pytest.fixture(scope="module")
def chroot() -> Chroot:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("the ROCm chroot needs root on Linux (mmdebstrap, chroot, mount)")
    if shutil.which("unshare") is None:
        pytest.skip("the ROCm chroot needs unshare (util-linux)")
    result = subprocess.run(
        ["bash", str(SCRIPT), "ensure"], capture_output=True, text=True, timeout=3600, check=False
    )
    if result.returncode != 0:
        pytest.skip(f"no ROCm chroot could be made here: {result.stderr.strip()[-600:]}")
    return Chroot(result.stdout.strip().splitlines()[-1])


def _read_back(chroot: Chroot, library: Path, out: Path, bind: Path) -> dict[str, object]:
    out.mkdir()
    text = chroot.check("python", "-c", READ_BACK, str(library), str(out), cwd=bind, bind=bind)
    return dict(json.loads(text))


def _disassemble(chroot: Chroot, code_object: Path, bind: Path) -> str:
    # The chroot's own LLVM (llvm-21 on sid, llvm-17 on trixie): newest llvm-objdump there.
    command = 'exec "$(ls -d /usr/lib/llvm-*/bin/llvm-objdump | sort -V | tail -1)" -d "$1"'
    return chroot.check("sh", "-c", command, "sh", str(code_object), cwd=bind, bind=bind)


def test_gemm_builds_every_arch_of_build_toml_and_gfx942_has_fp8_matrix_instructions(
    chroot: Chroot, tmp_path: Path
) -> None:
    root = copy_gemm(tmp_path)
    build = ("python", "-m", "build2cmake", "build", "build.toml", "--backend", "rocm")
    # As a user would: no BUILD2CMAKE_ROCM_ARCHS, so every rocm-archs entry is compiled.
    result = chroot.run(*build, cwd=root, bind=tmp_path)
    said = " ".join((result.stdout + result.stderr).split())  # CMake wraps its messages
    expected = ["gfx90a", "gfx940", "gfx942"]
    if "kernel_gemm_rocm: skipping 'gfx940'" in said:
        # Debian sid builds ROCm 6.4 with clang-21, which no longer knows gfx940 (LLVM dropped
        # the pre-production MI300 targets gfx940/gfx941; AMD's own ROCm 6.4 LLVM still had
        # them): configure names it, with the compiler, and builds the others.
        assert "(Clang 21." in said and "cannot compile for it" in said, said[-2000:]
        expected = ["gfx90a", "gfx942"]
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    variants = [p for p in (root / "build").iterdir() if not p.name.startswith("cmake")]
    libraries = [so for v in variants for so in v.rglob("_gemm_rocm_*.so")]
    assert len(libraries) == 1, variants
    library = libraries[0]
    found = _read_back(chroot, library, tmp_path / "objects", tmp_path)
    bundles = found["bundles"]
    assert isinstance(bundles, list) and len(bundles) == 1  # one HIP translation unit
    ids = bundles[0]["ids"]
    print("bundle ids read back:", ids, "compressed:", bundles[0]["compressed"],
          ".hip_fatbin bytes:", found["fatbin_bytes"])  # fmt: skip
    assert sorted(i.split("--")[-1] for i in ids) == expected
    assert all(i.startswith("hipv4-amdgcn-amd-amdhsa--") for i in ids)
    mfma = "_ZN7fp8gemm21gemm_mfma_fnuz_kernelEPtPKhS2_PKfS4_iii"
    assert mfma in bundles[0]["kernels"]
    if chroot.rocm_version >= "6.2":
        # --offload-compress: the build reads its own compressed code objects back.
        assert bundles[0]["compressed"] is True
    metadata = json.loads((library.parent / "metadata.json").read_text())
    assert "gfx942" in json.dumps(metadata)

    gfx942 = _disassemble(chroot, tmp_path / "objects" / "gfx942.co", tmp_path)
    assert "v_mfma_f32_16x16x32_fp8_fp8" in gfx942
    gfx90a = _disassemble(chroot, tmp_path / "objects" / "gfx90a.co", tmp_path)
    assert "v_mfma" not in gfx90a  # MI200 has no fp8 matrix cores: the portable kernel only


def test_the_rocm_guides_project_builds_as_written_for_gfx942(
    chroot: Chroot, tmp_path: Path
) -> None:
    root = tmp_path / "rocm_guide"
    shutil.copytree(FIXTURES / "rocm_guide", root)
    before = sorted(p.relative_to(root) for p in root.rglob("*"))

    doctor = chroot.run("python", "-m", "build2cmake", "doctor", "build.toml", cwd=root, bind=root)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"ROCm {chroot.rocm_version.split('-')[0][:3]}" in doctor.stdout
    assert "rocm: archs gfx942; buildable here: gfx942" in doctor.stdout

    chroot.check("python", "-m", "build2cmake", "generate-torch", "build.toml", cwd=root, bind=root)
    # As the guide says, with no backend named: the chroot's torch is a CPU build, which
    # build.toml does not declare, and rocm is its one GPU backend with a compiler here.
    result = chroot.run(
        "pip", "install", "-v", "--no-build-isolation", "-e", ".", cwd=root, bind=root
    )
    installed = result.stdout + result.stderr
    assert result.returncode == 0, installed[-4000:]
    assert (
        "build2cmake: building rocm, the one GPU backend of build.toml with a compiler here"
    ) in installed, installed[-3000:]
    assert "the extension loads only under a ROCm build of torch" in installed
    # The build folder's copy (scikit-build-core < 0.12 links it there; later ones install it
    # under install/): either is the library the editable install loads.
    libraries = sorted((root / "build" / "cmake").rglob("_gemm_rocm_*.so"))
    assert libraries, "no library built"
    library = libraries[0]
    found = _read_back(chroot, library, tmp_path / "objects", root.parent)
    ids = [i for bundle in found["bundles"] for i in bundle["ids"]]  # type: ignore[attr-defined]
    # gfx942 only; one bundle, gemm_launcher.hip's (timer.hip has no device code, so clang
    # embeds none for it).
    assert ids == ["hipv4-amdgcn-amd-amdhsa--gfx942"]
    kernels = {k for bundle in found["bundles"] for k in bundle["kernels"]}  # type: ignore[attr-defined]
    assert any("gemm_blockscaled_kernel" in k for k in kernels)

    # Imported outside the project folder: the op is registered for the CUDA dispatch key (as
    # PyTorch on ROCm expects) and for nothing else, so CPU tensors are refused by the dispatcher.
    call = (
        "import torch, gemm\n"
        "name = gemm.ops.gemm._qualified_op_name\n"
        "print('op', name)\n"
        "print('cuda kernel', torch._C._dispatch_has_kernel_for_dispatch_key(name, 'CUDA'))\n"
        "a = torch.zeros(16, 128, dtype=torch.uint8)\n"
        "try:\n"
        "    gemm.gemm(a, a.t().contiguous(), torch.ones(1, 16), torch.ones(1, 1))\n"
        "except NotImplementedError as error:\n"
        "    print('refused:', str(error).splitlines()[0])\n"
    )
    out = chroot.check("python", "-c", call, cwd=tmp_path, bind=tmp_path)
    assert re.search(r"op _gemm_rocm_[0-9a-f]{10}::gemm", out), out
    assert "cuda kernel True" in out, out
    assert "refused: Could not run '_gemm_rocm_" in out and "'CPU' backend" in out, out

    chroot.check("python", "-m", "build2cmake", "clean", "build.toml", cwd=root, bind=root)
    after = sorted(p.relative_to(root) for p in root.rglob("*"))
    assert after == before


def test_a_cu_kernel_using_torchs_complex_compiles_with_rocthrust_for_gfx90a_and_gfx942(
    chroot: Chroot, tmp_path: Path
) -> None:
    root = tmp_path / "rocm_torch_headers"
    shutil.copytree(FIXTURES / "rocm_torch_headers", root)
    build = ("python", "-m", "build2cmake", "build", "build.toml", "--backend", "rocm")
    result = chroot.run(*build, cwd=root, bind=tmp_path)
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 0, said[-4000:]
    assert "(rocThrust) is not installed" not in said  # the chroot has librocthrust-dev
    # torch's complex.h really included rocThrust's: the compiler's dependency list (Ninja keeps
    # it in its deps log) says so, for complex_scale.hip and not for device_count.hip.
    builds = [p.parent for p in (root / "build").rglob("build.ninja")]
    assert len(builds) == 1, builds
    deps = chroot.check("ninja", "-C", str(builds[0]), "-t", "deps", cwd=root, bind=tmp_path)
    per_object = {
        block.split(":", 1)[0]: block for block in deps.split("\n\n") if ".hip.o:" in block
    }
    [complex_deps] = [b for o, b in per_object.items() if o.endswith("complex_scale.hip.o")]
    [plain_deps] = [b for o, b in per_object.items() if o.endswith("device_count.hip.o")]
    assert "/usr/include/thrust/complex.h" in complex_deps
    assert "thrust/" not in plain_deps

    libraries = list((root / "build").rglob("_complex_scale_rocm_*.so"))
    libraries = [so for so in libraries if "cmake" not in so.relative_to(root / "build").parts[0]]
    assert len(libraries) == 1, libraries
    library = libraries[0]
    found = _read_back(chroot, library, tmp_path / "objects", tmp_path)
    bundles = found["bundles"]
    assert isinstance(bundles, list)
    # One bundle: complex_scale.hip's (device_count.hip is host code only).
    assert len(bundles) == 1, bundles
    ids = sorted(i.split("--")[-1] for i in bundles[0]["ids"])
    assert ids == ["gfx90a", "gfx942"]
    kernel = "_Z20complex_scale_kernelPN3c107complexIfEEPKS1_S1_l"
    assert kernel in bundles[0]["kernels"], bundles[0]["kernels"]

    # The library loads into the chroot's (CPU) torch; device_count's host code runs (no GPU
    # here, so the HIP runtime reports none) and complex_scale is registered for the CUDA key.
    # build/<variant>/ is the package itself (the kernels layout): load it under its name.
    call = (
        "import importlib.util, sys, torch\n"
        f"spec = importlib.util.spec_from_file_location('complex_scale', "
        f"{str(library.parent / '__init__.py')!r}, "
        f"submodule_search_locations=[{str(library.parent)!r}])\n"
        "complex_scale = importlib.util.module_from_spec(spec)\n"
        "sys.modules['complex_scale'] = complex_scale\n"
        "spec.loader.exec_module(complex_scale)\n"
        "print('devices', complex_scale.device_count())\n"
        "name = complex_scale.add_op_namespace_prefix('complex_scale')\n"
        "print('cuda key', torch._C._dispatch_has_kernel_for_dispatch_key(name, 'CUDA'))\n"
    )
    out = chroot.check("python", "-c", call, cwd=tmp_path, bind=tmp_path)
    assert "devices 0" in out and "cuda key True" in out, out
