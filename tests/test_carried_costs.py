"""The first build's order (issue #61): a project may carry its author's compile times
(build2cmake-costs.tsv, written by `build2cmake costs`), and a machine that never built the
kernel orders its compiles by them, put on its own scale. The file is the project's, so it is
untrusted: whatever it holds, it changes the order at most, never the build."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from build2cmake.builds import carried_costs
from build2cmake.generate.project import generate_torch
from tests.conftest import REPO, load_script, run_cli
from tests.test_schedule import compile_order, configure, uneven

SCRIPT = REPO / "cmake_templates" / "common" / "build2cmake_schedule.py"
RECORD = carried_costs.RECORD_NAME
# A source of a few lines that takes seconds to compile (the constant evaluations), listed
# first and smaller than heavy.cpp, which the cold estimate (bytes read) puts first.
SPIN = """constexpr long spin(long n) {
  long s = 0;
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) s += (i ^ j) % 7;
  return s;
}
static_assert(spin(1000) > 0);
static_assert(spin(1001) > 0);
int spin_one() { return 1; }
"""


@pytest.fixture
def schedule() -> ModuleType:
    return load_script(SCRIPT)


def sources_of(tmp_path: Path, sizes: dict[str, int]) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    for name, size in sizes.items():
        (folder / name).write_text("x" * size)
    return folder


def test_a_first_build_orders_by_the_projects_record_on_this_machines_scale(
    schedule: ModuleType, tmp_path: Path
) -> None:
    names = ["a.cu", "b.cu", "c.cu", "new.cu"]
    folder = sources_of(tmp_path, {"a.cu": 100, "b.cu": 200, "c.cu": 300, "new.cu": 250})
    carried = folder / RECORD
    # The author's seconds (another machine's): a.cu, the smallest, is the slowest. A line of
    # another backend says nothing of this one's compiles.
    carried.write_text(
        carried_costs.RECORD_HEADER + "30\tcuda\ta.cu\n10\tcuda\tb.cu\n20\tcuda\tc.cu\n"
        "99\trocm\tnew.cu\n"
    )
    costs = tmp_path / "costs" / "p-cuda.tsv"

    def ranked() -> tuple[list[str], str]:
        order, how, _ = schedule.order(
            str(costs), str(folder), str(tmp_path / "b"), [], names, "", str(carried), "cuda"
        )
        return [names[i] for i in order], how

    # No seconds of this machine: the record decides; new.cu, absent from it, is weighed by its
    # bytes times the record's median seconds per byte (0.3, 0.05, 0.067: 0.067, so 16.7 s).
    assert ranked() == (
        ["a.cu", "c.cu", "new.cu", "b.cu"],
        f"by the project's {RECORD} (3 of 4 recorded there)",
    )
    # This machine recorded b.cu at 100 s, ten times the author's 10 s: the record's other
    # seconds are taken ten times (a.cu 300, c.cu 200), and new.cu is weighed on this
    # machine's own seconds per byte (0.5: 125 s).
    costs.parent.mkdir()
    costs.write_text("100\tb.cu\n")
    assert ranked() == (
        ["a.cu", "c.cu", "new.cu", "b.cu"],
        f"by recorded seconds (1 of 4 recorded, 2 in the project's {RECORD})",
    )
    # This machine's own seconds win over the record's where both know a source: c.cu took 5 s
    # here (the record's 20 s, scaled, would put it second).
    costs.write_text("100\tb.cu\n5\tc.cu\n")
    assert ranked()[0] == ["a.cu", "new.cu", "b.cu", "c.cu"]
    # This machine knows only new.cu, which the record lacks: the record is put on this
    # machine's scale through seconds per byte (here 1, in the record 0.067: 15 times).
    costs.write_text("250\tnew.cu\n")
    assert ranked()[0] == ["a.cu", "c.cu", "new.cu", "b.cu"]
    # Everything recorded here: the record is not mentioned.
    costs.write_text("1\ta.cu\n2\tb.cu\n3\tc.cu\n4\tnew.cu\n")
    assert ranked() == (["new.cu", "c.cu", "b.cu", "a.cu"], "by recorded seconds (4 of 4 recorded)")


@pytest.mark.parametrize(
    "kind", ["symlink", "fifo", "folder", "oversize", "device", "garbage", "other-backend"]
)
def test_a_broken_or_hostile_record_changes_nothing_but_what_it_validly_says(
    schedule: ModuleType, tmp_path: Path, kind: str
) -> None:
    """Whatever the project's record is, the order call returns (no wait on a FIFO, no read of
    an endless device), and only its checked lines count: each bad kind leaves the cold order
    (the largest first), and says in one printable line why the file was not used."""
    names = ["a.cu", "b.cu", "c.cu"]
    folder = sources_of(tmp_path, {"a.cu": 100, "b.cu": 200, "c.cu": 300})
    carried = folder / RECORD
    valid = carried_costs.RECORD_HEADER + "50\tcuda\ta.cu\n"
    reason = ""
    if kind == "symlink":
        (tmp_path / "elsewhere.tsv").write_text(valid)
        carried.symlink_to(tmp_path / "elsewhere.tsv")
        reason = "a symbolic link"
    elif kind == "fifo":
        os.mkfifo(carried)
        reason = "not a regular file"
    elif kind == "folder":
        carried.mkdir()
        reason = "not a regular file"
    elif kind == "device":  # an endless one
        order, how, _ = schedule.order(
            "", str(folder), str(tmp_path / "b"), [], names, "", "/dev/zero", "cuda"
        )
        assert [names[i] for i in order] == ["c.cu", "b.cu", "a.cu"]
        assert how.endswith(f"; {RECORD} not used: not a regular file")
        return
    elif kind == "oversize":
        carried.write_text(valid + "1\tcuda\tb.cu\n" * (schedule.COSTS_LIMIT // 12))
        reason = f"larger than {schedule.COSTS_LIMIT} bytes"
    elif kind == "garbage":
        # Not one line a number, a backend and a plain relative path: none is used.
        carried.write_text(
            "50\tcuda\t../src/a.cu\n50\tcuda\t/abs/a.cu\nnan\tcuda\ta.cu\ninf\tcuda\ta.cu\n"
            "-5\tcuda\ta.cu\n1e9\tcuda\ta.cu\n50\tcuda\ta.cu\textra\n50\tCUDA\ta.cu\n"
            "50\tcu da\ta.cu\n50 cuda a.cu\n50\tcuda\ta .cu\n\x00\xff\n"
            "50\tcuda\tsrc//a.cu\n"
        )
    elif kind == "other-backend":
        carried.write_text(carried_costs.RECORD_HEADER + "50\trocm\ta.cu\n")
    order, how, _ = schedule.order(
        "", str(folder), str(tmp_path / "b"), [], names, "", str(carried), "cuda"
    )
    assert [names[i] for i in order] == ["c.cu", "b.cu", "a.cu"], how
    assert how.isprintable()
    if reason:
        assert how.endswith(f"; {RECORD} not used: {reason}")
    else:
        assert "not used" not in how and how.startswith("by size")


def test_one_valid_line_among_hostile_ones_is_the_only_one_used(
    schedule: ModuleType, tmp_path: Path
) -> None:
    names = ["a.cu", "b.cu", "c.cu"]
    folder = sources_of(tmp_path, {"a.cu": 100, "b.cu": 200, "c.cu": 300})
    carried = folder / RECORD
    carried.write_text(
        "1e9\tcuda\tc.cu\n7\tcuda\t../../etc/passwd\n50\tcuda\ta.cu\n-1\tcuda\tb.cu\n"
        + "\x1b[2J\tcuda\tb.cu\n"
    )
    order, how, _ = schedule.order(
        "", str(folder), str(tmp_path / "b"), [], names, "", str(carried), "cuda"
    )
    # a.cu at 50 s; b.cu and c.cu by bytes on the record's scale (0.5 s a byte: 100 and 150).
    assert [names[i] for i in order] == ["c.cu", "b.cu", "a.cu"]
    assert how == f"by the project's {RECORD} (1 of 3 recorded there)"
    # A backend that is not a plain name reads nothing.
    _, how, _ = schedule.order(
        "", str(folder), str(tmp_path / "b"), [], names, "", str(carried), "../cuda"
    )
    assert how.startswith("by size")


def test_an_edited_record_of_extreme_seconds_still_gives_numbers_to_sort_by(
    schedule: ModuleType, tmp_path: Path
) -> None:
    """5e-324 s (the least float) against this machine's 10 s would scale the record infinitely,
    and 0 s times infinity is no number: the scale then falls back, and the order is sound."""
    names = ["a.cu", "b.cu", "c.cu"]
    folder = sources_of(tmp_path, {"a.cu": 100, "b.cu": 200, "c.cu": 300})
    carried = folder / RECORD
    carried.write_text("5e-324\tcuda\ta.cu\n0\tcuda\tb.cu\n1e5\tcuda\tc.cu\n")
    costs = tmp_path / "p-cuda.tsv"
    costs.write_text("10\ta.cu\n")
    order, how, _ = schedule.order(
        str(costs), str(folder), str(tmp_path / "b"), [], names, "", str(carried), "cuda"
    )
    assert [names[i] for i in order] == ["c.cu", "a.cu", "b.cu"]
    assert how == f"by recorded seconds (1 of 3 recorded, 2 in the project's {RECORD})"
    # No sources: nothing to order, and no error.
    assert (
        schedule.order(str(costs), str(folder), str(tmp_path), [], [], "", str(carried), "cuda")[0]
        == []
    )


def measured(build_dir: Path, folder: str) -> dict[str, float]:
    """Seconds of each compile of `folder`'s sources in the build's .ninja_log."""
    seconds = {}
    for line in (build_dir / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, output, _ = line.split("\t")
        match = re.fullmatch(rf"CMakeFiles/[^/]+\.dir/{folder}/(\w+)\.\w+\.o", output)
        if match:
            seconds[match[1]] = (int(end) - int(start)) / 1000
    return seconds


def spin_project(root: Path) -> Path:
    """The uneven fixture with the spinning source listed first in the cpu kernel."""
    uneven(root)
    (root / "cpu" / "spin.cpp").write_text(SPIN)
    toml = root / "build.toml"
    toml.write_text(
        toml.read_text().replace('"cpu/light.cpp"', '"cpu/spin.cpp", "cpu/light.cpp"', 1)
    )
    generate_torch(toml, force=True)
    return root


def commands(build_dir: Path) -> set[tuple[str, str]]:
    """Each compile's source and command line, with the build folder's name taken out."""
    entries = json.loads((build_dir / "compile_commands.json").read_text())
    return {(entry["file"], entry["command"].replace(str(build_dir), "BUILD")) for entry in entries}


@pytest.mark.compile
def test_the_authors_record_orders_a_first_build_elsewhere_as_the_authors_build_measured(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    root = spin_project(project("scale_add"))
    # The author's machine: a build, then `costs` keeps its seconds in the project.
    result = run_cli(
        "build", root / "build.toml", "--backend", "cpu", "--jobs", "1",
        "-D", f"BUILD2CMAKE_COSTS_DIR={tmp_path / 'author'}",
        "-D", "BUILD2CMAKE_COMPILER_LAUNCHER=none",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    seconds = measured(root / "build" / "cmake-variant-cpu", "cpu")
    assert set(seconds) == {"spin", "light", "ops_cpu", "heavy"}
    # The case a size estimate gets wrong: the smallest source is slower than the largest.
    assert seconds["spin"] > seconds["heavy"], seconds
    saved = run_cli("costs", root)
    assert saved.returncode == 0, saved.stderr
    assert f"wrote {RECORD} (cpu: 5 compiles)" in saved.stdout
    record = (root / RECORD).read_text()
    assert record.startswith(carried_costs.RECORD_HEADER)
    assert {line.split("\t")[2] for line in record.splitlines() if line[0] != "#"} == {
        "cpu/spin.cpp", "cpu/light.cpp", "cpu/ops_cpu.cpp", "cpu/heavy.cpp",
        "torch-ext/torch_binding.cpp",
    }  # fmt: skip

    # A clone on a machine that never built it (its own, empty costs folder): the order is
    # the author's measured one, not the cold estimate's.
    clone = tmp_path / "clone" / "scale_add"
    shutil.copytree(root, clone, ignore=shutil.ignore_patterns("build"))
    fresh = f"BUILD2CMAKE_COSTS_DIR={tmp_path / 'fresh'}"
    build_dir, said = configure(clone, "cpu", fresh)
    order = compile_order(build_dir, "cpu")
    assert order == sorted(seconds, key=lambda name: -seconds[name]), (order, seconds)
    assert f"kernel_ops_cpu: 4 sources, longest first by the project's {RECORD} (4 of 4" in said
    (clone / RECORD).unlink()
    cold_dir, said = configure(clone, "cpu", fresh, name="-cold")
    cold = compile_order(cold_dir, "cpu")
    assert cold.index("heavy") < cold.index("spin")  # by size
    assert "longest first by size" in said

    # A hostile record (the reverse order, out-of-range numbers, paths out of the project,
    # terminal escapes): the same compiles, flag for flag, in another order.
    (clone / RECORD).write_text(
        "100\tcpu\tcpu/light.cpp\n1e300\tcpu\tcpu/spin.cpp\n5\tcpu\t../../x.cpp\n"
        "9\tcpu\tcpu/\x1b[31mheavy.cpp\n" + "0\tcpu\tcpu/ops_cpu.cpp\n"
    )
    hostile_dir, said = configure(clone, "cpu", fresh, name="-hostile")
    order = compile_order(hostile_dir, "cpu")
    assert order.index("light") < order.index("ops_cpu")
    assert order != cold
    assert commands(hostile_dir) == commands(cold_dir)
    assert said.isprintable()


def test_costs_keeps_only_the_projects_sources_from_the_files_its_build_folders_name(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    """The build folders are the clone's: what they name is read only when it is a bounded
    regular file called <package>-<backend>.tsv, and only its seconds for the project's own
    sources are kept."""
    root = project("scale_add")
    none = run_cli("costs", root)
    assert none.returncode == 2
    assert "no compile times recorded for scale_add's sources" in none.stderr
    assert "Traceback" not in none.stderr

    recorded = tmp_path / "cache" / "scale_add-cuda.tsv"
    recorded.parent.mkdir()
    recorded.write_text(
        "# build2cmake compile costs, v1\n12.3456\tcuda/ops.cu\n7\ttorch-ext/torch_binding.cpp\n"
        "5\tcuda/gone.cu\n5\t../../etc/passwd\n5\thipified/cuda/ops.hip\n"
    )
    for name, named in (
        ("cmake-variant-cuda", str(recorded)),
        ("planted-1", "/etc/passwd"),  # not a <package>-<backend>.tsv
        ("planted-2", str(tmp_path / "cache" / "other_package-cuda.tsv")),
        ("planted-3", "relative/scale_add-cuda.tsv"),
    ):
        (root / "build" / name).mkdir(parents=True)
        (root / "build" / name / carried_costs.POINTER_NAME).write_text(named + "\n")
    (tmp_path / "cache" / "other_package-cuda.tsv").write_text("99\tcuda/ops.cu\n")
    # A pointer holding a NUL or a second line, and a costs file that is a symlink loop.
    (root / "build" / "planted-5").mkdir()
    (root / "build" / "planted-5" / carried_costs.POINTER_NAME).write_text(
        f"{tmp_path}/c\0/scale_add-cuda.tsv\n"
    )
    (root / "build" / "planted-6").mkdir()
    (root / "build" / "planted-6" / carried_costs.POINTER_NAME).write_text(
        f"{recorded}\n{recorded}\n"
    )
    loop = tmp_path / "loop" / "scale_add-cuda.tsv"
    loop.parent.mkdir()
    loop.symlink_to(loop)
    (root / "build" / "planted-7").mkdir()
    (root / "build" / "planted-7" / carried_costs.POINTER_NAME).write_text(f"{loop}\n")
    # A pointer that is a symlink is not followed.
    (root / "build" / "planted-4").mkdir()
    (root / "build" / "planted-4" / carried_costs.POINTER_NAME).symlink_to(
        root / "build" / "cmake-variant-cuda" / carried_costs.POINTER_NAME
    )
    saved = run_cli("costs", root)
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout.strip() == f"wrote {RECORD} (cuda: 3 compiles)"
    lines = (root / RECORD).read_text().splitlines()
    assert [line for line in lines if not line.startswith("#")] == [
        "12.3\tcuda\tcuda/ops.cu",
        "5\tcuda\thipified/cuda/ops.hip",  # a ROCm build's hipified copy of cuda/ops.cu
        "7\tcuda\ttorch-ext/torch_binding.cpp",
    ]

    # Another backend's lines are kept when this one is written again.
    (root / RECORD).write_text((root / RECORD).read_text() + "4\trocm\thip/scale_add.hip\n")
    recorded.write_text("20\tcuda/ops.cu\n")
    assert run_cli("costs", root).returncode == 0
    assert [line for line in (root / RECORD).read_text().splitlines() if line[0] != "#"] == [
        "20\tcuda\tcuda/ops.cu",
        "4\trocm\thip/scale_add.hip",
    ]

    # A file of that name that build2cmake did not write is the user's: kept unless --force.
    (root / RECORD).write_text("my notes\n")
    refused = run_cli("costs", root)
    assert refused.returncode == 2
    assert "not a record build2cmake wrote" in refused.stderr and "--force" in refused.stderr
    assert (root / RECORD).read_text() == "my notes\n"
    assert run_cli("costs", root, "--force").returncode == 0
    assert (root / RECORD).read_text().startswith(carried_costs.RECORD_HEADER)

    # A record that is a symlink loop: one error naming it.
    (root / RECORD).unlink()
    (root / RECORD).symlink_to(RECORD)
    looped = run_cli("costs", root)
    assert looped.returncode == 2 and "Traceback" not in looped.stderr
    assert f"{RECORD}: cannot read" in looped.stderr

    # A symlink at the record's name is replaced by the file, never written through.
    target = tmp_path / "outside.tsv"
    target.write_text(carried_costs.RECORD_HEADER)
    (root / RECORD).unlink()
    (root / RECORD).symlink_to(target)
    assert run_cli("costs", root, "--force").returncode == 0
    assert not (root / RECORD).is_symlink()
    assert target.read_text() == carried_costs.RECORD_HEADER


def test_the_record_stays_within_what_the_schedule_reads(tmp_path: Path) -> None:
    """Seconds for more compiles than 1 MiB holds: the cheapest are left out, so that the file
    `costs` writes is one the schedule (and `costs` itself) reads."""
    long = "d/" + "x" * 400
    record = {
        backend: {f"{long}{i}.cu": float(i) for i in range(1500)} for backend in ("cuda", "rocm")
    }
    lines = carried_costs.record_lines(record)
    size = len(carried_costs.RECORD_HEADER.encode()) + sum(len(line.encode()) for line in lines)
    limit = carried_costs.schedule().COSTS_LIMIT
    assert limit - 500 < size <= limit
    kept = {float(line.split("\t")[0]) for line in lines}
    assert 1499.0 in kept and 0.0 not in kept  # the cheapest went
    assert carried_costs.shown_seconds(999_999.0) == "999999"
    assert carried_costs.shown_seconds(12.3456) == "12.3"


def test_a_build_suggests_costs_only_where_a_first_build_elsewhere_gains(
    project: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = uneven(project("scale_add"))  # three compiled cpu sources
    toml = root / "build.toml"
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert carried_costs.suggestion(toml, "cpu") is None  # nothing recorded: no build folder
    (root / "build" / "cmake-variant-cpu").mkdir(parents=True)
    (root / "build" / "cmake-variant-cpu" / carried_costs.POINTER_NAME).write_text("/c/x.tsv\n")
    line = carried_costs.suggestion(toml, "cpu")
    assert line is not None and "`build2cmake costs`" in line and line.startswith("3 kernel")
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert carried_costs.suggestion(toml, "cpu") is None  # every source starts at once
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    (root / RECORD).write_text(carried_costs.RECORD_HEADER)
    assert carried_costs.suggestion(toml, "cpu") is None  # the project carries one


REGISTRY = """// A registry constructed at static initialisation, as layer-norm's function maps are.
struct Registry {
  Registry();
  void add();
  bool constructed;
  int early;  // additions before the constructor ran: zero-initialised, kept by it
};
Registry::Registry() : constructed(true) {}
void Registry::add() { if (!constructed) ++early; }
Registry registry;
extern "C" int registry_early_additions() { return registry.early; }
"""
REGISTRAR = """struct Registry { Registry(); void add(); bool constructed; int early; };
extern Registry registry;
static const int added = (registry.add(), 0);
"""


@pytest.mark.compile
def test_objects_link_in_build_tomls_order_whatever_order_they_compile_in(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    """A record that starts registrar.cpp first does not link it first: its static initialiser
    still runs after the constructor of the registry that build.toml lists before it."""
    root = uneven(project("scale_add"))
    (root / "cpu" / "registry.cpp").write_text(REGISTRY)
    (root / "cpu" / "registrar.cpp").write_text(REGISTRAR)
    toml = root / "build.toml"
    listed = '"cpu/registry.cpp", "cpu/registrar.cpp", "cpu/light.cpp"'
    toml.write_text(toml.read_text().replace('"cpu/light.cpp"', listed, 1))
    generate_torch(toml, force=True)
    (root / RECORD).write_text(
        "90\tcpu\tcpu/registrar.cpp\n1\tcpu\tcpu/registry.cpp\n50\tcpu\tcpu/heavy.cpp\n"
    )
    result = run_cli(
        "build", toml, "--backend", "cpu",
        "-D", f"BUILD2CMAKE_COSTS_DIR={tmp_path / 'costs'}",
        "-D", "BUILD2CMAKE_COMPILER_LAUNCHER=none",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    build_dir = root / "build" / "cmake-variant-cpu"
    compiled = compile_order(build_dir, "cpu")
    assert compiled[:2] == ["registrar", "heavy"], compiled
    (link,) = re.findall(
        r"^build \S+\.so: \S+ (.*)$", (build_dir / "build.ninja").read_text(), re.M
    )
    linked = re.findall(r"CMakeFiles/kernel_ops_cpu\.dir/cpu/(\w+)\.cpp\.o", link)
    assert linked == ["registry", "registrar", "light", "ops_cpu", "heavy"], link
    variant = root / result.stdout.strip().splitlines()[-1].split()[1]
    (extension,) = variant.rglob("*.so")
    check = subprocess.run(
        [sys.executable, "-c",
         "import ctypes, sys, torch; "
         "print(ctypes.CDLL(sys.argv[1]).registry_early_additions())", str(extension)],
        capture_output=True, text=True, check=False, timeout=300, cwd="/",
    )  # fmt: skip
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.strip() == "0"


@pytest.mark.compile
def test_the_longest_source_of_a_later_kernel_starts_first(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    """Ninja starts compiles target after target; the priorities (a chain of no-op steps per
    place, Ninja 1.12's critical path) rank every kernel's sources together: with one job, the
    first compile is the most-weighed one, of the kernel build.toml lists last."""
    root = uneven(project("scale_add"))
    (root / "cpu2").mkdir()
    (root / "cpu2" / "spin.cpp").write_text(SPIN)
    toml = root / "build.toml"
    toml.write_text(
        toml.read_text()
        + '\n[kernel.second_cpu]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["cpu2/spin.cpp"]\n'
    )
    generate_torch(toml, force=True)
    (root / RECORD).write_text(
        "90\tcpu\tcpu2/spin.cpp\n3\tcpu\tcpu/heavy.cpp\n2\tcpu\tcpu/ops_cpu.cpp\n"
        "1\tcpu\tcpu/light.cpp\n"
    )
    result = run_cli(
        "build", toml, "--backend", "cpu", "--jobs", "1",
        "-D", f"BUILD2CMAKE_COSTS_DIR={tmp_path / 'costs'}",
        "-D", "BUILD2CMAKE_COMPILER_LAUNCHER=none", "-D", "BUILD2CMAKE_CORES=2",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    build_dir = root / "build" / "cmake-variant-cpu"
    started = [
        line.split("\t")[3]
        for line in (build_dir / ".ninja_log").read_text().splitlines()[1:]
        if line.split("\t")[3].endswith(".cpp.o")
    ]
    assert started[0] == "CMakeFiles/kernel_second_cpu.dir/cpu2/spin.cpp.o", started
    # Then the first kernel's, longest first (the binding, unrecorded, is weighed by size).
    kernel = [name.rsplit("/", 1)[1] for name in started if "kernel_ops_cpu" in name]
    assert kernel == ["heavy.cpp.o", "ops_cpu.cpp.o", "light.cpp.o"], started
    # Four places (2 x 2 cores): stamps 0-3 in the build folder, each made once.
    assert sorted(p.name for p in (build_dir / "build2cmake-priorities").iterdir()) == [
        "0.stamp", "1.stamp", "2.stamp", "3.stamp"
    ]  # fmt: skip
