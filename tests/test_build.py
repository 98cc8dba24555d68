"""Generate, build with pip + scikit-build-core + CMake, import, call: the real toolchains."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import clean, generate_torch
from build2cmake.builds.doctor import find_rocm
from build2cmake.toolchains.offload import hip_bundles
from tests.conftest import (
    BuildEnv,
    cuobjdump,
    requires_nvcc,
    requires_rocm_toolchain,
    run_cli,
)

pytestmark = pytest.mark.compile


def configure(
    root: Path, build_dir: Path, backend: str, *defines: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run only CMake's configure step of a generated project for `backend`."""
    command = ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
               f"-DBUILD2CMAKE_BACKEND={backend}", *(f"-D{d}" for d in defines)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False)


def generated(project: Callable[[str], Path]) -> Path:
    root = project("scale_add")
    generate_torch(root / "build.toml")
    return root


def extension(root: Path, backend: str) -> Path:
    found = list((root / "build" / "cmake").rglob(f"_scale_add_{backend}_*.so"))
    found = [p for p in found if "install" in p.parts]
    assert len(found) == 1, found
    return found[0]


def default_linker() -> str:
    return "lld" if shutil.which("ld.lld") else "gold" if shutil.which("ld.gold") else "bfd"


def linker_of(library: Path) -> str:
    """Which linker wrote `library`: gold leaves a note, lld a .comment line."""
    notes = subprocess.run(["readelf", "-n", "-p", ".comment", str(library)],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    return "gold" if "NT_GNU_GOLD_VERSION" in notes else "lld" if "Linker: LLD" in notes else "bfd"


CHECK_CPU = """
import torch, scale_add
torch.manual_seed(0)
a, b = torch.randn(1000, dtype=torch.float32), torch.randn(1000, dtype=torch.float32)
expected = (2.5 * a.double() + b.double()).float()
got = scale_add.scale_add(a, b, 2.5)
assert torch.allclose(got, expected, rtol=1e-6, atol=1e-6), (got - expected).abs().max()
print("namespace", scale_add.ops.__name__)
print("relu", scale_add.relu(torch.tensor([-1.5, 0.0, 2.0])).tolist())
"""


def test_cpu_build_imports_computes_and_rebuilds_after_an_edit(
    project: Callable[[str], Path], build_env: BuildEnv
) -> None:
    root = project("scale_add")
    before = {p for p in root.rglob("*")}
    generate_torch(root / "build.toml", ops_id="t1")
    build_env.pip_install(root)

    result = build_env.run(CHECK_CPU)
    assert result.returncode == 0, result.stderr
    assert "namespace torch.ops._scale_add_cpu_t1" in result.stdout
    assert "relu [0.0, 0.0, 2.0]" in result.stdout
    # Linked with the fastest linker installed (gold on Debian 12's binutils; lld when on PATH).
    assert linker_of(extension(root, "cpu")) == default_linker()

    # Editing a kernel source: the next import rebuilds (scikit-build-core editable rebuild).
    source = root / "cpu" / "ops_cpu.cpp"
    source.write_text(source.read_text().replace("x.clamp_min(0)", "x.clamp_min(0) * 2"))
    so = extension(root, "cpu")
    mtime = so.stat().st_mtime_ns
    time.sleep(1)
    result = build_env.run(CHECK_CPU)
    assert result.returncode == 0, result.stderr
    assert "relu [0.0, 0.0, 4.0]" in result.stdout
    assert so.stat().st_mtime_ns > mtime

    # compile_commands.json is where editors (clangd) look: linked from the project folder.
    link = root / "compile_commands.json"
    assert link.is_symlink() and link.resolve() == root / "build/cmake/compile_commands.json"
    commands = json.loads(link.read_text())
    assert any(c["file"].endswith("cpu/ops_cpu.cpp") for c in commands)

    source.write_text(source.read_text().replace("x.clamp_min(0) * 2", "x.clamp_min(0)"))
    clean(root / "build.toml")
    assert {p for p in root.rglob("*")} == before


@requires_rocm_toolchain
def test_hipflags_from_the_environment_reach_every_hip_compile(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    """$HIPFLAGS is where a ROCm user puts HIP compiler flags, as $CXXFLAGS for C++: CMake reads
    it in enable_language(HIP), after the template has added its own flags, which once hid it
    (found building aiter-flash-attn-ck with -I flags for its torch headers)."""
    root = project("scale_add")
    generate_torch(root / "build.toml")
    build_dir = tmp_path / "configure"
    command = ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
               "-DBUILD2CMAKE_BACKEND=rocm", "-DBUILD2CMAKE_COMPILER_LAUNCHER=none"]  # fmt: skip
    env = dict(os.environ, HIPFLAGS="-DB2C_FROM_HIPFLAGS=1")
    for _ in range(2):  # the first configure, then one from the cache
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
        hip = [c for c in json.loads((build_dir / "compile_commands.json").read_text())
               if c["file"].endswith(".hip")]  # fmt: skip
        assert hip
        for entry in hip:
            assert entry["command"].count("-DB2C_FROM_HIPFLAGS=1") == 1, entry["command"]
            assert "--rocm-path=" in entry["command"]


@requires_rocm_toolchain
def test_rocm_build_has_one_code_object_per_arch_of_each_kernel(
    project: Callable[[str], Path], build_env: BuildEnv
) -> None:
    root = project("scale_add")
    generate_torch(root / "build.toml", ops_id="t2")
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=rocm")
    so = extension(root, "rocm")

    bundles = {bundle.kernels: bundle.targets for bundle in hip_bundles(so)}
    by_kernel = {next(iter(k)): sorted(t) for k, t in bundles.items() if len(k) == 1}
    assert by_kernel == {
        "_Z16scale_add_kernelPfPKfS1_fl": ["gfx90a", "gfx940"],
        "_Z11relu_kernelPfPKfl": ["gfx90a"],
    }
    assert len(bundles) == 2

    result = build_env.run(
        """
import torch, scale_add
name = scale_add.add_op_namespace_prefix("scale_add")
print("namespace", scale_add.ops.__name__)
print("cuda key", torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"))
print("cpu key", torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU"))
x = torch.randn(8)
try:
    scale_add.ops.scale_add.default.redispatch(
        torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA), torch.empty(8), x, x, 1.0)
except RuntimeError as e:
    print("call:", str(e).splitlines()[0])
"""
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "namespace torch.ops._scale_add_rocm_t2" in lines
    assert "cuda key True" in lines and "cpu key False" in lines
    assert "call: scale_add: no ROCm device is present (hipGetDeviceCount: hipErrorNoDevice)" in (
        lines
    )

    # clangd reads the linked compile_commands.json: the HIP kernel and the bindings parse cleanly.
    clangd = shutil.which("clangd-15") or shutil.which("clangd")
    if clangd is None:
        pytest.skip("no clangd (apt-get install clangd-15) to check compile_commands.json with")
    for source in ("hip/scale_add.hip", "torch-ext/torch_binding.cpp"):
        checked = subprocess.run(
            [clangd, f"--check={source}"], capture_output=True, text=True, cwd=root, check=False
        )
        log = checked.stdout + checked.stderr
        assert "Loaded compilation database from" in log and f"{root}/compile_commands.json" in log
        assert checked.returncode == 0 and "All checks completed, 0 errors" in log, log[-2000:]


def test_configure_with_an_interpreter_without_torch_says_what_to_install(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = f"Python_EXECUTABLE={bare / 'bin' / 'python'}"
    result = configure(generated(project), tmp_path / "b", "cpu", python)
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert f"{bare / 'bin' / 'python'} cannot import torch" in message, message
    assert "pip install --no-build-isolation" in message
    assert not (tmp_path / "b" / "build.ninja").exists()


DEFAULT_FLAGS = set() if default_linker() == "bfd" else {f"-fuse-ld={default_linker()}"}


@pytest.mark.parametrize(
    ("define", "ldflags", "flags", "ours"),
    [
        (None, "", DEFAULT_FLAGS, bool(DEFAULT_FLAGS)),
        ("BUILD2CMAKE_LINKER=OFF", "", set(), False),
        ("BUILD2CMAKE_LINKER=bfd", "", {"-fuse-ld=bfd"}, True),
        # The user's own choice: left as it is, nothing added.
        (None, "-fuse-ld=bfd", {"-fuse-ld=bfd"}, False),
        ("CMAKE_MODULE_LINKER_FLAGS=-fuse-ld=bfd", "", {"-fuse-ld=bfd"}, False),
    ],
)
def test_linker_choice_and_the_users_own_win(
    project: Callable[[str], Path],
    tmp_path: Path,
    define: str | None,
    ldflags: str,
    flags: set[str],
    ours: bool,
) -> None:
    env = {**os.environ, "LDFLAGS": ldflags}
    result = configure(generated(project), tmp_path / "b", "cpu", *filter(None, [define]), env=env)
    assert result.returncode == 0, result.stderr
    found = set(re.findall(r"-fuse-ld=\w+", (tmp_path / "b" / "build.ninja").read_text()))
    assert found == flags
    assert ("build2cmake: linking with" in result.stdout) == ours


def test_a_linker_that_cannot_link_is_passed_over_or_named_in_one_error(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = generated(project)
    # An ld.lld that fails, first on PATH: what a GCC installed outside /usr meets with the
    # system's gold. The default keeps the compiler's linker instead.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ld.lld").write_text("#!/bin/sh\necho broken linker >&2\nexit 1\n")
    (fake / "ld.lld").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "LDFLAGS": ""}
    result = configure(root, tmp_path / "a", "cpu", env=env)
    assert result.returncode == 0, result.stderr
    assert "-fuse-ld" not in (tmp_path / "a" / "build.ninja").read_text()
    assert "build2cmake: linking with" not in result.stdout

    # Named explicitly, it is an error that says what to do.
    result = configure(root, tmp_path / "b", "cpu", "BUILD2CMAKE_LINKER=lld", env=env)
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert "BUILD2CMAKE_LINKER=lld" in message
    assert "cannot link a program with -fuse-ld=lld" in message
    assert "leave BUILD2CMAKE_LINKER empty" in message


@requires_rocm_toolchain
def test_archs_the_hip_compiler_cannot_build_are_left_out_and_none_left_stops_configure(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    text = (root / "build.toml").read_text().replace('["gfx90a", "gfx940"]', '["gfx90a", "gfx950"]')
    (root / "build.toml").write_text(text)
    generate_torch(root / "build.toml")
    result = configure(root, tmp_path / "b", "rocm")
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "kernel_scale_add_rocm: skipping 'gfx950' of its rocm-archs" in said
    assert "clang++-15 (Clang 15.0.6)" in said
    assert "kernel_scale_add_rocm compiles HIP for gfx90a" in said
    # A kernel left with no arch at all is an error naming its list and what is supported.
    (root / "build.toml").write_text(text.replace('["gfx90a", "gfx950"]', '["gfx950"]'))
    generate_torch(root / "build.toml")
    result = configure(root, tmp_path / "c", "rocm")
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert "kernel_scale_add_rocm: none of its rocm-archs (gfx950) can be compiled" in message
    assert "which supports: gfx" in message and "gfx90a" in message
    assert "-C cmake.define.BUILD2CMAKE_ROCM_ARCHS=<archs>" in message


@requires_rocm_toolchain
@pytest.mark.rocm
def test_without_rocthrust_configure_and_doctor_name_the_missing_header_and_its_package(
    project: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rocm, _ = find_rocm()
    if rocm is None or rocm.thrust:
        pytest.skip("rocThrust is installed here (or no ROCm): nothing to warn about")
    root = project("rocm_torch_headers")
    generate_torch(root / "build.toml")
    result = configure(root, tmp_path / "b", "rocm")
    assert result.returncode == 0, result.stderr  # a warning, not a refusal
    said = " ".join((result.stdout + result.stderr).split())  # CMake wraps its messages
    # Once, for the kernel whose HIP sources see torch's headers (it depends on torch); not for
    # device_count_rocm, which does not.
    assert said.count("(rocThrust) is not installed") == 1, said[-3000:]
    assert "kernel_complex_scale_rocm compiles HIP sources with torch's headers" in said
    assert f"{rocm.root}/include/thrust/complex.h (rocThrust) is not installed" in said
    assert "'thrust/complex.h' file not found" in said
    assert "apt-get install librocthrust-dev" in said

    # What it predicts: the kernel including torch's complex.h stops there. The other compiles:
    # its int64_t comes from the HIP runtime wrapper, which Debian 12's clang-15 pre-includes only
    # when told the HIP version.
    def build(target: str) -> subprocess.CompletedProcess[str]:
        command = ["cmake", "--build", str(tmp_path / "b"), "--target", target]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    plain = build("kernel_device_count_rocm")
    assert plain.returncode == 0, plain.stdout[-3000:]
    assert f"--hip-version={rocm.version}" in (tmp_path / "b" / "build.ninja").read_text()
    with_torch = build("kernel_complex_scale_rocm")
    assert with_torch.returncode != 0
    assert "fatal error: 'thrust/complex.h' file not found" in with_torch.stdout

    # The host's ROCm, as configured above (a toolchain of build2cmake's may have rocThrust).
    monkeypatch.setenv("BUILD2CMAKE_TOOLCHAIN", "host")
    doctor = run_cli("doctor", root / "build.toml")
    warnings = [line for line in doctor.stdout.splitlines() if "WARNING complex_scale" in line]
    assert len(warnings) == 1, doctor.stdout
    assert warnings[0].startswith("  WARNING complex_scale_rocm: HIP sources compiled with torch")
    assert "(rocThrust) is not installed" in warnings[0]
    assert "fix: install rocThrust: apt-get install librocthrust-dev" in doctor.stdout


@requires_nvcc
def test_cuda_build_has_sass_for_exactly_the_kernels_capabilities(
    project: Callable[[str], Path], build_env: BuildEnv
) -> None:
    tool = cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    root = project("scale_add")
    generate_torch(root / "build.toml", ops_id="t3")
    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=cuda")
    so = extension(root, "cuda")
    listing = subprocess.run(
        [tool, "--list-elf", "--list-ptx", str(so)], capture_output=True, text=True, check=True
    ).stdout
    elves = sorted(line.rsplit(".", 2)[-2] for line in listing.splitlines() if "ELF file" in line)
    ptx = sorted(line.rsplit(".", 2)[-2] for line in listing.splitlines() if "PTX file" in line)
    assert elves == ["sm_80", "sm_90a"]
    assert ptx == ["sm_80"]

    result = build_env.run(
        """
import torch, scale_add
name = scale_add.add_op_namespace_prefix("relu")
print("namespace", scale_add.ops.__name__, scale_add.backend)
print("cuda key", torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"))
if not torch.cuda.is_available():
    x = torch.randn(8)
    try:
        scale_add.ops.relu.default.redispatch(
            torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA), torch.empty(8), x)
    except RuntimeError as e:
        print("call:", str(e).splitlines()[0])
else:
    x = torch.randn(1000, device="cuda")
    assert torch.equal(scale_add.relu(x), torch.relu(x))
    print("call: ran on", torch.cuda.get_device_name())
"""
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "namespace torch.ops._scale_add_cuda_t3 cuda" in lines
    assert "cuda key True" in lines
    call = next(line for line in lines if line.startswith("call:"))
    assert call.startswith(("call: relu: no CUDA device is present", "call: ran on"))


@requires_nvcc
def test_capabilities_nvcc_cannot_build_are_left_out_and_none_left_stops_configure(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    text = (root / "build.toml").read_text().replace('["8.0+PTX", "9.0a"]', '["3.5", "9.0a"]')
    (root / "build.toml").write_text(text)
    generate_torch(root / "build.toml")
    result = configure(root, tmp_path / "b", "cuda")
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "kernel_ops_cuda: skipping '3.5' of its cuda-capabilities" in said
    assert "kernel_ops_cuda compiles CUDA for 9.0a" in said
    (root / "build.toml").write_text(text.replace('["3.5", "9.0a"]', '["3.5"]'))
    generate_torch(root / "build.toml")
    result = configure(root, tmp_path / "c", "cuda")
    assert result.returncode != 0
    message = " ".join(result.stderr.split())
    assert "kernel_ops_cuda: none of its cuda-capabilities (3.5) can be compiled" in message
    assert "sm_90" in message
