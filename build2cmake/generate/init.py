"""`build2cmake init`: a new kernel project (edition 5 build.toml, kernel sources, binding, tests).

The files come from our own templates in project_templates/ (rendered when they end in `.j2`,
copied as they are otherwise). Everything is rendered in memory first, so a bad name or backend
writes nothing; then the files go into the folder the user named, in place (the folder itself is
never replaced): a record of what init is about to write first, each file atomically, the record
removed last, so that a killed init's leftovers are known as init's and the next init finishes.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import jinja2

from build2cmake.config.archs import rocm_arch_problem
from build2cmake.config.model import BUILDABLE_BACKENDS
from build2cmake.ground.bounded import parse_json_record
from build2cmake.ground.errors import Build2CMakeError, WriteRefusedError
from build2cmake.ground.safefs import (
    RECORD_LIMIT_BYTES,
    ProjectFolder,
    anchored,
    is_temporary_name,
    relative_path,
    system_folder_refusal,
)

# The Hub's rule for kernel names (and build.toml's [general].name from edition 5 on).
KERNEL_NAME = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]$")
# Hub user and organisation names: letters, digits, '-', '_' and '.', not at either end.
OWNER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$")
# An SPDX license expression as metadata.json and the card carry it ("Apache-2.0", "MIT OR X").
_SPDX_ID = r"[A-Za-z0-9][A-Za-z0-9.+-]*"
LICENSE = re.compile(rf"^{_SPDX_ID}(?: (?:AND|OR|WITH) {_SPDX_ID})*$")

DEFAULT_BACKENDS = ("cuda",)  # as kernel-builder's init on Linux
DEFAULT_LICENSE = "Apache-2.0"
# MI200 and MI300X. gfx942 needs ROCm >= 5.7; older toolchains override the list at build time.
DEFAULT_ROCM_ARCHS = ("gfx90a", "gfx942")


@dataclass(frozen=True)
class KernelName:
    """`--name owner/name`, checked, with the names derived from it."""

    owner: str
    name: str

    @property
    def repo_id(self) -> str:
        """The Hub repository: owner/name."""
        return f"{self.owner}/{self.name}"

    @property
    def package(self) -> str:
        """The Python package (and op) name: dashes become underscores."""
        return self.name.replace("-", "_")

    @property
    def class_name(self) -> str:
        """CamelCase, for the benchmark class."""
        return "".join(part.capitalize() for part in self.name.split("-"))


def parse_kernel_name(text: str) -> KernelName:
    """Check `owner/name` against the Hub's rules; one error saying what would be valid."""
    owner, slash, name = text.partition("/")
    if not slash or "/" in name or not owner or not name:
        raise Build2CMakeError(
            f"--name {text!r}: use <owner>/<kernel name>, "
            f"e.g. my-org/{_suggest(text) or 'my-kernel'}"
        )
    if not OWNER_NAME.fullmatch(owner) or ".." in owner or "--" in owner:
        raise Build2CMakeError(
            f"--name {text!r}: {owner!r} is not a Hub user or organisation name (letters, digits, "
            "'-', '_' and '.', starting and ending with a letter or digit)"
        )
    if not KERNEL_NAME.fullmatch(name):
        suggestion = _suggest(name)
        hint = f" (did you mean {owner}/{suggestion}?)" if suggestion else ""
        raise Build2CMakeError(
            f"--name {text!r}: {name!r} is not a valid kernel name: lowercase letters, digits "
            f"and '-', starting with a letter and not ending with '-'{hint}"
        )
    return KernelName(owner, name)


def _suggest(name: str) -> str:
    """The nearest valid kernel name, or '' when there is none."""
    candidate = re.sub(r"[^a-z0-9-]+", "-", name.split("/")[-1].lower()).strip("-")
    candidate = re.sub(r"-{2,}", "-", candidate).lstrip("0123456789-")
    return candidate if KERNEL_NAME.fullmatch(candidate) else ""


def resolve_backends(selected: Sequence[str]) -> tuple[str, ...]:
    """`--backends` values (`all` or backend names) as build.toml lists them, in canonical order."""
    if not selected:
        return DEFAULT_BACKENDS
    chosen: set[str] = set()
    for value in selected:
        if value == "all":
            chosen.update(BUILDABLE_BACKENDS)
        elif value in BUILDABLE_BACKENDS:
            chosen.add(value)
        else:
            raise Build2CMakeError(
                f"--backends {value!r}: build2cmake builds {', '.join(BUILDABLE_BACKENDS)} "
                "(or 'all' of them)"
            )
    return tuple(b for b in BUILDABLE_BACKENDS if b in chosen)


@dataclass(frozen=True)
class InitReport:
    """Where init put the project and which files it wrote (relative, sorted)."""

    directory: Path
    name: KernelName
    backends: tuple[str, ...]
    written: tuple[str, ...]


def _data_dir() -> Path:
    packaged = Path(__file__).parents[1] / "_data" / "project_templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).parents[2] / "project_templates"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_data_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    # Values reach TOML and Python only as quoted literals (they are checked as well).
    env.filters["toml"] = lambda value: json.dumps(str(value))
    env.filters["py"] = lambda value: repr(str(value))
    return env


def _layout(package: str, backends: Sequence[str]) -> dict[str, str]:
    """Output path -> template path, for the chosen backends."""
    files = {
        "build.toml": "build.toml.j2",
        ".gitignore": "gitignore.j2",
        ".gitattributes": "gitattributes",
        "CARD.md": "CARD.md",
        "example.py": "example.py.j2",
        "benchmarks/benchmark.py": "benchmarks/benchmark.py.j2",
        "torch-ext/torch_binding.cpp": "torch-ext/torch_binding.cpp.j2",
        "torch-ext/torch_binding.h": "torch-ext/torch_binding.h.j2",
        f"torch-ext/{package}/__init__.py": "torch-ext/__init__.py.j2",
        "tests/__init__.py": "tests/__init__.py",
        "tests/conftest.py": "tests/conftest.py.j2",
        f"tests/test_{package}.py": "tests/test_kernel.py.j2",
    }
    sources = {
        "cpu": (f"{package}_cpu/{package}_cpu.cpp", "kernel_cpu/kernel_cpu.cpp.j2"),
        "cuda": (f"{package}_cuda/{package}.cu", "kernel_cuda/kernel.cu.j2"),
        "rocm": (f"{package}_rocm/{package}.hip", "kernel_rocm/kernel.hip.j2"),
    }
    for backend in backends:
        output, template = sources[backend]
        files[output] = template
    return files


def render_init(
    name: KernelName,
    backends: Sequence[str],
    *,
    license_id: str = DEFAULT_LICENSE,
    rocm_archs: Sequence[str] = DEFAULT_ROCM_ARCHS,
) -> dict[str, bytes]:
    """The new project's files in memory: relative path -> content."""
    if not LICENSE.fullmatch(license_id):
        raise Build2CMakeError(
            f"--license {license_id!r}: use an SPDX license identifier, e.g. Apache-2.0 or MIT"
        )
    for arch in rocm_archs:
        problem = rocm_arch_problem(arch)
        if problem is not None:
            raise Build2CMakeError(f"--rocm-archs: {problem}")
    env = _environment()
    context = {
        "name": name.name,
        "package": name.package,
        "repo_id": name.repo_id,
        "class_name": name.class_name,
        "license": license_id,
        "backends": list(backends),
        "rocm_archs": list(rocm_archs),
    }
    rendered: dict[str, bytes] = {}
    for output, template in _layout(name.package, backends).items():
        if template.endswith(".j2"):
            text = env.get_template(template).render(context)
            rendered[output] = text.encode("utf-8")
        else:
            rendered[output] = (_data_dir() / template).read_bytes()
    return rendered


def init_project(
    directory: Path | None,
    name: str,
    *,
    backends: Sequence[str] = (),
    license_id: str = DEFAULT_LICENSE,
    rocm_archs: Sequence[str] = DEFAULT_ROCM_ARCHS,
    force: bool = False,
) -> InitReport:
    """Create a kernel project in `directory` (default: ./<kernel name>).

    A non-empty directory is refused unless `force`; with it, init's own files are replaced and
    every other file is kept. Every argument and every file's way is checked before the first
    write; the writes go through safefs (no symlink followed from the current folder, or from
    the nearest existing folder above `directory` when it lies elsewhere).
    """
    kernel = parse_kernel_name(name)
    chosen = resolve_backends(backends)
    files = render_init(kernel, chosen, license_id=license_id, rocm_archs=rocm_archs)
    target = directory if directory is not None else Path(kernel.name)
    refused = system_folder_refusal(Path(os.path.realpath(target)))
    if refused is not None:
        raise Build2CMakeError(
            f"{target}: refusing to create a kernel project in {refused}; name a new folder"
        )
    anchor, relative = _anchor(target)
    with ProjectFolder(anchor) as folder:
        _check_target(target, folder, relative, files, force=force)
        _fill(folder, relative, files)
    return InitReport(target, kernel, chosen, tuple(sorted(files)))


# What init writes first into the project folder, listing each file it is about to write with
# the hash of its content, and removes last. A folder holding nothing but that record, the files
# it lists (as listed) and folders on their way is what a killed init left: the next init fills
# it again without --force.
INIT_RECORD = ".build2cmake-init.json"


def _fill(folder: ProjectFolder, relative: PurePosixPath, files: dict[str, bytes]) -> None:
    """Write `files` into the folder `relative` in place: the folder the user named (made if
    missing) is never replaced, so its inode, mode, owner and whoever has it open or as their
    working folder stay; the record goes first and last, each file atomically, and the
    temporary files of killed writes go before the files."""
    if relative.parts:
        folder.makedirs(relative)
    record = {"files": {name: content_hash(files[name]) for name in sorted(files)}}
    folder.write_atomic(relative / INIT_RECORD, (json.dumps(record, indent=2) + "\n").encode())
    # What killed writes of an earlier init left beside these names goes first.
    folder.remove_stale_temporaries([relative / name for name in [INIT_RECORD, *sorted(files)]])
    for name in sorted(files):
        folder.write_atomic(relative / name, files[name])
    folder.unlink(relative / INIT_RECORD)


def content_hash(data: bytes) -> str:
    """The hash init's record lists for a file's content."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _left_by_a_killed_init(
    folder: ProjectFolder, relative: PurePosixPath, writes: Collection[str]
) -> bool:
    """Whether everything in folder `relative` is what a killed init of the same project left:
    its record (or the temporary file of it), files the record lists with the content it lists
    and that this init `writes` too, temporary files of init's writes and folders on the way.
    Nothing is deleted on that account: this init writes over all of it."""
    listed = {k: v for k, v in _init_record(folder, relative).items() if k in writes}
    folders = {p for name in listed for p in PurePosixPath(name).parents} - {PurePosixPath()}
    pending = [PurePosixPath()]
    while pending:
        below = pending.pop()
        entries = folder.listdir(relative / below) if (relative / below).parts else folder.listdir()
        for entry in entries:
            name = below / entry
            names_here = [INIT_RECORD] if not below.parts else []
            names_here += [
                PurePosixPath(n).name for n in listed if PurePosixPath(n).parent == below
            ]
            if name in folders and folder.is_dir(relative / name):
                pending.append(name)
            elif any(is_temporary_name(n, entry) for n in names_here):
                if not folder.is_file(relative / name):
                    return False
            elif str(name) != INIT_RECORD and not _holds(
                folder, relative / name, listed.get(str(name))
            ):
                return False
    return True


def _holds(folder: ProjectFolder, name: PurePosixPath, hash_: str | None) -> bool:
    """Whether `name` is a regular file whose content has the hash `hash_` (None: none)."""
    if hash_ is None:
        return False
    try:
        content = folder.read(name, RECORD_LIMIT_BYTES, "file")
    except Build2CMakeError:  # a link, a folder, a FIFO...: not init's
        return False
    return content is not None and content_hash(content) == hash_


def _init_record(folder: ProjectFolder, relative: PurePosixPath) -> dict[str, str]:
    """The files a killed init's record lists (path -> hash); {} when there is none or it is
    not one (then only its temporary file can count as init's)."""
    try:
        name = relative / INIT_RECORD
        raw = folder.read(name, RECORD_LIMIT_BYTES, "init's record")
        data = {} if raw is None else parse_json_record(raw, folder.path / name, "init's record")
    except Build2CMakeError:
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {
        name: value
        for name, value in files.items()
        if isinstance(value, str) and relative_path(name) is not None and name != INIT_RECORD
    }


def _anchor(target: Path) -> tuple[Path, PurePosixPath]:
    """The folder init walks from (without following symlinks) and the target relative to it:
    the current folder when the target lies inside it (a cloned tree's planted links are
    there), else the nearest existing folder above the target (folders the user named)."""
    return anchored(target, [Path.cwd()])


def _check_target(
    target: Path,
    folder: ProjectFolder,
    relative: PurePosixPath,
    files: dict[str, bytes],
    *,
    force: bool,
) -> None:
    """Refuse, before anything is written: a non-empty folder without --force (unless all it
    holds is what a killed init left), and a symlink (or a file where a folder goes, or a
    non-file where a file goes) anywhere on the way from the anchor to the target or to any
    file init writes."""
    anchor = folder.path
    names = [*sorted(files), INIT_RECORD]
    # Every folder from the anchor down to each file, the target itself included.
    folders = {parent for f in names for parent in (relative / f).parents} - {PurePosixPath()}
    for path in sorted(folders):
        _check_entry(anchor, path, want_folder=True)
    for name in names:
        _check_entry(anchor, relative / name, want_folder=False)
    holds = folder.listdir(relative) if relative.parts else folder.listdir()
    if holds and not force and not _left_by_a_killed_init(folder, relative, files):
        raise WriteRefusedError(
            f"{target}: folder is not empty; pick a new folder, or pass --force to write init's "
            "files into it (other files are kept, init's own are replaced)"
        )


def _check_entry(anchor: Path, relative: PurePosixPath, *, want_folder: bool) -> None:
    path = anchor / relative
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        if error.errno == errno.ENOTDIR:
            return  # below a file: that file is reported as such
        raise Build2CMakeError(f"{path}: cannot inspect ({error.strerror})") from None
    if stat.S_ISLNK(info.st_mode):
        raise WriteRefusedError(
            f"{path}: is a symlink; init writes only through real folders and files of the new "
            "project (move the link away)"
        )
    if want_folder and not stat.S_ISDIR(info.st_mode):
        raise WriteRefusedError(f"{path}: is a file where init puts a folder; move it away")
    if not want_folder and not stat.S_ISREG(info.st_mode):
        raise WriteRefusedError(f"{path}: is not a regular file; move it away and run init")
