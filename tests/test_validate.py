"""Every validation rule: one clear error naming file, key, value and what would be valid."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from build2cmake.api import validate
from build2cmake.ground.errors import BuildConfigError
from tests.conftest import run_cli


def write(project: Path, data: dict[str, Any]) -> Path:
    path = project / "build.toml"
    path.write_text(tomlkit.dumps(data))
    return path


def base() -> dict[str, Any]:
    return {
        "general": {"name": "scale-add", "backends": ["cpu", "rocm"]},
        "torch": {"src": ["torch-ext/torch_binding.cpp"]},
        "kernel": {
            "k_cpu": {"backend": "cpu", "depends": ["torch"], "src": ["cpu/ops_cpu.cpp"]},
            "k_rocm": {
                "backend": "rocm",
                "depends": [],
                "rocm-archs": ["gfx90a"],
                "src": ["hip/scale_add.hip"],
            },
        },
    }


def error_for(project: Path, data: dict[str, Any]) -> BuildConfigError:
    with pytest.raises(BuildConfigError) as info:
        validate(write(project, data))
    return info.value


def test_seed_format_from_the_rocm_guide_is_accepted(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    path = root / "build.toml"
    path.write_text(
        '[general]\nname = "scale_add"\nuniversal = false\n\n'
        '[torch]\nsrc = [\n  "torch-ext/torch_binding.cpp",\n  "torch-ext/torch_binding.h",\n]\n\n'
        '[kernel.scale_add]\nbackend = "rocm"\nrocm-archs = [\n    "gfx942",\n]\n\n'
        'depends = ["torch"]\n\nsrc = [\n  "hip/launchers.h",\n  "hip/scale_add.hip",\n]\n\n'
        'include = ["hip"]\n'
    )
    project_model = validate(path)
    assert project_model.backends == ("rocm",)
    assert project_model.source_format == "v2"
    assert project_model.kernels[0].rocm_archs == ("gfx942",)


def test_current_upstream_format_is_accepted(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    data = base()
    data["general"].update(
        {"version": 2, "python-depends": ["einops"], "hub": {"repo-id": "me/scale-add"}}
    )
    data["torch"].update(
        {"include": ["hip"], "pyext": ["py", "json"], "minver": "2.7", "maxver": "2.13"}
    )
    data["kernel"]["k_rocm"].update({"hip-flags": ["-O3"], "cxx-flags": ["-Wall"]})
    result = validate(write(root, data))
    assert result.package_name == "scale_add"
    assert result.version == 2
    assert result.hub_repo_id == "me/scale-add"
    assert result.torch is not None and result.torch.pyext == ("py", "json")
    assert result.kernels[1].hip_flags == ("-O3",)


@pytest.mark.parametrize(
    ("mutate", "key", "fragment"),
    [
        (
            lambda d: d["general"].update(name="my kernel"),
            "[general].name",
            "'my kernel' does not make a Python package name",
        ),
        (lambda d: d["general"].update(name="9lives"), "[general].name", "starting with a letter"),
        (
            lambda d: d["general"].update(name=3),
            "[general].name",
            "expected a string, got integer 3",
        ),
        (
            lambda d: d["general"].update(backends=["rocm", "cdua"]),
            "[general].backends[1]",
            "'cdua' is not a backend (did you mean 'cuda'?)",
        ),
        (lambda d: d["general"].update(backends=[]), "[general].backends", "is empty"),
        (
            lambda d: d["general"].update(backend=["cpu"]),
            "[general].backend",
            "unknown key (did you mean 'backends'?)",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update(backend="hip"),
            "[kernel.k_rocm].backend",
            "'hip' is not a backend",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update({"rocm-archs": ["sm_90"]}),
            "[kernel.k_rocm].rocm-archs[0]",
            "'sm_90' is not a ROCm architecture",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update({"rocm-archs": ["gfx90a", "gfx9999"]}),
            "[kernel.k_rocm].rocm-archs[1]",
            "'gfx9999' is not a ROCm architecture (did you mean",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update({"rocm-archs": ["gfx90a:xnak-"]}),
            "[kernel.k_rocm].rocm-archs[0]",
            "unknown target feature 'xnak-'",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update({"rocm-arch": ["gfx90a"]}),
            "[kernel.k_rocm].rocm-arch",
            "unknown key (did you mean 'rocm-archs'?)",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update({"cuda-capabilities": ["9.0"]}),
            "[kernel.k_rocm].cuda-capabilities",
            "only applies to cuda kernels",
        ),
        (
            lambda d: d["kernel"].update(
                k_cuda={
                    "backend": "cuda",
                    "depends": [],
                    "src": ["hip/launchers.h"],
                    "cuda-capabilities": ["9"],
                }
            ),
            "[kernel.k_cuda].cuda-capabilities[0]",
            "'9' is not a CUDA compute capability",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update(depends=["torhc"]),
            "[kernel.k_rocm].depends[0]",
            "'torhc' is not a known dependency (did you mean 'torch'?)",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].pop("depends"),
            "[kernel.k_rocm].depends",
            "missing; expected a list of strings",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update(src="hip/scale_add.hip"),
            "[kernel.k_rocm].src",
            "expected a list of strings, got string",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update(src=["hip/missing.hip"]),
            "[kernel.k_rocm].src[0]",
            "'hip/missing.hip' does not exist",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update(src=["/etc/passwd"]),
            "[kernel.k_rocm].src[0]",
            "is absolute",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update(src=["../outside.hip"]),
            "[kernel.k_rocm].src[0]",
            "points outside the project folder",
        ),
        (
            lambda d: d["kernel"]["k_rocm"].update(src=["cpu/ops_cpu.cpp", "hip/scale_add.cu"]),
            "[kernel.k_rocm].src[1]",
            None,
        ),
        (
            lambda d: d["kernel"]["k_cpu"].update(src=["hip/scale_add.hip"]),
            "[kernel.k_cpu].src[0]",
            "has a suffix a cpu source cannot have",
        ),
        (
            lambda d: d["kernel"]["k_cpu"].update(include=["cpu/ops_cpu.cpp"]),
            "[kernel.k_cpu].include[0]",
            "is not a directory",
        ),
        (
            lambda d: d["kernel"]["k_cpu"].update(src=["cpu/a;b.cpp"]),
            "[kernel.k_cpu].src[0]",
            "contains a character a build path cannot have",
        ),
        (
            lambda d: d["kernel"]["k_cpu"].update(backend="cuda"),
            "[kernel.k_cpu].backend",
            "'cuda' is not in [general].backends",
        ),
        (lambda d: d.pop("torch"), "[torch]", "missing section"),
        (lambda d: d.update(extra={}), "[extra]", "unknown key"),
        (
            lambda d: d["general"].update(universal=True),
            "[kernel.k_cpu]",
            "a universal kernel (universal = true) has no compiled kernels",
        ),
        (
            lambda d: d["torch"].update(minver="latest"),
            "[torch].minver",
            "'latest' is not a version",
        ),
        (
            lambda d: d["kernel"]["k_cpu"].update({"cxx-flags": ["-O2;-g"]}),
            "[kernel.k_cpu].cxx-flags[0]",
            "is not a compiler flag",
        ),
    ],
)
def test_invalid_build_toml_names_key_and_fix(
    project: Callable[[str], Path],
    mutate: Callable[[dict[str, Any]], Any],
    key: str,
    fragment: str | None,
) -> None:
    root = project("scale_add")
    data = base()
    mutate(data)
    error = error_for(root, data)
    assert error.key == key
    assert str(error).startswith(f"{root / 'build.toml'}: {key}: ")
    if fragment is not None:
        assert fragment in error.message


def test_cu_source_in_rocm_kernel_is_accepted_for_hipify(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    (root / "hip" / "k.cu").write_text("")
    data = base()
    data["kernel"]["k_rocm"]["src"] = ["hip/k.cu"]
    path = root / "build.toml"
    path.write_text(tomlkit.dumps(data))
    (kernel,) = validate(path).kernels_for("rocm")
    assert [str(s) for s in kernel.sources] == ["hip/k.cu"]
    # A CUDA source has no place in a cpu kernel, though.
    data["kernel"]["k_cpu"]["src"] = ["hip/k.cu"]
    assert "a cpu source cannot have" in error_for(root, data).message


def test_symlink_pointing_outside_project_is_refused(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    outside = tmp_path / "elsewhere.hip"
    outside.write_text("")
    os.symlink(outside, root / "hip" / "link.hip")
    data = base()
    data["kernel"]["k_rocm"]["src"] = ["hip/link.hip"]
    error = error_for(root, data)
    assert error.key == "[kernel.k_rocm].src[0]"
    assert "symlink that points outside the project" in error.message


def test_toml_syntax_error_names_the_file(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    path = root / "build.toml"
    path.write_text("[general]\nname = \n")
    with pytest.raises(BuildConfigError, match=r"build\.toml: invalid TOML"):
        validate(path)


def test_duplicate_table_is_a_toml_error(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    path = root / "build.toml"
    path.write_text('[general]\nname = "a"\n[general]\nname = "b"\n')
    with pytest.raises(BuildConfigError, match="invalid TOML"):
        validate(path)


def test_cli_validate_exits_2_with_one_line_and_no_traceback(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    data = base()
    data["kernel"]["k_rocm"]["rocm-archs"] = ["gfx9999"]
    path = write(root, data)
    result = run_cli("validate", path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"build2cmake: error: {path}: [kernel.k_rocm].rocm-archs[0]: 'gfx9999' is not a ROCm "
        "architecture (did you mean 'gfx909'?)"
    ]


def test_cli_validate_exits_0_for_the_fixture(project: Callable[[str], Path]) -> None:
    result = run_cli("validate", project("scale_add") / "build.toml")
    assert result.returncode == 0, result.stderr
    assert "valid (v3, torch); package scale_add, backends cpu, cuda, rocm" in result.stdout


def test_cli_missing_file_exits_2(tmp_path: Path) -> None:
    result = run_cli("validate", tmp_path / "nope.toml")
    assert result.returncode == 2
    assert "nope.toml: file not found" in result.stderr


def test_duplicate_archs_and_sources_are_warnings_and_used_once(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    data = base()
    data["kernel"]["k_rocm"]["rocm-archs"] = ["gfx90a", "gfx90a"]
    data["kernel"]["k_rocm"]["src"] = ["hip/scale_add.hip", "hip/scale_add.hip"]
    path = root / "build.toml"
    path.write_text(tomlkit.dumps(data))
    model = validate(path)
    (kernel,) = model.kernels_for("rocm")
    assert kernel.rocm_archs == ("gfx90a",)
    assert [str(s) for s in kernel.sources] == ["hip/scale_add.hip"]
    assert any(
        "[kernel.k_rocm].rocm-archs[1]: 'gfx90a' is listed twice" in w for w in model.warnings
    )
    assert any("[kernel.k_rocm].src[1]" in w for w in model.warnings)


def test_rocm_kernel_without_archs_builds_the_default_archs(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    data = base()
    del data["kernel"]["k_rocm"]["rocm-archs"]
    path = root / "build.toml"
    path.write_text(tomlkit.dumps(data))
    (kernel,) = validate(path).kernels_for("rocm")
    assert kernel.rocm_archs == ()


def test_validate_reports_every_error_of_a_file_at_once(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    data = base()
    data["general"]["backend"] = ["cpu"]
    data["kernel"]["k_rocm"]["rocm-archs"] = ["gfx9999"]
    data["kernel"]["k_cpu"]["src"] = ["cpu/missing.cpp"]
    path = root / "build.toml"
    path.write_text(tomlkit.dumps(data))
    result = run_cli("validate", path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 3, result.stderr
    assert all(line.startswith("build2cmake: error: ") for line in lines)
    assert "[general].backend: unknown key (did you mean 'backends'?)" in lines[0]
    assert "[kernel.k_rocm].rocm-archs[0]: 'gfx9999'" in result.stderr
    assert "[kernel.k_cpu].src[0]: 'cpu/missing.cpp' does not exist" in result.stderr
    assert "Traceback" not in result.stderr
