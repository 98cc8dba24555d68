"""`build2cmake check-abi`: kernel-builder's check-abi (manylinux, Python stable ABI, torch stable
ABI) on a real CPU build, and the torch stable ABI check on libraries whose undefined symbols we
choose (compiled here with g++: a 2.10 shim function, a 2.13 one, and torch's C++ API)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from build2cmake.share import checks
from tests.conftest import FIXTURES, run_cli

pytest.importorskip("kernel_abi_check")


@pytest.fixture(scope="module")
def shim_user(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared library that calls torch_call_dispatcher (torch 2.10), torch_library_set_python_
    module (2.13) and c10::detail::torchCheckFail (torch's C++ API), all left undefined."""
    folder = tmp_path_factory.mktemp("shim_user")
    source = folder / "uses.cpp"
    source.write_text(
        'extern "C" int torch_call_dispatcher(const char*, const char*, void*, unsigned long);\n'
        'extern "C" int torch_library_set_python_module(void*, const char*);\n'
        "namespace c10::detail { [[noreturn]] void torchCheckFail(const char*, const char*, "
        "unsigned, const char*); }\n"
        'extern "C" int use(int x) {\n'
        '  if (x > 1) c10::detail::torchCheckFail("f", "file", 1, "message");\n'
        '  return x ? torch_call_dispatcher("a", "", nullptr, 0)\n'
        '           : torch_library_set_python_module(nullptr, "m");\n'
        "}\n"
    )
    library = folder / "libuses.so"
    subprocess.run(
        ["g++", "-shared", "-fPIC", "-o", str(library), str(source)], check=True, cwd=folder
    )
    return library


def test_torch_stable_abi_flags_newer_shims_and_the_cpp_api(shim_user: Path) -> None:
    versions = checks.torch_shim_versions()
    assert versions["torch_call_dispatcher"] == (2, 10, 0)
    assert versions["torch_library_set_python_module"] == (2, 13, 0)
    cpp = "c10::detail::torchCheckFail(char const*, char const*, unsigned int, char const*)"
    assert checks.torch_stable_abi_violations(shim_user, "2.10") == [
        cpp,
        "torch_library_set_python_module (torch 2.13.0)",
    ]
    assert checks.torch_stable_abi_violations(shim_user, "2.13") == [cpp]


def test_check_abi_on_a_variant_folder_exits_1_on_a_violation(
    shim_user: Path, tmp_path: Path
) -> None:
    variant = tmp_path / "build" / "torch213-cxx11-cpu-x86_64-linux"
    variant.mkdir(parents=True)
    shutil.copy(shim_user, variant / "_uses.abi3.so")
    (variant / "metadata.json").write_text(json.dumps({"backend": {"type": "cpu"}}))
    clean = run_cli("check-abi", variant)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.splitlines() == [
        "kernel-abi-check: _uses.abi3.so: Python 3.9 stable ABI ok, manylinux_2_28 ok"
    ]
    stable = run_cli("check-abi", variant, "--torch-stable-abi", "2.12")
    assert stable.returncode == 1, stable.stdout + stable.stderr
    assert (
        "  not in torch's 2.12 stable ABI: torch_library_set_python_module (torch 2.13.0)"
        in stable.stdout.splitlines()
    )
    bad = run_cli("check-abi", variant, "--torch-stable-abi", "two")
    assert bad.returncode == 2 and "--torch-stable-abi 'two'" in bad.stderr


@pytest.mark.compile
def test_check_abi_on_a_cpu_build_runs_what_build_runs(tmp_path: Path) -> None:
    root = tmp_path / "static_state_one"
    shutil.copytree(FIXTURES / "static_state_one", root)
    built = run_cli("build", root / "build.toml")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (variant_line,) = [line for line in built.stdout.splitlines() if line.startswith("built ")]
    variant = Path(variant_line.split()[1])
    (library,) = variant.glob("*.so")
    ok = f"kernel-abi-check: {library.name}: Python 3.9 stable ABI ok, manylinux_2_28 ok"
    assert ok in built.stdout.splitlines()
    checked = run_cli("check-abi", root / "build.toml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.splitlines() == [ok]
    # torch's stable ABI, which the kernel (a regular torch extension) does not keep to.
    strict = run_cli("check-abi", variant, "--torch-stable-abi", "2.10")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    lines = strict.stdout.splitlines()
    assert lines[0] == f"kernel-abi-check: {library.name}: violations"
    assert "  not in torch's 2.10 stable ABI: c10::UndefinedTensorImpl::_singleton" in lines
    # A policy kernel-abi-check does not know: one error, exit 2.
    unknown = run_cli("check-abi", variant, "--manylinux", "manylinux_2_99")
    assert unknown.returncode == 2
    assert "Unknown manylinux version: manylinux_2_99" in unknown.stderr
