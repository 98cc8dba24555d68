"""Compiles run in Ninja pools sized from free memory (C++, CUDA kernels; HIP has its own), and
nvcc compiles a kernel's capabilities in parallel threads. Configure only: the generated
build.ninja is what Ninja runs."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import generate_torch

pytestmark = pytest.mark.compile


def configure(root: Path, backend: str, *defines: str) -> Path:
    build_dir = root / "build" / f"configure-{backend}"
    command = ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
               f"-DBUILD2CMAKE_BACKEND={backend}", "-DBUILD2CMAKE_COMPILER_LAUNCHER=none",
               *(f"-D{d}" for d in defines)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (build_dir / "configure-output.txt").write_text(result.stdout)
    return build_dir


def free_mb_at_configure(build_dir: Path) -> int:
    """The free memory configure sized the CUDA pool with, as its status line prints it."""
    output = " ".join((build_dir / "configure-output.txt").read_text().split())
    found = re.search(r"CUDA kernels compile \d+ at once.*?cores, (\d+) MB free", output)
    assert found, output[-2000:]
    return int(found[1])


def available_mb() -> int:
    """MemAvailable now, in MB (what CMake's AVAILABLE_PHYSICAL_MEMORY reads)."""
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if "MemAvailable" in x)
    return int(line.split()[1]) // 1024


def pools(build_dir: Path) -> dict[str, int]:
    rules = (build_dir / "CMakeFiles" / "rules.ninja").read_text()
    return {m[1]: int(m[2]) for m in re.finditer(r"^pool (\S+)\n  depth = (\d+)$", rules, re.M)}


def compile_edges(build_dir: Path, suffix: str) -> dict[str, dict[str, str]]:
    """Each object compiled from a `suffix` source: its build.ninja variables (FLAGS, pool)."""
    edges: dict[str, dict[str, str]] = {}
    for block in (build_dir / "build.ninja").read_text().split("\n\n"):
        head = re.match(r"build (\S+\.o): \S+_COMPILER__\S+ (\S+)", block)
        if head and head[2].endswith(suffix):
            variables = re.findall(r"^  (\w+) = (.*)$", block, re.M)
            edges[head[1]] = dict(variables)
    return edges


@pytest.fixture
def generated(project: Callable[[str], Path]) -> Path:
    root = project("scale_add")
    generate_torch(root / "build.toml")
    return root


def test_every_cpp_compile_runs_in_a_pool_sized_from_free_memory(generated: Path) -> None:
    build_dir = configure(generated, "cpu")
    edges = compile_edges(build_dir, ".cpp")
    assert len(edges) == 2, edges  # the kernel's source and the binding
    assert {e.get("pool") for e in edges.values()} == {"build2cmake_compile"}
    # One per 2 GB of the memory free at configure: at least one, at most what all memory gives.
    total_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    depth = pools(build_dir)["build2cmake_compile"]
    assert 1 <= depth <= max(1, total_mb // 2048), depth
    # The cores bound it too, and with cores to spare memory alone decides: one per 2 GB free
    # (measured around the configure; 2 GB, not 4, and the memory, not all cores).
    # (The pool is a cache variable, set at a folder's first configure: a fresh folder each.)
    shutil.rmtree(build_dir)
    build_dir = configure(generated, "cpu", "BUILD2CMAKE_CORES=2")
    assert pools(build_dir)["build2cmake_compile"] == max(1, min(2, available_mb() // 2048))
    shutil.rmtree(build_dir)
    before = available_mb()
    build_dir = configure(generated, "cpu", "BUILD2CMAKE_CORES=9999")
    low, high = sorted((before, available_mb()))
    depth = pools(build_dir)["build2cmake_compile"]
    assert max(1, int(low * 0.8) // 2048) <= depth <= max(1, int(high * 1.2) // 2048), depth
    # A value of one's own wins.
    build_dir = configure(generated, "cpu", "BUILD2CMAKE_COMPILE_JOBS=3")
    assert pools(build_dir)["build2cmake_compile"] == 3


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to configure CUDA")
def test_nvcc_compiles_a_kernels_capabilities_in_threads_within_a_cuda_pool(
    generated: Path,
) -> None:
    # scale_add's CUDA kernel: 8.0+PTX and 9.0a, three -gencode (SASS 80, PTX 80, SASS 90a).
    # One thread per -gencode, up to the cores: eight cores here (BUILD2CMAKE_CORES), so three.
    build_dir = configure(generated, "cuda", "BUILD2CMAKE_CORES=8")
    (kernel,) = [e for o, e in compile_edges(build_dir, ".cu").items() if "kernel_ops" in o]
    flags = shlex.split(kernel["FLAGS"])
    assert sum(f.startswith("-gencode=") for f in flags) == 3
    assert "--threads=3" in flags
    assert kernel["pool"] == "build2cmake_cuda"
    # Threads count against the cores: a 3-thread compile keeps 1 + 2 x 2/3 = 2.3 cores busy,
    # so 8 cores hold 3 compiles at once (memory allowing).
    by_memory = free_mb_at_configure(build_dir) // (4096 * 3)
    assert pools(build_dir)["build2cmake_cuda"] == max(1, min(3, by_memory))
    # And the C++ pool never holds more compiles than there are cores.
    assert 1 <= pools(build_dir)["build2cmake_compile"] <= 8
    # Two cores: two threads each (1.7 cores busy), one compile at a time.
    build_dir = configure(generated, "cuda", "BUILD2CMAKE_CORES=2")
    (kernel,) = [e for o, e in compile_edges(build_dir, ".cu").items() if "kernel_ops" in o]
    assert "--threads=2" in shlex.split(kernel["FLAGS"])
    assert pools(build_dir)["build2cmake_cuda"] == 1
    # At most BUILD2CMAKE_NVCC_THREADS threads; 1 turns them off.
    build_dir = configure(generated, "cuda", "BUILD2CMAKE_CORES=8", "BUILD2CMAKE_NVCC_THREADS=2")
    (kernel,) = [e for o, e in compile_edges(build_dir, ".cu").items() if "kernel_ops" in o]
    assert "--threads=2" in shlex.split(kernel["FLAGS"])
    build_dir = configure(generated, "cuda", "BUILD2CMAKE_CORES=8", "BUILD2CMAKE_NVCC_THREADS=1")
    (kernel,) = [e for o, e in compile_edges(build_dir, ".cu").items() if "kernel_ops" in o]
    assert not any(f.startswith("--threads") for f in shlex.split(kernel["FLAGS"]))
    # The pool is sized per thread the kernels use: one thread each, a compile per core
    # (memory allowing: 4 GB a thread).
    total_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    assert 1 <= pools(build_dir)["build2cmake_cuda"] <= min(8, max(1, total_mb // 4096))
    # A value of one's own wins; a value that is no count of compiles is refused.
    build_dir = configure(generated, "cuda", "BUILD2CMAKE_CUDA_JOBS=5")
    assert pools(build_dir)["build2cmake_cuda"] == 5
    command = ["cmake", "-S", str(generated), "-B", str(build_dir), "-G", "Ninja",
               "-DBUILD2CMAKE_BACKEND=cuda", "-DBUILD2CMAKE_CUDA_JOBS=5;x"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode != 0
    assert "BUILD2CMAKE_CUDA_JOBS=5;x: expected a number of compiles" in " ".join(
        result.stderr.split()
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc to configure CUDA")
def test_nvcc_threads_must_be_a_small_positive_number(generated: Path) -> None:
    command = ["cmake", "-S", str(generated), "-B", str(generated / "build" / "bad"), "-G",
               "Ninja", "-DBUILD2CMAKE_BACKEND=cuda", "-DBUILD2CMAKE_NVCC_THREADS=0"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode != 0
    assert "BUILD2CMAKE_NVCC_THREADS=0: expected a number of threads from 1" in " ".join(
        result.stderr.split()
    )


@pytest.mark.parametrize(
    ("cores", "threads", "free_mb", "jobs"),
    [
        (64, 1, 500_000, 64),  # one thread: a compile per core
        (64, 4, 500_000, 21),  # 4-thread nvcc keeps 3 cores busy: flash-attn2's four caps
        (32, 4, 500_000, 10),
        (8, 3, 500_000, 3),
        (2, 2, 500_000, 1),
        (64, 4, 100_000, 6),  # memory counts every thread: 100 GB / (4 GB x 4)
        (16, 4, 8_000, 1),  # never fewer than one
    ],
)
def test_a_pool_counts_the_cores_a_threaded_compile_keeps_busy_and_every_threads_memory(
    generated: Path, cores: int, threads: int, free_mb: int, jobs: int
) -> None:
    """The generated pool function itself, run by cmake -P with the machine's figures given."""
    module = (generated / "cmake" / "build2cmake_torch.cmake").read_text()
    function = re.search(
        r"^function\(_build2cmake_pool_size .*?^endfunction\(\)$", module, re.M | re.S
    )
    assert function, "the generated module has no _build2cmake_pool_size"
    script = generated / "build" / "pool_size.cmake"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        f"set(BUILD2CMAKE_CORE_COUNT {cores})\nset(BUILD2CMAKE_FREE_MEMORY_MB {free_mb})\n"
        f"set(BUILD2CMAKE_DISTRIBUTED FALSE)\n{function[0]}\n"
        f'_build2cmake_pool_size(jobs 4096 {threads})\nmessage("jobs=${{jobs}}")\n'
    )
    result = subprocess.run(
        ["cmake", "-P", str(script)], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert f"jobs={jobs}" in result.stderr
