"""`build2cmake test`: run the project's `kernels_ci` tests against a built build/<variant>/.

As kernel-builder's CI does: the first backend of CUDA, ROCm, XPU, Metal, CPU that the kernel
declares and this machine can load (the `kernels` loader takes CPU or the installed torch's
backend), `pytest tests -m kernels_ci`, with the kernel loaded from the variant folder:

- LOCAL_KERNELS=<repo-id>=build/<variant> makes kernels.get_kernel(<repo-id>) load it;
- a folder on PYTHONPATH where <package> is a link to build/<variant> makes `import <package>`
  load it, as a package of its own files, which is how kernels imports a variant.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from build2cmake.config.model import Project
from build2cmake.ground.errors import Build2CMakeError, printable
from build2cmake.share.card import built_variants

# kernel-builder's order for picking the backend whose tests run.
BACKEND_ORDER = ("cuda", "rocm", "xpu", "metal", "cpu")
# pytest: "no tests were collected" (here: none marked kernels_ci).
NO_TESTS_COLLECTED = 5


def pick_backend(project: Project, torch_backend: str) -> str:
    """The backend to test: the first in kernel-builder's order this machine can load."""
    loadable = {"cpu", torch_backend}
    for backend in BACKEND_ORDER:
        if backend in project.backends and backend in loadable:
            return backend
    raise Build2CMakeError(
        f"none of build.toml's backends ({', '.join(project.backends)}) can be loaded here "
        f"(the installed torch is a {torch_backend} build; kernels loads {torch_backend} or cpu "
        "variants); test on a machine with one of them, or name a variant with --variant"
    )


def variant_folder(project: Project, project_dir: Path, variant: str) -> Path:
    """build/<variant>/ of this kernel; an error listing the ones there otherwise."""
    known = [v.name for v in built_variants(project, project_dir)]
    if variant not in known:
        there = ", ".join(known) or "none"
        raise Build2CMakeError(
            f"--variant {variant}: no such build of {project.name} in {project_dir / 'build'} "
            f"(built: {there}); `build2cmake build` makes this machine's"
        )
    return project_dir / "build" / variant


def pytest_command(tests: Path, python: str = sys.executable) -> list[str]:
    """pytest on the kernels_ci tests, writing no cache into the project."""
    return [python, "-m", "pytest", str(tests), "-m", "kernels_ci", "-p", "no:cacheprovider"]


def run_tests(
    project: Project, project_dir: Path, variant_dir: Path, extra_args: Sequence[str] = ()
) -> int:
    """Run the kernels_ci tests against `variant_dir`; pytest's exit status."""
    tests = project_dir / "tests"
    if not tests.is_dir():
        raise Build2CMakeError(f"{tests}: no tests folder; kernels_ci tests live in tests/")
    env = os.environ.copy()
    if project.hub_repo_id is not None:
        if ":" in str(variant_dir.resolve()):
            raise Build2CMakeError(
                f"{variant_dir}: LOCAL_KERNELS cannot name a path with ':'; move the project"
            )
        override = f"{project.hub_repo_id}={variant_dir.resolve()}"
        env["LOCAL_KERNELS"] = ":".join(filter(None, [override, env.get("LOCAL_KERNELS")]))
    with tempfile.TemporaryDirectory(prefix="build2cmake-test-") as shim:
        (Path(shim) / project.package_name).symlink_to(variant_dir.resolve())
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [shim, env.get("PYTHONPATH")]))
        command = pytest_command(tests) + list(extra_args)
        print(printable("+ " + " ".join(command)), flush=True)
        return subprocess.run(command, cwd=project_dir, env=env, check=False).returncode
