"""Hub variants without compiling: names, the required set, list-variants, the CI workflow, the
ops id, the toolkit a variant is named after, and -D values that must not stick."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from build2cmake import api
from build2cmake.builder import fresh_cache_arguments
from build2cmake.errors import Build2CMakeError
from build2cmake.hub_variants import (
    HubVariant,
    parse_variant,
    parse_variants,
    project_variants,
    required_variants,
)
from build2cmake.variant import toolkit_for_variant
from build2cmake.variant_builds import VariantResult, split_jobs, summary_table
from build2cmake.variant_env import PackageSources, requirements, system_toolkit
from tests.conftest import run_cli


def test_variant_names_round_trip_between_short_and_folder_forms() -> None:
    cu = parse_variant("torch2.13-cu130", machine="x86_64")
    assert cu == HubVariant((2, 13), "cuda", (13, 0))
    assert cu.folder("x86_64") == "torch213-cxx11-cu130-x86_64-linux"
    assert parse_variant("torch213-cxx11-cu130-x86_64-linux", machine="x86_64") == cu
    assert parse_variant("torch2.9-cu128").toolkit == (12, 8)
    assert parse_variant("torch2.12-rocm71") == HubVariant((2, 12), "rocm", (7, 1))
    assert parse_variant("torch2.12-cpu").folder("aarch64") == "torch212-cxx11-cpu-aarch64-linux"
    assert parse_variant("torch2.10-cu126").spec == "torch2.10-cu126"


@pytest.mark.parametrize(
    "bad", ["torch2.13", "torch2.13-cu", "torch2.13-xpu20253", "cu130", "torch213-cxx98-cpu-x"]
)
def test_a_malformed_variant_is_one_clear_error(bad: str) -> None:
    with pytest.raises(Build2CMakeError, match=r"use torch<major>\.<minor>-<cpu\|cuXY\|rocmXY>"):
        parse_variant(bad)


def test_a_variant_folder_for_another_machine_is_refused() -> None:
    with pytest.raises(Build2CMakeError, match="is for aarch64"):
        parse_variant("torch213-cxx11-cpu-aarch64-linux", machine="x86_64")


def test_variant_lists_drop_duplicates_and_keep_order() -> None:
    got = parse_variants("torch2.13-cpu, torch2.12-cu126,torch2.13-cpu,")
    assert [v.spec for v in got] == ["torch2.13-cpu", "torch2.12-cu126"]
    with pytest.raises(Build2CMakeError, match="at least one"):
        parse_variants(" , ")


def test_required_set_is_upstreams_linux_list() -> None:
    # nix-builder/build-variants.json (huggingface/kernels), x86_64-linux, without xpu.
    assert [v.folder("x86_64") for v in required_variants("x86_64")] == [
        "torch212-cxx11-cpu-x86_64-linux",
        "torch212-cxx11-cu126-x86_64-linux",
        "torch212-cxx11-cu130-x86_64-linux",
        "torch212-cxx11-cu132-x86_64-linux",
        "torch212-cxx11-rocm71-x86_64-linux",
        "torch212-cxx11-rocm72-x86_64-linux",
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu126-x86_64-linux",
        "torch213-cxx11-cu130-x86_64-linux",
        "torch213-cxx11-cu132-x86_64-linux",
        "torch213-cxx11-rocm71-x86_64-linux",
        "torch213-cxx11-rocm72-x86_64-linux",
    ]
    assert {v.backend for v in required_variants("aarch64")} == {"cpu", "cuda"}


def edit_build_toml(root: Path, old: str, new: str) -> Path:
    build_toml = root / "build.toml"
    text = build_toml.read_text()
    assert old in text
    build_toml.write_text(text.replace(old, new, 1))
    return build_toml


def specs(build_toml: Path) -> list[str]:
    return [v.spec for v in project_variants(api.validate(build_toml), machine="x86_64")]


def test_list_variants_follows_backends_and_version_bounds(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    build_toml = root / "build.toml"
    assert len(specs(build_toml)) == 12
    # A CPU-only project gets only CPU variants.
    text = build_toml.read_text()
    cpu_only = root.parent / "cpu_only"
    cpu_only.mkdir()
    for part in ("torch-ext", "cpu"):
        shutil.copytree(root / part, cpu_only / part)
    (cpu_only / "build.toml").write_text(
        text[: text.index("# Two ROCm kernels")].replace('"cpu", "cuda", "rocm"', '"cpu"')
    )
    assert specs(cpu_only / "build.toml") == ["torch2.12-cpu", "torch2.13-cpu"]
    # [torch] minver at the precision written: "2.13" admits 2.13.x.
    edit_build_toml(root, "[torch]\n", '[torch]\nminver = "2.13"\n')
    assert specs(build_toml) == [
        "torch2.13-cpu",
        "torch2.13-cu126",
        "torch2.13-cu130",
        "torch2.13-cu132",
        "torch2.13-rocm71",
        "torch2.13-rocm72",
    ]
    edit_build_toml(root, "version = 1\n", 'version = 1\n[general.cuda]\nmaxver = "13.0"\n')
    assert specs(build_toml) == [
        "torch2.13-cpu",
        "torch2.13-cu126",
        "torch2.13-cu130",
        "torch2.13-rocm71",
        "torch2.13-rocm72",
    ]
    # The only CUDA kernel needs CUDA >= 13: no CUDA 12 variant has anything to build.
    edit_build_toml(root, "[kernel.ops_cuda]\n", '[kernel.ops_cuda]\ncuda-minver = "13.0"\n')
    assert specs(build_toml) == [
        "torch2.13-cpu",
        "torch2.13-cu130",
        "torch2.13-rocm71",
        "torch2.13-rocm72",
    ]
    edit_build_toml(root, 'minver = "2.13"', 'minver = "2.12"\nmaxver = "2.12"')
    assert [s for s in specs(build_toml) if "rocm" not in s] == ["torch2.12-cpu", "torch2.12-cu130"]


def test_list_variants_command_prints_one_variant_a_line(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    expected = [v.spec for v in api.list_variants(root / "build.toml")]
    result = run_cli("list-variants", root / "build.toml")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == expected
    folders = run_cli("list-variants", root / "build.toml", "--folders").stdout.splitlines()
    assert folders == [v.folder() for v in api.list_variants(root / "build.toml")]


def test_github_workflow_is_yaml_whose_matrix_is_list_variants(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    edit_build_toml(root, "[torch]\n", '[torch]\nminver = "2.13"\n')
    output = tmp_path / "repo" / ".github" / "workflows" / "variants.yml"
    result = run_cli("ci", "github", root / "build.toml", "--repository", tmp_path, "-o", output)
    assert result.returncode == 0, result.stderr
    workflow = yaml.safe_load(output.read_text())
    listed = run_cli("list-variants", root / "build.toml").stdout.splitlines()
    assert listed and all(v.startswith("torch2.13-") for v in listed)
    job = workflow["jobs"]["build"]
    assert job["strategy"]["matrix"]["variant"] == listed
    assert job["strategy"]["fail-fast"] is False
    # "on" is a YAML 1.1 boolean when unquoted; the workflow must keep it a key.
    assert "on" in workflow and "workflow_dispatch" in workflow["on"]
    assert job["env"]["BUILD_TOML"] == "scale_add/build.toml"
    run_steps = [s["run"] for s in job["steps"] if "run" in s]
    assert any('--variants "$VARIANT"' in step for step in run_steps)
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads[0]["with"]["path"] == "scale_add/build/torch*/"
    assert workflow["jobs"]["collect"]["needs"] == "build"


def test_github_workflow_refuses_a_build_toml_outside_the_repository(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    (tmp_path / "elsewhere").mkdir()
    result = run_cli("ci", "github", root / "build.toml", "--repository", tmp_path / "elsewhere")
    assert result.returncode == 2
    assert "not inside the repository folder" in result.stderr


def test_variants_and_backend_cannot_be_combined(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    result = run_cli(
        "build", root / "build.toml", "--variants", "torch2.13-cpu", "--backend", "cpu"
    )
    assert result.returncode == 2
    assert "--backend: a variant names its backend" in result.stderr
    result = run_cli("build", root / "build.toml", "--variants", "torch2.13-cuda")
    assert result.returncode == 2 and "use torch<major>.<minor>" in result.stderr


def test_environment_requirements_pair_torch_with_its_nvcc() -> None:
    assert requirements(parse_variant("torch2.13-cpu")) == ["torch>=2.13,<2.14"]
    cu130 = requirements(parse_variant("torch2.14-cu130"), cutlass=True)
    assert {"nvidia-cuda-nvcc==13.0.*", "nvidia-cuda-crt==13.0.*", "nvidia-cutlass"} <= set(cu130)
    with pytest.raises(Build2CMakeError, match="CUDA before 12 is not supported"):
        requirements(parse_variant("torch2.5-cu118"))
    sources = PackageSources("https://download.pytorch.org/whl/rocm7.1", ("file:///x",), ("/w",))
    assert sources.uv_arguments() == [
        "--index-url",
        "https://download.pytorch.org/whl/rocm7.1",
        "--extra-index-url",
        "file:///x",
        "--find-links",
        "/w",
    ]


def test_jobs_are_split_between_concurrent_variants() -> None:
    assert split_jobs(8, 2) == 4
    assert split_jobs(2, 4) == 1
    assert split_jobs(None, 1) >= 1


def test_summary_table_lists_every_variant_and_counts_the_built_ones() -> None:
    ok = VariantResult(parse_variant("torch2.13-cu130"), "torch213-a", True, 12.4, ("8.0", "9.0a"))
    bad = VariantResult(parse_variant("torch2.13-cpu"), "torch213-b", False, 3.0, message="x")
    table = summary_table([ok, bad]).splitlines()
    assert table[0].split() == ["variant", "result", "time", "archs"]
    assert table[1].split() == ["torch213-a", "ok", "12", "s", "8.0,", "9.0a"]
    assert table[2].split() == ["torch213-b", "FAILED", "3", "s", "-"]
    assert table[3] == "1 of 2 variants built"


def test_variant_is_named_after_torchs_toolkit_not_the_compilers() -> None:
    # Same release: nothing to say.
    assert toolkit_for_variant("cuda", "12.8", ("cuda", "12.8")) == ("12.8", None)
    # nvcc 12.9 for a cu128 torch: kernels looks for cu128; say so.
    version, note = toolkit_for_variant("cuda", "12.9", ("cuda", "12.8"))
    assert version == "12.8" and note is not None and "named after torch's (cu128)" in note
    # ROCm 6.4 compiler, ROCm 6.3 torch: rocm63.
    assert toolkit_for_variant("rocm", "6.4", ("rocm", "6.3"))[0] == "6.3"
    # A CPU torch carries no toolkit: the compiler's release names the variant.
    version, note = toolkit_for_variant("cuda", "13.0", ("cpu", None))
    assert version == "13.0" and note is not None and "torch is a cpu build" in note
    assert toolkit_for_variant("cpu", None, ("cuda", "13.0")) == (None, None)


def test_a_compiler_of_another_major_release_is_refused_unless_allowed() -> None:
    with pytest.raises(Build2CMakeError, match="--allow-toolkit-mismatch") as error:
        toolkit_for_variant("cuda", "13.0", ("cuda", "12.8"))
    assert "nvcc is CUDA 13.0, but torch was built with CUDA 12.8" in str(error.value)
    version, note = toolkit_for_variant("cuda", "13.0", ("cuda", "12.8"), allow_mismatch=True)
    assert version == "12.8" and note is not None and note.startswith("warning:")


def test_changed_defines_start_a_fresh_cache_and_say_which_were_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_dir = tmp_path / "b"
    build_dir.mkdir()
    assert fresh_cache_arguments(build_dir, ["A=1"]) == []  # first configure: nothing cached
    (build_dir / "CMakeCache.txt").write_text("")
    # A cache without our record (an older build2cmake configured it): start afresh.
    assert fresh_cache_arguments(build_dir, []) == ["--fresh"]
    (build_dir / "build2cmake-defines.json").write_text(json.dumps(["A=1", "B=2"]))
    assert fresh_cache_arguments(build_dir, ["A=1", "B=2"]) == []
    capsys.readouterr()
    assert fresh_cache_arguments(build_dir, ["A=1"]) == ["--fresh"]
    assert "no longer given: -D B=2" in capsys.readouterr().out
    assert fresh_cache_arguments(build_dir, ["A=1", "B=3"]) == ["--fresh"]


def test_ops_id_covers_every_compiled_file_and_nothing_else(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    build_toml = root / "build.toml"
    first = api.default_ops_id(build_toml)
    assert first == api.default_ops_id(build_toml)  # deterministic
    assert len(first) == 10 and int(first, 16) >= 0

    # A source listed in build.toml.
    source = root / "cpu" / "ops_cpu.cpp"
    source.write_text(source.read_text() + "\n// changed\n")
    second = api.default_ops_id(build_toml)
    assert second != first
    # A header found through an `include` folder (hip/), not listed as src.
    header = root / "hip" / "extra_helpers.h"
    header.write_text("#pragma once\n")
    third = api.default_ops_id(build_toml)
    assert third != second
    # Files the compilers do not read, and generated files, leave it alone.
    (root / "hip" / "NOTES.md").write_text("notes\n")
    (root / "README.md").write_text("readme\n")
    api.generate_torch(build_toml)
    assert api.default_ops_id(build_toml) == third
    # The same files in another folder give the same id.
    assert api.default_ops_id(build_toml) == api.default_ops_id(build_toml.resolve())


def test_ops_id_does_not_read_through_a_symlink_out_of_the_project(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    outside = tmp_path / "outside.h"
    outside.write_text("int a;\n")
    (root / "hip" / "outside.h").symlink_to(outside)
    before = api.default_ops_id(root / "build.toml")
    outside.write_text("int b;\n")
    assert api.default_ops_id(root / "build.toml") == before


def test_cuda_12_comes_from_the_machine_and_its_absence_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PyPI's nvidia-cuda-nvcc-cu12 wheels hold ptxas and NVVM only: no nvcc to install.
    assert requirements(parse_variant("torch2.13-cu128")) == ["torch>=2.13,<2.14"]
    monkeypatch.setenv("CUDA_HOME_12_8", str(tmp_path / "none"))
    with pytest.raises(Build2CMakeError, match=r"PyPI has no nvcc for CUDA 12.*CUDA_HOME_12_8"):
        system_toolkit((12, 8))
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").write_text("")
    monkeypatch.setenv("CUDA_HOME_12_8", str(tmp_path / "cuda"))
    assert system_toolkit((12, 8)) == tmp_path / "cuda"
