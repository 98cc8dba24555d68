"""build2cmake build, checked with the real Hugging Face `kernels` loader and kernel-abi-check.

Each test builds for real (CMake + Ninja + g++/clang), then loads the result the way kernels'
users do: kernels.get_local_kernel on the project folder (which picks build/<variant>/ by its own
rules) in a fresh interpreter.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from build2cmake.toolchains.offload import rocm_targets
from tests.conftest import FIXTURES, REPO, requires_rocm_toolchain, run_cli

pytestmark = pytest.mark.compile


def copy_project(source: Path, destination: Path) -> Path:
    # Only what the user wrote: not what an earlier generate or build left in the source tree.
    ignore = shutil.ignore_patterns(
        "build",
        "__pycache__",
        ".build2cmake-manifest.json",
        "CMakeLists.txt",
        "cmake",
        "pyproject.toml",
        "_ops.py",
        "registration.h",
        "compile_commands.json",
    )
    shutil.copytree(source, destination, ignore=ignore, symlinks=True)
    return destination


def build(root: Path, *args: str) -> dict[str, object]:
    result = run_cli("build", root / "build.toml", *args)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("built "), line
    variant_dir = root / line.split()[1]
    metadata: dict[str, object] = json.loads((variant_dir / "metadata.json").read_text())
    metadata["_variant_dir"] = str(variant_dir)
    return metadata


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def pip_wheel(root: Path, wheel_dir: Path) -> list[Path]:
    """`pip wheel --no-build-isolation` of a project; the wheels it wrote."""
    command = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q"]
    result = subprocess.run(
        [*command, "-w", str(wheel_dir), str(root)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return sorted(wheel_dir.iterdir())


def kernels_variant_for(build_dir: Path) -> str:
    """The variant folder `kernels` itself picks for this machine among those in build_dir."""
    return run_python(
        f"""
        from pathlib import Path
        from kernels.variants import get_variants_local, resolve_variant
        variant, trace = resolve_variant(get_variants_local(Path({str(build_dir)!r})))
        print(variant.variant_str)
        """
    ).strip()


def test_cpu_build_loads_with_kernels_side_by_side_with_another_ops_id(tmp_path: Path) -> None:
    first = copy_project(FIXTURES / "scale_add", tmp_path / "first")
    second = copy_project(FIXTURES / "scale_add", tmp_path / "second")
    # A compile_commands.json the user keeps in the project is theirs: never replaced.
    (first / "compile_commands.json").write_text("[]\n")
    meta_first = build(first, "--backend", "cpu", "--ops-id", "one")
    meta_second = build(second, "--backend", "cpu", "--ops-id", "two")

    variant_dir = Path(str(meta_first["_variant_dir"]))
    assert (first / "compile_commands.json").read_text() == "[]\n"
    assert (second / "compile_commands.json").resolve().parent == second / "build/cmake-variant-cpu"
    assert variant_dir.name == kernels_variant_for(first / "build")
    assert variant_dir.name.startswith("torch213-cxx11-cpu-")
    assert meta_first["id"] == "_scale_add_cpu_one" and meta_second["id"] == "_scale_add_cpu_two"
    assert meta_first["backend"] == {"type": "cpu"}
    assert meta_first["name"] == "scale-add" and meta_first["version"] == 1
    assert sorted(p.name for p in variant_dir.iterdir()) == [
        "__init__.py",
        "_ops.py",
        "_scale_add_cpu_one.abi3.so",
        "metadata.json",
    ]

    out = run_python(
        f"""
        from pathlib import Path
        import torch
        from kernels import get_local_kernel
        one = get_local_kernel(Path({str(first)!r}))
        two = get_local_kernel(Path({str(second)!r}))
        a, b = torch.arange(5.0), torch.full((5,), 10.0)
        print(one.__name__, two.__name__, one.ops is not two.ops)
        print(one.scale_add(a, b, 2.0).tolist(), two.scale_add(a, b, -1.0).tolist())
        print(one.add_op_namespace_prefix("x"), two.add_op_namespace_prefix("x"))
        """
    )
    assert out.splitlines() == [
        "_scale_add_cpu_one _scale_add_cpu_two True",
        "[10.0, 12.0, 14.0, 16.0, 18.0] [10.0, 9.0, 8.0, 7.0, 6.0]",
        "_scale_add_cpu_one::x _scale_add_cpu_two::x",
    ]

    # A rebuild replaces the folder build made; a variant folder it did not make is kept.
    foreign = first / "build" / "torch213-cxx11-cu999-x86_64-linux"
    foreign.mkdir()
    (foreign / "metadata.json").write_text("{}")
    assert build(first, "--backend", "cpu", "--ops-id", "one")["id"] == "_scale_add_cpu_one"
    cleaned = run_cli("clean", first / "build.toml")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not variant_dir.exists() and foreign.is_dir()
    assert (first / "compile_commands.json").read_text() == "[]\n"
    assert sorted(p.name for p in (first / "build").iterdir()) == [foreign.name]


def test_gemm_cpu_build_loads_with_kernels_and_matches_the_reference(tmp_path: Path) -> None:
    root = copy_project(REPO / "kernels" / "gemm", tmp_path / "gemm")
    metadata = build(root, "--backend", "cpu")
    assert metadata["backend"] == {"type": "cpu"}
    out = run_python(
        f"""
        from pathlib import Path
        import importlib, torch
        from kernels import get_local_kernel
        gemm = get_local_kernel(Path({str(root)!r}))
        g = torch.Generator().manual_seed(0)
        a = torch.randn(70, 256, generator=g).to(torch.float8_e4m3fn)
        b = torch.randn(256, 384, generator=g).to(torch.float8_e4m3fn)
        sa, sb = torch.rand(2, 70, generator=g) + 0.5, torch.rand(2, 3, generator=g) + 0.5
        reference = importlib.import_module(gemm.__name__ + ".reference")
        ref = reference.gemm_reference(a, b, sa, sb)
        out = gemm.gemm(a, b, sa, sb)
        print(gemm.backend, ((out.double() - ref).norm() / ref.norm()).item())
        """
    )
    backend, error = out.split()
    assert backend == "cpu" and float(error) < 1e-2


@requires_rocm_toolchain
def test_rocm_build_records_the_archs_it_holds_and_loads_with_kernels(tmp_path: Path) -> None:
    root = copy_project(FIXTURES / "scale_add", tmp_path / "scale_add")
    metadata = build(root, "--backend", "rocm")
    variant_dir = Path(str(metadata["_variant_dir"]))
    assert variant_dir.name.startswith("torch213-cxx11-rocm")
    library = next(variant_dir.glob("*.so"))
    # The archs written down are the ones the library's code objects were compiled for.
    assert metadata["backend"] == {"type": "rocm", "archs": ["gfx90a", "gfx940"]}
    assert rocm_targets(library) == ["gfx90a", "gfx940"]
    # With a CPU torch, kernels only picks cpu variants on its own; given the variant folder
    # itself it loads it (no ROCm device here, so the op is registered but cannot run).
    out = run_python(
        f"""
        from pathlib import Path
        import torch
        from kernels import get_local_kernel
        k = get_local_kernel(Path({str(variant_dir)!r}))
        name = k.add_op_namespace_prefix("scale_add")
        print(k.__name__, k.backend,
              torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA"))
        """
    )
    assert out.split() == [str(metadata["id"]), "rocm", "True"]


def test_universal_kernel_wheel_is_pure_and_kernels_loads_it(tmp_path: Path) -> None:
    root = tmp_path / "triton_like"
    (root / "torch-ext" / "triton_like").mkdir(parents=True)
    (root / "build.toml").write_text(
        '[general]\nname = "triton_like"\nuniversal = true\nversion = 2\n'
        'license = "Apache-2.0"\npython-depends = ["einops"]\n'
    )
    (root / "torch-ext" / "triton_like" / "__init__.py").write_text(
        textwrap.dedent(
            """
            import torch

            from ._ops import add_op_namespace_prefix, ops


            @torch.library.custom_op(add_op_namespace_prefix("double"), mutates_args=())
            def double(x: torch.Tensor) -> torch.Tensor:
                return x * 2
            """
        )
    )
    generated = run_cli("generate-torch", root / "build.toml")
    assert generated.returncode == 0, generated.stderr
    assert not (root / "CMakeLists.txt").exists()

    wheel_dir = tmp_path / "wheels"
    (wheel,) = pip_wheel(root, wheel_dir)
    assert wheel.name == "triton_like-2-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n for n in names if not n.startswith("triton_like-2.dist-info/")) == [
        "triton_like/__init__.py",
        "triton_like/_ops.py",
    ]

    metadata = build(root)
    assert Path(str(metadata["_variant_dir"])).name == "torch-universal"
    assert metadata["python-depends"] == ["einops"] and metadata["license"] == "Apache-2.0"
    assert kernels_variant_for(root / "build") == "torch-universal"
    load = f"""
        import sys
        from pathlib import Path
        import torch
        from kernels import get_local_kernel
        sys.modules["einops"] = None  # absent, whether or not this machine has it
        try:
            k = get_local_kernel(Path({str(root)!r}))
        except ImportError as error:
            print("refused:", error)
        else:
            print(k.double(torch.arange(3.0)).tolist(), k.ops.double(torch.ones(2)).tolist())
        """
    # kernels reads python-depends from our metadata.json (einops hidden: find_spec finds none) ...
    assert "requires Python dependency `einops`" in run_python(load)
    # ... and loads the package once the kernel no longer asks for it.
    toml = (root / "build.toml").read_text().replace('python-depends = ["einops"]\n', "")
    (root / "build.toml").write_text(toml)
    assert build(root)["python-depends"] == []
    assert run_python(load).strip() == "[0.0, 2.0, 4.0] [2.0, 2.0]"


def test_gemm_wheel_is_abi3_passes_kernel_abi_check_and_installs_with_only_torch(
    tmp_path: Path,
) -> None:
    import kernel_abi_check

    root = copy_project(REPO / "kernels" / "gemm", tmp_path / "gemm")
    generated = run_cli("generate-torch", root / "build.toml", "--backend", "cpu")
    assert generated.returncode == 0, generated.stderr
    wheel_dir = tmp_path / "wheels"
    (wheel,) = pip_wheel(root, wheel_dir)
    assert wheel.name.endswith("-cp39-abi3-linux_x86_64.whl"), wheel.name

    extract = tmp_path / "unpacked"
    zipfile.ZipFile(wheel).extractall(extract)
    (library,) = (extract / "gemm").glob("*.so")
    checked = kernel_abi_check.ObjectFile(library)
    assert checked.check_python_abi("3.9") == []
    # kernel-builder's target; glibc/libstdc++ symbol versions follow the machine that built the
    # extension (Debian 12), and gemm's stay within manylinux_2_28 (see the README).
    assert checked.check_manylinux("manylinux_2_28") == []

    # A fresh environment with nothing but torch (and its own dependencies).
    env = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    for args in (["torch==2.13.0"], ["--no-deps", str(wheel)]):
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *args],
            capture_output=True,
            text=True,
            check=False,
        )
        assert installed.returncode == 0, installed.stdout + installed.stderr
    run = subprocess.run(
        [
            str(python),
            "-c",
            "import torch, gemm; a = torch.ones(1, 128).to(torch.float8_e4m3fn); "
            "b = torch.ones(128, 128).to(torch.float8_e4m3fn); "
            "print(gemm.gemm(a, b, torch.ones(1, 1), torch.ones(1, 1))[0, :3].tolist())",
        ],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[128.0, 128.0, 128.0]"


def test_a_failed_compile_is_one_error_and_writes_no_variant(tmp_path: Path) -> None:
    root = copy_project(FIXTURES / "scale_add", tmp_path / "scale_add")
    source = root / "cpu" / "ops_cpu.cpp"
    source.write_text('#error "broken on purpose"\n' + source.read_text())
    result = run_cli("build", root / "build.toml", "--backend", "cpu")
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    # The one error line names the first failing step and the compiler's own words.
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("build2cmake: error: CMake build failed (exit 1); the first failing "
                           "step, "), last  # fmt: skip
    assert "ops_cpu.cpp" in last and 'error: #error "broken on purpose"' in last, last
    assert "Traceback" not in result.stderr
    assert not [p for p in (root / "build").iterdir() if p.name.startswith("torch")]
