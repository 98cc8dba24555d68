"""The schedule a build compiles in (issue #52): each kernel's sources longest first (recorded
seconds, else a cold estimate by size), compile times recorded after each build beside the
compiler cache, and objects that do not depend on the order or on nvcc's threads.

The fixture is scale_add with sources of very different sizes added to its cpu, cuda and rocm
kernels: a light one, listed first, and a heavy one (a large project header), listed last."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from build2cmake.api import generate_torch
from build2cmake.toolchains.programs import ninja_program
from tests.conftest import (
    REPO,
    cuobjdump,
    load_script,
    requires_nvcc,
    requires_rocm_toolchain,
    run_cli,
)

SCRIPT = REPO / "cmake_templates" / "common" / "build2cmake_schedule.py"
HEAVY_HEADER = "".join(
    f"template <typename T> T heavy_{i}(T x) {{ return x * T({i}) + T({i % 7}); }}\n"
    for i in range(3000)
)


@pytest.fixture
def schedule() -> ModuleType:
    return load_script(SCRIPT)


def uneven(root: Path) -> Path:
    """scale_add with a light and a heavy source added to each kernel, then generated."""
    toml = root / "build.toml"
    text = toml.read_text()
    for folder, suffix, listed in (
        ("cpu", ".cpp", '"cpu/ops_cpu.cpp"'),
        ("cuda", ".cu", '"cuda/ops.cu", "cuda/launchers_cuda.h"'),
        ("hip", ".hip", '"hip/scale_add.hip", "hip/launchers.h"'),
    ):
        (root / folder / "heavy.h").write_text(HEAVY_HEADER)
        (root / folder / f"light{suffix}").write_text("int light_one() { return 1; }\n")
        (root / folder / f"heavy{suffix}").write_text(
            '#include "heavy.h"\nint heavy_one() { return heavy_2999(1); }\n'
        )
        replaced = (
            f'"{folder}/light{suffix}", {listed}, "{folder}/heavy{suffix}", "{folder}/heavy.h"'
        )
        assert listed in text
        text = text.replace(f"src = [{listed}]", f"src = [{replaced}]", 1)
    toml.write_text(text)
    generate_torch(toml)
    return root


def configure(root: Path, backend: str, *defines: str, name: str = "") -> tuple[Path, str]:
    build_dir = root / "build" / f"schedule-{backend}{name}"
    command = ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
               f"-DBUILD2CMAKE_BACKEND={backend}", "-DBUILD2CMAKE_COMPILER_LAUNCHER=none",
               *(f"-D{d}" for d in defines)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return build_dir, " ".join(result.stdout.split())


def compile_order(build_dir: Path, folder: str, target: str = "[^/]+") -> list[str]:
    """The sources of `folder` in the order build.ninja lists their compiles (Ninja's start
    order among steps of equal depth)."""
    text = (build_dir / "build.ninja").read_text()
    pattern = rf"^build CMakeFiles/{target}\.dir/{folder}/(\w+)\.\w+\.o:"
    return re.findall(pattern, text, re.M)


def test_cold_order_lists_the_source_that_reads_the_most_project_code_first(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = uneven(project("scale_add"))
    # A folder whose name holds a CMake list separator and a space.
    costs = tmp_path / "my costs;1"
    build_dir, said = configure(root, "cpu", f"BUILD2CMAKE_COSTS_DIR={costs}")
    assert compile_order(build_dir, "cpu") == ["heavy", "ops_cpu", "light"]
    # Where it looked, so that a costs file kept under another name is seen to be missed.
    expected = f"by size (no recorded costs yet in {costs / 'scale_add-cpu.tsv'})"
    assert f"kernel_ops_cpu: 3 sources, longest first {expected}" in said


@pytest.mark.compile
def test_a_build_records_its_compile_times_and_the_next_configure_orders_by_them(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = uneven(project("scale_add"))
    costs = tmp_path / "costs"
    result = run_cli(
        "build", root / "build.toml", "--backend", "cpu",
        "-D", f"BUILD2CMAKE_COSTS_DIR={costs}", "-D", "BUILD2CMAKE_COMPILER_LAUNCHER=none",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    variant = root / result.stdout.strip().splitlines()[-1].split()[1]
    # The build loads and computes: alpha * a + b against float64.
    check = subprocess.run(
        [sys.executable, "-c",
         "import importlib.util, sys, torch; v = sys.argv[1]; "
         "spec = importlib.util.spec_from_file_location("
         "'scale_add', v + '/__init__.py', submodule_search_locations=[v]); "
         "scale_add = importlib.util.module_from_spec(spec); sys.modules['scale_add'] = scale_add; "
         "spec.loader.exec_module(scale_add); "
         "a, b = torch.randn(1000), torch.randn(1000); "
         "out = scale_add.scale_add(a, b, 0.5).double(); "
         "print(float((out - (0.5 * a.double() + b.double())).abs().max()))",
         str(variant)],
        capture_output=True, text=True, check=False, timeout=300, cwd="/",
    )  # fmt: skip
    assert check.returncode == 0, check.stderr[-2000:]
    assert float(check.stdout) < 1e-6

    # One line a compile: its seconds and the object's path relative to the project.
    (record,) = costs.glob("*.tsv")
    assert record.name == "scale_add-cpu.tsv"
    seconds = {
        key: float(value)
        for value, key in (line.split("\t") for line in record.read_text().splitlines()[1:])
    }
    assert {
        "cpu/heavy.cpp",
        "cpu/light.cpp",
        "cpu/ops_cpu.cpp",
        "torch-ext/torch_binding.cpp",
    } <= set(seconds)
    assert all(value > 0 for value in seconds.values()), seconds

    # Records decide over sizes: the light source, recorded as the slowest, goes first.
    seconds["cpu/light.cpp"] = 500.0
    record.write_text("".join(f"{v}\t{k}\n" for k, v in seconds.items()))
    build_dir, said = configure(root, "cpu", f"BUILD2CMAKE_COSTS_DIR={costs}")
    assert compile_order(build_dir, "cpu")[0] == "light"
    assert "kernel_ops_cpu: 3 sources, longest first by recorded seconds (3 of 3 recorded)" in said


def write_log(build_dir: Path, entries: list[tuple[int, int, str]]) -> None:
    build_dir.mkdir(parents=True, exist_ok=True)
    lines = ["# ninja log v7"] + [f"{s}\t{e}\t0\t{out}\tabc" for s, e, out in entries]
    (build_dir / ".ninja_log").write_text("\n".join(lines) + "\n")


def test_a_cache_hit_keeps_the_recorded_cost_and_foreign_lines_are_never_used(
    schedule: ModuleType, tmp_path: Path
) -> None:
    costs = tmp_path / "costs" / "p-cuda.tsv"
    build_dir = tmp_path / "build"
    write_log(build_dir, [(0, 120_000, "CMakeFiles/k.dir/src/a.cu.o"),
                          (0, 30_000, "CMakeFiles/k.dir/src/b.cu.o"),
                          (0, 900, "libext.so")])  # fmt: skip
    schedule.record(str(costs), str(build_dir))
    assert schedule.read_costs(str(costs)) == {"src/a.cu": 120.0, "src/b.cu": 30.0}
    # A rebuild answered by the compiler cache: a.cu took 0.2 s (a hit) and is kept at 120 s;
    # b.cu really got faster (15 s) and is updated.
    write_log(build_dir, [(0, 200, "CMakeFiles/k.dir/src/a.cu.o"),
                          (0, 15_000, "CMakeFiles/k.dir/src/b.cu.o")])  # fmt: skip
    schedule.record(str(costs), str(build_dir))
    assert schedule.read_costs(str(costs)) == {"src/a.cu": 120.0, "src/b.cu": 15.0}
    # Lines that are not a number and a plain relative path are skipped, whoever wrote them.
    costs.write_text(
        "9\t../../etc/passwd\n9\t/abs/path.cu\n9\tsrc/x.cu\nnan\tsrc/y.cu\n9\tsrc/a b.cu\n"
        "1e9\tsrc/z.cu\n5\tsrc/ok.cu\n"
    )
    assert schedule.read_costs(str(costs)) == {"src/x.cu": 9.0, "src/ok.cu": 5.0}
    # A file far larger than any record is not read at all.
    costs.write_text("1\tsrc/a.cu\n" * (schedule.COSTS_LIMIT // 8))
    assert schedule.read_costs(str(costs)) == {}


def test_a_source_added_since_the_last_build_is_placed_by_the_recorded_seconds_per_byte(
    schedule: ModuleType, tmp_path: Path
) -> None:
    """A source with no record of its own (added since) is weighed as its bytes times the
    recorded sources' median seconds per byte; the next configure of a folder whose build
    stopped merges that folder's .ninja_log before it orders."""
    sources = tmp_path / "src"
    sources.mkdir()
    for name, size in (("a.cu", 100), ("b.cu", 200), ("c.cu", 100), ("new.cu", 250)):
        (sources / name).write_text("x" * size)
    costs = tmp_path / "costs" / "p-cuda.tsv"
    costs.parent.mkdir()
    # Seconds per byte 0.1, 0.2 and 0.6: the median 0.2 (not the least, the most or the mean)
    # puts new.cu (250 bytes: 50 s) between c.cu (60 s) and b.cu (40 s).
    costs.write_text("10\ta.cu\n40\tb.cu\n60\tc.cu\n")
    names = ["a.cu", "b.cu", "c.cu", "new.cu"]
    ranked, how, _ = schedule.order(str(costs), str(sources), str(tmp_path / "b"), [], names)
    assert [names[i] for i in ranked] == ["c.cu", "new.cu", "b.cu", "a.cu"]
    assert how == "by recorded seconds (3 of 4 recorded)"
    # A stopped build in the folder finished new.cu in 70 s: recorded first, then ordered by.
    build_dir = tmp_path / "b"
    write_log(build_dir, [(0, 70_000, "CMakeFiles/k.dir/new.cu.o")])
    ranked, how, _ = schedule.order(
        str(costs), str(sources), str(build_dir), [], names, str(build_dir)
    )
    assert [names[i] for i in ranked] == ["new.cu", "c.cu", "b.cu", "a.cu"]
    assert how == "by recorded seconds (4 of 4 recorded)"
    assert schedule.read_costs(str(costs))["new.cu"] == 70.0


def test_the_order_says_where_it_looked_for_costs_in_one_printable_line(
    schedule: ModuleType, tmp_path: Path
) -> None:
    sources = tmp_path / "src"
    sources.mkdir()
    (sources / "a.cu").write_text("x" * 10)
    (sources / "b.cu").write_text("x" * 20)
    # A costs folder named with a newline and an escape: the line the build prints stays one
    # line, and the terminal gets no control character.
    folder = tmp_path / "costs\n\x1b[2J"
    ranked, how, _ = schedule.order(
        str(folder / "p-cuda.tsv"), str(sources), str(tmp_path / "b"), [], ["a.cu", "b.cu"]
    )
    assert ranked == [1, 0]
    assert how.startswith("by size (no recorded costs yet in ") and how.endswith("p-cuda.tsv)")
    assert "\\n\\x1b[2J" in how and how.isprintable()
    _, how, _ = schedule.order("", str(sources), str(tmp_path / "b"), [], ["a.cu", "b.cu"])
    assert how == "by size (compile costs not kept: BUILD2CMAKE_COSTS_DIR=OFF, or no home folder)"


def test_the_cores_are_this_processs_cpus(
    schedule: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    cpus = len(os.sched_getaffinity(0))
    assert 1 <= schedule.cores() <= cpus
    # Within its cgroup's quota (a container given one CPU of many), whichever is fewer.
    monkeypatch.setattr(schedule, "_cgroup_quota", lambda: 1)
    assert schedule.cores() == 1
    monkeypatch.setattr(schedule, "_cgroup_quota", lambda: cpus + 8)
    assert schedule.cores() == cpus


def masked(obj: Path) -> bytes:
    """An object's bytes without nvcc's temporary file names, which embed its process id."""
    return re.sub(rb"tmpxft_[0-9a-f]{8}_[0-9a-f]{8}", b"tmpxft_X", obj.read_bytes())


@pytest.mark.compile
@requires_nvcc
def test_cuda_objects_carry_every_capability_whatever_the_threads_and_the_order(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    tool = cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    root = uneven(project("scale_add"))
    costs = tmp_path / "costs"
    costs.mkdir()
    # The recorded order reverses the cold one.
    (costs / "scale_add-cuda.tsv").write_text(
        "300\tcuda/light.cu\n200\tcuda/ops.cu\n1\tcuda/heavy.cu\n"
    )
    objects: dict[str, dict[str, bytes]] = {}
    for name, defines in {
        "threads, cold order": ("BUILD2CMAKE_CORES=8",
                                f"BUILD2CMAKE_COSTS_DIR={tmp_path / 'none'}"),
        "threads, recorded order": ("BUILD2CMAKE_CORES=8", f"BUILD2CMAKE_COSTS_DIR={costs}"),
        "one thread": ("BUILD2CMAKE_CORES=8", "BUILD2CMAKE_NVCC_THREADS=1",
                       f"BUILD2CMAKE_COSTS_DIR={costs}"),
    }.items():  # fmt: skip
        build_dir, _ = configure(root, "cuda", *defines, name=f"-{len(objects)}")
        order = compile_order(build_dir, "cuda")
        assert order == (["light", "ops", "heavy"] if "recorded" in name or "one" in name
                         else ["heavy", "ops", "light"]), (name, order)  # fmt: skip
        built = subprocess.run(
            ["cmake", "--build", str(build_dir), "--target", "kernel_ops_cuda"],
            capture_output=True, text=True, check=False, timeout=900,
        )  # fmt: skip
        assert built.returncode == 0, built.stdout[-3000:]
        found = sorted((build_dir / "CMakeFiles" / "kernel_ops_cuda.dir" / "cuda").glob("*.o"))
        objects[name] = {o.name: masked(o) for o in found}
        assert len(found) == 3, found
        for obj in found:
            elves = subprocess.run([tool, "--list-elf", str(obj)], capture_output=True,
                                   text=True, check=True).stdout  # fmt: skip
            ptx = subprocess.run([tool, "--list-ptx", str(obj)], capture_output=True,
                                 text=True, check=True).stdout  # fmt: skip
            # light.cu holds no kernel: no device code at all.
            if obj.name.startswith("light"):
                continue
            assert "sm_80" in elves and "sm_90a" in elves, (obj.name, elves)
            assert "sm_80" in ptx, (obj.name, ptx)
    # Neither the order nor the threads change an object.
    first, *others = objects.values()
    for other in others:
        assert other == first


@pytest.mark.rocm
@requires_rocm_toolchain
def test_hip_compiles_are_ordered_and_pooled_by_the_cores(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = uneven(project("scale_add"))
    build_dir, _ = configure(
        root, "rocm", "BUILD2CMAKE_CORES=1", f"BUILD2CMAKE_COSTS_DIR={tmp_path / 'costs'}"
    )
    assert compile_order(build_dir, "hip", "kernel_scale_add_rocm") == [
        "heavy",
        "scale_add",
        "light",
    ]
    rules = (build_dir / "CMakeFiles" / "rules.ninja").read_text()
    pools = {m[1]: int(m[2]) for m in re.finditer(r"^pool (\S+)\n  depth = (\d+)$", rules, re.M)}
    assert pools["build2cmake_hip"] == 1 and pools["build2cmake_compile"] == 1, pools


@pytest.mark.compile
def test_a_build_stopped_before_its_link_has_its_finished_compiles_recorded_at_the_next_configure(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    """A build that never reaches its link (a timeout, a failed source) records nothing itself;
    the next configure of its folder records what it finished, and orders by it."""
    root = uneven(project("scale_add"))
    costs = tmp_path / "costs"
    build_dir, said = configure(root, "cpu", f"BUILD2CMAKE_COSTS_DIR={costs}")
    assert "3 sources, longest first by size (no recorded costs yet in " in said
    # Only the light source compiles, as if the build had been stopped after it.
    (light,) = re.findall(
        r"^build (CMakeFiles/\S+/cpu/light\.cpp\.o):", (build_dir / "build.ninja").read_text(), re.M
    )
    done = subprocess.run([ninja_program(), "-C", str(build_dir), light],
                          capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    assert not list(costs.glob("*.tsv"))  # no link, so no POST_BUILD record
    build_dir, said = configure(root, "cpu", f"BUILD2CMAKE_COSTS_DIR={costs}")
    assert "kernel_ops_cpu: 3 sources, longest first by recorded seconds (1 of 3 recorded)" in said
    (record,) = costs.glob("*.tsv")
    assert [line.split("\t")[1] for line in record.read_text().splitlines()[1:]] == [
        "cpu/light.cpp"
    ]


@pytest.mark.compile
def test_a_failed_build_records_the_compiles_that_finished(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    """`build` stops at a source that does not compile; what compiled before it is recorded, so
    the next build (here, or on a runner that restores the cache's folder) knows those costs."""
    root = uneven(project("scale_add"))
    toml = root / "build.toml"
    (root / "cpu" / "broken.cpp").write_text("#error this source does not compile\n")
    toml.write_text(
        toml.read_text().replace('"cpu/light.cpp"', '"cpu/light.cpp", "cpu/broken.cpp"', 1)
    )
    generate_torch(toml, force=True)
    costs = tmp_path / "costs"
    result = run_cli(
        "build", toml, "--backend", "cpu", "--jobs", "1",
        "-D", f"BUILD2CMAKE_COSTS_DIR={costs}", "-D", "BUILD2CMAKE_COMPILER_LAUNCHER=none",
    )  # fmt: skip
    assert result.returncode != 0
    assert "this source does not compile" in result.stdout + result.stderr
    # One job, longest first: heavy and ops_cpu compiled before broken (37 bytes) failed.
    (record,) = costs.glob("*.tsv")
    recorded = {line.split("\t")[1] for line in record.read_text().splitlines()[1:]}
    assert {"cpu/heavy.cpp", "cpu/ops_cpu.cpp"} <= recorded, recorded
    assert "cpu/broken.cpp" not in recorded
