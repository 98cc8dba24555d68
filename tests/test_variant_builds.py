"""build2cmake build for real: versions side by side, -D values that do not stick, and Hub
variants built in uv environments from package indexes, loaded with `kernels`."""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from build2cmake.builds.variant_env import uv_program
from tests.conftest import FIXTURES, REPO, run_cli
from tests.test_kernels_hub import copy_project, run_python

pytestmark = pytest.mark.compile


@pytest.fixture(autouse=True)
def ccache_relative_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each test copies the fixture into its own tmp folder; with paths under it rewritten as
    # relative ones, ccache serves the same compile from any of those folders.
    monkeypatch.setenv("CCACHE_BASEDIR", str(tmp_path))


def built_folder(result: subprocess.CompletedProcess[str], root: Path) -> Path:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("built "), line
    return root / line.split()[1]


def test_two_versions_differing_in_one_source_load_side_by_side(tmp_path: Path) -> None:
    old = copy_project(FIXTURES / "scale_add", tmp_path / "old")
    new = copy_project(FIXTURES / "scale_add", tmp_path / "new")
    source = new / "cpu" / "ops_cpu.cpp"
    source.write_text(source.read_text().replace("x.clamp_min(0)", "x.clamp_min(0) * 2"))
    # build.toml is the same in both: only the source differs (the usual release).
    assert (old / "build.toml").read_bytes() == (new / "build.toml").read_bytes()
    old_dir = built_folder(run_cli("build", old / "build.toml", "--backend", "cpu"), old)
    new_dir = built_folder(run_cli("build", new / "build.toml", "--backend", "cpu"), new)
    old_id = json.loads((old_dir / "metadata.json").read_text())["id"]
    new_id = json.loads((new_dir / "metadata.json").read_text())["id"]
    assert old_id != new_id and old_id.startswith("_scale_add_cpu_")

    out = run_python(
        f"""
        from pathlib import Path
        import torch
        from kernels import get_local_kernel
        old = get_local_kernel(Path({str(old)!r}))
        new = get_local_kernel(Path({str(new)!r}))
        x = torch.tensor([-1.5, 0.0, 2.0])
        print(old.ops.__name__)
        print(new.ops.__name__)
        print(old.relu(x).tolist(), new.relu(x).tolist())
        """
    )
    assert out.splitlines() == [
        f"torch.ops.{old_id}",
        f"torch.ops.{new_id}",
        "[0.0, 0.0, 2.0] [0.0, 0.0, 4.0]",
    ]


def cache_entry(build_dir: Path, name: str) -> str | None:
    for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split("=", 1)[1]
    return None


def test_a_define_given_to_one_build_does_not_stick_to_the_next(tmp_path: Path) -> None:
    root = copy_project(FIXTURES / "scale_add", tmp_path / "p")
    build_dir = root / "build" / "cmake-variant-cpu"
    linker_off = ("-D", "BUILD2CMAKE_LINKER=OFF")
    first = run_cli("build", root / "build.toml", "--backend", "cpu", *linker_off)
    built_folder(first, root)
    assert cache_entry(build_dir, "BUILD2CMAKE_LINKER") == "OFF"
    assert "linking with -fuse-ld" not in first.stdout
    # CMake's messages name the setting the way this command takes it (-DNAME=...).
    assert cache_entry(build_dir, "BUILD2CMAKE_DEFINE_HINT") == "-D"

    second = run_cli("build", root / "build.toml", "--backend", "cpu")
    built_folder(second, root)
    assert "no longer given: -D BUILD2CMAKE_LINKER=OFF" in second.stdout
    assert cache_entry(build_dir, "BUILD2CMAKE_LINKER") == ""
    if shutil.which("ld.gold") or shutil.which("ld.lld"):
        assert "build2cmake: linking with -fuse-ld=" in second.stdout

    # The same values again: no fresh configure.
    third = run_cli("build", root / "build.toml", "--backend", "cpu")
    built_folder(third, root)
    assert "--fresh" not in third.stdout


# What this machine's disk holds: torch 2.13.0+cpu (a flat folder) and torch 2.14.1+cu130 with
# its nvidia-* libraries (a local index). uv takes a package from the first index that has it
# (extra indexes before PyPI; flat folders merged in), so torch comes from disk and everything
# else (nvcc 13.0 and 13.2, torch's small dependencies) from PyPI, into uv's cache, once.
# Elsewhere everything comes from PyPI.
LOCAL_SOURCES = [
    arg
    for option, where in (
        ("--find-links", "/opt/wheels"),
        ("--extra-index-url", "/opt/pypi-more/simple"),
    )
    if Path(where).is_dir()
    for arg in (option, where if option == "--find-links" else f"file://{where}")
]


def have_uv() -> bool:
    try:
        uv_program()
    except Exception:
        return False
    return True


CHECK_CPU_VARIANT = """
import torch
from pathlib import Path
from kernels import get_local_kernel
k = get_local_kernel(Path({root!r}), backend="cpu")
torch.manual_seed(0)
a, b = torch.randn(1000), torch.randn(1000)
expected = (1.5 * a.double() + b.double()).float()
assert torch.allclose(k.scale_add(a, b, 1.5), expected, rtol=1e-6, atol=1e-6)
print(torch.__version__.split("+")[0], Path(k.__file__).parent.name)
"""


def torch_214_runtime(tmp_path: Path) -> Path:
    """A venv whose torch is 2.14.1 with its CUDA libraries (it does not import without them)
    and which sees this interpreter's packages (kernels)."""
    venv = tmp_path / "torch214"
    uv = uv_program()
    subprocess.run([uv, "venv", "-q", "--system-site-packages", "--python", sys.executable,
                    str(venv)], check=True)  # fmt: skip
    nvidia = [
        "nvidia-cublas", "nvidia-cuda-cupti", "nvidia-cuda-nvrtc", "nvidia-cudnn-cu13",
        "nvidia-cufft", "nvidia-cufile", "nvidia-curand", "nvidia-cusolver", "nvidia-cusparse",
        "nvidia-cusparselt-cu13", "nvidia-nccl-cu13", "nvidia-nvjitlink", "nvidia-nvshmem-cu13",
        "nvidia-nvtx", "nvidia-cuda-runtime==13.0.*",
    ]  # fmt: skip
    subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    "--no-deps", *LOCAL_SOURCES, "torch==2.14.1", *nvidia], check=True)  # fmt: skip
    return venv / "bin" / "python"


def needed_cudart(library: Path) -> list[str]:
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True,
                             check=True).stdout  # fmt: skip
    return re.findall(r"\[(libcudart\.so[.\d]*)\]", dynamic)


@pytest.mark.variants
@pytest.mark.cuda
@pytest.mark.skipif(not have_uv(), reason="no uv (pip install uv)")
def test_cpu_and_cuda_variants_from_package_indexes(tmp_path: Path) -> None:
    root = copy_project(FIXTURES / "scale_add", tmp_path / "scale_add")
    variants = [
        "torch2.13-cpu",  # torch 2.13.0+cpu
        "torch2.14-cpu",  # torch 2.14.1, a CUDA 13.0 build: its CMake package needs CUDA 13.0
        "torch2.13-cu132",  # a CPU torch: the variant is named after nvcc 13.2 (from PyPI)
        "torch2.14-cu130",  # torch 2.14.1's own CUDA release, nvcc 13.0 from PyPI
        "torch2.14-cu132",  # torch 2.14.1 is a CUDA 13.0 build: refused, the others go on
    ]
    command = [sys.executable, "-m", "build2cmake", "build", str(root / "build.toml"),
               "--variants", ",".join(variants), *LOCAL_SOURCES, "-j", "2"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-5000:]
    for index, variant in enumerate(variants, 1):
        assert f"[{index}/5] {variant}: building" in result.stdout
    # Known from the index before anything is downloaded: the CUDA release torch 2.14.1's wheel
    # requires (cuda-toolkit==13.0.*).
    assert re.search(
        r"torch2\.14-cu132: FAILED: torch 2\.14\.1 \(from .*\) is a CUDA 13\.0 build, which "
        r"makes torch2\.14-cu130 .*--index-url https://download.pytorch.org/whl/cu132",
        result.stdout,
    ), result.stdout
    build = root / "build"
    refused_log = (build / "cmake-torch2.14-cu132.log").read_text()
    assert "uv pip install" not in refused_log and "Configuring" not in refused_log
    summary = result.stdout[result.stdout.index("variant  ") :].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in summary[1:-1]}
    assert summary[-1] == "4 of 5 variants built"
    assert rows["torch213-cxx11-cpu-x86_64-linux"][0] == "ok"
    assert rows["torch214-cxx11-cpu-x86_64-linux"][0] == "ok"
    assert rows["torch213-cxx11-cu132-x86_64-linux"][0] == "ok"
    assert rows["torch214-cxx11-cu130-x86_64-linux"][-2:] == ["8.0+PTX,", "9.0a"]
    assert rows["torch214-cxx11-cu132-x86_64-linux"][0] == "FAILED"

    assert not (build / "torch214-cxx11-cu132-x86_64-linux").exists()
    for folder in ("torch213-cxx11-cu132", "torch214-cxx11-cu130"):
        variant_dir = build / f"{folder}-x86_64-linux"
        metadata = json.loads((variant_dir / "metadata.json").read_text())
        assert metadata["backend"] == {"type": "cuda", "archs": ["8.0+PTX", "9.0a"]}
        (library,) = variant_dir.glob("_scale_add_cuda_*.abi3.so")
        assert needed_cudart(library) == ["libcudart.so.13"]
    # Each was compiled by its own nvcc: the 13.2 build's log names nvcc 13.2.
    assert re.search(r"CUDA compiler identification is NVIDIA 13\.2",
                     (build / "cmake-torch2.13-cu132.log").read_text())  # fmt: skip
    assert re.search(r"CUDA compiler identification is NVIDIA 13\.0",
                     (build / "cmake-torch2.14-cu130.log").read_text())  # fmt: skip

    # Each CPU variant loads with kernels under the torch it was built for.
    check = CHECK_CPU_VARIANT.format(root=str(root))
    assert run_python(check).split() == ["2.13.0", "torch213-cxx11-cpu-x86_64-linux"]
    python = torch_214_runtime(tmp_path)
    loaded = subprocess.run([str(python), "-c", textwrap.dedent(check)], capture_output=True,
                            text=True, cwd="/", check=False)  # fmt: skip
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    assert loaded.stdout.split() == ["2.14.1", "torch214-cxx11-cpu-x86_64-linux"]

    # A second run reuses the environments and build folders: no uv install, no compile.
    again = subprocess.run(command, capture_output=True, text=True, check=False)
    assert again.returncode == 1
    logs = {v: (build / f"cmake-{v}.log").read_text() for v in variants[:4]}
    for variant, log in logs.items():
        assert "reusing " in log and "uv pip install" not in log, variant


@pytest.mark.variants
@pytest.mark.cuda
@pytest.mark.skipif(not have_uv(), reason="no uv (pip install uv)")
def test_a_cuda_variant_compiles_a_kernel_that_includes_torchs_cuda_context(
    tmp_path: Path,
) -> None:
    # ATen/cuda/CUDAContext.h includes cusparse.h, cublas_v2.h, cublasLt.h and cusolverDn.h:
    # the environment holds those headers of CUDA 13.0's libraries, read from their wheels
    # (#59). One capability, one small source: the environment is torch2.14-cu130's of the
    # test above, reused.
    root = copy_project(FIXTURES / "cuda_context", tmp_path / "cuda_context")
    result = run_cli("build", root / "build.toml", "--variants", "torch2.14-cu130",
                     *LOCAL_SOURCES, "-j", "2")  # fmt: skip
    log = (root / "build" / "cmake-torch2.14-cu130.log").read_text()
    assert result.returncode == 0, result.stdout[-2000:] + log[-5000:]
    variant_dir = root / "build" / f"torch214-cxx11-cu130-{platform.machine()}-linux"
    metadata = json.loads((variant_dir / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cuda", "archs": ["8.0"]}
    (library,) = variant_dir.glob("_cuda_context_cuda_*.abi3.so")
    assert needed_cudart(library) == ["libcudart.so.13"]
    # The headers are those of the libraries of torch's CUDA release, in its toolkit folder.
    env = Path(re.findall(r"^(?:reusing |\+ \S+ venv .* )(\S+)$", log, re.MULTILINE)[-1])
    record = json.loads((env / ".build2cmake-env.json").read_text())
    assert record["library_headers"] == ["cublas", "cusparse", "cusolver", "curand", "cufft"]
    for header in ("cusparse.h", "cublas_v2.h", "cublasLt.h", "cusolverDn.h", "curand_kernel.h"):
        assert (env / "cuda" / "include" / header).is_file(), header


def test_no_isolation_builds_the_variant_this_environment_makes_and_refuses_others(
    tmp_path: Path,
) -> None:
    root = copy_project(FIXTURES / "scale_add", tmp_path / "p")
    variants = ("--variants", "torch2.12-cpu,torch2.13-cpu", "--no-isolation")
    # Both at once (one compile job each): a failure of one does not stop the other.
    result = run_cli("build", root / "build.toml", *variants, "--concurrent", "2", "-j", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(
        r"torch2\.12-cpu: FAILED: the environment's torch and toolkit make "
        r"torch213-cxx11-cpu-\w+-linux, not torch212-cxx11-cpu-\w+-linux",
        result.stdout,
    ), result.stdout
    assert "torch2.13-cpu: ok" in result.stdout
    assert result.stdout.rstrip().endswith("1 of 2 variants built")
    (variant_dir,) = (root / "build").glob("torch2*-cpu-*")
    assert variant_dir.name.startswith("torch213-cxx11-cpu-")
    assert (root / "build" / "cmake-torch2.13-cpu.log").is_file()


def newest_torch(sources: list[str]) -> str:
    """The newest torch release the sources serve (PyPI by default), asked of uv as a build
    would ask it: found when the test runs, not written here."""
    result = subprocess.run(
        [uv_program(), "pip", "compile", "-", "--no-header", "--no-annotate", "--no-deps",
         "--python", sys.executable, *sources],
        input="torch\n", capture_output=True, text=True, cwd="/", check=True,
    )  # fmt: skip
    match = re.search(r"^torch==([0-9]+\.[0-9]+\.[0-9]+)$", result.stdout, re.MULTILINE)
    assert match, result.stdout
    return match[1]


CHECK_GEMM = """
import importlib
import torch
from pathlib import Path
from kernels import get_local_kernel
k = get_local_kernel(Path({root!r}), backend="cpu")
gemm_reference = importlib.import_module(k.__name__ + ".reference").gemm_reference
g = torch.Generator().manual_seed(1)
m, n, k_ = 96, 272, 512  # N a multiple of 16, not of 128: a part-full last block of b_scale
a = (torch.randn(m, k_, generator=g) * 4).to(torch.float8_e4m3fn)
b = (torch.randn(k_, n, generator=g) * 4).to(torch.float8_e4m3fn)
a_scale = torch.exp(torch.randn(k_ // 128, m, generator=g))
b_scale = torch.exp(torch.randn(k_ // 128, (n + 127) // 128, generator=g))
out = k.gemm(a, b, a_scale, b_scale)
ref = gemm_reference(a, b, a_scale, b_scale)
error = ((out.double() - ref).norm() / ref.norm()).item()
assert error < 1e-2, error  # bf16 output: ~2e-3
print(torch.__version__.split("+")[0], Path(k.__file__).parent.name, f"{{error:.1e}}")
"""


def torch_runtime(tmp_path: Path, version: str) -> Path:
    """A venv whose torch is `version` with everything it loads (a CUDA build of torch does not
    import without its CUDA libraries), seeing this interpreter's packages (kernels)."""
    venv = tmp_path / f"torch-{version}"
    uv = uv_program()
    subprocess.run([uv, "venv", "-q", "--system-site-packages", "--python", sys.executable,
                    str(venv)], check=True)  # fmt: skip
    subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    f"torch=={version}"], check=True, cwd="/")  # fmt: skip
    return venv / "bin" / "python"


@pytest.mark.variants
@pytest.mark.skipif(not have_uv(), reason="no uv (pip install uv)")
def test_gemm_cpu_variant_builds_against_the_newest_torch_the_index_serves(
    tmp_path: Path,
) -> None:
    version = newest_torch([])
    major, minor = version.split(".")[:2]
    root = copy_project(REPO / "kernels" / "gemm", tmp_path / "gemm")
    variant = f"torch{major}.{minor}-cpu"
    started = time.monotonic()
    result = run_cli("build", root / "build.toml", "--variants", variant, "-j", "2")
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    folder = f"torch{major}{minor}-cxx11-cpu-{platform.machine()}-linux"
    assert (root / "build" / folder / "metadata.json").is_file()
    log = (root / "build" / f"cmake-{variant}.log").read_text()
    # The standard came from that torch's own files, whatever it is.
    assert re.search(rf"sources compile as C\+\+[0-9]+, as torch {re.escape(version)} asks", log)
    print(f"{variant} (torch {version}) built in {seconds:.0f} s")

    python = torch_runtime(tmp_path, version)
    check = textwrap.dedent(CHECK_GEMM.format(root=str(root)))
    loaded = subprocess.run([str(python), "-c", check], capture_output=True, text=True,
                            cwd="/", check=False)  # fmt: skip
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    got_version, got_folder, _error = loaded.stdout.split()
    assert (got_version, got_folder) == (version, folder)


def test_a_local_mirror_is_mounted_into_the_toolchain_with_the_files_beside_its_pages(
    tmp_path: Path,
) -> None:
    """A file:// index's pages link to files beside them (`<root>/simple/`, `<root>/files/`):
    the build inside a toolchain gets the mirror's root, a --find-links folder itself."""
    from build2cmake.builds.variant_builds import _local_folders
    from build2cmake.builds.variant_env import PackageSources

    for folder in ("mirror/simple", "mirror/files", "links"):
        (tmp_path / folder).mkdir(parents=True)
    sources = PackageSources(
        extra_index_urls=(f"file://{tmp_path}/mirror/simple", "https://example.org/simple"),
        find_links=(str(tmp_path / "links"),),
    )
    assert _local_folders(sources) == [str(tmp_path / "mirror"), str(tmp_path / "links")]


def test_a_stable_abi_backend_builds_one_variant_named_after_its_abi(tmp_path: Path) -> None:
    """[torch.stable-abi] cpu = "2.10": the cpu variants of every torch release are one build,
    torch-stable-abi210-cpu-<machine>-linux (kernel-builder's name, the one kernels loads), made
    by the torch named; cuda, not in the table, keeps a variant per torch. Before #59's fix the
    build stopped: it expected torch213-cxx11-cpu and the environment made the ABI's name."""
    root = copy_project(FIXTURES / "stable_abi", tmp_path / "p")
    listed = run_cli("list-variants", root / "build.toml", "--folders")
    assert listed.returncode == 0, listed.stderr
    folders = listed.stdout.split()
    machine = platform.machine()
    assert folders.count(f"torch-stable-abi210-cpu-{machine}-linux") == 1, folders
    assert not [f for f in folders if "-cxx11-cpu-" in f], folders
    assert any(f.startswith("torch213-cxx11-cu130-") for f in folders), folders

    # Older than the ABI: one error naming it, nothing written.
    older = run_cli("build", root / "build.toml", "--variants", "torch2.9-cpu", "--no-isolation")
    assert older.returncode == 2
    assert "torch 2.10's stable ABI, which torch 2.9 does not have" in older.stderr
    assert not (root / "build").exists()

    result = run_cli(
        "build", root / "build.toml", "--variants", "torch2.13-cpu", "--no-isolation", "-j", "2"
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    variant = root / "build" / f"torch-stable-abi210-cpu-{machine}-linux"
    assert json.loads((variant / "metadata.json").read_text())["backend"]["type"] == "cpu"
    assert "torch2.13-cpu: ok" in result.stdout
