"""ROCm discovery (cmake_templates/rocm/build2cmake_find_rocm.cmake) on each layout it knows,
laid out in a temporary folder and pointed to with $ROCM_PATH; doctor reads the same module."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from build2cmake.builds import doctor
from build2cmake.generate.render import backend_choice_module, rocm_discovery_module
from build2cmake.toolchains.programs import cmake_program
from tests.conftest import FIXTURES, requires_rocm_toolchain


def _touch(path: Path, text: str = "", executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _hip_headers(root: Path, major: int, minor: int) -> None:
    _touch(root / "include/hip/hip_runtime.h")
    _touch(
        root / "include/hip/hip_version.h",
        f"#define HIP_VERSION_MAJOR {major}\n#define HIP_VERSION_MINOR {minor}\n"
        "#define HIP_VERSION_PATCH 1234\n",
    )


def _rocm_release(root: Path) -> Path:  # AMD's ROCm 6.x tree
    _hip_headers(root, 6, 3)
    return _touch(root / "lib/llvm/bin/clang++", executable=True)


def _rocm5_release(root: Path) -> Path:  # AMD's ROCm 5.x tree
    _hip_headers(root, 5, 7)
    return _touch(root / "llvm/bin/clang++", executable=True)


def _debian12(root: Path) -> Path:
    _hip_headers(root, 5, 2)
    _touch(root / "lib/x86_64-linux-gnu/cmake/hip/hip-config.cmake")
    (root / "lib/x86_64-linux-gnu/amdgcn/bitcode").mkdir(parents=True)
    _touch(root / "bin/hipcc.pl", 'my $HIPCC = "clang++-15";\n')
    return _touch(root / "bin/clang++-15", executable=True)


def _debian_trixie(root: Path) -> Path:  # also Ubuntu 24.04; sid is the same with 21 and 6.4
    _hip_headers(root, 5, 7)
    _touch(root / "lib/x86_64-linux-gnu/cmake/hip/hip-config.cmake")
    for major in (15, 17):  # an older LLVM without device libraries is not chosen
        _touch(root / f"lib/llvm-{major}/bin/clang++", executable=True)
    (root / "lib/llvm-17/lib/clang/17/amdgcn/bitcode").mkdir(parents=True)
    return root / "lib/llvm-17/bin/clang++"


def _debian_sid(root: Path) -> Path:
    _hip_headers(root, 6, 4)
    _touch(root / "lib/x86_64-linux-gnu/cmake/hip/hip-config.cmake")
    (root / "lib/llvm-21/lib/clang/21/amdgcn/bitcode").mkdir(parents=True)
    return _touch(root / "lib/llvm-21/bin/clang++", executable=True)


def _run_discovery(root: Path | None, defines: tuple[str, ...], cpath: str) -> str:
    """The module's output, run with ROCM_PATH=root (none when None) and CPATH=cpath."""
    env = {**os.environ, "CPATH": cpath}
    for name in ("HIP_PATH", "ROCM_PATH", "CPLUS_INCLUDE_PATH"):
        env.pop(name, None)
    if root is not None:
        env["ROCM_PATH"] = str(root)
    result = subprocess.run(
        [cmake_program(), *(f"-D{d}" for d in defines), "-P", str(rocm_discovery_module())],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr


def _discover(root: Path | None, *defines: str, cpath: str = "") -> dict[str, str]:
    """The module's NAME=VALUE lines (the last of each name)."""
    lines = _run_discovery(root, defines, cpath).splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _libraries(root: Path | None, *defines: str, cpath: str = "") -> dict[str, list[str]]:
    """library= lines: name -> [key header, where found ("" when missing), install command]."""
    found = {}
    for line in _run_discovery(root, defines, cpath).splitlines():
        if line.startswith("library="):
            name, *rest = line.removeprefix("library=").split("|")
            found[name] = rest
    return found


@pytest.mark.parametrize(
    ("make", "layout", "bitcode", "version", "offload"),
    [
        (_rocm_release, "ROCm release tree", "", "6.3.1234", "--offload-compress"),
        (_rocm5_release, "ROCm release tree", "", "5.7.1234", ""),
        (_debian12, "lib/<multiarch>/amdgcn", "lib/x86_64-linux-gnu/amdgcn/bitcode", "5.2.1234",
         ""),
        (_debian_trixie, "lib/llvm-17", "lib/llvm-17/lib/clang/17/amdgcn/bitcode", "5.7.1234", ""),
        (_debian_sid, "lib/llvm-21", "lib/llvm-21/lib/clang/21/amdgcn/bitcode", "6.4.1234",
         "--offload-compress"),
    ],
)  # fmt: skip
def test_each_rocm_layout_is_found_with_its_matching_compiler_and_bitcode(
    tmp_path: Path, make: object, layout: str, bitcode: str, version: str, offload: str
) -> None:
    root = tmp_path / "rocm"
    compiler = make(root)  # type: ignore[operator]
    found = _discover(root)
    assert found["root"] == str(root)
    assert found["compiler"] == str(compiler)
    assert layout in found["layout_detail"]
    assert found["bitcode"] == (str(root / bitcode) if bitcode else "")
    assert found["version"] == version
    # --offload-compress only where the compiler has it (ROCm >= 6.2).
    assert found["offload_flags"] == offload


def test_headers_without_a_compiler_or_device_libraries_are_not_a_rocm(tmp_path: Path) -> None:
    root = tmp_path / "rocm"
    _hip_headers(root, 6, 4)
    _touch(root / "lib/llvm-21/bin/clang++", executable=True)  # no amdgcn bitcode next to it
    found = _discover(root)
    assert found.get("root") != str(root)
    assert found["searched"].startswith(f"{root}, ")


def test_doctor_reports_the_layout_the_build_would_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "rocm"
    compiler = _debian_sid(root)
    monkeypatch.setenv("ROCM_PATH", str(root))
    monkeypatch.delenv("HIP_PATH", raising=False)
    rocm, searched = doctor.find_rocm()
    assert rocm is not None and searched.startswith(str(root))
    assert (rocm.compiler, rocm.version, rocm.offload_flags) == (
        str(compiler),
        "6.4.1234",
        "--offload-compress",
    )
    assert rocm.layout == "distribution"
    assert rocm.layout_detail == "distribution packages, bitcode in lib/llvm-21"


def test_amd_release_trees_side_by_side_are_found_newest_first_with_their_version(
    tmp_path: Path,
) -> None:
    releases = tmp_path / "opt"
    _rocm_release(releases / "rocm-6.2.4")
    newest = _rocm_release(releases / "rocm-6.10.0")  # 6.10 > 6.2: compared as versions
    (releases / "rocm-6.10.0/include/hip/hip_version.h").unlink()  # the version from the name
    (releases / "rocm-7.0.0-rc1").mkdir()  # not a release name: never a root
    found = _discover(None, f"BUILD2CMAKE_ROCM_RELEASES_DIR={releases}")
    assert found["searched"].startswith(
        f"/opt/rocm, {releases}/rocm-6.10.0, {releases}/rocm-6.2.4, "
    )
    assert (found["root"], found["compiler"]) == (str(releases / "rocm-6.10.0"), str(newest))
    assert found["version"] == "6.10.0"
    assert found["layout_detail"] == "ROCm release tree"


def test_a_rocm_path_given_to_cmake_is_used_or_refused_never_passed_over(tmp_path: Path) -> None:
    releases = tmp_path / "opt"
    _rocm_release(releases / "rocm-6.3.1")
    chosen = releases / "rocm-6.2.4"
    compiler = _rocm_release(chosen)
    found = _discover(
        None, f"BUILD2CMAKE_ROCM_RELEASES_DIR={releases}", f"BUILD2CMAKE_ROCM_PATH={chosen}"
    )
    assert (found["root"], found["compiler"], found["searched"]) == (
        str(chosen),
        str(compiler),
        str(chosen),
    )
    empty = tmp_path / "not-rocm"
    empty.mkdir()
    found = _discover(
        None, f"BUILD2CMAKE_ROCM_RELEASES_DIR={releases}", f"BUILD2CMAKE_ROCM_PATH={empty}"
    )
    assert "root" not in found and found["searched"] == str(empty)


def test_rocm_libraries_are_found_in_the_root_and_on_cpath_else_named_with_their_install_command(
    tmp_path: Path,
) -> None:
    release = tmp_path / "opt" / "rocm-6.3.1"
    _rocm_release(release)
    _touch(release / "include/rocwmma/rocwmma.hpp")
    cpath = tmp_path / "headers"
    _touch(cpath / "hipblaslt/hipblaslt.h")
    found = _libraries(release, cpath=f"{tmp_path / 'absent'}:{cpath}")
    assert sorted(found) == [
        "hipBLASLt", "hipCUB", "hipSPARSELt", "rocPRIM", "rocSHMEM", "rocThrust", "rocWMMA"
    ]  # fmt: skip
    assert found["rocWMMA"][:2] == [
        "rocwmma/rocwmma.hpp",
        str(release / "include/rocwmma/rocwmma.hpp"),
    ]
    assert found["hipBLASLt"][:2] == ["hipblaslt/hipblaslt.h", str(cpath / "hipblaslt/hipblaslt.h")]
    # A release tree's missing library: AMD's package of that release.
    assert found["rocSHMEM"][1] == ""
    assert found["rocSHMEM"][2].startswith(
        "install rocSHMEM: apt-get install rocshmem-dev from AMD's ROCm repository "
        f"(rocshmem-dev6.3.1 for {release})"
    )
    # Distribution packages: Debian's package where Debian has one, else what to do instead.
    sid = tmp_path / "usr"
    _debian_sid(sid)
    found = _libraries(sid)
    assert all(fields[1] == "" for fields in found.values())
    assert found["rocWMMA"][2].startswith(
        "install rocWMMA: apt-get install librocwmma-dev (Debian experimental only)"
    )
    assert found["rocThrust"][2].startswith(
        "install rocThrust: apt-get install librocthrust-dev (Debian 13 and later; Debian 12 "
        "has none)"
    )
    assert found["rocSHMEM"][2].startswith("install rocSHMEM: no Debian package has it: ")
    # A package that ships the key header without what it includes beside it (as Debian
    # experimental's librocwmma-dev 7.2.4 lacks rocwmma/internal/): found, but incomplete.
    _touch(sid / "include/rocwmma/rocwmma.hpp", '#include "internal/types.hpp"\n')
    assert _libraries(sid)["rocWMMA"][3] == "internal/types.hpp"
    _touch(sid / "include/rocwmma/internal/types.hpp")
    assert _libraries(sid)["rocWMMA"][1:4:2] == [str(sid / "include/rocwmma/rocwmma.hpp"), ""]
    assert "AMD's rocshmem-dev; set ROCM_PATH" in found["rocSHMEM"][2]


def _choose_backend(declared: str, *defines: str, cuda_home: Path | None = None) -> dict[str, str]:
    """Run the backend choice (build2cmake_backend.cmake) as `build2cmake build` does."""
    env = dict(os.environ)
    for name in ("HIP_PATH", "ROCM_PATH", "CUDA_HOME", "CUDA_PATH"):
        env.pop(name, None)
    if cuda_home is not None:
        env["CUDA_HOME"] = str(cuda_home)
    command = [
        cmake_program(),
        f"-DBUILD2CMAKE_DECLARED_BACKENDS={declared}",
        "-DBUILD2CMAKE_TORCH_BACKEND=cpu",
        "-DBUILD2CMAKE_TORCH_VERSION=2.14.1",
        f"-DBUILD2CMAKE_FIND_ROCM_MODULE={rocm_discovery_module()}",
        *(f"-D{d}" for d in defines),
        "-P",
        str(backend_choice_module()),
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stderr.splitlines() if "=" in line)


def test_a_cpu_torch_builds_the_one_declared_gpu_backend_with_a_compiler_here(
    tmp_path: Path,
) -> None:
    rocm = tmp_path / "rocm"
    _debian_sid(rocm)
    nvcc = _touch(tmp_path / "cuda/bin/nvcc", executable=True).parent.parent
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    # ROCm only: rocm, with one line saying which torch the extension then needs.
    chosen = _choose_backend("rocm", f"BUILD2CMAKE_ROCM_PATH={rocm}")
    assert chosen["backend"] == "rocm"
    assert chosen["note"] == (
        f"build2cmake: building rocm, the one GPU backend of build.toml with a compiler here "
        f"(rocm: ROCm 6.4.1234 at {rocm}), since the installed torch 2.14.1 is a cpu build: the "
        "extension loads only under a ROCm build of torch"
    )
    # rocm and cuda declared, only nvcc here: cuda.
    chosen = _choose_backend("rocm;cuda", f"BUILD2CMAKE_ROCM_PATH={nothing}", cuda_home=nvcc)
    assert chosen["backend"] == "cuda"
    assert chosen["note"].endswith("loads only under a CUDA build of torch")
    # Both compilers here: no guess; the error lists what was found.
    chosen = _choose_backend("rocm;cuda", f"BUILD2CMAKE_ROCM_PATH={rocm}", cuda_home=nvcc)
    assert "backend" not in chosen
    assert chosen["found"] == f"rocm: ROCm 6.4.1234 at {rocm}; cuda: nvcc at {nvcc}/bin/nvcc"
    # None: the error says where it looked.
    chosen = _choose_backend("rocm", f"BUILD2CMAKE_ROCM_PATH={nothing}")
    assert chosen == {"found": f"rocm: no HIP compiler (searched {nothing})"}


def _build(root: Path, *args: str, cpath: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CPATH": cpath}
    for name in ("HIP_PATH", "ROCM_PATH", "CPLUS_INCLUDE_PATH"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "build2cmake", *args],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
        check=False,
    )


@requires_rocm_toolchain
@pytest.mark.rocm
@pytest.mark.compile
def test_a_missing_rocm_library_is_named_by_doctor_configure_and_the_failed_compile(
    tmp_path: Path,
) -> None:
    # Debian 12's ROCm 5.2 has neither rocWMMA nor hipBLASLt: the fixture includes both.
    rocm, _ = doctor.find_rocm()
    assert rocm is not None
    wmma, blaslt = rocm.library("rocWMMA"), rocm.library("hipBLASLt")
    if wmma is None or blaslt is None or wmma.path or blaslt.path:
        pytest.skip("rocWMMA or hipBLASLt is installed here: nothing is missing")
    root = tmp_path / "rocm_libs"
    shutil.copytree(FIXTURES / "rocm_libs", root)
    assert _build(root, "generate-torch", "build.toml").returncode == 0

    report = _build(root, "doctor", "build.toml").stdout
    assert re.search(r"rocWMMA +missing <rocwmma/rocwmma.hpp>: install rocWMMA: ", report), report
    assert "hipBLASLt    missing <hipblaslt/hipblaslt.h>: install hipBLASLt: " in report

    failed = _build(root, "build", "build.toml", "--backend", "rocm")
    assert failed.returncode == 2
    said = " ".join((failed.stdout + failed.stderr).split())  # CMake wraps its warnings
    # Configure: one warning per library, naming the project header that includes it.
    for header, name in (
        ("rocwmma/rocwmma.hpp", "rocWMMA"),
        ("hipblaslt/hipblaslt.h", "hipBLASLt"),
    ):
        assert said.count(f"({name}) is not installed") == 1, said[-4000:]
        assert (
            f"kernel_wmma_info: wmma_info/gpu_libs.h includes <{header}>, but "
            f"{rocm.root}/include/{header} ({name}) is not installed (nor on CPATH)"
        ) in said
    # The compile stops at the first missing header; one line names its library and the fix.
    assert "fatal error: 'rocwmma/rocwmma.hpp' file not found" in failed.stdout
    hint = [line for line in failed.stdout.splitlines() if line.startswith("build2cmake: '")]
    assert hint == [
        f"build2cmake: 'rocwmma/rocwmma.hpp' is a header of rocWMMA, which is not installed "
        f"(looked in {rocm.root}/include): {wmma.install}"
    ]

    # The headers at a release-tree-like path, given on CPATH; first a rocWMMA that lacks the
    # header its rocwmma.hpp includes beside itself: doctor, configure and the compile say so.
    headers = tmp_path / "opt" / "rocm-6.4.0" / "include"
    _touch(headers / "rocwmma/rocwmma.hpp", '#include "internal/types.hpp"\n')
    _touch(
        headers / "hipblaslt/hipblaslt.h", "typedef struct hipblasLtHandle_st* hipblasLtHandle_t;\n"
    )
    incomplete = (
        f"rocWMMA at {headers}/rocwmma/rocwmma.hpp is incomplete: it includes "
        '"internal/types.hpp", which is not installed beside it'
    )
    assert incomplete in _build(root, "doctor", "build.toml", cpath=str(headers)).stdout
    failed = _build(root, "build", "build.toml", cpath=str(headers))
    assert failed.returncode == 2
    said = " ".join((failed.stdout + failed.stderr).split())
    assert f"wmma_info/gpu_libs.h includes <rocwmma/rocwmma.hpp>, but {incomplete}" in said
    assert f"build2cmake: {incomplete}" in failed.stdout
    assert "is not installed (nor on CPATH)" not in said  # hipBLASLt is there now

    # Complete: found, compiled against, and no --backend: the CPU torch is a build for none of
    # build.toml's backends, and rocm is the one with a compiler here.
    _touch(
        headers / "rocwmma/internal/types.hpp", "namespace rocwmma { using float32_t = float; }\n"
    )
    report = _build(root, "doctor", "build.toml", cpath=str(headers)).stdout
    assert f"found: {headers}/rocwmma/rocwmma.hpp" in report
    assert f"found: {headers}/hipblaslt/hipblaslt.h" in report
    built = _build(root, "build", "build.toml", cpath=str(headers))
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-2000:]
    assert "is not installed" not in built.stdout
    assert "build2cmake: building rocm, the one GPU backend of build.toml with a compiler here" in (
        built.stdout
    )
    assert "the extension loads only under a ROCm build of torch" in built.stdout
    [library] = list((root / "build").glob("torch*-rocm*/_rocm_libs_rocm_*.so"))
    call = (
        "import importlib.util, sys\n"
        "path = sys.argv[1]\n"
        "spec = importlib.util.spec_from_file_location('rocm_libs', path + '/__init__.py', "
        "submodule_search_locations=[path])\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['rocm_libs'] = module\n"
        "spec.loader.exec_module(module)\n"
        "print(module.library_sizes())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", call, str(library.parent)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    # sizeof(rocwmma::float32_t) * 100 + sizeof(hipblasLtHandle_t), from the headers written here.
    assert result.stdout.strip() == "408", result.stdout + result.stderr


@pytest.mark.compile  # a configure only, but it runs CMake on a generated project
def test_configure_without_a_backend_or_a_compiler_for_it_says_which_compilers_were_found(
    tmp_path: Path,
) -> None:
    root = tmp_path / "rocm_libs"
    shutil.copytree(FIXTURES / "rocm_libs", root)
    assert _build(root, "generate-torch", "build.toml").returncode == 0
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    command = [cmake_program(), "-S", str(root), "-B", str(tmp_path / "b"), "-G", "Ninja",
               f"-DPython_EXECUTABLE={sys.executable}",
               f"-DBUILD2CMAKE_ROCM_PATH={nothing}"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode != 0
    said = " ".join(result.stderr.split())
    assert re.search(r"backend 'cpu' \(from the installed torch [0-9.]+\) is not one of", said)
    assert f"Compilers found for its GPU backends: rocm: no HIP compiler (searched {nothing})." in (
        said
    )
