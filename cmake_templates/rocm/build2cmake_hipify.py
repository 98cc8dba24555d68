#!/usr/bin/env python3
"""Hipify one CUDA source of a kernel project for a ROCm build, with torch's own hipify.

Usage (the generated CMake runs this once per .cu source of a rocm kernel):

    python build2cmake_hipify.py --project-dir ABS_PROJECT --output-dir ABS_OUT
        [--include REL_DIR]... --depfile ABS_OUT/<rel>.hip.d --output ABS_OUT/<rel>.hip
        REL_SOURCE.cu

The source is converted into --output; every project file it includes, transitively, is converted
into the mirror tree under --output-dir at the same relative path and with the same name. Keeping
names (unlike torch.utils.hipify.hipify(), which renames foo.cuh to foo_hip.cuh and cuda/ to hip/
and rewrites the include lines to match) means include lines of project headers stay as written:
the compiler finds the converted copy first, because the mirror folders come before the original
ones on its include path and a quoted include looks next to the including file first. It also
means two project files can never land on one name (torch maps cuda/x.h and hip/x.h both to
hip/x.h).

Only files inside the project are read (symlinks resolving outside are refused), only files under
--output-dir are written, never through a symlink (in the output tree, or as --output-dir or a
folder leading to it from the project folder), and a file is rewritten only when its content
changes, so an unchanged converted header does not trigger recompiles. The Ninja depfile lists
the source and every project file read, so editing a header re-runs this script for the sources
that include it.

Standalone on purpose (standard library and torch only, Python >= 3.9): generate copies it into
each project's cmake/ folder, and it runs with the Python the build found.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import re
import stat
import sys
import tempfile
import unicodedata
from typing import Any

PROG = "build2cmake_hipify"
# The name torch's hipify package is loaded under (see _load_torch_hipify).
_PRIVATE_PACKAGE = "_build2cmake_torch_hipify"

# Any preprocessor include naming a file, however it is spaced. Wider than torch's own pattern on
# purpose: a header we fail to see here would be compiled unconverted from the original folder.
INCLUDE_LINE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)', re.MULTILINE)

# torch's hipify renames includes of these torch headers (ATen/cuda/X.h -> ATen/hip/X.h); the
# prefixes are the ones its preprocessor checks.
TORCH_RENAMED_PREFIXES = (
    "ATen/cuda",
    "ATen/native/cuda",
    "ATen/native/nested/cuda",
    "ATen/native/quantized/cuda",
    "ATen/native/sparse/cuda",
    "ATen/native/transformers/cuda",
    "THC/",
)


# Unicode categories that must not reach a terminal raw: control characters (newline, ESC, ...),
# format characters (bidirectional overrides, zero-width characters), lone surrogates (from file
# names that are not UTF-8) and the line and paragraph separators.
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _printable(text: str) -> str:
    """`text` with every control or format character written as an escape, so a name from the
    project can neither forge a line nor send an escape sequence to a terminal. A copy of
    build2cmake.ground.errors.printable (this script runs in the build, without build2cmake);
    tests/test_robustness.py checks that the copies agree."""
    if text.isprintable():
        return text
    out: list[str] = []
    for char in text:
        if unicodedata.category(char) not in _UNPRINTABLE_CATEGORIES:
            out.append(char)
        elif char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x100:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return "".join(out)


class HipifyError(Exception):
    """Something the project or the caller must fix; printed as one line, exit status 1."""


def _load_torch_hipify() -> Any:
    """torch.utils.hipify.hipify_python, typed as Any: torch leaves it unannotated.

    Loaded from the installed torch's files as a package of its own, without running
    torch/__init__.py: torch.utils.hipify needs nothing else from torch, and importing torch
    costs ~3 s, paid once per hipified source in every build.
    """
    try:
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.submodule_search_locations:
            for torch_dir in spec.submodule_search_locations:
                folder = os.path.join(torch_dir, "utils", "hipify")
                init = os.path.join(folder, "__init__.py")
                if os.path.isfile(os.path.join(folder, "hipify_python.py")):
                    package = importlib.util.spec_from_file_location(
                        _PRIVATE_PACKAGE, init, submodule_search_locations=[folder]
                    )
                    if package is None or package.loader is None:
                        break
                    module = importlib.util.module_from_spec(package)
                    sys.modules[_PRIVATE_PACKAGE] = module
                    package.loader.exec_module(module)
                    return importlib.import_module(_PRIVATE_PACKAGE + ".hipify_python")
    except Exception:
        # Any surprise in torch's layout: fall back to the ordinary import below.
        for name in [name for name in sys.modules if name.startswith(_PRIVATE_PACKAGE)]:
            del sys.modules[name]
    try:
        return importlib.import_module("torch.utils.hipify.hipify_python")
    except ImportError as error:
        raise HipifyError(
            f"cannot import torch.utils.hipify with {sys.executable} ({error}); "
            "install torch for the Python this build uses"
        ) from error


def _is_within(path: str, folder: str) -> bool:
    """Whether the normalized absolute `path` is `folder` or lies below it."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _project_relative(name: str, what: str) -> str:
    """Normalize a path the caller gave relative to the project; refuse one that leaves it."""
    if os.path.isabs(name):
        raise HipifyError(f"{what} {name!r} must be relative to the project folder")
    rel = os.path.normpath(name)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        raise HipifyError(f"{what} {name!r} lies outside the project folder")
    return "" if rel == os.curdir else rel


def _check_output_dir(project_dir: str, output_dir: str) -> None:
    """Refuse an output folder that is, or is reached through, a symlink inside the project.

    The build folder usually lies inside the (untrusted) project: a symlink planted as it, as
    its hipified/ folder or as a folder leading to it would send our writes elsewhere. Only the
    folders below the project folder are checked; the project folder's own path is the user's.
    """
    project = os.path.normpath(project_dir)
    current = output_dir if _is_within(output_dir, project) else None
    while current is not None and current != project:
        if os.path.islink(current):
            raise HipifyError(
                f"refusing to write through the symlink {current} (to {os.readlink(current)}): "
                f"--output-dir {output_dir} must be a real folder inside the project"
            )
        current = os.path.dirname(current)
    if os.path.islink(output_dir):
        raise HipifyError(f"refusing to write through the symlink {output_dir}")


class Hipifier:
    """Converts one source and the project headers it includes into a mirror tree."""

    def __init__(self, project_dir: str, output_dir: str, include_dirs: list[str]) -> None:
        self.project_dir = project_dir
        self.project_real = os.path.realpath(project_dir)
        self.output_dir = os.path.normpath(output_dir)
        self.output_real = os.path.realpath(output_dir)
        self.include_dirs = include_dirs
        self.torch = _load_torch_hipify()
        # The files read, project-relative, in the order they were first reached.
        self.read: list[str] = []

    # Reading ------------------------------------------------------------------------------------

    def _open_project_file(self, rel: str, included_from: str | None) -> bytes:
        """Read a project file, refusing anything that really lies outside the project."""
        where = f" (included from {included_from})" if included_from else ""
        path = os.path.join(self.project_real, rel)
        real = os.path.realpath(path)
        if not _is_within(real, self.project_real):
            raise HipifyError(f"{rel}{where} is a symlink to {real}, outside the project folder")
        if _is_within(real, self.output_real):
            raise HipifyError(f"{rel}{where} lies in the hipify output folder {self.output_dir}")
        try:
            # O_NONBLOCK: a FIFO planted under a header's name must not hang the build.
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as error:
            raise HipifyError(f"cannot read {rel}{where}: {error.strerror}") from error
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise HipifyError(f"{rel}{where} is not a regular file")
            return handle.read()

    def _resolve(self, name: str, including: str) -> str | None:
        """The project-relative path an include names, or None for a file outside the project.

        Looked up as the compiler would for the original sources: next to the including file,
        then in each include folder, then at the project root.
        """
        if os.path.isabs(name):
            return None
        bases = [os.path.dirname(including), *self.include_dirs, ""]
        for base in bases:
            rel = os.path.normpath(os.path.join(base, name))
            escapes = rel == os.pardir or rel.startswith(os.pardir + os.sep)
            path = os.path.join(self.project_real, rel)
            if not os.path.lexists(path):
                continue
            if escapes:
                raise HipifyError(
                    f'{including}: #include "{name}" names {os.path.normpath(path)}, '
                    "outside the project folder"
                )
            real = os.path.realpath(path)
            if not _is_within(real, self.project_real):
                raise HipifyError(
                    f'{including}: #include "{name}" is {rel}, a symlink to {real}, '
                    "outside the project folder"
                )
            if os.path.isdir(real) or not os.path.exists(real):
                continue  # Not something the compiler would include either.
            return rel
        return None

    # Converting ---------------------------------------------------------------------------------

    def _convert(self, rel: str, text: str) -> tuple[str, list[str]]:
        """torch's per-file hipify steps on `text`; returns it and the project files it includes.

        The steps and their order are those of torch.utils.hipify's preprocessor for a PyTorch
        extension, except that includes of project files keep their names (see the module doc).
        """
        hip = self.torch
        breadcrumb: str = hip.HIPIFY_C_BREADCRUMB
        if text.startswith(breadcrumb):
            # Already hipify output (a converted file checked in); torch leaves these alone.
            return text, self._project_includes(rel, text)
        text = hip.RE_PYTORCH_PREPROCESSOR.sub(lambda m: hip.PYTORCH_MAP[m.group(0)], text)
        # Includes are resolved after the CUDA->HIP renames, as the compiler will see them:
        # "#include <cub/cub.cuh>" now names hipcub, not a project folder called cub.
        includes = self._project_includes(rel, text)

        def rename_torch_header(template: str) -> Any:
            def replace(match: re.Match[str]) -> str:
                name = match.group(1)
                if name.startswith(TORCH_RENAMED_PREFIXES) or (
                    name.startswith("THC") and not name.startswith("THCP")
                ):
                    return template.format(hip.get_hip_file_path(name, is_pytorch_extension=True))
                return match.group(0)

            return replace

        text = hip.RE_QUOTE_HEADER.sub(rename_torch_header('#include "{0}"'), text)
        text = hip.RE_ANGLE_HEADER.sub(rename_torch_header("#include <{0}>"), text)
        # Kernel launches: kernel<<<grid, block, shmem, stream>>>(args) -> hipLaunchKernelGGL.
        stats: dict[str, list[Any]] = {"unsupported_calls": [], "kernel_launches": []}
        text = hip.processKernelLaunches(text, stats)
        if rel.endswith((".cu", ".cuh")):
            text = hip.replace_math_functions(text)
        text = hip.hip_header_magic(text)
        return breadcrumb + text, includes

    def _project_includes(self, rel: str, text: str) -> list[str]:
        found: list[str] = []
        for match in INCLUDE_LINE.finditer(text):
            header = self._resolve(match.group(1) or match.group(2), rel)
            if header is not None and header not in found:
                found.append(header)
        return found

    # Writing ------------------------------------------------------------------------------------

    def _make_dirs(self, folder: str) -> None:
        """Create `folder` below the output folder, refusing symlinked folders on the way.

        The output folder may live inside the (untrusted) project; a symlink planted there
        must not redirect our writes elsewhere.
        """
        rel = os.path.relpath(folder, self.output_dir)
        current = self.output_dir
        os.makedirs(current, exist_ok=True)
        for part in [] if rel == os.curdir else rel.split(os.sep):
            current = os.path.join(current, part)
            # Parallel hipify runs (the other .cu sources of the build) create the same folders:
            # one that appears between a check and mkdir is fine, and is then checked like any.
            with contextlib.suppress(FileExistsError):
                os.mkdir(current)
            if os.path.islink(current):
                raise HipifyError(f"refusing to write through the symlink {current}")
            if not os.path.isdir(current):
                raise HipifyError(f"cannot write into {current}: not a folder")

    def write(self, path: str, content: bytes) -> bool:
        """Write `path` (under the output folder) only if its content changes; True if written."""
        self._make_dirs(os.path.dirname(path))
        if not os.path.islink(path) and os.path.isfile(path):
            with open(path, "rb") as handle:
                if handle.read() == content:
                    return False
        # A temporary file and a rename: parallel hipify runs share headers, and a compiler
        # must never see a half-written one.
        fd, temporary = tempfile.mkstemp(prefix=".hipify-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
        return True

    def mirror_path(self, rel: str) -> str:
        return os.path.join(self.output_dir, rel)

    # The whole run ------------------------------------------------------------------------------

    def run(self, source: str, output: str) -> None:
        """Hipify `source` into `output` and its project headers into the mirror tree."""
        if not os.path.lexists(os.path.join(self.project_real, source)):
            raise HipifyError(f"source {source} does not exist in {self.project_dir}")
        pending: list[tuple[str, str | None]] = [(source, None)]
        seen = {source}
        # Everything is converted in memory first: a refused header leaves no output behind.
        converted: dict[str, bytes] = {}
        while pending:
            rel, included_from = pending.pop(0)
            data = self._open_project_file(rel, included_from)
            self.read.append(rel)
            text, includes = self._convert(rel, data.decode("utf-8", "surrogateescape"))
            target = output if rel == source else self.mirror_path(rel)
            if target in converted:
                raise HipifyError(
                    f"{rel} (included from {included_from}) would be hipified onto {output}, "
                    f"the hipified {source}"
                )
            converted[target] = text.encode("utf-8", "surrogateescape")
            for header in includes:
                if header not in seen:
                    seen.add(header)
                    pending.append((header, rel))
        for target, content in converted.items():
            self.write(target, content)


def _depfile_path(path: str) -> str:
    """One path in Makefile/Ninja depfile syntax."""
    if any(char in path for char in "\n\r\0"):
        raise HipifyError(f"cannot write {path!r} into a depfile (line break in the name)")
    return path.replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--project-dir", required=True, help="the kernel project (absolute)")
    parser.add_argument("--output-dir", required=True, help="root of the mirror tree (absolute)")
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="REL_DIR",
        help="an include folder of the kernel, relative to the project (repeatable)",
    )
    parser.add_argument("--depfile", required=True, help="Ninja depfile to write (absolute)")
    parser.add_argument("--output", required=True, help="the hipified source (absolute)")
    parser.add_argument("source", help="the CUDA source, relative to the project")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    args = _parse_args(argv)
    try:
        for option in ("project_dir", "output_dir", "depfile", "output"):
            if not os.path.isabs(getattr(args, option)):
                flag = "--" + option.replace("_", "-")
                raise HipifyError(f"{flag} {getattr(args, option)!r} must be an absolute path")
        if not os.path.isdir(args.project_dir):
            raise HipifyError(f"--project-dir {args.project_dir} is not a folder")
        output_dir = os.path.normpath(args.output_dir)
        project_real = os.path.realpath(args.project_dir)
        output_real = os.path.realpath(output_dir)
        if _is_within(project_real, output_real):
            raise HipifyError(
                f"--output-dir {output_dir} holds the project itself; "
                "hipified files would overwrite its sources"
            )
        _check_output_dir(args.project_dir, output_dir)
        source = _project_relative(args.source, "source")
        includes = [_project_relative(name, "--include") for name in args.include]
        output = os.path.normpath(args.output)
        depfile = os.path.normpath(args.depfile)
        for flag, path in (("--output", output), ("--depfile", depfile)):
            if not _is_within(path, output_dir) or path == output_dir:
                raise HipifyError(f"{flag} {path} must lie inside --output-dir {output_dir}")
        # Relative includes of the hipified source must reach the mirrored headers beside it.
        mirror_folder = os.path.join(output_dir, os.path.dirname(source))
        if os.path.dirname(output) != os.path.normpath(mirror_folder):
            raise HipifyError(
                f"--output {output} must be in {os.path.normpath(mirror_folder)}, the mirror of "
                f"the folder of {source}"
            )

        hipifier = Hipifier(args.project_dir, output_dir, includes)
        hipifier.run(source, output)
        deps = [os.path.join(os.path.normpath(args.project_dir), rel) for rel in hipifier.read]
        lines = [_depfile_path(output) + ":"] + [_depfile_path(dep) for dep in deps]
        hipifier.write(depfile, (" \\\n  ".join(lines) + "\n").encode())
    except (HipifyError, OSError) as error:
        # Names of the project's files and link targets: escaped on their way to the terminal.
        print(f"{PROG}: error: {_printable(str(error))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
