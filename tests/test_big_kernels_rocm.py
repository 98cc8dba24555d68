"""benchmarks/big_kernels_rocm.py (issue #45): which sources the aiter-flash-attn-ck slice keeps,
the slice project it writes, and the whole-project estimate scaled from the slice's steps. No
compile: the measured build runs in the ROCm chroot (see the script's docstring)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

from tests.conftest import REPO, load_script

SCRIPT = REPO / "benchmarks" / "big_kernels_rocm.py"

FIXED = [
    "aiter/cpp_itfs/mha_fwd.hip",
    "aiter/include/mha_fwd.h",
    "instances/fmha_fwd_api.hip",
    "instances/fmha_fwd_splitkv_api.hip",
]


@pytest.fixture(scope="module")
def rocm_slice() -> ModuleType:
    return load_script(SCRIPT)


def _instances(family: str, arch: str, count: int) -> list[str]:
    return [f"instances/{family}_d{i:03d}_bf16_{arch}.hip" for i in range(count)]


def test_slice_keeps_every_other_source_and_spreads_n_per_kind(rocm_slice: ModuleType) -> None:
    fwd9 = _instances("fmha_fwd", "gfx9", 12)
    fwd950 = _instances("fmha_fwd", "gfx950", 8)
    split = _instances("fmha_fwd_splitkv", "gfx9", 5)
    combine = _instances("fmha_fwd_splitkv_combine", "gfx9", 2)
    # Listed out of order: the pick follows the sorted names, the result the listed order.
    sources = FIXED[:2] + fwd9[::-1] + fwd950 + FIXED[2:] + split + combine
    kept = rocm_slice.select_slice(sources, 3)
    assert [s for s in kept if s in FIXED] == FIXED  # dispatch tables are not instantiations
    assert [s for s in kept if s in fwd9] == [fwd9[10], fwd9[6], fwd9[2]]  # middles of 4-wide
    assert [s for s in kept if s in fwd950] == [fwd950[1], fwd950[4], fwd950[6]]
    assert [s for s in kept if s in split] == [split[0], split[2], split[4]]
    assert [s for s in kept if s in combine] == combine  # fewer than N: all of them
    assert kept == [s for s in sources if s in kept]
    assert rocm_slice.select_slice(list(reversed(sources)), 3) == list(reversed(kept))
    assert rocm_slice.kind_counts(sources) == {
        "fmha_fwd gfx9": 12,
        "fmha_fwd gfx950": 8,
        "fmha_fwd_splitkv gfx9": 5,
        "fmha_fwd_splitkv_combine gfx9": 2,
    }


def test_slice_project_lists_and_holds_only_the_slice(
    rocm_slice: ModuleType, tmp_path: Path
) -> None:
    project = tmp_path / "aiter"
    sources = FIXED + _instances("fmha_fwd", "gfx9", 4)
    for source in sources:
        (project / source).parent.mkdir(parents=True, exist_ok=True)
        (project / source).write_text("// x\n")
    listed = ",\n".join(f'    "{s}"' for s in sources)
    (project / "build.toml").write_text(
        '[general]\nname = "aiter"\n# kept\n\n[kernel.k]\nbackend = "rocm"\n'
        f'rocm-archs = ["gfx942"]\nsrc = [\n{listed},\n]\n'
    )
    full, kept = rocm_slice.make_slice(project, tmp_path / "slice", 2)
    assert full == sources
    assert kept == [*FIXED, sources[5], sources[7]]
    written = (tmp_path / "slice" / "build.toml").read_text()
    assert "# kept" in written
    assert tomllib.loads(written)["kernel"]["k"]["src"] == kept
    on_disk = sorted(
        p.relative_to(tmp_path / "slice").as_posix() for p in (tmp_path / "slice").rglob("*.hip")
    )
    assert on_disk == sorted(s for s in kept if s.endswith(".hip"))


def test_estimate_scales_each_kind_by_its_count(rocm_slice: ModuleType) -> None:
    step = sys.modules["big_kernels"].Step
    prefix = "CMakeFiles/kernel_k.dir/"
    steps = [
        step(prefix + "instances/fmha_fwd_api.hip.o", 0.0, 40.0),
        step(prefix + "instances/fmha_fwd_a_gfx9.hip.o", 0.0, 20.0),
        step(prefix + "instances/fmha_fwd_b_gfx9.hip.o", 0.0, 30.0),
        step(prefix + "instances/fmha_fwd_a_gfx950.hip.o", 0.0, 6.0),
        step("_k_rocm_abc.abi3.so", 50.0, 52.0),
    ]
    full = ["instances/fmha_fwd_api.hip"]
    full += _instances("fmha_fwd", "gfx9", 10) + _instances("fmha_fwd", "gfx950", 4)
    est = rocm_slice.estimate(steps, full, 2)
    assert est.kinds == {"fmha_fwd gfx9": (10, 2, 25.0), "fmha_fwd gfx950": (4, 1, 6.0)}
    assert est.once_s == pytest.approx(42.0)
    assert est.serial_s == pytest.approx(42.0 + 250.0 + 24.0)
    assert est.over_jobs_s == pytest.approx(est.serial_s / 2)
    # The plain mean: 4 compile steps of 96 s, 15 HIP sources, 2 jobs.
    assert est.naive_over_jobs_s == pytest.approx(96.0 / 4 * 15 / 2)
    assert est.longest_s == 40.0
