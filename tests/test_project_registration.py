"""Projects that ship their own torch-ext/registration.h (kernel-builder wrote one into the tree
and its authors committed it, as the upstream example cutlass-gemm does): generate uses that
copy when it defines the binding's macros, never overwrites or cleans it, and refuses one that
does not (naming the file, as for any file of the user's)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import clean, generate_torch
from build2cmake.ground.errors import Build2CMakeError
from tests.conftest import BuildEnv

# A registration header in kernel-builder's style, written for this test: the two macros every
# binding uses, and nothing of build2cmake's (no built_with_torch attribute).
OWN_HEADER = """#pragma once
#include <Python.h>

#define OWN_CAT_(a, b) a##b
#define OWN_CAT(a, b) OWN_CAT_(a, b)
#define OWN_STR_(x) #x
#define OWN_STR(x) OWN_STR_(x)

#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
  #  define REGISTER_EXTENSION(NAME)                                          \\
  PyMODINIT_FUNC OWN_CAT(PyInit_, NAME)() {                                     \\
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, OWN_STR(NAME),    \\
                                        nullptr, 0, nullptr};                    \\
    return PyModule_Create(&module);                                            \\
  }
"""


def _manifest_files(root: Path) -> set[str]:
    return set(json.loads((root / ".build2cmake-manifest.json").read_text())["files"])


@pytest.mark.compile
def test_own_registration_header_is_used_as_it_is_and_the_build_works(
    project: Callable[[str], Path], build_env: BuildEnv
) -> None:
    root = project("scale_add")
    header = root / "torch-ext" / "registration.h"
    header.write_text(OWN_HEADER)
    report = generate_torch(root / "build.toml")
    assert header.read_text() == OWN_HEADER
    assert "torch-ext/registration.h" not in report.written
    (warning,) = [w for w in report.warnings if "registration.h" in w]
    assert "project's own copy" in warning and "--force replaces it" in warning
    assert "torch-ext/registration.h" not in _manifest_files(root)
    # A second generate is as quiet about the rest and still keeps the header.
    again = generate_torch(root / "build.toml")
    assert again.written == () and header.read_text() == OWN_HEADER

    build_env.pip_install(root, "cmake.define.BUILD2CMAKE_BACKEND=cpu")
    result = build_env.run(
        "import torch, scale_add\n"
        "a, b = torch.randn(300), torch.randn(300)\n"
        "assert torch.allclose(scale_add.scale_add(a, b, 2.0), 2.0 * a + b)\n"
        "print('ok')\n"
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr

    # clean removes what generate wrote, not the project's header.
    removed = clean(root / "build.toml").removed
    assert "pyproject.toml" in removed and "torch-ext/registration.h" not in removed
    assert header.read_text() == OWN_HEADER


def test_own_header_without_the_binding_macros_is_refused(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    header = root / "torch-ext" / "registration.h"
    # REGISTER_EXTENSION only mentioned in a comment: not a definition.
    header.write_text(OWN_HEADER.replace("  #  define REGISTER_EXTENSION", "// REGISTER_EXTENSION"))
    with pytest.raises(Build2CMakeError, match=r"refusing to overwrite[\s\S]*registration\.h"):
        generate_torch(root / "build.toml")
    assert not (root / "CMakeLists.txt").exists()  # nothing half-written
    assert "REGISTER_EXTENSION" in header.read_text()


def test_stable_abi_project_needs_the_stable_macros_in_its_own_header(
    project: Callable[[str], Path],
) -> None:
    root = project("stable_abi")
    header = root / "torch-ext" / "registration.h"
    header.write_text(OWN_HEADER)
    with pytest.raises(Build2CMakeError, match=r"registration\.h"):
        generate_torch(root / "build.toml")
    stable = OWN_HEADER + (
        "#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)\n"
    )
    header.write_text(stable)
    generate_torch(root / "build.toml")
    assert header.read_text() == stable


def test_symlinked_registration_header_is_never_taken_for_the_projects_own(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    outside = tmp_path / "outside.h"
    outside.write_text(OWN_HEADER)
    root = project("scale_add")
    (root / "torch-ext" / "registration.h").symlink_to(outside)
    with pytest.raises(Build2CMakeError, match=r"registration\.h"):
        generate_torch(root / "build.toml")
    assert outside.read_text() == OWN_HEADER
