"""Mutation score of the fast tests over the write/delete/read paths (not a CI gate).

Each mutant breaks one safety promise of the README (a lock made a no-op, a write made
non-atomic, a symlink followed, a manifest path trusted, ...). For each, the script copies the
repository to a temporary folder, applies the mutation there (never to your checkout), runs the
fast test subset, and counts the mutant as killed when a test fails. The score is killed/total.

    python benchmarks/mutation.py                    # the current tests
    python benchmarks/mutation.py --tests-from e4ddad8   # the same mutants against older tests
    python benchmarks/mutation.py --only lock-noop,non-atomic-write -j 2

Runs are independent, so `-j 2` runs two at a time (the CI machines have two cores).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAST_K = "not fuzzed and not arbitrary and not mutated"


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: replace `old` by `new` in `path` (the `occurrence`-th match)."""

    name: str
    path: str
    old: str
    new: str
    occurrence: int = 1


MUTANTS = [
    Mutant("lock-noop", "build2cmake/safefs.py",
           "fcntl.flock(self.fd, fcntl.LOCK_EX)", "pass"),
    # Writes the file in place (truncate, then write), then still calls os.replace (on itself).
    Mutant("non-atomic-write", "build2cmake/safefs.py",
           'tmp = f"{temporary_prefix(rel.name)}{secrets.token_hex(4)}.tmp"\n'
           "                fd = os.open(\n                    tmp,\n"
           "                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW"
           " | os.O_CLOEXEC,",
           "tmp = rel.name\n                fd = os.open(\n                    tmp,\n"
           "                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,"),
    Mutant("no-tmp-nofollow", "build2cmake/safefs.py",
           "os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC",
           "os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC"),
    Mutant("follow-folder-symlinks", "build2cmake/safefs.py",
           "os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC",
           "os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC"),
    Mutant("dotdot-accepted", "build2cmake/safefs.py",
           'part in ("", ".", "..")', 'part in ("",)'),
    Mutant("rmtree-any-entry", "build2cmake/safefs.py",
           "if not stat.S_ISDIR(info.st_mode):\n                    raise Build2CMakeError(\n"
           '                        f"{self.path / str(rel)}: is not a real folder',
           "if False:\n                    raise Build2CMakeError(\n"
           '                        f"{self.path / str(rel)}: is not a real folder'),
    Mutant("no-size-limit", "build2cmake/safefs.py",
           "if info.st_size > limit_bytes:", "if False:"),
    Mutant("read-any-file-type", "build2cmake/safefs.py",
           "if not stat.S_ISREG(info.st_mode):\n            raise Build2CMakeError(f\"{where} is",
           "if False:\n            raise Build2CMakeError(f\"{where} is"),
    Mutant("no-system-folders", "build2cmake/safefs.py",
           "elif resolved in SYSTEM_FOLDERS or", "elif False and"),
    Mutant("home-only-from-env", "build2cmake/safefs.py",
           "for entry in pwd.getpwall():", "for entry in []:"),
    Mutant("manifest-names-trusted", "build2cmake/fileset.py",
           "if not is_generated_name(name):", "if False:"),
    Mutant("stale-edited-deleted", "build2cmake/fileset.py",
           "if current is not None and content_hash(current) == recorded[name]:",
           "if current is not None:"),
    Mutant("edited-overwritten", "build2cmake/fileset.py",
           "elif force or (current is not None and recorded.get(str(path)) == "
           "content_hash(current)):",
           "elif True:"),
    Mutant("parents-unchecked", "build2cmake/fileset.py",
           "        _check_parents(folder, path)\n", ""),
    Mutant("build-args-late", "build2cmake/api.py",
           "    check_build_arguments(defines, jobs)\n", ""),
    Mutant("ops-id-prefix-match", "build2cmake/api.py",
           "_OPS_ID.fullmatch(ops_id)", "_OPS_ID.match(ops_id)"),
    Mutant("build-unlocked", "build2cmake/api.py",
           "with ProjectFolder(target) as folder, folder.locked():",
           "with ProjectFolder(target) as folder:", occurrence=2),
    Mutant("clean-unlocked", "build2cmake/api.py",
           "with ProjectFolder(target) as folder, folder.locked():",
           "with ProjectFolder(target) as folder:", occurrence=3),
    Mutant("build-dir-symlink-followed", "build2cmake/api.py",
           'and folder.is_dir(f"{BUILD_FOLDER}/{name}")', ""),
    Mutant("any-compile-commands-link", "build2cmake/api.py",
           "if _is_our_compile_commands_link(folder):",
           "if folder.lstat(COMPILE_COMMANDS) is not None:"),
    Mutant("variant-names-trusted", "build2cmake/builder.py",
           'if not _VARIANT_NAME.fullmatch(name) or name.startswith("cmake"):', "if False:"),
]  # fmt: skip


def copy_repo(destination: Path, tests_from: str | None) -> None:
    """The working tree (tracked and untracked files, no build outputs) into `destination`."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    if tests_from is not None:
        shutil.rmtree(destination / "tests")
        archive = subprocess.run(
            ["git", "archive", tests_from, "tests"], cwd=REPO, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True)


def test_files(root: Path) -> list[str]:
    names = ["tests/test_generate.py", "tests/test_hostile.py"]
    names += sorted(str(p.relative_to(root)) for p in (root / "tests").glob("test_security_*.py"))
    return [n for n in names if (root / n).is_file()]


def run_tests(root: Path, timeout: float, also_k: str | None) -> tuple[bool, float, str]:
    """(all passed, seconds, last line of pytest's output)."""
    start = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
             "-m", "not compile", "-k", FAST_K + (f" and ({also_k})" if also_k else ""),
             *test_files(root)],
            cwd=root, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(root)},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - start, "timed out (a test hung: counts as killed)"
    lines = (result.stdout + result.stderr).strip().splitlines()
    return result.returncode == 0, time.monotonic() - start, lines[-1] if lines else ""


def apply(root: Path, mutant: Mutant) -> None:
    path = root / mutant.path
    text = path.read_text()
    index = -1
    for _ in range(mutant.occurrence):
        index = text.find(mutant.old, index + 1)
        if index < 0:
            raise SystemExit(f"{mutant.name}: {mutant.old!r} not found in {mutant.path}")
    path.write_text(text[:index] + mutant.new + text[index + len(mutant.old) :])


def run_one(
    mutant: Mutant | None, tests_from: str | None, timeout: float, also_k: str | None
) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory(prefix="b2c-mutant-") as folder:
        root = Path(folder)
        copy_repo(root, tests_from)
        if mutant is not None:
            apply(root, mutant)
        passed, seconds, last = run_tests(root, timeout, also_k)
        name = mutant.name if mutant else "(no mutation)"
        verdict = "survived" if passed else "killed"
        if mutant is None:
            verdict = "passes" if passed else "FAILS"
        line = f"{name:28} {verdict:9} {seconds:6.0f} s  {last}"
        print(line, flush=True)
        return passed, line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests-from", metavar="REV", help="take tests/ from this git revision")
    parser.add_argument("--only", help="comma-separated mutant names")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at once (<= 2)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per test run")
    parser.add_argument(
        "--also-k",
        metavar="EXPR",
        help="further pytest -k selection, e.g. to leave out a test that fails under load",
    )
    args = parser.parse_args()
    mutants = MUTANTS
    if args.only:
        wanted = set(args.only.split(","))
        mutants = [m for m in MUTANTS if m.name in wanted]
    baseline, _ = run_one(None, args.tests_from, args.timeout, args.also_k)
    if not baseline:
        print("the unmutated code fails these tests; no score", file=sys.stderr)
        return 1
    with ThreadPoolExecutor(max(1, min(args.jobs, 2))) as pool:
        outcomes = list(
            pool.map(lambda m: run_one(m, args.tests_from, args.timeout, args.also_k), mutants)
        )
    killed = sum(not passed for passed, _ in outcomes)
    survivors = [m.name for m, (passed, _) in zip(mutants, outcomes, strict=True) if passed]
    print(f"\nmutation score: {killed}/{len(mutants)} killed")
    if survivors:
        print("survivors: " + ", ".join(survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
