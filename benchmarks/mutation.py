"""Mutation score of each area's own tests (not a CI gate).

Each mutant breaks one promise of the README or docs/: the safety ones (a lock made a no-op, a
write made non-atomic, a symlink followed, a manifest path trusted, ...) and, per area, the
behaviour of newer code (the C++ standard torch asks for, the kernels loader's rules,
kernels.lock, the compile schedule, signals, the intent-first records, the job pools,
kernel-builder's names). For each, the script copies the repository to a temporary folder,
applies the mutation there (never to your checkout), runs the test files of the mutant's area
(AREAS) and counts the mutant as killed when a test fails. The score is killed/total.

    python benchmarks/mutation.py                    # the current tests
    python benchmarks/mutation.py --tests-from e4ddad8   # the same mutants against older tests
    python benchmarks/mutation.py --only lock-noop,non-atomic-write -j 2
    python benchmarks/mutation.py --area schedule,lock   # the mutants of these areas only
    python benchmarks/mutation.py --check            # show each mutant's diff, run no test

Each mutant's `old` text must occur exactly once in its file: after a refactor, a mutant whose
text is gone or now ambiguous stops the run (before any test) instead of mutating the wrong
place. The working tree is copied once at the start, so edits made while it runs do not mix in.
Runs are independent, so `-j 2` runs two at a time (the CI machines have two cores).
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# One line at a time: with -j 2, two runs finishing together would interleave their prints.
_PRINTING = threading.Lock()
FAST_K = "not fuzzed and not arbitrary and not mutated"


@dataclass(frozen=True)
class Area:
    """The tests a mutant of one area runs against: the area's own test files, with the pytest
    marker expression and -k selection that keep the run to them (compile-marked tests only
    where the area is the build's own CMake)."""

    files: tuple[str, ...]
    markers: str = "not compile"
    k: str = ""


# "safety": the attack tests first (with -x a mutant is killed as soon as one fails, and most
# fail there), test_generate.py (goldens, slower) last; files=() stands for that list.
AREAS = {
    "safety": Area(()),
    "cxx-standard": Area(("tests/test_cxx_standard.py",), "compile and not rocm"),
    "loader": Area(("tests/test_loader_contract.py",)),
    "lock": Area(("tests/test_lock.py",)),
    "schedule": Area(("tests/test_schedule.py", "tests/test_carried_costs.py")),
    "build-order": Area(("tests/test_carried_costs.py",), "compile", "link_in or later_kernel"),
    "signals": Area(("tests/test_interrupts.py",)),
    "journal-generate": Area(("tests/test_faults.py",), k="generate or two_kills"),
    "journal-build": Area(
        ("tests/test_faults.py", "tests/test_kernel_builder_names.py"),
        k="build_killed or undone_by_clean or hash or variant_build",
    ),
    "pools": Area(("tests/test_job_pools.py",), "compile and not rocm", k="not nvcc"),
    "kb-names": Area(("tests/test_kernel_builder_names.py",)),
    # Issue #64, second round: the code of #59 and #60.
    "shared-sources": Area(("tests/test_shared_sources.py",)),
    "gpu-targets": Area(("tests/test_shared_sources.py",)),
    "ci-workflow": Area(("tests/test_ci_workflow.py",)),
    "clean": Area(("tests/test_faults.py",), k="clean"),
    # #59, 2026-11-29: a dependency's headers for the whole extension, and its major release.
    "dependencies": Area(
        ("tests/test_shared_sources.py", "tests/test_variants.py"),
        "not rocm",
        k="cutlass or sharing_sources_link or requirements",
    ),
    # #59, 2026-11-29: an extension that would not load stops its build.
    "symbols": Area(
        ("tests/test_symbols.py", "tests/test_shared_sources.py"),
        "compile or not compile",
        k="symbols or loader or load or printable or interpreter or sharing_sources_link "
        "or rocm_bindings",
    ),
    # #59: the CUDA library headers of a variant's environment.
    "cuda-headers": Area(("tests/test_cuda_headers.py",)),
}


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: replace `old` (which occurs exactly once) by `new` in `path`; run
    against the tests of `area`."""

    name: str
    path: str
    old: str
    new: str
    area: str = "safety"


_TORCH_CMAKE = "cmake_templates/common/build2cmake_torch.cmake.j2"
_SCHEDULE = "cmake_templates/common/build2cmake_schedule.py"
_LOADER = "build2cmake/config/loader_rules.py"
_LOCK = "build2cmake/config/lock.py"
_SIGNALS = "build2cmake/ground/interrupts.py"
_FILESET = "build2cmake/generate/fileset.py"
_FOLDERS = "build2cmake/builds/variant_folders.py"
_KB = "build2cmake/cli/kernel_builder.py"

MUTANTS = [
    Mutant("lock-noop", "build2cmake/ground/safefs.py",
           "fcntl.flock(self.fd, fcntl.LOCK_EX)", "pass"),
    # Writes the file in place (truncate, then write), then still calls os.replace (on itself).
    Mutant("non-atomic-write", "build2cmake/ground/safefs.py",
           "tmp = temporary_name(rel.name, secrets.token_hex(4))\n"
           "                fd = os.open(\n                    tmp,\n"
           "                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW"
           " | os.O_CLOEXEC,",
           "tmp = rel.name\n                fd = os.open(\n                    tmp,\n"
           "                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,"),
    # write_atomic's temporary file (write_new's flags, the same, end their line without a comma).
    Mutant("no-tmp-nofollow", "build2cmake/ground/safefs.py",
           "os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,",
           "os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC,"),
    Mutant("follow-folder-symlinks", "build2cmake/ground/safefs.py",
           "os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC",
           "os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC"),
    Mutant("dotdot-accepted", "build2cmake/ground/safefs.py",
           'part in ("", ".", "..")', 'part in ("",)'),
    Mutant("rmtree-any-entry", "build2cmake/ground/safefs.py",
           "if not stat.S_ISDIR(info.st_mode):\n                    raise Build2CMakeError(\n"
           '                        f"{self.path / str(rel)}: is not a real folder',
           "if False:\n                    raise Build2CMakeError(\n"
           '                        f"{self.path / str(rel)}: is not a real folder'),
    Mutant("no-size-limit", "build2cmake/ground/safefs.py",
           "if info.st_size > limit_bytes:", "if False:"),
    Mutant("read-any-file-type", "build2cmake/ground/safefs.py",
           "if not stat.S_ISREG(info.st_mode):\n            raise Build2CMakeError(f\"{where} is",
           "if False:\n            raise Build2CMakeError(f\"{where} is"),
    Mutant("no-system-folders", "build2cmake/ground/safefs.py",
           "if resolved in SYSTEM_FOLDERS or any(", "if False and any("),
    Mutant("home-only-from-env", "build2cmake/ground/safefs.py",
           "for entry in pwd.getpwall():", "for entry in []:"),
    Mutant("manifest-names-trusted", "build2cmake/generate/fileset.py",
           "if not is_generated_name(name):", "if False:"),
    Mutant("stale-edited-deleted", "build2cmake/generate/fileset.py",
           "if current is not None and previous.is_ours(name, current):",
           "if current is not None:"),
    Mutant("edited-overwritten", "build2cmake/generate/fileset.py",
           "elif force or (current is not None and previous.is_ours(str(path), current)):",
           "elif True:"),
    Mutant("parents-unchecked", "build2cmake/generate/fileset.py",
           "        _check_parents(folder, path)\n", ""),
    # The check `build` and `build_for_sharing` (the CLI's `build`) both pass through; the one
    # at the top of `build` only repeats it.
    Mutant("build-args-late", "build2cmake/builds/project_build.py",
           "(a command reads it once).\"\"\"\n    check_build_arguments(defines, jobs)\n",
           "(a command reads it once).\"\"\"\n"),
    Mutant("ops-id-prefix-match", "build2cmake/generate/project.py",
           "_OPS_ID.fullmatch(ops_id)", "_OPS_ID.match(ops_id)"),
    Mutant("build-unlocked", "build2cmake/builds/project_build.py",
           "with ProjectFolder(target) as folder, folder.locked():\n"
           "        report = generate_locked",
           "with ProjectFolder(target) as folder:\n        report = generate_locked"),
    Mutant("clean-unlocked", "build2cmake/builds/clean.py",
           "with ProjectFolder(target) as folder, folder.locked():\n        return _clean_locked(",
           "with ProjectFolder(target) as folder:\n        return _clean_locked("),
    Mutant("build-dir-symlink-followed", "build2cmake/builds/clean.py",
           'and folder.is_dir(f"{BUILD_FOLDER}/{name}")', ""),
    Mutant("any-compile-commands-link", "build2cmake/builds/clean.py",
           "if _is_our_compile_commands_link(folder):",
           "if folder.lstat(COMPILE_COMMANDS) is not None:"),
    Mutant("variant-names-trusted", "build2cmake/builds/variant_folders.py",
           'if not _VARIANT_NAME.fullmatch(name) or name.startswith("cmake"):', "if False:"),
    # Issue #43, second round, the commands around the build (their tests are in
    # tests/test_security_*.py by promise: writes, reads, planted code, refused input).
    Mutant("ci-output-follows-links", "build2cmake/generate/ci.py",
           'write_user_file(output, workflow.encode("utf-8"), anchors)',
           "output.parent.mkdir(parents=True, exist_ok=True); output.write_text(workflow)"),
    Mutant("init-checks-late", "build2cmake/generate/init.py",
           "        _check_target(target, folder, relative, files, force=force)\n", ""),
    Mutant("variant-args-late", "build2cmake/builds/project_build.py",
           "    check_build_arguments(defines, jobs, concurrent)\n    check_ops_id(ops_id)\n", ""),
    Mutant("card-no-timer", "build2cmake/share/card.py",
           "signal.alarm(seconds)\nresult", "signal.alarm(0)\nresult"),
    Mutant("card-output-uncapped", "build2cmake/share/card.py",
           '"cap": CARD_OUTPUT_CHARS,', '"cap": 1 << 60,'),
    Mutant("metadata-recursion-uncaught", "build2cmake/ground/bounded.py",
           "except (ValueError, RecursionError) as error:", "except ValueError as error:"),
    Mutant("python-parse-unbounded", "build2cmake/share/checks.py",
           "    except (RecursionError, MemoryError, ValueError):\n", "    except ValueError:\n"),
    Mutant("walk-depth-unbounded", "build2cmake/ground/bounded.py",
           "if depth + 1 > WALK_DEPTH_LIMIT:", "if False:"),
    Mutant("ci-expressions-unchecked", "build2cmake/generate/ci.py",
           'path = checked_workflow_value(build_toml.as_posix(), "build.toml path")',
           "path = build_toml.as_posix()"),
    Mutant("rebuild-note-printed-raw", "torch-ext/_ops.py.j2",
           "    if name in _EXTENSIONS:\n", "    if name:\n"),
    # Issue #43, second round, the build itself (tests/test_security_planted_code_never_runs.py,
    # test_security_reads_stay_in_the_project.py, test_security_bad_input_is_refused.py).
    Mutant("provider-folder-unchecked", "build2cmake/generate/project.py",
           "    check_provider_folder(folder)\n", ""),
    Mutant("provider-bytecode-kept", "build2cmake/generate/project.py",
           "if cache_info is not None and stat.S_ISDIR(cache_info.st_mode):\n"
           "        folder.rmtree(cache)",
           "if False:\n        folder.rmtree(cache)"),
    Mutant("build-folder-trusted", "build2cmake/ground/folder_marks.py",
           "if folder.lstat(name) is not None and not made_here(folder, name, key):",
           "if False:"),
    Mutant("pip-build-folder-trusted", "cmake_templates/common/build2cmake_metadata.py",
           "        _claim_build_folders(build_dir)\n", "        pass\n"),
    Mutant("mark-not-bound-to-folder", "build2cmake/ground/folder_marks.py",
           "\\0{info.st_dev}\\0{info.st_ino}", ""),
    Mutant("fifo-source-accepted", "build2cmake/config/schema.py",
           "        if irregular:\n", "        if False:\n"),
    Mutant("toml-read-by-tomlkit", "build2cmake/config/__init__.py",
           "    if tomllib is None:\n        return dict(", "    if True:\n        return dict("),
    Mutant("dotted-keys-unbounded", "build2cmake/config/__init__.py",
           "if found > DOTTED_KEY_LIMIT:", "if False:"),
    Mutant("include-walk-recursive", "build2cmake/generate/project.py",
           "_include_folder_files(project_dir / include)",
           "sorted((project_dir / include).rglob('*'))"),
    Mutant("ops-id-names-utf8", "build2cmake/generate/project.py",
           'b"\\0" + os.fsencode(relative) + f"\\0{len(content)}\\0".encode()',
           'f"\\0{relative}\\0{len(content)}\\0".encode()'),
    Mutant("capability-prefix-match", "build2cmake/config/archs.py",
           "_CUDA_CAPABILITY.fullmatch(capability)", "_CUDA_CAPABILITY.match(capability)"),
    Mutant("capability-unicode-digits", "build2cmake/config/archs.py",
           'r"([0-9]{1,2})\\.([0-9])([af]?)(\\+PTX)?"', 'r"(\\d{1,2})\\.(\\d)([af]?)(\\+PTX)?"'),
    Mutant("variant-prefix-match", "build2cmake/config/hub_variants.py",
           "    short = _SHORT.fullmatch(text)\n", "    short = _SHORT.match(text)\n"),
    Mutant("build-tree-depth-unbounded", "build2cmake/ground/safefs.py",
           "and len(rel.parts) - len(root.parts) > BUILD_TREE_DEPTH_LIMIT", "and False"),
    Mutant("pip-build-tree-depth-unbounded", "cmake_templates/common/build2cmake_metadata.py",
           "if stat.S_ISDIR(mode) and depth > _BUILD_TREE_DEPTH_LIMIT:", "if False:"),
    # rmtree-recursion-uncaught left with e2eb91d (#51): safefs.rmtree walks iteratively, so
    # there is no RecursionError left to catch; the deep-tree tests keep that promise.
    Mutant("include-keywords-partial", "build2cmake/config/schema.py",
           "     # target_include_directories'\n"
           '     "AFTER", "BEFORE", "INTERFACE", "PRIVATE", "PUBLIC", "SYSTEM")', "     )"),
]  # fmt: skip

# Issue #64: the code of the newest-torch, loader, lock, schedule, signal, journal, pool and
# kernel-builder-name work (#45, #49, #51, #52), each mutant written from the docs and the diffs
# (not the tests) and run against its area's own test files (AREAS).
MUTANTS += [Mutant(name, path, old, new, area) for name, path, old, new, area in [
    ("cxx-version-boundary", _TORCH_CMAKE,
     "VERSION_GREATER_EQUAL 2.12)", "VERSION_GREATER 2.12)", "cxx-standard"),
    ("cxx-floor-boundary", _TORCH_CMAKE,
     "if(_b2c_std_year LESS _b2c_std_floor_year)",
     "if(_b2c_std_year LESS_EQUAL _b2c_std_floor_year)", "cxx-standard"),
    ("cxx-package-over-headers", _TORCH_CMAKE,
     "  elseif(package GREATER_EQUAL floor)\n", "  elseif(package GREATER 0)\n", "cxx-standard"),
    ("cxx-draft-not-rounded", _TORCH_CMAKE,
     'math(EXPR year "${year} + (4 - ${year} % 3) % 3")', 'math(EXPR year "${year}")',
     "cxx-standard"),
    ("loader-general-name-in-backend-table", _LOADER,
     "        if name in self.general:\n            return (\n",
     "        if name in self.general:\n            return None\n        if False:\n"
     "            return (\n", "loader"),
    ("loader-backend-name-in-general", _LOADER,
     "            if name in self.general:\n                return None\n            owners",
     "            if name in self.general or self.backends_of(name):\n"
     "                return None\n            owners", "loader"),
    ("loader-rocm-features-kept", _LOADER,
     'written = arch.split(":")[0] if backend == "rocm" else arch', "written = arch", "loader"),
    ("loader-archs-repeated", _LOADER,
     "        if written not in result:\n", "        if True:\n", "loader"),
    ("loader-backend-pip-ignored", _LOADER,
     "listed = own if name in own else self.general", "listed = self.general", "loader"),
    ("loader-folder-without-init", _LOADER,
     "if spec is None or spec.origin is None:", "if spec is None:", "loader"),
    ("lock-cache-folder-hashed", _LOCK,
     "        if parts[0] == _DOWNLOAD_CACHE:\n", "        if False:\n", "lock"),
    ("lock-cache-folder-anywhere", _LOCK,
     "if parts[0] == _DOWNLOAD_CACHE:", "if _DOWNLOAD_CACHE in parts:", "lock"),
    ("lock-version-not-a-branch", _LOCK,
     'branch = f"v{dependency.version}"', 'branch = f"{dependency.version}"', "lock"),
    ("lock-removed-dependency-unseen", _LOCK,
     "    if added or removed:\n", "    if added:\n", "lock"),
    ("lock-nar-padding", "build2cmake/config/nar.py",
     "self._padding = -size % 8", "self._padding = size % 8", "lock"),
    ("lock-duplicate-entries", _LOCK,
     "        if dependency in seen:\n", "        if False:\n", "lock"),
    ("lock-same-size-kept", _LOCK,
     "            and folder.read(LOCK_NAME, len(content), LOCK_NAME) == content\n", "", "lock"),
    ("schedule-new-source-least-rate", _SCHEDULE,
     "return values[len(values) // 2] if values else None",
     "return values[0] if values else None", "schedule"),
    ("schedule-new-source-unscaled", _SCHEDULE,
     "next(value * scale for tier, scale", "next(value for tier, scale", "schedule"),
    ("schedule-cache-hit-recorded", _SCHEDULE,
     "if known is not None and seconds * CACHE_HIT_RATIO < known:",
     "if known is not None and seconds > known * CACHE_HIT_RATIO:", "schedule"),
    ("schedule-shortest-first", _SCHEDULE,
     "key=lambda i: (-weights[i], i)", "key=lambda i: (weights[i], i)", "schedule"),
    ("schedule-log-not-merged", _SCHEDULE,
     "            record(costs_path, build_dir)\n", "            pass\n", "schedule"),
    ("schedule-quota-ignored", _SCHEDULE,
     "return max(1, min(count, quota)) if quota else max(1, count)", "return max(1, count)",
     "schedule"),
    ("signals-no-sigkill-round", _SIGNALS,
     "(signal.SIGKILL, 2.0)", "(signal.SIGTERM, 2.0)", "signals"),
    ("signals-daemons-stopped", _SIGNALS, " and pid_session == session", "", "signals"),
    ("signals-ignored-overridden", _SIGNALS,
     "if signal.getsignal(signum) is not signal.SIG_IGN:", "if True:", "signals"),
    ("signals-no-subreaper", _SIGNALS,
     "libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)", "pass", "signals"),
    ("journal-no-intent", _FILESET,
     "    _write_manifest(folder, Manifest(files=pending))\n", "", "journal-generate"),
    ("journal-intent-new-hash-only", _FILESET,
     "pending[str(path)] = (ours_now[str(path)], *settled[str(path)])",
     "pending[str(path)] = settled[str(path)]", "journal-generate"),
    ("journal-stale-dropped-early", _FILESET,
     "    pending.update({name: recorded[name] for name in stale})\n", "", "journal-generate"),
    ("journal-manifest-one-hash", _FILESET,
     "not 1 <= len(hashes) <= 2", "not 1 <= len(hashes) <= 1", "journal-generate"),
    ("journal-hash-no-intent", _FOLDERS,
     "        record.variants[variant] = (*old, content_hash(content))\n",
     "        record.variants[variant] = old\n", "journal-build"),
    ("journal-staging-made-first", _FOLDERS,
     "        record.staging.append(name)\n        write_record(folder, record)\n"
     '        if folder.make_dir(f"build/{name}"):\n',
     '        if folder.make_dir(f"build/{name}"):\n'
     "            record.staging.append(name)\n            write_record(folder, record)\n",
     "journal-build"),
    ("journal-record-one-hash", _FOLDERS,
     "            or len(hashes) > 2\n", "            or len(hashes) > 1\n", "journal-build"),
    ("pools-cpp-4gb", _TORCH_CMAKE,
     "_build2cmake_pool_size(_b2c_compile_jobs 2048 1)",
     "_build2cmake_pool_size(_b2c_compile_jobs 4096 1)", "pools"),
    ("pools-threads-not-counted", _TORCH_CMAKE,
     'math(EXPR jobs "${BUILD2CMAKE_CORE_COUNT} * 3 / (2 * ${threads} + 1)")',
     'math(EXPR jobs "${BUILD2CMAKE_CORE_COUNT}")', "pools"),
    ("pools-memory-per-compile", _TORCH_CMAKE,
     '"${BUILD2CMAKE_FREE_MEMORY_MB} / (${mb_per_thread} * ${threads})"',
     '"${BUILD2CMAKE_FREE_MEMORY_MB} / ${mb_per_thread}"', "pools"),
    ("pools-no-floor", _TORCH_CMAKE, "  if(jobs LESS 1)\n", "  if(jobs LESS 0)\n", "pools"),
    ("kb-max-jobs-cores-swapped", _KB,
     '"--max-jobs", dest="concurrent"', '"--max-jobs", dest="jobs"', "kb-names"),
    ("kb-complete-no-default", "build2cmake/cli/completions.py",
     "complete -o default -F", "complete -F", "kb-names"),
    ("kb-copy-not-all", _KB,
     "    bld.set_defaults(all=True, concurrent=1)\n", "    bld.set_defaults(concurrent=1)\n",
     "kb-names"),
    ("kb-kernel-dir-not-a-folder", _KB,
     'return path / "build.toml" if path.is_dir() else path', "return path", "kb-names"),
    ("kb-names-offered", "build2cmake/cli/completions.py",
     "c.name for c in spec.commands if c.listed", "c.name for c in spec.commands", "kb-names"),
    ("kb-upload-after-failed-build", "build2cmake/cli/sharing.py",
     '    if status != 0:\n        err("build2cmake: not uploading',
     '    if False:\n        err("build2cmake: not uploading', "kb-names"),
]]  # fmt: skip

_SHARED = "build2cmake/generate/shared_sources.py"
_GPU = "cmake_templates/common/build2cmake_gpu_targets.cmake"
_CUDA = "cmake_templates/cuda/build2cmake_cuda.cmake.j2"
_ROCM = "cmake_templates/rocm/build2cmake_rocm.cmake.j2"
_CI = "build2cmake/generate/ci.py"
_CLEAN = "build2cmake/builds/clean.py"

# Issue #64, second round: the code of #59 (sources shared between kernels, TORCH_CUDA_ARCH_LIST
# and PYTORCH_ROCM_ARCH) and #60 (ci github's YAML, runners, publish job and costs cache; clean's
# empty folders), each mutant written from docs/building.md, rocm.md, variants.md, security.md
# and the diffs, not the tests.
MUTANTS += [Mutant(name, path, old, new, area) for name, path, old, new, area in [
    ("shared-headers-grouped", _SHARED,
     "            if source.suffix not in HEADER_SUFFIXES:\n", "            if True:\n",
     "shared-sources"),
    ("shared-single-owner-unit", _SHARED,
     "        if len(owners) > 1:\n", "        if len(owners) >= 1:\n", "shared-sources"),
    ("shared-gpu-flags-for-cxx", _SHARED,
     "    if source.suffix in _GPU_SUFFIXES:\n", "    if True:\n", "shared-sources"),
    ("shared-hip-flags-ignored", _SHARED,
     'return kernel.cuda_flags if kernel.backend == "cuda" else kernel.hip_flags',
     "return kernel.cuda_flags", "shared-sources"),
    ("shared-undef-as-define", _SHARED,
     'macros[name] = None if kind == "U" else', "macros[name] = None if False else",
     "shared-sources"),
    ("shared-bare-define-no-value", _SHARED,
     '("1" if value is None else value)', "value", "shared-sources"),
    ("shared-first-flag-wins", _SHARED,
     "        if match:\n", "        if match and match.group(2) not in macros:\n",
     "shared-sources"),
    ("shared-undef-conflict-unseen", _SHARED,
     "            if before is None or before[1] == value:\n",
     "            if before is None or before[1] == value or None in (before[1], value):\n",
     "shared-sources"),
    ("shared-unit-kernels-sorted", _SHARED,
     "groups.setdefault(tuple(k.name for k in owners), [])",
     "groups.setdefault(tuple(sorted(k.name for k in owners)), [])", "shared-sources"),
    ("shared-unit-after-first-kernel", _SHARED,
     "unit.kernels[-1].name == kernel.name", "unit.kernels[0].name == kernel.name",
     "shared-sources"),
    ("shared-source-compiled-twice", _SHARED,
     "tuple(s for s in kernel.sources if s not in shared)", "tuple(kernel.sources)",
     "shared-sources"),
    ("shared-union-unbuilt-kernels", _TORCH_CMAKE,
     "    if(NOT is_built)\n      continue()\n", "    if(FALSE)\n      continue()\n",
     "shared-sources"),
    ("shared-conflicts-one-kernel", _TORCH_CMAKE,
     "  elseif(count GREATER 1)\n", "  elseif(count GREATER 0)\n", "shared-sources"),
    ("shared-union-last-kernel-only", _TORCH_CMAKE,
     "      list(APPEND union_${key} ${values})\n", "      set(union_${key} ${values})\n",
     "shared-sources"),
    ("dependency-not-to-bindings", _TORCH_CMAKE,
     "    foreach(target IN ITEMS ${extension} ${kernels})\n",
     "    foreach(target IN ITEMS ${kernels})\n", "dependencies"),
    ("dependency-declarers-only", "build2cmake/generate/render.py",
     'for d in k.depends if d != "torch"', 'for d in k.depends if d == "sycl_tla"',
     "dependencies"),
    ("cutlass-oldest-major", "build2cmake/config/schema.py",
     "return max(majors) if majors else None", "return min(majors) if majors else None",
     "dependencies"),
    ("cutlass-any-release", "build2cmake/builds/variant_env.py",
     'packages.append(f"nvidia-cutlass=={cutlass}.*")', 'packages.append("nvidia-cutlass")',
     "dependencies"),
    ("cutlass-other-major-silent", "cmake_templates/cuda/build2cmake_cuda.cmake.j2",
     "AND NOT CMAKE_MATCH_1 STREQUAL named AND NOT warned)",
     "AND CMAKE_MATCH_1 STREQUAL named AND NOT warned)", "dependencies"),
    ("cutlass-warning-repeated", "cmake_templates/cuda/build2cmake_cuda.cmake.j2",
     "STREQUAL named AND NOT warned)", "STREQUAL named)", "dependencies"),
    ("gpu-cache-over-environment", _GPU,
     "  if(DEFINED ENV{${variable}})\n",
     "  if(DEFINED ENV{${variable}} AND NOT DEFINED ${variable})\n", "gpu-targets"),
    ("gpu-list-length-unbounded", _GPU,
     "if(length GREATER 1000 OR", "if(length GREATER 100000 OR", "gpu-targets"),
    ("gpu-cuda-entry-unanchored", _GPU,
     '"^[0-9]+\\\\.[0-9][af]?(\\\\+PTX)?$" "a CUDA capability"',
     '"^[0-9]+\\\\.[0-9][af]?(\\\\+PTX)?" "a CUDA capability"', "gpu-targets"),
    ("gpu-rocm-feature-sign-optional", _GPU,
     '"^gfx[0-9a-f]+(:(sramecc|xnack)[+-])*$"', '"^gfx[0-9a-f]+(:(sramecc|xnack)[+-]?)*$"',
     "gpu-targets"),
    ("gpu-suffix-kept-for-any-target", _GPU,
     ' AND CMAKE_MATCH_1 IN_LIST bases)', ")", "gpu-targets"),
    ("gpu-suffix-target-served-again", _GPU,
     '      list(REMOVE_ITEM unserved "${CMAKE_MATCH_1}")\n', "", "gpu-targets"),
    ("gpu-ptx-stays-in-its-major", _GPU,
     "if(NOT CMAKE_MATCH_2 EQUAL target_major AND NOT CMAKE_MATCH_3)",
     "if(NOT CMAKE_MATCH_2 EQUAL target_major)", "gpu-targets"),
    ("gpu-sass-crosses-majors", _GPU,
     "if(NOT CMAKE_MATCH_2 EQUAL target_major AND NOT CMAKE_MATCH_3)", "if(FALSE)",
     "gpu-targets"),
    ("gpu-equal-capability-skipped", _GPU,
     "if(version VERSION_GREATER target)", "if(version VERSION_GREATER_EQUAL target)",
     "gpu-targets"),
    ("gpu-lowest-capability-picked", _GPU,
     "OR version VERSION_GREATER best_version)", "OR version VERSION_LESS best_version)",
     "gpu-targets"),
    ("gpu-target-ptx-not-stripped", _GPU,
     'string(REGEX REPLACE "[af]?(\\\\+PTX)?$" "" base "${target}")',
     'string(REGEX REPLACE "[af]?$" "" base "${target}")', "gpu-targets"),
    ("gpu-rocm-any-processor", _GPU,
     "      if(NOT target_processor STREQUAL processor)\n", "      if(FALSE)\n",
     "gpu-targets"),
    ("gpu-rocm-features-contradict", _GPU, "set(fits FALSE)", "set(fits TRUE)",
     "gpu-targets"),
    ("gpu-rocm-target-features-dropped", _GPU,
     "        elseif(mine OR theirs)\n", "        elseif(mine)\n", "gpu-targets"),
    ("gpu-cuda-left-out-kernel-built", _CUDA,
     "  if(NOT capabilities)\n    return()\n  endif()\n  build2cmake_record_kernel",
     "  build2cmake_record_kernel", "gpu-targets"),
    ("gpu-rocm-targets-ignored", _ROCM,
     "    list(APPEND narrowing BUILD2CMAKE_ROCM_TARGETS)\n", "", "gpu-targets"),
    ("ci-yaml-words-unquoted", _CI,
     "        and text.lower() not in _PLAIN_WORDS\n", "", "ci-workflow"),
    ("ci-yaml-colon-space-unquoted", _CI, '        and ": " not in text\n', "",
     "ci-workflow"),
    ("ci-yaml-trailing-colon-unquoted", _CI,
     '        and not text.endswith((":", " "))\n', "", "ci-workflow"),
    ("ci-yaml-backslash-unescaped", _CI, "if c in '\"\\\\':", "if c == '\"':",
     "ci-workflow"),
    ("ci-yaml-unicode-raw", _CI, "elif 0x20 <= code <= 0x7E:", "elif 0x20 <= code:",
     "ci-workflow"),
    ("ci-yaml-literal-trailing-lines", _CI, '        and not text.endswith("\\n\\n")\n', "",
     "ci-workflow"),
    ("ci-yaml-literal-indented", _CI, 'not text.startswith((" ", "\\n"))',
     'not text.startswith("\\n")', "ci-workflow"),
    ("ci-yaml-literal-empty-first-line", _CI, 'not text.startswith((" ", "\\n"))',
     'not text.startswith(" ")', "ci-workflow"),
    ("ci-yaml-on-key-unquoted", _CI,
     "_KEY.fullmatch(key) and key.lower() not in _PLAIN_WORDS", "_KEY.fullmatch(key)",
     "ci-workflow"),
    ("ci-runner-prefix-match", _CI, "_RUNNER_LABEL.fullmatch(label)",
     "_RUNNER_LABEL.match(label)", "ci-workflow"),
    ("ci-runners-first-only", _CI,
     '"runs-on": labels[0] if len(labels) == 1 else labels,', '"runs-on": labels[0],',
     "ci-workflow"),
    ("ci-token-in-job-env", _CI,
     '            "env": {"BUILD_TOML": path},\n',
     '            "env": {"BUILD_TOML": path, "HF_TOKEN": "${{ secrets.HF_TOKEN }}"},\n',
     "ci-workflow"),
    ("ci-publish-on-any-ref", _CI,
     "            \"if\": \"startsWith(github.ref, 'refs/tags/v')\",\n", "", "ci-workflow"),
    ("ci-costs-kept-on-success-only", _CI, '                "if": "always()",\n', "",
     "ci-workflow"),
    ("ci-costs-key-reused", _CI,
     '"key": costs_key + "${{ github.run_id }}-${{ github.run_attempt }}",\n'
     "                },\n            },\n            {\n                \"uses\"",
     '"key": costs_key,\n'
     "                },\n            },\n            {\n                \"uses\"",
     "ci-workflow"),
    # The folder in double quotes: the shell expands no `~` there.
    ("ci-costs-dir-tilde-quoted", _CI,
     "BUILD2CMAKE_COSTS_DIR=$HOME/{COSTS_FOLDER[2:]}", "BUILD2CMAKE_COSTS_DIR={COSTS_FOLDER}",
     "ci-workflow"),
    ("ci-permissions-unset", _CI, '        "permissions": {"contents": "read"},\n', "",
     "ci-workflow"),
    ("clean-any-empty-folder", _CLEAN,
     "            if str(PurePosixPath(name).parent) in GENERATED_FOLDERS:\n",
     "            if True:\n", "clean"),
    ("clean-gone-not-swept", _CLEAN,
     "            gone.append(name)  #", "            pass  #", "clean"),
    ("clean-cmake-folder-kept", _CLEAN,
     "{METADATA_PROVIDER_FOLDER, str(PurePosixPath(METADATA_PROVIDER_FOLDER).parent)}",
     "{METADATA_PROVIDER_FOLDER}", "clean"),
]]  # fmt: skip

_CARRIED = "build2cmake/builds/carried_costs.py"

# Issue #61: the project's carried record of compile times (the schedule reads it; `costs`
# writes it), each mutant written from docs/building.md ("A first build") and the diff.
MUTANTS += [Mutant(name, path, old, new, area) for name, path, old, new, area in [
    ("carried-link-followed", _SCHEDULE,
     "read_bounded(path, COSTS_LIMIT, follow=False)",
     "read_bounded(path, COSTS_LIMIT, follow=True)", "schedule"),
    ("carried-any-file-type", _SCHEDULE,
     "    if not stat.S_ISREG(os.fstat(descriptor).st_mode):\n", "    if False:\n", "schedule"),
    ("carried-unbounded", _SCHEDULE,
     "    if len(raw) > limit:\n", "    if False:\n", "schedule"),
    ("carried-other-backend-read", _SCHEDULE,
     "carried = read_carried(carried_path).get(backend, {})",
     "carried = {k: v for c in read_carried(carried_path).values() for k, v in c.items()}",
     "schedule"),
    ("carried-over-own", _SCHEDULE,
     "        [costs.get(key) if key else None for key in keys],\n"
     "        [carried.get(key) if key else None for key in keys],\n",
     "        [carried.get(key) if key else None for key in keys],\n"
     "        [costs.get(key) if key else None for key in keys],\n", "schedule"),
    ("carried-unscaled", _SCHEDULE,
     "scaled = [(tier, scale_onto(reference, tier, cold)) for tier in tiers]",
     "scaled = [(tier, 1.0) for tier in tiers]", "schedule"),
    ("carried-no-scale-through-bytes", _SCHEDULE,
     "through_bytes = ours / theirs if ours and theirs else 1.0", "through_bytes = 1.0",
     "schedule"),
    ("carried-unchecked-seconds", _SCHEDULE,
     "return value if math.isfinite(value) and 0 <= value < 1e6 else None",
     "return value", "schedule"),
    ("costs-any-key-kept", _CARRIED,
     "if source_of(root, key)}", "if plain_key(key)}", "schedule"),
    ("costs-users-file-replaced", _CARRIED,
     "if (report.path.exists() or report.path.is_symlink()) and not force:",
     "if False:", "schedule"),
    ("costs-other-backends-dropped", _CARRIED,
     "    record.update(fresh)\n", "    record = fresh\n", "schedule"),
    ("costs-any-package-named", _CARRIED,
     "match = pattern.fullmatch(named.name)",
     "match = re.fullmatch(r\".*-([a-z0-9]+)\\.tsv\", named.name)", "schedule"),
    ("link-in-compile-order", _TORCH_CMAKE,
     "  if(positions)\n    target_sources", "  if(FALSE)\n    target_sources", "build-order"),
    ("link-positions-as-compiled", _TORCH_CMAKE,
     '        list(FIND compiled "${source}" position)',
     '        list(FIND listed "${source}" position)', "build-order"),
    ("priorities-not-built", _TORCH_CMAKE,
     'add_custom_target(build2cmake_priorities ALL DEPENDS "${previous}")',
     'add_custom_target(build2cmake_priorities DEPENDS "${previous}")', "build-order"),
    ("priorities-reversed", _TORCH_CMAKE,
     'math(EXPR rank "${last} - ${step}")', "set(rank ${step})", "build-order"),
    ("carried-infinite-scale", _SCHEDULE,
     "    if both is not None and usable(both):", "    if both is not None:", "schedule"),
    ("costs-suggested-with-a-record", _CARRIED,
     "    if (root / RECORD_NAME).exists() or (root / RECORD_NAME).is_symlink():\n"
     "        return None\n", "", "schedule"),
]]  # fmt: skip

_SYMBOLS = "cmake_templates/common/build2cmake_symbols.py"

# Issue #59: the check that the linked extension loads (build2cmake_symbols.py, and the build
# that runs it), each mutant written from docs/building.md ("Building for the GPUs at hand").
MUTANTS += [Mutant(name, path, old, new, area) for name, path, old, new, area in [
    ("symbols-python-api-missing", _SYMBOLS,
     'if name.startswith(("Py", "_Py")):', "if False:", "symbols"),
    ("symbols-c-kept-when-a-library-is-not-found", _SYMBOLS,
     'if not_found and not name.startswith("_Z"):', "if False:", "symbols"),
    ("symbols-all-dropped-when-a-library-is-not-found", _SYMBOLS,
     'if not_found and not name.startswith("_Z"):', "if not_found:", "symbols"),
    ("symbols-other-objects-counted", _SYMBOLS,
     "if not found or found.group(2) != extension:", "if not found:", "symbols"),
    ("symbols-failure-passes", _SYMBOLS,
     "    print(message(extension, names, args.left_out), file=sys.stderr)\n    return 1\n",
     "    print(message(extension, names, args.left_out), file=sys.stderr)\n    return 0\n",
     "symbols"),
    ("symbols-unprintable-names", _SYMBOLS,
     'return "".join(c if c.isprintable() else "?" for c in text)', "return text", "symbols"),
    ("symbols-library-dirs-not-searched", _SYMBOLS,
     "path = [d for d in library_dirs if d] + ", "path = [] + ", "symbols"),
    ("symbols-check-not-run", _TORCH_CMAKE,
     '(build2cmake_symbols.py)" ON)', '(build2cmake_symbols.py)" OFF)', "symbols"),
    ("symbols-extension-loaded-in-process", _SYMBOLS,
     "        report = trace(loader, extension, args.library_dir)\n",
     '        report = (__import__("ctypes").CDLL(extension), "")[1]\n', "symbols"),
    ("symbols-left-out-unsaid", _TORCH_CMAKE,
     'set_property(GLOBAL APPEND PROPERTY BUILD2CMAKE_LEFT_OUT "${target}: ${reason}")',
     'set_property(GLOBAL APPEND PROPERTY _UNUSED "${target}: ${reason}")', "symbols"),
]]  # fmt: skip


_HEADERS = "build2cmake/builds/cuda_headers.py"

# Issue #59, third round: an outside reader's mutants of the same code (shared sources, the GPU
# lists, the load check, the CUDA library headers), each at a place no earlier mutant touched.
MUTANTS += [Mutant(name, path, old, new, area) for name, path, old, new, area in [
    ("shared-conflict-winner-not-followed", _SHARED,
     "            if name in changed:\n                seen[name] = (kernel, changed[name])\n",
     "            if before is None:\n                seen[name] = (kernel, value)\n",
     "shared-sources"),
    ("shared-conflict-repeated-flag-counted", _SHARED,
     "changed = _macros(tuple(f for f in flags if f not in given))", "changed = _macros(flags)",
     "shared-sources"),
    ("shared-conflicts-first-source-only", _SHARED,
     "for source in sources for line in _conflicts(members, source)",
     "for source in sources[:1] for line in _conflicts(members, source)", "shared-sources"),
    ("shared-empty-define-is-one", _SHARED,
     '("1" if value is None else value)', '(value or "1")', "shared-sources"),
    ("gpu-target-major-one-digit", _GPU,
     'string(REGEX MATCH "^[0-9]+" target_major "${target}")',
     'string(REGEX MATCH "^[0-9]" target_major "${target}")', "gpu-targets"),
    ("gpu-suffixed-ptx-not-kept", _GPU,
     'if(capability MATCHES "^([0-9]+\\\\.[0-9])[af](\\\\+PTX)?$" AND',
     'if(capability MATCHES "^([0-9]+\\\\.[0-9])[af]$" AND', "gpu-targets"),
    ("gpu-trailing-separator-refused", _GPU,
     '    if(item STREQUAL "")\n      continue()\n    endif()\n', "", "gpu-targets"),
    ("gpu-rocm-archs-limit-ignored", _ROCM,
     "  elseif(BUILD2CMAKE_ROCM_ARCHS)\n    list(APPEND narrowing BUILD2CMAKE_ROCM_ARCHS)\n", "",
     "gpu-targets"),
    ("gpu-cuda-unit-of-left-out-kernels-built", _CUDA,
     "CONFLICTS ${arg_CONFLICTS})\n  if(NOT unit_KERNELS)\n    return()\n  endif()\n"
     "  set(capabilities",
     "CONFLICTS ${arg_CONFLICTS})\n  set(capabilities", "gpu-targets"),
    ("symbols-minver-left-out-unsaid", _CUDA,
     "    set_property(GLOBAL APPEND PROPERTY BUILD2CMAKE_LEFT_OUT\n"
     '      "${target}: its cuda-minver is',
     "    set_property(GLOBAL APPEND PROPERTY _UNUSED\n"
     '      "${target}: its cuda-minver is', "symbols"),
    ("symbols-private-python-api-missing", _SYMBOLS,
     'name.startswith(("Py", "_Py"))', 'name.startswith(("Py",))', "symbols"),
    ("symbols-and-0-more", _SYMBOLS,
     "    if len(names) > SHOWN:\n", "    if len(names) >= SHOWN:\n", "symbols"),
    ("headers-library-missing-accepted", _HEADERS,
     "    if missing:\n        asked", "    if False:\n        asked", "cuda-headers"),
    ("headers-cu13-suffix-unnamed", _HEADERS,
     'r"nvidia-([a-z]+)(?:-cu[0-9]+)?"', 'r"nvidia-([a-z]+)(?:-cu12)?"', "cuda-headers"),
]]  # fmt: skip


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


def test_files(root: Path, area: str = "safety") -> list[str]:
    """The test files of `area` that exist in `root`."""
    names = list(AREAS[area].files)
    if not names:
        tests = root / "tests"
        names = sorted(str(p.relative_to(root)) for p in tests.glob("test_security_*.py"))
        names += sorted(str(p.relative_to(root)) for p in tests.glob("test_hostile*.py"))
        names += ["tests/test_generate.py"]
    return [n for n in names if (root / n).is_file()]


def run_tests(
    root: Path, timeout: float, also_k: str | None, area: str = "safety"
) -> tuple[bool, float, str]:
    """(all passed, seconds, the failed test or else the last line of pytest's output)."""
    start = time.monotonic()
    selection = AREAS[area]
    k = FAST_K + "".join(f" and ({x})" for x in (selection.k, also_k) if x)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
             "-m", selection.markers, "-k", k, *test_files(root, area)],
            cwd=root, capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(root)},
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - start, "timed out (a test hung: counts as killed)"
    lines = (result.stdout + result.stderr).strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    last = failed[0][:150] if failed else lines[-1] if lines else ""
    return result.returncode == 0, time.monotonic() - start, last


def mutated(root: Path, mutant: Mutant) -> tuple[str, str]:
    """(the file's text, the text with the mutation), or an error naming what went wrong."""
    path = root / mutant.path
    if not path.is_file():
        raise ValueError(f"{mutant.name}: {mutant.path} does not exist")
    text = path.read_text()
    found = text.count(mutant.old)
    if found != 1:
        raise ValueError(
            f"{mutant.name}: {mutant.old!r} occurs {found} times in {mutant.path} (must be once)"
        )
    return text, text.replace(mutant.old, mutant.new)


def apply(root: Path, mutant: Mutant) -> None:
    (root / mutant.path).write_text(mutated(root, mutant)[1])


def check_all(root: Path, mutants: list[Mutant], show: bool) -> list[str]:
    """The mutants that do not apply to `root` (each once, exactly); with `show`, each diff."""
    problems = []
    for mutant in mutants:
        if mutant.area not in AREAS:
            problems.append(f"{mutant.name}: no area named {mutant.area!r}")
            continue
        try:
            before, after = mutated(root, mutant)
        except ValueError as error:
            problems.append(str(error))
            continue
        if show:
            print(f"=== {mutant.name}")
            diff = difflib.unified_diff(
                before.splitlines(keepends=True), after.splitlines(keepends=True),
                f"a/{mutant.path}", f"b/{mutant.path}", n=2,
            )  # fmt: skip
            sys.stdout.writelines(diff)
    return problems


def run_one(
    mutant: Mutant | None, snapshot: Path, timeout: float, also_k: str | None, area: str
) -> tuple[bool, str]:
    """One test run of `area`'s tests, with `mutant` applied (None: the baseline of `area`)."""
    with tempfile.TemporaryDirectory(prefix="b2c-mutant-") as folder:
        root = Path(folder) / "repo"
        shutil.copytree(snapshot, root, symlinks=True)
        if mutant is not None:
            apply(root, mutant)
        passed, seconds, last = run_tests(root, timeout, also_k, area)
        name = mutant.name if mutant else f"(no mutation: {area})"
        verdict = "survived" if passed else "killed"
        if mutant is None:
            verdict = "passes" if passed else "FAILS"
        line = f"{name:30} {area:16} {verdict:9} {seconds:6.0f} s  {last}"
        with _PRINTING:
            print(line, flush=True)
        return passed, line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests-from", metavar="REV", help="take tests/ from this git revision")
    parser.add_argument("--only", help="comma-separated mutant names")
    parser.add_argument("--area", help="comma-separated areas: their mutants only")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="mutants run at once (<= 2)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per test run")
    parser.add_argument(
        "--check",
        action="store_true",
        help="print each mutant's diff against the current tree and run no test",
    )
    parser.add_argument(
        "--also-k",
        metavar="EXPR",
        help="further pytest -k selection, e.g. to leave out a test that fails under load",
    )
    args = parser.parse_args()
    mutants = MUTANTS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {m.name for m in MUTANTS}
        if unknown:
            parser.error(f"--only: no mutant named {', '.join(sorted(unknown))}")
        mutants = [m for m in MUTANTS if m.name in wanted]
    if args.area:
        areas = set(args.area.split(","))
        if areas - set(AREAS):
            parser.error(f"--area: no area named {', '.join(sorted(areas - set(AREAS)))}")
        mutants = [m for m in mutants if m.area in areas]
    with tempfile.TemporaryDirectory(prefix="b2c-mutation-") as folder:
        snapshot = Path(folder)
        copy_repo(snapshot, args.tests_from)
        problems = check_all(snapshot, mutants, show=args.check)
        if problems:
            print("\n".join(problems), file=sys.stderr)
            return 1
        if args.check:
            print(f"\n{len(mutants)} mutants apply, each at exactly one place")
            return 0
        start = time.monotonic()
        # One baseline per area: a mutant counts only against tests that pass without it.
        for area in sorted({m.area for m in mutants}):
            baseline, _ = run_one(None, snapshot, args.timeout, args.also_k, area)
            if not baseline:
                print(f"the unmutated code fails the {area} tests; no score", file=sys.stderr)
                return 1
        with ThreadPoolExecutor(max(1, min(args.jobs, 2))) as pool:
            outcomes = list(
                pool.map(lambda m: run_one(m, snapshot, args.timeout, args.also_k, m.area), mutants)
            )
    killed = sum(not passed for passed, _ in outcomes)
    survivors = [m.name for m, (passed, _) in zip(mutants, outcomes, strict=True) if passed]
    minutes = (time.monotonic() - start) / 60
    print(f"\nmutation score: {killed}/{len(mutants)} killed ({minutes:.0f} min)")
    if survivors:
        print("survivors: " + ", ".join(survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
