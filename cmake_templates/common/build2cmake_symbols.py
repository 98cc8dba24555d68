"""Stops a build whose extension would not load: functions it calls that neither its own
objects nor any library it loads defines (issue #59).

    build2cmake_symbols.py EXTENSION [--library-dir DIR ...] [--left-out LINE ...]

The case it is for: TORCH_CUDA_ARCH_LIST (or PYTORCH_ROCM_ARCH, cuda-minver) leaves out a
kernel whose functions the bindings call unguarded. kernels-community's sage-attention built for
9.0a links, and `import` then fails with `undefined symbol: mha_fwd(...)`, on the machine that
loads it, after the upload. Here the build stops instead, naming the functions and the kernels
left out.

How: the system's dynamic loader, the one the build's Python runs under (its ELF interpreter),
resolves every symbol of the extension in trace mode (LD_TRACE_LOADED_OBJECTS with
LD_BIND_NOW: it maps the libraries and binds the symbols, and runs none of their code), with
torch's and the toolkit's library folders on its path. What it reports undefined in the
extension itself is missing, except:
- the Python C API (`Py*`, `_Py*`), which the interpreter that imports the extension provides;
- C functions, when a library of the load was not found: a variant's environment holds torch
  without the CUDA libraries torch loads at run time (cuBLAS, cuDNN, NCCL...), whose C functions
  some kernels call without linking them (kernels-community's megablocks calls cublasGemmEx
  through torch's libcublas). C++ functions stay missing: those libraries export none.

Standard library only; run with the build's Python from a neutral working folder. Where it
cannot check (not Linux, no loader found), it says nothing and lets the build be. Names read
from the extension reach the terminal only printable.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys

PT_INTERP = 3
SHOWN = 8  # functions named in the error; the rest are counted


def interpreter(executable: str) -> str | None:
    """The ELF interpreter (dynamic loader) of `executable`, or None where it has none."""
    try:
        with open(executable, "rb") as f:
            header = f.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
                return None  # 64-bit little-endian ELF only (x86_64, aarch64)
            (phoff,) = struct.unpack_from("<Q", header, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
            for index in range(min(phnum, 256)):
                f.seek(phoff + index * phentsize)
                entry = f.read(56)
                if len(entry) < 56:
                    return None
                kind, _, offset, _, _, size = struct.unpack_from("<IIQQQQ", entry)
                if kind == PT_INTERP and 0 < size <= 4096:
                    f.seek(offset)
                    path = f.read(size).split(b"\0", 1)[0].decode("utf-8", "replace")
                    return path if os.path.isabs(path) and os.path.isfile(path) else None
    except OSError:
        return None
    return None


def trace(loader: str, extension: str, library_dirs: list[str]) -> str:
    """What the loader says resolving every symbol of `extension`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    path = [d for d in library_dirs if d] + [os.environ.get("LD_LIBRARY_PATH", "")]
    env.update(
        LD_TRACE_LOADED_OBJECTS="1",
        LD_BIND_NOW="1",
        LD_WARN="1",
        LD_LIBRARY_PATH=":".join(p for p in path if p),
    )
    done = subprocess.run(
        [loader, extension], env=env, capture_output=True, text=True, errors="replace",
        timeout=300, check=False,
    )  # fmt: skip
    return done.stdout + done.stderr


def missing(report: str, extension: str) -> list[str]:
    """The symbols the extension needs and nothing found defines, as the rules above keep."""
    not_found = re.search(r"=> not found", report) is not None
    names = []
    for line in report.splitlines():
        found = re.match(r"\s*undefined symbol: (\S+)\s+\((.*)\)\s*$", line)
        if not found or found.group(2) != extension:
            continue
        name = found.group(1)
        if name.startswith(("Py", "_Py")):
            continue
        if not_found and not name.startswith("_Z"):
            continue
        names.append(name)
    return sorted(set(names))


def demangled(names: list[str]) -> list[str]:
    tool = shutil.which("c++filt")
    if tool is None:
        return names
    try:
        done = subprocess.run(
            [tool], input="\n".join(names), capture_output=True, text=True, timeout=60,
            check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return names
    lines = done.stdout.splitlines()
    return lines if len(lines) == len(names) else names


def printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


def message(extension: str, names: list[str], left_out: list[str]) -> str:
    shown = [f"  {printable(n)[:300]}" for n in demangled(names[:SHOWN])]
    if len(names) > SHOWN:
        shown.append(f"  and {len(names) - SHOWN} more")
    lines = [
        f"build2cmake: {os.path.basename(extension)} would not load: it calls "
        f"{len(names)} function{'s' if len(names) != 1 else ''} that no source of this build "
        "and no library it loads defines:",
        *shown,
    ]
    if left_out:
        lines.append("Left out of this build, whose sources may define them:")
        lines += [f"  {printable(line)}" for line in left_out]
        lines.append(
            "Build for a capability (or arch) of theirs too (TORCH_CUDA_ARCH_LIST, "
            "PYTORCH_ROCM_ARCH), or guard the calls in the sources that make them."
        )
    else:
        lines.append("Is the source that defines them missing from a kernel's `src` in build.toml?")
    lines.append("To build it all the same: -DBUILD2CMAKE_CHECK_SYMBOLS=OFF.")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="build2cmake_symbols.py")
    parser.add_argument("extension")
    parser.add_argument("--library-dir", action="append", default=[])
    parser.add_argument("--left-out", action="append", default=[])
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        return 0
    loader = interpreter(os.path.realpath(sys.executable))
    if loader is None:
        return 0
    extension = os.path.abspath(args.extension)
    try:
        report = trace(loader, extension, args.library_dir)
    except (OSError, subprocess.SubprocessError) as error:
        print(f"build2cmake: symbols of {os.path.basename(extension)} not checked: {error}")
        return 0
    names = missing(report, extension)
    if not names:
        return 0
    print(message(extension, names, args.left_out), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
