"""Hub variants without compiling: names, the required set, list-variants, the CI workflow, the
ops id, the toolkit a variant is named after, and -D values that must not stick."""

from __future__ import annotations

import io
import json
import platform
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from build2cmake import api
from build2cmake.builds import variant_builds, variant_env
from build2cmake.builds.builder import fresh_cache_arguments
from build2cmake.builds.variant import toolkit_for_variant
from build2cmake.builds.variant_builds import VariantResult, split_jobs, summary_table
from build2cmake.builds.variant_env import (
    PackageSources,
    requirements,
    system_toolkit,
    torch_sources,
)
from build2cmake.config import hub_variants, load_project
from build2cmake.config.hub_variants import (
    HubVariant,
    parse_variant,
    parse_variants,
    project_variants,
    required_variants,
)
from build2cmake.config.schema import cutlass_major
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.toolchains.rocm_installs import SearchRoots, discover, pick
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
    # nix-builder/build-variants.json (huggingface/kernels at 8ac69fc, 2026-08-20), x86_64-linux,
    # without xpu.
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


def package_matrix() -> dict[str, dict[str, list[str]]]:
    """The package's data file, read as plain JSON (not through hub_variants)."""
    data = json.loads((Path(hub_variants.__file__).parent / hub_variants.MATRIX_FILE).read_text())
    return data["build-variants"]


def test_the_data_file_is_upstreams_matrix_with_the_commit_it_came_from() -> None:
    matrix = hub_variants.upstream_matrix()
    assert matrix.source["repository"] == "huggingface/kernels"
    assert matrix.source["path"] == "nix-builder/build-variants.json"
    assert re.fullmatch(r"[0-9a-f]{40}", matrix.source["commit"])
    assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", matrix.source["committed"])
    # Upstream's file as it is, every system and backend (darwin, metal, xpu) included.
    assert {s: {b: list(n) for b, n in v.items()} for s, v in matrix.variants.items()} == (
        package_matrix()
    )


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_required_set_is_the_data_files_linux_part_for_the_backends_built(
    machine: str,
) -> None:
    expected = sorted(
        name
        for backend, names in package_matrix()[f"{machine}-linux"].items()
        if backend in ("cpu", "cuda", "rocm")
        for name in names
    )
    assert sorted(v.folder(machine) for v in required_variants(machine)) == expected


def test_list_variants_follows_the_matrix_it_is_given(project: Callable[[str], Path]) -> None:
    # Upstream's next matrix (a release added, one dropped): list-variants follows the data, no
    # table in the code.
    names = {
        "cpu": ["torch214-cxx11-cpu-x86_64-linux", "torch215-cxx11-cpu-x86_64-linux"],
        "cuda": ["torch215-cxx11-cu132-x86_64-linux"],
        "xpu": ["torch215-cxx11-xpu20261-x86_64-linux"],
    }
    text = json.dumps({"source": dict(hub_variants.upstream_matrix().source),
                       "build-variants": {"x86_64-linux": names}})  # fmt: skip
    matrix = hub_variants.read_matrix(text, "next.json")
    project_ = api.validate(project("scale_add") / "build.toml")
    got = project_variants(project_, machine="x86_64", matrix=matrix)
    assert [v.spec for v in got] == ["torch2.14-cpu", "torch2.15-cpu", "torch2.15-cu132"]
    with pytest.raises(Build2CMakeError, match=r"no Hub variant list for aarch64 \(upstream's has"):
        required_variants("aarch64", matrix=matrix)
    with pytest.raises(Build2CMakeError, match=r"broken\.json: not a build variant matrix"):
        hub_variants.read_matrix('{"source": {}}', "broken.json")


def test_list_variants_command_prints_the_data_files_matrix(
    project: Callable[[str], Path],
) -> None:
    # scale_add declares cpu, cuda and rocm and no bounds: every x86_64 entry of those backends.
    root = project("scale_add")
    result = run_cli("list-variants", root / "build.toml", "--folders")
    assert result.returncode == 0, result.stderr
    machine = platform.machine()
    expected = sorted(
        name
        for backend, names in package_matrix()[f"{machine}-linux"].items()
        if backend in ("cpu", "cuda", "rocm")
        for name in names
    )
    assert sorted(result.stdout.split()) == expected


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
    assert uploads[0]["with"]["path"] == "scale_add/build/torch*/\nscale_add/build/CARD.md\n"
    assert workflow["jobs"]["collect"]["needs"] == "build"


def test_github_workflow_compiles_through_sccache_on_the_actions_cache(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = project("scale_add")
    output = tmp_path / "variants.yml"
    result = run_cli("ci", "github", root / "build.toml", "--repository", tmp_path, "-o", output)
    assert result.returncode == 0, result.stderr
    job = yaml.safe_load(output.read_text())["jobs"]["build"]
    # sccache's documented GitHub Actions storage: the switch in the job's environment (which is
    # also what makes the generated build pick sccache), and the action that installs sccache
    # and exports the cache's URL and token, set up before the build step.
    assert job["env"]["SCCACHE_GHA_ENABLED"] == "true"
    uses = [s.get("uses", "") for s in job["steps"]]
    names = [s.get("name", "") for s in job["steps"]]
    action = next(i for i, u in enumerate(uses) if u.startswith("mozilla-actions/sccache-action@"))
    assert action < next(i for i, n in enumerate(names) if n.startswith("Build "))
    # ccache is no longer installed nor cached: its objects would never be read.
    text = output.read_text()
    assert "ccache" not in text.replace("sccache", "")


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


def test_a_cutlass_dependency_names_its_major_release() -> None:
    # kernels-community's vllm-flash-attn3 (cutlass_3_9) does not compile with 4.2's headers.
    assert cutlass_major(["torch", "cutlass_3_9"]) == 3
    assert cutlass_major(["cutlass_4_0", "cutlass_3_8"]) == 4
    assert cutlass_major(["cutlass_2_10"]) == 2
    assert cutlass_major(["torch", "metal-cpp"]) is None


def test_environment_requirements_pair_torch_with_its_nvcc() -> None:
    assert requirements(parse_variant("torch2.13-cpu")) == ["torch>=2.13,<2.14"]
    cu130 = requirements(parse_variant("torch2.14-cu130"), cutlass=cutlass_major(["cutlass_3_9"]))
    assert {"nvidia-cuda-nvcc==13.0.*", "nvidia-cuda-crt==13.0.*", "nvidia-cutlass==3.*"} <= set(
        cu130
    )
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


def test_cuda_12_library_headers_are_searched_after_the_machines_toolkit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 12.x variant compiles with the machine's toolkit; the CUDA library headers read from
    # PyPI (#59) sit in a folder of their own, on CPATH after whatever CPATH already holds, so
    # a complete toolkit's own copies (-I) come first.
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    (tmp_path / "cuda" / "bin" / "nvcc").write_text("")
    monkeypatch.setenv("CUDA_HOME_12_8", str(tmp_path / "cuda"))
    monkeypatch.setenv("CPATH", "/users/own")
    env_path = tmp_path / "env"
    (env_path / "cuda-libraries" / "include").mkdir(parents=True)
    described = variant_env._described(parse_variant("torch2.13-cu128"), env_path, (12, 8))
    assert described.env["CPATH"] == f"/users/own:{env_path / 'cuda-libraries' / 'include'}"
    assert described.env["CUDA_HOME"] == str(tmp_path / "cuda")
    # 13.x: the headers are in the toolkit made from PyPI; CPATH is left as it was.
    (env_path / "cuda" / "bin").mkdir(parents=True)
    (env_path / "cuda" / "include").mkdir()
    (env_path / "cuda" / "bin" / "nvcc").write_text("")
    described = variant_env._described(parse_variant("torch2.14-cu130"), env_path, (13, 0))
    assert described.env["CPATH"] == "/users/own"


# ROCm installations by version (rocm_installs), on fake trees: a few files at a temp path.


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _roots(tmp_path: Path, env: dict[str, str] | None = None) -> SearchRoots:
    return SearchRoots(
        env=env or {},
        opt=tmp_path / "opt",
        system_prefix=tmp_path / "usr",
        dpkg_status=tmp_path / "var/lib/dpkg/status",
        chroot_cache=tmp_path / "cache",
    )


_HIP_VERSION_H = (
    "#define HIP_VERSION_MAJOR {}\n#define HIP_VERSION_MINOR {}\n#define HIP_VERSION_PATCH 43484\n"
)


def test_a_side_by_side_release_tree_is_found_by_its_info_version(tmp_path: Path) -> None:
    _tree(tmp_path / "opt/rocm-7.1.1", {".info/version": "7.1.1-38\n"})
    (tmp_path / "opt/rocm").symlink_to("rocm-7.1.1")  # AMD's installer links the default one
    installs = discover(_roots(tmp_path))
    # Reached twice (/opt/rocm and /opt/rocm-7.1.1): listed once, under the first name.
    assert [(i.version, i.found_in) for i in installs] == [("7.1.1", str(tmp_path / "opt/rocm"))]
    assert pick(installs, (7, 1)) == installs[0] and pick(installs, (7, 2)) is None


def test_rocm_path_is_found_by_its_hip_version_header(tmp_path: Path) -> None:
    root = _tree(tmp_path / "elsewhere", {"include/hip/hip_version.h": _HIP_VERSION_H.format(7, 2)})
    installs = discover(_roots(tmp_path, {"ROCM_PATH": str(root)}))
    assert [(i.root, i.version, i.found_in) for i in installs] == [(root, "7.2", "$ROCM_PATH")]


def test_hip_path_naming_the_hip_folder_finds_the_release_above_it(tmp_path: Path) -> None:
    # Neither version file nor header: the folder's name is the version.
    _tree(tmp_path / "x/rocm-6.4.3/hip", {"bin/hipcc": ""})
    installs = discover(_roots(tmp_path, {"HIP_PATH": str(tmp_path / "x/rocm-6.4.3/hip")}))
    assert [(i.root.name, i.version) for i in installs] == [("rocm-6.4.3", "6.4.3")]


def test_debians_usr_is_found_by_the_libamdhip64_dev_package(tmp_path: Path) -> None:
    _tree(tmp_path / "usr", {"include/hip/hip_version.h": _HIP_VERSION_H.format(5, 2)})
    status = (
        "Package: libamdhip64-5\nStatus: install ok installed\nVersion: 9.9.9-1\n\n"
        "Package: libamdhip64-dev\nStatus: install ok installed\nVersion: 5.2.3-8\n"
    )
    _tree(tmp_path, {"var/lib/dpkg/status": status})
    assert [(i.version, i.root) for i in discover(_roots(tmp_path))] == [
        ("5.2.3", tmp_path / "usr")
    ]
    # Without dpkg's record (another distribution), the header's major.minor.
    (tmp_path / "var/lib/dpkg/status").unlink()
    assert [i.version for i in discover(_roots(tmp_path))] == ["5.2"]


def test_a_build2cmake_chroot_is_found_and_one_being_made_is_not(tmp_path: Path) -> None:
    made = {".b2c-stamp": "suite=rocm72\n", ".b2c-rocm-version": "7.2.4-1~exp2\n"}
    _tree(tmp_path / "cache/rocm-chroot-rocm72", made)
    _tree(tmp_path / "cache/rocm-chroot-rocm72.tmp.123", {".b2c-rocm-version": "7.2.4\n"})
    _tree(tmp_path / "cache/rocm-chroot-sid", {".b2c-rocm-version": "6.4.3\n"})  # no stamp
    _tree(tmp_path / "opt/rocm-7.2.0", {".info/version": "7.2.0\n"})
    installs = discover(_roots(tmp_path))
    assert [(i.version, i.suite) for i in installs] == [("7.2.0", None), ("7.2.4", "rocm72")]
    chroot = installs[1]
    assert chroot.chroot == tmp_path / "cache/rocm-chroot-rocm72"
    assert chroot.root == Path("/usr") and chroot.release == (7, 2)
    # The machine's own ROCm of a release comes before a chroot's.
    assert pick(installs, (7, 2)) == installs[0]
    assert pick(installs[1:], (7, 2)) == chroot


def _rocm_project(tmp_path: Path, source: str) -> Path:
    root = _tree(
        tmp_path / "k",
        {
            "build.toml": '[general]\nname = "k"\nbackends = ["rocm"]\nversion = 1\n\n'
            '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n\n'
            '[kernel.k_rocm]\nbackend = "rocm"\nrocm-archs = ["gfx942"]\ndepends = ["torch"]\n'
            'src = ["k/k.hip", "k/k.h"]\n',
            "torch-ext/torch_binding.cpp": '#include "registration.h"\n',
            "torch-ext/k/__init__.py": "",
            "k/k.hip": '#include "k.h"\n',
            "k/k.h": source,
        },
    )
    return root / "build.toml"


def test_a_rocm_variant_without_its_rocm_fails_alone_with_one_line(tmp_path: Path) -> None:
    # Only ROCm 7.2 is there (a fake tree) and PyTorch's index cannot be reached; the kernel's
    # header includes torch's HIP stream, which a stand-in torch does not have. Both variants
    # fail before anything is downloaded, each with its own one-line reason.
    build_toml = _rocm_project(tmp_path, "#pragma once\n  #  include <ATen/hip/HIPContext.h>\n")
    _tree(tmp_path / "opt/rocm-7.2.1", {".info/version": "7.2.1-5\n"})
    project = load_project(build_toml)
    out = io.StringIO()
    results = variant_builds.build_variants(
        project,
        build_toml.parent,
        [parse_variant("torch2.13-rocm71"), parse_variant("torch2.13-rocm72")],
        extension_for={"rocm": "_k_rocm_abc"},
        sources=PackageSources(),
        env_root=tmp_path / "envs",
        rocm_roots=_roots(tmp_path),
        reachable=lambda url: False,
        out=out,
    )
    assert [r.ok for r in results] == [False, False]
    assert results[0].message.startswith(
        "needs ROCm 7.1.x, which is not installed (ROCm found: 7.2.1 ("
        f"{tmp_path / 'opt/rocm-7.2.1'}); looked in: $ROCM_PATH (unset)"
    ), results[0].message
    assert "rocm-chroot-*" in results[0].message and "\n" not in results[0].message
    assert results[1].message == (
        "k/k.h includes ATen/hip/HIPContext.h, a header of a ROCm build of torch, but a CPU or "
        "CUDA torch stands in for it (https://download.pytorch.org/whl/rocm7.2 cannot be "
        "reached); install torch from that index: --index-url "
        "https://download.pytorch.org/whl/rocm7.2"
    )
    assert not (tmp_path / "envs").exists()
    assert "[1/2] torch2.13-rocm71: FAILED: needs ROCm 7.1.x" in out.getvalue()


def test_gpu_torch_headers_are_found_through_project_headers_only(tmp_path: Path) -> None:
    build_toml = _rocm_project(
        tmp_path, '#include "../outside.h"\n#include <c10/util/complex.h>\n#include "sub/a.h"\n'
    )
    _tree(tmp_path, {"outside.h": "#include <c10/cuda/CUDAStream.h>\n"})  # outside the project
    _tree(tmp_path / "k/k/sub", {"a.h": "#include <c10/cuda/CUDAGuard.h>\n"})
    project = load_project(build_toml)
    assert variant_builds.gpu_torch_includes(project, build_toml.parent) == [
        ("k/sub/a.h", "c10/cuda/CUDAGuard.h")
    ]


def test_a_rocm_variants_torch_comes_from_pytorchs_rocm_index_unless_told_otherwise() -> None:
    rocm72 = parse_variant("torch2.13-rocm72")
    reached = torch_sources(rocm72, PackageSources(), reachable=lambda url: True)
    assert reached.sources.index_url == "https://download.pytorch.org/whl/rocm7.2"
    assert reached.unreachable is None
    local = PackageSources(find_links=("/opt/wheels",))
    cut_off = torch_sources(rocm72, local, reachable=lambda url: False)
    assert cut_off.sources == local
    assert cut_off.unreachable == "https://download.pytorch.org/whl/rocm7.2"
    mine = PackageSources(index_url="https://example.invalid/simple")
    assert torch_sources(rocm72, mine, reachable=lambda url: False).sources == mine
    cpu = torch_sources(parse_variant("torch2.13-cpu"), local, reachable=lambda url: False)
    assert cpu.sources == local and cpu.unreachable is None
