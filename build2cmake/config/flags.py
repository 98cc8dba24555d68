"""Which compiler flags a build.toml may pass (`cxx-flags`, `cuda-flags`, `hip-flags`,
`sycl-flags`), and why the others are refused.

A cloned project's build.toml is untrusted, and its flags reach gcc, clang and nvcc as written.
Compilers have options that run a program (`-wrapper`, `-B`, `-ccbin`, `-fuse-ld=`), load code
into the compiler (`-fplugin=`, `-fpass-plugin=`, `-Xclang -load`), write a file wherever they
say (`-o`, `-MF`, `-save-temps=`, `-ftime-trace=`, `-fprofile-generate=`), pass options on to the
linker or assembler (`-Wl,`, `-Xlinker`), or read more options from a file that no check sees
(`@file`, `-optf`, `-specs=`, `--config=`).

Why an allowlist of flag shapes rather than a denylist: gcc, clang and nvcc have thousands of
options between them and every release adds some. A denylist must name each one that runs, loads,
writes or reads options, in every compiler a kernel may meet, and the one it misses is the hole
(gcc's `-fmodule-mapper=|program`, nvcc's `--run`, clang's `-fcrash-diagnostics-dir=`). The
allowlist names the shapes kernel projects use: macros, `-O`, `-std=`, debug info, warnings,
`-f`/`-m` code-generation switches, `-l`, and nvcc's own switches; anything else is one error
naming the flag. The `-f` and `-m` families are too large to list, so inside them the options
known to run, load or write are refused by name (`_DENIED`), and their values may not hold a
path (no `/`, no `..`): an option missed there can name a file only in the compiler's working
folder, the build folder.

Two rules hold for every string, wherever CMake puts it:

- Only letters, digits and `_ - + = . , / :`. nvcc runs its tools through a shell, with
  `-Xcompiler`'s values unquoted (`nvcc --dryrun` shows the command lines): `$(...)`, a
  backquote, `>`, `|` or a space in a flag would run commands or redirect output. `@` starts a
  response file for gcc, clang and nvcc, also inside `-Wl,` or `-Xcompiler=`.
- An option never takes its value from the next string: CMake removes repeated flags from a
  target's options, so `-Xcompiler`, `X`, `-Xcompiler`, `Y` reaches the compiler as
  `-Xcompiler X Y`, and any string may end up after any option. Each string is therefore
  checked on its own, and forwarding options are accepted only joined (`-Xcompiler=-fopenmp`),
  their comma-separated parts checked by the same rules.
"""

from __future__ import annotations

import re

# Every character a flag may hold (see the module doc).
_FLAG_CHARS = re.compile(r"[A-Za-z0-9_+=.,/:-]+")

_RUNS = "runs a program"
_LOADS = "loads a plugin into the compiler"
_WRITES = "writes a file where it says, which may be outside the project"
_READS = "reads more options from a file, which no check sees"
_LINKER = "passes options to the linker, which can load plugins and write files (--plugin, -o)"

# Refused with the reason given, whatever else the flag looks like. Checked before the shapes
# below, so a denied option of an allowed family (-fplugin=) is refused with its reason.
_DENIED: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        # Programs the compiler runs in place of its own tools.
        (r"--?wrapper(=.*)?", f"{_RUNS} (gcc starts the wrapper in front of each tool it runs)"),
        (r"-B.*|--?prefix(=.*)?", f"{_RUNS} from the folder it names (gcc and clang look for "
         "as, ld and their own passes there)"),
        (r"--?(ccbin|compiler-bindir)(=.*)?", f"{_RUNS} (nvcc runs it as the host compiler)"),
        (r"--?(run|run-args)(=.*)?", f"{_RUNS} (nvcc runs what it compiled)"),
        (r"--?(arbin|archiver-binary)(=.*)?", f"{_RUNS} (nvcc runs it as the archiver)"),
        (r"--?fuse-ld(=.*)?|--?ld-path(=.*)?", f"{_RUNS} (the compiler runs it as the linker)"),
        (r"--?(gcc-toolchain|gcc-install-dir)(=.*)?", f"{_RUNS} (clang runs the assembler and "
         "linker of the gcc installation it names)"),
        (r"--?fmodule-mapper(=.*)?", f"{_RUNS} (gcc's -fmodule-mapper=|program)"),
        (r"--?specs(=.*)?", f"{_READS} (a gcc specs file, which can make gcc run any program)"),
        # Code loaded into the compiler.
        (r"--?f(plugin|pass-plugin).*", f"{_LOADS} (a shared library of the project's choosing)"),
        (r"--?Xclang(=.*)?", "passes the next string to clang's compiler proper, past this "
         "check (-Xclang -load loads a plugin)"),
        (r"--?mllvm.*", "passes options to LLVM inside the compiler, past this check (-mllvm "
         "-load loads a plugin)"),
        (r"--?mlink-(builtin-)?bitcode.*", f"{_LOADS} (bitcode linked into the device code)"),
        # Options read from a file.
        (r"--?(optf|options-file)(=.*)?", _READS),
        (r"--?config(-.*)?(=.*)?", f"{_READS} (a clang configuration file)"),
        # Files written where the flag says.
        (r"--?(odir|output-directory)(=.*)?", f"{_WRITES} (nvcc's output folder)"),
        (r"-o(?!ffload).*|--output.*", f"{_WRITES} (the compiler's output file)"),
        (r"--?(MF|MJ|dependency-output).*", f"{_WRITES} (a dependency file)"),
        (r"--?dump(dir|base).*", f"{_WRITES} (gcc's auxiliary and dump files)"),
        (r"--?save-temps.*|--?keep-dir(=.*)?", f"{_WRITES} (the compiler's intermediate files)"),
        (r"--?aux-info(=.*)?", f"{_WRITES} (gcc's prototype listing)"),
        (r"--?time(=.*)?", f"{_WRITES} (nvcc's timing report)"),
        (r"--?f(profile|cs-profile|memory-profile|auto-profile).*",
         f"{_WRITES} (profile data, written when the built code runs)"),
        (r"--?f(time-trace|device-time-trace|crash-diagnostics|opt-info|save-optimization-"
         r"record|optimization-record|proc-stat-report|diagnostics-add-output|diagnostics-set-"
         r"output|diagnostics-format|deps-|compare-debug).*|--?f[A-Za-z0-9-]*dump.*",
         f"{_WRITES} (a compiler report or dump)"),
        (r"--?gen-reproducer.*|--?freport-bug", "writes the preprocessed source (and clang a "
         "script to rerun the compile) to the temporary folder, outside the project, when the "
         "compiler crashes (clang's -gen-reproducer: on every compile)"),
        (r"--?f(module|prebuilt-module|implicit-module).*",
         f"{_WRITES} (compiled modules, in a cache or file it names)"),
        # Options passed on to other tools.
        (r"-Wl(,.*)?|--?(Xlinker|linker-options|Xnvlink|nvlink-options)(=.*)?", _LINKER),
        (r"-Wa(,.*)?|--?Xassembler(=.*)?", "passes options to the assembler, which writes files "
         "where they say (-o, --MD)"),
        (r"-Wp(,.*)?|--?Xpreprocessor(=.*)?", "passes options to the preprocessor, which writes "
         "files where they say (-MD, -MF)"),
        (r"--?(Xarchive|archive-options)(=.*)?", "passes options to the archiver, past this check"),
        (r"--?foffload.*", "passes options to the offload compilers gcc runs, past this check"),
        (r"--?(Xcompiler|compiler-options|Xptxas|ptxas-options|Xfatbin|fatbin-options)",
         "takes its value from the next string, which CMake may drop or move (it removes "
         "repeated flags); write the value in the same string, e.g. -Xcompiler=-fopenmp"),
        (r"-X.*", "passes the next string to another tool, past this check"),
        (r"-I.*|--?(isystem|iquote|idirafter).*", "adds an include folder; list include folders "
         "in the kernel's `include` key, which checks that they stay in the project"),
    )
)  # fmt: skip

# Shapes accepted as they are (after the denials above and the character rule).
_ALLOWED: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        r"-D[A-Za-z_][A-Za-z0-9_]*(=.*)?",
        r"-U[A-Za-z_][A-Za-z0-9_]*",
        r"-O([0-4sgz]|fast)?",
        r"--?std=[a-z0-9+]+",
        r"-g([0-3]|gdb[0-3]?|dwarf(-[2-5])?|line-tables-only|line-directives-only|z|"
        r"column-info|no-column-info)?",
        r"-G",
        r"-W[A-Za-z0-9][A-Za-z0-9_=+-]*",
        r"-w|-pthread|-pedantic(-errors)?",
        r"-l[A-Za-z0-9_][A-Za-z0-9_+.-]*",
        # nvcc's own switches (one or two dashes, as nvcc accepts either).
        r"--?(use_fast_math|expt-relaxed-constexpr|expt-extended-lambda|extended-lambda|"
        r"extra-device-vectorization|lineinfo|generate-line-info|res-usage|resource-usage|"
        r"restrict|display-error-number|no-display-error-number|source-in-ptx|device-debug)",
        r"--?(threads|split-compile|maxrregcount|ftemplate-backtrace-limit|ftemplate-depth)"
        r"=[0-9]+",
        r"--?(diag-suppress|diag-error|diag-warn|diag-default)=[A-Za-z0-9_-]+(,[A-Za-z0-9_-]+)*",
        r"--?(ftz|prec-div|prec-sqrt|fmad|relocatable-device-code|rdc)=(true|false)",
        r"--?default-stream=(legacy|null|per-thread)",
        # clang's HIP switch.
        r"--gpu-max-threads-per-block=[0-9]+",
    )
)

# -f and -m switches: a name, and maybe a value without a path in it.
_SWITCH = re.compile(r"-[fm][A-Za-z0-9][A-Za-z0-9_+.-]*(=(?P<value>.*))?")
_SWITCH_VALUE = re.compile(r"[A-Za-z0-9_+.,:=-]*")

# Options that pass their comma-separated value to another tool: (flag pattern, the tool, the
# rule for each part).
_FORWARDING = re.compile(
    r"--?(?P<option>Xcompiler|compiler-options|Xptxas|ptxas-options|Xfatbin|fatbin-options)="
    r"(?P<value>.*)"
)

# What nvcc may pass to ptxas and fatbinary: their switches that neither write nor read files
# (`ptxas --help`, `fatbinary --help`; the others are -o, --options-file, --create, ...).
_PTXAS_OPTION = re.compile(
    r"--?(v|verbose|warn-on-local-memory-usage|warn-lmem-usage|warn-on-spills|warn-spills|"
    r"warn-on-double-precision-use|warn-double-usage|warning-as-error|Werror|w|disable-warnings|"
    r"O[0-4]|opt-level=[0-4]|maxrregcount=[0-9]+|allow-expensive-optimizations=(true|false)|"
    r"(def-load-cache|dlcm|def-store-cache|dscm|force-load-cache|flcm|force-store-cache|fscm)"
    r"=[a-z]+|disable-optimizer-constants|disable-optimizer-consts|g|device-debug|lineinfo|"
    r"generate-line-info|suppress-[a-z-]+|fmad=(true|false)|regUsageLevel=[0-9]+|"
    r"register-usage-level=[0-9]+|opt-fp-atomics|optimize-float-atomics|ret-end|return-at-end|"
    r"sp-bounds-check|split-compile=[0-9]+|device-stack-protector=(true|false)|"
    r"pic=(true|false)|position-independent-code=(true|false)|preserve-relocs)"
)
_FATBIN_OPTION = re.compile(
    r"--?(compress-all|compress=(true|false)|compress-mode=(default|size|speed|balance|none))"
)

_KNOWN = (
    "is not a flag build2cmake passes on (it passes macros -D and -U, -O, -std=, -g, warnings "
    "-W..., -f and -m switches, -l, and nvcc's switches such as --use_fast_math, "
    "--expt-relaxed-constexpr, -Xptxas=, -Xfatbin= and -Xcompiler=; ask for a flag a kernel "
    "needs to be added)"
)


def flag_problem(flag: str) -> str | None:
    """Why build.toml may not pass `flag` to a compiler (a sentence naming it), or None."""
    why = _refusal(flag, host_part=False)
    return None if why is None else f"{flag!r} {why}"


def _refusal(flag: str, *, host_part: bool) -> str | None:
    """What is wrong with `flag`, as a verb phrase ("runs a program ..."), or None.

    `host_part`: `flag` is a part of -Xcompiler='s value, which nvcc gives the host compiler.
    """
    if flag.startswith("@"):
        return f"{_READS} (a response file)"
    if not flag.startswith("-"):
        return (
            "is not an option: a flag starts with '-', and an option's value goes in the same "
            "string (e.g. -Xcompiler=-fopenmp, -DNAME=VALUE)"
        )
    bad = _FLAG_CHARS.sub("", flag)
    if bad:
        if bad[0] == "@":
            return f"contains '@', which starts a response file: the compiler {_READS}"
        return (
            f"contains {bad[0]!r}: nvcc runs its tools through a shell, where it would run "
            "commands or redirect output; a flag holds only letters, digits and _ - + = . , / :"
        )
    # Inside -Xcompiler='s value, a forwarding option is refused below (-X.*): nothing nests.
    forwarded = None if host_part else _FORWARDING.fullmatch(flag)
    if forwarded is not None:
        return _forwarding_refusal(forwarded.group("option"), forwarded.group("value"))
    for pattern, reason in _DENIED:
        if pattern.fullmatch(flag):
            return reason
    if any(pattern.fullmatch(flag) for pattern in _ALLOWED):
        return None
    switch = _SWITCH.fullmatch(flag)
    if switch is not None:
        value = switch.group("value") or ""
        if _SWITCH_VALUE.fullmatch(value) and ".." not in value:
            return None
        return (
            "names a path ('/' or '..'), which may lead outside the project; a -f or -m switch "
            "from build.toml takes no path"
        )
    return _KNOWN


def _forwarding_refusal(option: str, value: str) -> str | None:
    """What is wrong with the first bad part of a forwarding option's comma-separated value."""
    host = option in ("Xcompiler", "compiler-options")
    tool = "the host compiler" if host else "ptxas" if "ptxas" in option else "fatbinary"
    known = _PTXAS_OPTION if tool == "ptxas" else _FATBIN_OPTION
    for part in value.split(","):
        why: str | None
        if not part:
            return f"gives {tool} an empty option (two commas, or one at an end)"
        if host:
            why = _refusal(part, host_part=True)
        elif known.fullmatch(part):
            why = None
        else:
            why = (
                f"is not a {tool} switch build2cmake passes (those that write or read files, "
                f"such as -o and --options-file, are not; `{tool} --help` lists them)"
            )
        if why is not None:
            return f"gives {tool} {part!r}, which {why}"
    return None
