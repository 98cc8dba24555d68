"""Build kernel-builder projects of the corpus with build2cmake on a CUDA machine, and run each
project's own tests against what was built (issue #59; benchmarks/README.md, "The corpus on CUDA
and ROCm", has the results).

    python3 benchmarks/device_corpus.py CORPUS OUT PROJECT... [--jobs N] [--arch-list 9.0a]

Each PROJECT (a folder of CORPUS, e.g. kernels-community) is copied to a temporary folder and
built one of two ways:

- ``pip``: ``generate-torch``, then ``pip install --no-build-isolation --no-deps -e`` with
  ``TORCH_CUDA_ARCH_LIST`` set to ``--arch-list`` (the developer's "only my GPU" build); the tests
  import the installed package.
- ``kernels``: ``build2cmake build`` (or a variant already built elsewhere: ``--built
  NAME=DIR`` names a project's ``build/`` folder made on another machine, e.g. by ``build
  --variants``), then the tests run with the package loaded through
  ``kernels.get_local_kernel``, as a Hub user loads it; ``get_kernel("org/name")`` calls reach it
  through ``LOCAL_KERNELS``.

Projects without compiled sources (Triton and noarch kernels) take the ``kernels`` route. A
project sliced by benchmarks/slices.py (a SLICE.json beside its build.toml) runs its tests with
the environment and the pytest arguments the slice names, which choose the tests of what
was built.
PROJECT may end in ``:pip`` or ``:kernels`` to choose; ``--tests NAME=PATH,...`` runs those
test files of NAME (relative to it) instead of its whole tests/ folder. The projects run
``--jobs`` at a time; the builds that run at once share the cores. Writes OUT/summary.tsv
(project, route, build seconds, build result, test seconds, pytest's last line) and
OUT/<project>.log.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Imported by every Python that starts with ALIAS_DIR on its path (sitecustomize), the tests'
# subprocesses too (megablocks' distributed tests spawn theirs): loads the variant of the project
# that DEVICE_CORPUS_PROJECT names through kernels, and names it as its package so that
# `import pkg` and `from pkg.x import y` find it.
SITECUSTOMIZE = """
import os
if os.environ.get("DEVICE_CORPUS_PROJECT"):
    import importlib, importlib.abc, importlib.util, json, sys
    from pathlib import Path
    import kernels
    module = kernels.get_local_kernel(Path(os.environ["DEVICE_CORPUS_PROJECT"]))
    metadata = Path(module.__file__).parent / "metadata.json"
    name = json.loads(metadata.read_text())["name"].replace("-", "_")

    class Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        # `name` and `name.x` are the modules kernels loaded as `module.__name__` and its `.x`.
        def find_spec(self, fullname, path, target=None):
            if fullname == name or fullname.startswith(name + "."):
                return importlib.util.spec_from_loader(fullname, self)
            return None
        def create_module(self, spec):
            return importlib.import_module(module.__name__ + spec.name[len(name):])
        def exec_module(self, loaded):
            pass

    sys.meta_path.insert(0, Alias())
    os.environ["DEVICE_CORPUS_LOADED"] = f"{module.__name__} from {metadata.parent}"
"""
ALIAS_DIR = Path(tempfile.mkdtemp(prefix="corpus-alias-"))
(ALIAS_DIR / "sitecustomize.py").write_text(SITECUSTOMIZE)
KERNELS_LOADED = """
import os, sys
print("loaded through kernels:", os.environ["DEVICE_CORPUS_LOADED"], flush=True)
"""
KERNELS_PYTEST = KERNELS_LOADED + "import pytest; sys.exit(pytest.main(sys.argv[2:]))\n"


def has_compiled_sources(project: Path) -> bool:
    return any(project.rglob("*.cu")) or any(project.rglob("*.cpp"))


def run(command: list[str], log, cwd: Path, env: dict[str, str], timeout: float) -> int:
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    try:
        return subprocess.run(
            command,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            start_new_session=True,
        ).returncode
    except subprocess.TimeoutExpired:
        log.write(f"\ntimed out after {timeout:.0f} s\n")
        return 124


def hub_repo_id(tests: Path) -> str | None:
    pattern = re.compile(r"get_kernel\(\s*[\"']([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)[\"']")
    for path in sorted(tests.rglob("*.py")) if tests.is_dir() else []:
        found = pattern.search(path.read_text(errors="replace"))
        if found:
            return found.group(1)
    return None


def pytest_result(lines: list[str]) -> str:
    """pytest's closing line, or, for a run stopped at its time limit, the outcomes so far."""
    finals = [
        line for line in lines if re.search(r"\d+ (passed|failed|errors?)\b|no tests ran", line)
    ]
    if finals:
        return finals[-1].strip("= ")
    progress = "".join(
        match.group(1)
        for line in lines
        if (match := re.match(r"^([.sFExX]+)( +\[ *\d+%\])?$", line))
    )
    counts = {
        name: progress.count(mark)
        for mark, name in ((".", "passed"), ("F", "failed"), ("E", "errors"), ("s", "skipped"))
    }
    so_far = ", ".join(f"{count} {name}" for name, count in counts.items() if count)
    return f"stopped at the time limit; so far {so_far or 'nothing'}"


def one_project(spec: str, args: argparse.Namespace, jobs: int) -> str:
    name, _, route = spec.partition(":")
    source = args.corpus / name
    work = Path(tempfile.mkdtemp(prefix="corpus-")) / name
    shutil.copytree(source, work, symlinks=True)
    repo_id = hub_repo_id(work / "tests")
    if not route:
        # Tests that load the kernel by its Hub id need the Hub layout, which kernels loads.
        route = "pip" if has_compiled_sources(work) and not repo_id else "kernels"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TORCH_CUDA_ARCH_LIST"] = args.arch_list  # empty: build.toml's own capabilities
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    env["MAX_JOBS"] = str(jobs)
    slice_record = work / "SLICE.json"
    slice_args: list[str] = []
    if slice_record.is_file():
        record = json.loads(slice_record.read_text())
        env.update(record["test_env"])
        slice_args = record["pytest_args"]
    python = sys.executable
    with open(args.out / f"{name}.log", "w") as log:
        start = time.monotonic()
        built_elsewhere = args.built.get(name)
        if built_elsewhere:
            shutil.copytree(built_elsewhere, work / "build", dirs_exist_ok=True)
            route, rc = "variant", 0
        else:
            generate = [python, "-m", "build2cmake", "generate-torch", str(work / "build.toml")]
            rc = run(generate, log, work, env, 120)
            if rc:
                rc = run([*generate, "--force"], log, work, env, 120)
            if rc == 0 and route == "pip":
                install = [
                    python,
                    "-m",
                    "pip",
                    "install",
                    "-v",  # the configure's lines (pools, capabilities) and each step
                    "--no-build-isolation",
                    "--no-deps",
                    "-e",
                    str(work),
                    *(f"-Ccmake.define.{define}" for define in args.defines),
                ]
                rc = run(install, log, work, env, args.build_timeout)
                # Each step's times; after a time-out, what had finished (sgl-flash-attn3's G10).
                for ninja_log in sorted(work.glob("build/*/.ninja_log")):
                    log.write(f"\n{ninja_log} (start ms, end ms, ...):\n")
                    log.write(ninja_log.read_text(errors="replace")[-20000:])
            elif rc == 0:
                build = [
                    python,
                    "-m",
                    "build2cmake",
                    "build",
                    str(work / "build.toml"),
                    "-j",
                    str(jobs),
                    *(f"-D{define}" for define in args.defines),
                ]
                rc = run(build, log, work, env, args.build_timeout)
        build_seconds = time.monotonic() - start
        if route != "pip":
            env["DEVICE_CORPUS_PROJECT"] = str(work)
            env["PYTHONPATH"] = os.pathsep.join([str(ALIAS_DIR), env["PYTHONPATH"]])
        tests = work / "tests"
        result, test_seconds = "-", 0.0
        if rc == 0 and tests.is_dir():
            start = time.monotonic()
            pytest_args = [
                "-q",
                "-p",
                "no:cacheprovider",
                "--continue-on-collection-errors",
                *(["-x"] if args.first_failure else []),
                *slice_args,
                *(str(work / f) for f in args.tests.get(name, "tests").split(",")),
            ]
            if route == "pip":
                command = [python, "-m", "pytest", *pytest_args]
            else:
                if repo_id:
                    env["LOCAL_KERNELS"] = f"{repo_id}={work}"
                # A test package named `kernels` (paged-attention's) would be imported under the
                # name of the kernels library, which the harness has imported: renamed.
                if (tests / "kernels").is_dir():
                    (tests / "kernels").rename(tests / "kernels_tests")
                command = [python, "-c", KERNELS_PYTEST, str(work), *pytest_args]
            run(command, log, work, env, args.test_timeout)
            test_seconds = time.monotonic() - start
            log.flush()
            lines = (args.out / f"{name}.log").read_text(errors="replace").splitlines()
            result = pytest_result(lines)
        elif rc == 0:
            # No tests: the package must at least import, with its ops registered.
            if route == "pip":
                package = next((work / "torch-ext").glob("*/__init__.py")).parent.name
                check = [python, "-c", f"import {package} as p; print(p.__name__, dir(p.ops))"]
            else:
                check = [python, "-c", KERNELS_LOADED]
            result = (
                "imported (no tests)" if run(check, log, work, env, 300) == 0 else "import FAILED"
            )
    line = "\t".join(
        [
            name,
            route,
            f"{build_seconds:.0f}",
            "ok" if rc == 0 else f"FAILED ({rc})",
            f"{test_seconds:.0f}",
            result,
        ]
    )
    with open(args.out / "summary.tsv", "a") as summary:
        summary.write(line + "\n")
    print(line, flush=True)
    return line


def compile_jobs(cores: int, at_once: int, projects: int) -> int:
    """Compiles each build runs: the builds that run at once share the cores, and a project
    built alone gets them all (until 2026-11-29 one got cores / --jobs: G2, G3, G7, G8, G10)."""
    return max(1, cores // max(1, min(at_once, projects)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("projects", nargs="+")
    parser.add_argument("--jobs", type=int, default=4, help="projects at once")
    parser.add_argument(
        "--arch-list",
        default="9.0a",
        help="TORCH_CUDA_ARCH_LIST (default 9.0a; '' for build.toml's own)",
    )
    parser.add_argument("--built", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument(
        "--tests",
        action="append",
        default=[],
        metavar="NAME=PATH[,PATH]",
        help="the test files or folders of NAME to run, relative to it (default: tests)",
    )
    parser.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a CMake definition for every build",
    )
    parser.add_argument(
        "--cores",
        type=int,
        default=os.cpu_count() or 1,
        help="cores the builds share (default: all)",
    )
    parser.add_argument("--build-timeout", type=float, default=900)
    parser.add_argument("--test-timeout", type=float, default=300)
    parser.add_argument("--first-failure", action="store_true", help="pytest -x")
    args = parser.parse_args()
    args.built = dict(entry.split("=", 1) for entry in args.built)
    args.tests = dict(entry.split("=", 1) for entry in args.tests)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.tsv").write_text("project\troute\tbuild_s\tbuild\ttests_s\ttests\n")
    jobs = compile_jobs(args.cores, args.jobs, len(args.projects))
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda spec: one_project(spec, args, jobs), args.projects))


if __name__ == "__main__":
    main()
