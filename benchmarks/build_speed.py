"""Build speed of generated projects, side by side with the compiler floor and cpp_extension.

Run from the repository root (after scripts/setup.sh):
    python benchmarks/build_speed.py [--jobs 2] [--cases gemm-cpu,gemm-rocm,fixture-cpu,...]
        [--out FILE]

For each case (a project and a backend) it measures, in this order, in one run:
  generate      `build2cmake generate-torch` (median of 5 runs, a fresh interpreter each)
  cold          `pip install --no-build-isolation -e` into a fresh build folder; a first run warms
                the OS file cache, then cold and floor par alternate twice and each keeps its best
  build cold    `build2cmake build` (CMake + Ninja without pip) into its own fresh build folder
  floor seq/par the compile commands of the build's compile_commands.json run directly, one after
                another and --jobs at a time (no link: the floor is the compiler alone)
  configure     CMake's configure alone, in a fresh folder (part of cold's fixed cost)
  pip floor     the same pip command on a project whose build backend does nothing (an in-tree
                PEP 517 backend that writes a minimal editable wheel): pip's own cost, first
                install and again; what pip no-op costs beyond it is ours
  import no-op  `import torch, <pkg>` minus `import torch` with nothing changed (the editable
                install's rebuild check), median of 5
  pip no-op     `pip install` again with nothing changed
  edit .hip/.cu and edit .cpp: touch one kernel source, then one binding source; what Ninja
                rebuilt (must be that object and the link) and the import that rebuilt it
  cpp_extension the same sources through torch.utils.cpp_extension (setup.py, Ninja backend,
                MAX_JOBS=--jobs): cold and no-op; n/a for HIP, which needs a ROCm torch
  ccache        cold with an empty cache, then a fresh build folder with the warm cache
Every build uses --jobs parallel jobs; the compiler cache is off except in the ccache rows.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from build2cmake.toolchains.programs import ninja_program  # noqa: E402

GENERATED = ("CMakeLists.txt", "cmake", "pyproject.toml", "_ops.py", "registration.h", "build")


@dataclass
class Case:
    name: str
    project: Path
    backend: str
    kernel_source: str  # touched for the kernel edit
    binding_source: str = "torch-ext/torch_binding.cpp"
    defines: tuple[str, ...] = ()  # CMake cache entries for every build of the case


CASES = {
    "gemm-cpu": Case("gemm-cpu", REPO / "kernels/gemm", "cpu", "cpu/gemm_cpu.cpp"),
    # gfx942 needs ROCm >= 5.7; Debian 12's 5.2 builds the other two.
    "gemm-rocm": Case(
        "gemm-rocm",
        REPO / "kernels/gemm",
        "rocm",
        "gemm/gemm_launcher.hip",
        defines=("BUILD2CMAKE_ROCM_ARCHS=gfx90a;gfx940",),
    ),
    "fixture-cpu": Case("fixture-cpu", REPO / "tests/fixtures/scale_add", "cpu", "cpu/ops_cpu.cpp"),
    "fixture-rocm": Case(
        "fixture-rocm", REPO / "tests/fixtures/scale_add", "rocm", "hip/scale_add.hip"
    ),
}


@dataclass
class Row:
    case: str
    values: dict[str, float | str] = field(default_factory=dict)


def timed(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(command)} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return elapsed


def fresh_copy(case: Case, root: Path) -> Path:
    destination = root / case.name
    shutil.copytree(
        case.project,
        destination,
        ignore=shutil.ignore_patterns(
            *GENERATED, "__pycache__", ".build2cmake-manifest.json", "compile_commands.json"
        ),
    )
    return destination


def floor(build_dir: Path, jobs: int, scratch: Path) -> tuple[float, float, int]:
    """The compile commands alone: sequential and `jobs` at a time, in a scratch folder."""
    entries = json.loads((build_dir / "compile_commands.json").read_text())
    commands = []
    for entry in entries:
        argv = entry.get("arguments") or shlex.split(entry["command"])
        output = argv[argv.index("-o") + 1]
        (scratch / output).parent.mkdir(parents=True, exist_ok=True)
        commands.append(argv)

    def run(argv: list[str]) -> None:
        result = subprocess.run(argv, cwd=scratch, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"floor command failed: {shlex.join(argv)}\n{result.stderr[-2000:]}")

    start = time.perf_counter()
    for argv in commands:
        run(argv)
    sequential = time.perf_counter() - start
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(run, commands))
    parallel = time.perf_counter() - start
    return sequential, parallel, len(commands)


def pip_floor(pip: list[str], root: Path, env: dict[str, str]) -> tuple[float, float]:
    """pip's own cost for an editable install (first, then again), with a do-nothing backend."""
    project = root / "pip-floor"
    project.mkdir(exist_ok=True)
    shutil.copy(Path(__file__).with_name("pip_floor_backend.py"), project / "backend.py")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "b2c-pip-floor"\nversion = "1"\ndependencies = ["torch"]\n'
    )
    first = timed([*pip, "-e", str(project)], env=env)
    again = timed([*pip, "-e", str(project)], env=env)
    timed([*pip[: pip.index("install")], "uninstall", "-y", "-q", "b2c_pip_floor"], env=env)
    return first, again


def ninja_plan(build_dir: Path) -> list[str]:
    """What Ninja would rebuild now (dry run): object files and the extension."""
    command = [ninja_program(), "-C", str(build_dir), "-n"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    steps = []
    for line in result.stdout.splitlines():
        if line.startswith("[") and "] " in line:
            steps.append(line.split("] ", 1)[1])
    return steps


def cpp_extension_times(
    case: Case, project: Path, python: Path, jobs: int, root: Path
) -> tuple[float, float] | str:
    if case.backend != "cpu":
        return "n/a (HIP through cpp_extension needs a ROCm build of torch)"
    config = tomllib.loads((project / "build.toml").read_text())
    sources = [s for s in config["torch"]["src"] if s.endswith(".cpp")]
    flags: list[str] = []
    for kernel in config["kernel"].values():
        if kernel["backend"] == "cpu":
            sources += [s for s in kernel["src"] if s.endswith(".cpp")]
            flags += kernel.get("cxx-flags", [])
    name = f"_{config['general']['name'].replace('-', '_')}_cppext"
    setup = root / f"setup_{case.name}"
    setup.mkdir()
    (setup / "setup.py").write_text(
        "from setuptools import setup\n"
        "from torch.utils.cpp_extension import BuildExtension, CppExtension\n"
        f"setup(name={name!r}, ext_modules=[CppExtension({name!r}, "
        f"{[str(project / s) for s in sources]!r}, include_dirs={[str(project / 'torch-ext')]!r}, "
        f"define_macros=[('CPU_KERNEL', None), ('TORCH_EXTENSION_NAME', {name!r})], "
        f"extra_compile_args={[*flags, '-O3']!r})], "
        "cmdclass={'build_ext': BuildExtension.with_options(use_ninja=True)})\n"
    )
    env = {**os.environ, "MAX_JOBS": str(jobs)}
    command = [str(python), "setup.py", "-q", "build_ext", "--inplace"]
    cold = timed(command, env=env, cwd=setup)
    noop = timed(command, env=env, cwd=setup)
    return cold, noop


def measure(case: Case, root: Path, jobs: int, with_ccache: bool) -> Row:
    row = Row(case.name)
    project = fresh_copy(case, root)
    toml = project / "build.toml"
    generate = [
        sys.executable,
        "-m",
        "build2cmake",
        "generate-torch",
        str(toml),
        "--backend",
        case.backend,
    ]
    subprocess.run(generate, capture_output=True, check=True)
    row.values["generate"] = statistics.median(timed(generate) for _ in range(5))

    env_dir = root / f"venv-{case.name}"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    pip = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        str(python),
        "install",
        "--no-build-isolation",
        "--no-deps",
        "-q",
    ]
    defines = [arg for d in case.defines for arg in ("-C", f"cmake.define.{d}")]
    settings = ["-C", "cmake.define.BUILD2CMAKE_COMPILER_LAUNCHER=OFF", *defines]
    env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs)}
    build_dir = project / "build" / "cmake"

    install = [*pip, *settings, "-e", str(project)]
    row.values["cold (1st)"] = timed(install, env=env)
    scratch = root / f"floor-{case.name}"
    scratch.mkdir()
    # The machine's speed drifts by seconds over minutes: alternate our cold build and the floor,
    # twice, and compare the best of each.
    colds, pars, seqs = [], [], []
    for _ in range(2):
        shutil.rmtree(build_dir)
        colds.append(timed(install, env=env))
        sequential, parallel, count = floor(build_dir, jobs, scratch)
        pars.append(parallel)
        seqs.append(sequential)
    row.values["cold"], row.values["floor par"] = min(colds), min(pars)
    row.values["floor seq"], row.values["compiles"] = min(seqs), count
    # The same compile through `build2cmake build` (CMake + Ninja directly, no pip).
    build_cmd = [sys.executable, "-m", "build2cmake", "build", str(toml), "--backend", case.backend]
    build_cmd += ["-j", str(jobs), "-D", "BUILD2CMAKE_COMPILER_LAUNCHER=OFF"]
    build_cmd += [arg for d in case.defines for arg in ("-D", d)]
    row.values["build cmd cold"] = timed(build_cmd, env=env)
    # CMake's configure alone, in a fresh folder: the fixed cost every cold build pays.
    configure = ["cmake", "-S", str(project), "-B", str(root / f"configure-{case.name}"), "-G"]
    configure += ["Ninja", f"-DPython_EXECUTABLE={python}", f"-DBUILD2CMAKE_BACKEND={case.backend}"]
    configure += ["-DCMAKE_BUILD_TYPE=Release", "-DBUILD2CMAKE_COMPILER_LAUNCHER=OFF"]
    configure += [f"-D{d}" for d in case.defines]
    row.values["configure"] = timed(configure, env=env)
    row.values["pip floor"], row.values["pip floor again"] = pip_floor(pip, root, env)

    pkg = next(p.name for p in (project / "torch-ext").iterdir() if (p / "__init__.py").is_file())
    base = statistics.median(
        timed([str(python), "-c", "import torch"], env=env, cwd=Path("/")) for _ in range(5)
    )
    full = statistics.median(
        timed([str(python), "-c", f"import torch, {pkg}"], env=env, cwd=Path("/")) for _ in range(5)
    )
    row.values["import no-op"] = max(full - base, 0.0)
    row.values["pip no-op"] = timed(install, env=env)

    for label, source in (
        ("edit kernel", case.kernel_source),
        ("edit binding", case.binding_source),
    ):
        (project / source).touch()
        plan = ninja_plan(build_dir)
        objects = [s for s in plan if "Building" in s]
        links = [s for s in plan if "Linking" in s]
        ok = len(objects) == 1 and source.split("/")[-1] in objects[0] and len(links) == 1
        row.values[f"{label} plan"] = "1 compile + link" if ok else "; ".join(plan) or "nothing"
        row.values[label] = (
            timed([str(python), "-c", f"import torch, {pkg}"], env=env, cwd=Path("/")) - base
        )

    result = cpp_extension_times(case, project, python, jobs, root)
    if isinstance(result, str):
        row.values["cppext cold"] = row.values["cppext no-op"] = result
    else:
        row.values["cppext cold"], row.values["cppext no-op"] = result

    if with_ccache:
        cache = root / f"ccache-{case.name}"
        cenv = {**env, "CCACHE_DIR": str(cache)}
        launcher = f"cmake.define.BUILD2CMAKE_COMPILER_LAUNCHER={shutil.which('ccache')}"
        on = ["-C", launcher, *defines]
        shutil.rmtree(build_dir)
        row.values["ccache cold"] = timed([*pip, *on, "-e", str(project)], env=cenv)
        shutil.rmtree(build_dir)
        row.values["ccache warm"] = timed([*pip, *on, "-e", str(project)], env=cenv)
    return row


def fmt(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:.2f}"


def ratio(a: float | str | None, b: float | str | None) -> str:
    if isinstance(a, float) and isinstance(b, float) and b > 0:
        return f"{a / b:.2f}"
    return "-"


def table(rows: list[Row], jobs: int) -> str:
    cpu = os.cpu_count()
    lines = [
        f"Machine: {cpu} cores, --jobs {jobs}; seconds (lower is better), ratios in brackets.",
        "",
        "Cold builds. Fixed cost = cold - floor par; of it, pip floor is pip's own (a do-nothing "
        "backend) and configure is CMake's configure in a fresh folder.",
        "",
        "| case | floor par (seq; compiles) | cold (pip) [/ floor par] | fixed cost "
        "| pip floor | configure | build cmd cold [/ floor par] "
        "| cpp_extension cold [cold / it] | generate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        v = row.values
        cppext = (
            "n/a (needs a ROCm torch)"
            if isinstance(v["cppext cold"], str)
            else f"{fmt(v['cppext cold'])} [{ratio(v['cold'], v['cppext cold'])}]"
        )
        fixed = v["cold"] - v["floor par"]  # type: ignore[operator]
        lines.append(
            f"| {row.case} | {fmt(v['floor par'])} ({fmt(v['floor seq'])}; {v['compiles']}) "
            f"| {fmt(v['cold'])} [{ratio(v['cold'], v['floor par'])}] | {fmt(fixed)} "
            f"| {fmt(v['pip floor'])} | {fmt(v['configure'])} "
            f"| {fmt(v['build cmd cold'])} [{ratio(v['build cmd cold'], v['floor par'])}] "
            f"| {cppext} | {fmt(v['generate'])} |"
        )
    lines += [
        "",
        "Rebuilds. pip no-op beyond pip = pip no-op - pip floor (again): what scikit-build-core "
        "and CMake add to pip's own cost.",
        "",
        "| case | import no-op | pip no-op | pip floor (again) | pip no-op beyond pip "
        "| edit kernel | edit binding | cpp_extension no-op | ccache cold → warm |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        v = row.values
        ccache = (
            f"{fmt(v.get('ccache cold'))} → {fmt(v.get('ccache warm'))} "
            f"({ratio(v.get('ccache warm'), v.get('ccache cold'))})"
            if "ccache cold" in v
            else "no ccache"
        )
        beyond = v["pip no-op"] - v["pip floor again"]  # type: ignore[operator]
        lines.append(
            f"| {row.case} | {fmt(v['import no-op'])} | {fmt(v['pip no-op'])} "
            f"| {fmt(v['pip floor again'])} | {fmt(beyond)} "
            f"| {fmt(v['edit kernel'])} [{v['edit kernel plan']}] "
            f"| {fmt(v['edit binding'])} [{v['edit binding plan']}] "
            f"| {fmt(v['cppext no-op'])} | {ccache} |"
        )
    return "\n".join(lines) + "\n"


def write_section(path: Path, body: str) -> None:
    begin, end = "<!-- build_speed.py begin -->", "<!-- build_speed.py end -->"
    text = path.read_text() if path.exists() else "# Measured results\n"
    section = f"{begin}\n## Build speed (benchmarks/build_speed.py)\n\n{body}{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + section + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--out", type=Path, help="write the table into this Markdown file")
    args = parser.parse_args()
    with_ccache = shutil.which("ccache") is not None
    rows = []
    with tempfile.TemporaryDirectory(prefix="build_speed.") as tmp:
        for name in args.cases.split(","):
            print(f"== {name}", flush=True)
            row = measure(CASES[name], Path(tmp), args.jobs, with_ccache)
            print(json.dumps(row.values, indent=1), flush=True)
            rows.append(row)
    body = table(rows, args.jobs)
    print(body)
    if args.out:
        write_section(args.out, body)


if __name__ == "__main__":
    main()
