"""benchmarks/big_kernels.py (issue #45): the floor it reads from Ninja's records, and a real
build measured end to end (tests/fixtures/scale_add, cpu backend)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from build2cmake.api import generate_torch
from build2cmake.toolchains.programs import ninja_program
from tests.conftest import REPO, load_script, requires_nvcc

SCRIPT = REPO / "benchmarks" / "big_kernels.py"


@pytest.fixture(scope="module")
def big_kernels() -> ModuleType:
    return load_script(SCRIPT)


def test_critical_path_follows_the_slowest_chain_of_a_real_ninja_build(
    big_kernels: ModuleType, tmp_path: Path
) -> None:
    # lib.so (0.3 s) waits for a.o (0.6 s), b.o (0.1 s, two outputs and a header) and, order-only,
    # x.o (0.8 s): the longest chain is x.o then lib.so, through the edge ninja draws dotted.
    (tmp_path / "build.ninja").write_text(
        "rule wait\n  command = sleep $t && touch $out\n"
        "build a.o: wait a.c\n  t = 0.6\n"
        "build b.o b.d: wait b.c | h.h\n  t = 0.1\n"
        "build x.o: wait x.c\n  t = 0.8\n"
        "build lib.so: wait a.o b.o || x.o\n  t = 0.3\n"
        "build all: phony lib.so x.o\ndefault all\n"
    )
    for source in ("a.c", "b.c", "x.c", "h.h"):
        (tmp_path / source).touch()
    subprocess.run([ninja_program(), "-C", str(tmp_path), "-j", "3"], check=True)
    steps = big_kernels.read_ninja_log(tmp_path / ".ninja_log")
    assert sorted(s.output for s in steps) == ["a.o", "b.o", "lib.so", "x.o"]  # b.d folded in
    assert big_kernels.max_parallel(steps) == 3
    seconds = {s.output: s.seconds for s in steps}
    seconds["b.d"] = seconds["b.o"]
    graph = subprocess.run(
        [ninja_program(), "-C", str(tmp_path), "-t", "graph"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total, chain = big_kernels.critical_path(graph, seconds)
    assert chain == ["x.o", "lib.so"]
    assert total == pytest.approx(seconds["x.o"] + seconds["lib.so"], abs=1e-6)
    assert 1.0 < total < 1.6


def test_replay_starts_a_logged_builds_compiles_longest_first(
    big_kernels: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Five compiles logged in the order a by-size estimate gave them (3, 3, 3, 4, 5 s on two
    # slots: 11 s), then a 1 s link. Longest first, the slots hold 5+3 and 4+3+3: 10 s, plus 1.
    lines = ["# ninja log v5"]
    for start, end, output in [(0, 3, "c.o"), (0, 3, "d.o"), (3, 6, "e.o"), (3, 7, "b.o"),
                               (6, 11, "a.o"), (11, 12, "lib.so")]:  # fmt: skip
        lines.append(f"{start * 1000}\t{end * 1000}\t0\t{output}\t{output}")
    log = tmp_path / ".ninja_log"
    log.write_text("\n".join(lines) + "\n")
    steps = big_kernels.read_ninja_log(log)
    assert big_kernels.longest_first_span(steps, 2) == pytest.approx(10 + 1)
    assert big_kernels.longest_first_span(steps, 5) == pytest.approx(5 + 1)
    assert big_kernels.longest_first_span(steps, 1) == pytest.approx(18 + 1)
    assert big_kernels.main(["--replay", str(log), "--slots", "2", "5"]) == 0
    printed = capsys.readouterr().out
    assert "6 steps, logged span 12 s" in printed
    assert "2 at once, longest first: 11 s" in printed
    assert "5 at once, longest first: 6 s" in printed


def test_a_build_past_its_timeout_is_stopped_and_reported(
    big_kernels: ModuleType, tmp_path: Path
) -> None:
    started = time.monotonic()
    report = big_kernels.measure(
        REPO / "tests" / "fixtures" / "scale_add",
        tmp_path,
        backend="cpu",
        capability="",
        # No compiler cache: with its hits the whole build fits in the second.
        defines=["BUILD2CMAKE_COMPILER_LAUNCHER=none"],
        jobs=1,
        cores=1,
        timeout=1.0,
        top=3,
    )
    assert report.status == "timeout"
    assert report.wall_s >= 1.0 and time.monotonic() - started < 60
    assert report.steps_done < 3  # the two compiles and the link cannot all fit in a second


@pytest.mark.compile
def test_big_kernels_measures_a_real_cpu_build(tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "report.json", tmp_path / "report.md"
    command = [sys.executable, str(SCRIPT), str(REPO / "tests" / "fixtures" / "scale_add")]
    command += [
        "--backend",
        "cpu",
        "--jobs",
        "2",
        "--cores",
        "2",
        "--timeout",
        "900",
        "--work",
        str(tmp_path / "w"),
    ]
    command += ["--json", str(out_json), "--markdown", str(out_md)]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (report,) = json.loads(out_json.read_text())
    assert report["project"] == "scale_add" and report["status"] == "ok"
    # Two compiles (kernel, binding) and the link, all finished.
    assert report["steps_done"] == report["steps_total"] >= 3
    assert report["jobs"] == 2 and 1 <= report["max_parallel"] <= 2
    assert report["wall_s"] >= report["ninja_s"] > 0
    # The floor bounds the build that ran: it cannot beat the longest chain, the steps' sum over
    # the cores, nor the CPU seconds over the cores (those count configure's too).
    assert report["ninja_s"] >= max(report["critical_s"], report["sum_over_jobs_s"]) - 0.05
    assert report["wall_s"] >= report["floor_s"] - 0.05
    assert report["floor_s"] == max(
        report["critical_s"], report["sum_over_jobs_s"], report["cpu_s"] / report["cores"]
    )
    assert report["cpu_s"] > 0 and len(report["top_starts"]) == len(report["top_steps"])
    assert report["critical_s"] >= report["longest_step_s"] > 0
    assert report["sum_steps_s"] >= report["critical_s"] - 0.05
    assert report["critical_path"][-1].endswith(".so")
    assert report["top_steps"][0][0].endswith(".o")
    # A C++ compiler holds well over 50 MiB; the whole tree at least as much as its largest.
    assert report["peak_rss_mib"] >= report["peak_process_mib"] > 50
    table = out_md.read_text()
    assert "| project | status | wall (s)" in table and "| scale_add | ok |" in table


@pytest.mark.compile
@requires_nvcc
def test_unit_split_runs_each_way_of_cutting_a_source_into_units(
    project: Callable[[str], Path],
) -> None:
    """benchmarks/unit_split.py on scale_add's kernel (8.0+PTX, 9.0a: three -gencode): it finds
    the compile, and every variant it times compiles."""
    root = project("scale_add")
    generate_torch(root / "build.toml")
    build_dir = root / "build" / "split"
    configure = ["cmake", "-S", str(root), "-B", str(build_dir), "-G", "Ninja",
                 "-DBUILD2CMAKE_BACKEND=cuda", "-DBUILD2CMAKE_COMPILER_LAUNCHER=none"]  # fmt: skip
    assert subprocess.run(configure, capture_output=True, check=False, timeout=300).returncode == 0
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "unit_split.py"), str(build_dir), "ops.cu"],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "3 -gencode (arch=compute_80,code=sm_80, arch=compute_80,code=compute_80, " in (
        result.stdout
    )
    rows = [line.split("|")[1].strip() for line in result.stdout.splitlines()[3:]]
    assert rows == ["threads", "serial", "split", "split-compile"]
