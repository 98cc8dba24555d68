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
  their comma-separated parts checked by the same rules (ptxas, fatbinary and cudafe++, reached
  through `-Xptxas=`, `-Xfatbin=` and `-Xcudafe=`, by lists of their own switches).

A flag may be harmless and still crash the compiler (clang-15 with `-mno-code-object-v3` for
gfx90a); clang then writes the preprocessed source and a script to rerun the compile into its
temporary folder: the build folder's tmp/ in the generated build (its compilers' TMPDIR), /tmp
(outside the project) where a launcher the user set replaces ours or for a compile run by hand.
The generated CMake gives clang `-fno-crash-diagnostics`
(see build2cmake_torch.cmake, _rocm.cmake and _cuda.cmake); the options that would write them
all the same (`-gen-reproducer`, gcc's `-freport-bug`) or choose where (`-fcrash-diagnostics-dir=`)
are refused here.

Flags that choose the GPU architectures (`-gencode`, `-arch=`, `--offload-arch=`) are harmless
but refused, pointing at the keys where build.toml lists them (`cuda-capabilities`,
`rocm-archs`): build2cmake sets them for each kernel, so that each carries code for its own
architectures only.
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
        (r"--?fsycl-host-compiler(=.*)?", f"{_RUNS} (icpx runs the compiler it names, found "
         "on PATH, for the host half of a SYCL compile, as nvcc runs -ccbin's)"),
        (r"--?fsycl-host-compiler-options.*", "passes options to the host compiler that icpx "
         "runs, past this check"),
        (r"--?specs(=.*)?", f"{_READS} (a gcc specs file, which can make gcc run any program)"),
        # Code loaded into the compiler.
        (r"--?f(plugin|pass-plugin).*", f"{_LOADS} (a shared library of the project's choosing)"),
        (r"--?Xclang(=.*)?", "passes the next string to clang's compiler proper, past this "
         "check (-Xclang -load loads a plugin)"),
        (r"--?mllvm.*", "passes options to LLVM inside the compiler, past this check (-mllvm "
         "-load loads a plugin, others write files); LLVM's options cannot be checked one by "
         "one, so build.toml passes none: whoever builds may add one with -DCMAKE_HIP_FLAGS= "
         "(or CMAKE_CXX_FLAGS), which build.toml does not control"),
        (r"--?mmlir.*", "passes options to MLIR inside the compiler (flang's front end), past "
         "this check (its options write crash reproducers where they say)"),
        (r"--?mlink-(builtin-)?bitcode.*", f"{_LOADS} (bitcode linked into the device code)"),
        (r"--?fsycl-libspirv-path.*", f"{_LOADS} (the libspirv bitcode linked into the device "
         "code)"),
        (r"--?fsycl-add-targets.*", "adds the device images it names to the output, files no "
         "check sees (a link step's option)"),
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
        (r"--?fsycl-(footer-path|int-header|int-footer).*", f"{_WRITES} (the SYCL integration "
         "header or footer)"),
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
        (r"--?(Xcompiler|compiler-options|Xptxas|ptxas-options|Xfatbin|fatbin-options|Xcudafe)",
         "takes its value from the next string, which CMake may drop or move (it removes "
         "repeated flags); write the value in the same string, e.g. -Xcompiler=-fopenmp"),
        (r"-X.*", "passes the next string to another tool, past this check"),
        (r"-I.*|--?(isystem|iquote|idirafter).*", "adds an include folder; list include folders "
         "in the kernel's `include` key, which checks that they stay in the project"),
    )
)  # fmt: skip

# Harmless flags that choose what build.toml says elsewhere: the GPU architectures, which
# build2cmake sets per kernel (and per source) from the kernel's own list, so that each kernel
# carries code for its own architectures only.
_CUDA_ARCHS = (
    "chooses the GPU architectures, which build2cmake sets for each kernel from its "
    '`cuda-capabilities` key (e.g. cuda-capabilities = ["8.0", "9.0a+PTX"]); list them there'
)
_ROCM_ARCHS = (
    "chooses the GPU architectures, which build2cmake sets for each kernel from its "
    '`rocm-archs` key (e.g. rocm-archs = ["gfx90a", "gfx942"]); list them there'
)
_ELSEWHERE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        (r"--?(gencode|generate-code|arch|gpu-architecture|code|gpu-code)(=.*)?", _CUDA_ARCHS),
        (r"--?(cuda-gpu-arch|no-cuda-gpu-arch)(=.*)?|-m(arch|cpu|tune)=(sm_|compute_).*",
         _CUDA_ARCHS),
        (r"--?(offload-arch|no-offload-arch|amdgpu-target)(=.*)?|-m(arch|cpu|tune)=gfx.*",
         _ROCM_ARCHS),
    )
)  # fmt: skip

# Every flag refused by name, with its reason.
_REFUSED = _DENIED + _ELSEWHERE

# Shapes accepted as they are (after the denials above and the character rule).
_ALLOWED: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        r"-D[A-Za-z_][A-Za-z0-9_]*(=.*)?",
        r"-U[A-Za-z_][A-Za-z0-9_]*",
        r"-O([0-4sgz]|fast)?",
        r"--?std=[a-z0-9+]+",
        # -gsplit-dwarf writes the debug info to a .dwo file beside the object file.
        r"-g([0-3]|gdb[0-3]?|dwarf(-[2-5])?|line-tables-only|line-directives-only|z|"
        r"column-info|no-column-info|split-dwarf(=(single|split))?)?",
        r"-G",
        r"-W[A-Za-z0-9][A-Za-z0-9_=+-]*",
        # -w and nvcc's --disable-warnings are one switch (nvcc gives the host compiler -w).
        r"-w|--disable-warnings|-pthread|-pedantic(-errors)?",
        # Only print: the commands the compiler runs (-v, --verbose); pipes in place of
        # temporary files between gcc's passes (-pipe).
        r"-v|--verbose|-pipe",
        r"-l[A-Za-z0-9_][A-Za-z0-9_+.-]*",
        # nvcc's own switches (one or two dashes, as nvcc accepts either).
        r"--?(use_fast_math|expt-relaxed-constexpr|expt-extended-lambda|extended-lambda|"
        r"extra-device-vectorization|lineinfo|generate-line-info|res-usage|resource-usage|"
        r"restrict|display-error-number|no-display-error-number|source-in-ptx|device-debug)",
        r"--?(threads|split-compile|maxrregcount|ftemplate-backtrace-limit|ftemplate-depth)"
        r"=[0-9]+",
        r"--?(diag-suppress|diag-error|diag-warn|diag-default)=[A-Za-z0-9_-]+(,[A-Za-z0-9_-]+)*",
        r"--Werror=[a-z-]+(,[a-z-]+)*",
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
    r"--?(?P<option>Xcompiler|compiler-options|Xptxas|ptxas-options|Xfatbin|fatbin-options|"
    r"Xcudafe)=(?P<value>.*)"
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
# What nvcc may pass to cudafe++, its C++ front end: the diagnostic switches (nvcc gives it
# --diag-suppress= as --diag_suppress, and -Xcudafe= passes the same switches as written). Two
# dashes only: cudafe++ reads one dash as a cluster of one-letter options, so
# -no_display_error_number is -n -o _display_error_number, and -diag_error=940 a debug option.
_CUDAFE_OPTION = re.compile(
    r"--(diag_suppress|diag_error|diag_warning|diag_warn|diag_remark)=[A-Za-z0-9_]+|"
    r"--(no_)?display_error_number"
)

# For each forwarding option but -Xcompiler's: the tool it reaches, the switches that tool may
# be given, and what to say of the others.
_TOOL_FILES = "those that write or read files, such as -o and --options-file, are not"
_PTXAS = ("ptxas", _PTXAS_OPTION, f"{_TOOL_FILES}; `ptxas --help` lists them")
_FATBIN = ("fatbinary", _FATBIN_OPTION, f"{_TOOL_FILES}; `fatbinary --help` lists them")
_CUDAFE = (
    "cudafe++",
    _CUDAFE_OPTION,
    "it passes --diag_suppress=N, --diag_error=N, --diag_warning=N, --diag_remark=N and "
    "--display_error_number; nvcc's own --diag-suppress=N and --diag-error=N do the same",
)
_FORWARDED_TO: dict[str, tuple[str, re.Pattern[str], str]] = {
    "Xptxas": _PTXAS,
    "ptxas-options": _PTXAS,
    "Xfatbin": _FATBIN,
    "fatbin-options": _FATBIN,
    "Xcudafe": _CUDAFE,
}

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
        why = (
            f"contains {bad[0]!r}: nvcc runs its tools through a shell, where it would run "
            "commands or redirect output; a flag holds only letters, digits and _ - + = . , / :"
        )
        if flag.startswith("-D"):
            why += (
                "; define a macro whose value needs other characters in a header that the "
                'sources include (#define NAME "a b")'
            )
        return why
    # Inside -Xcompiler='s value, a forwarding option is refused below (-X.*): nothing nests.
    forwarded = None if host_part else _FORWARDING.fullmatch(flag)
    if forwarded is not None:
        return _forwarding_refusal(forwarded.group("option"), forwarded.group("value"))
    for pattern, reason in _REFUSED:
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
    respelled = _respelled(flag)
    if respelled is not None:
        return f"is not a flag build2cmake passes on; did you mean {respelled!r}?"
    return _KNOWN


def _respelled(flag: str) -> str | None:
    """`flag` with '_' and '-' swapped in its name, where that spelling is passed on: nvcc
    takes --diag-suppress= but not --diag_suppress=, --use_fast_math but not --use-fast-math."""
    dashes = len(flag) - len(flag.lstrip("-"))
    name, equals, value = flag[dashes:].partition("=")
    for old, new in (("_", "-"), ("-", "_")):
        candidate = flag[:dashes] + name.replace(old, new) + equals + value
        # Only shapes the allowlist names (a refused spelling never suggests an -f or -m
        # switch), and none denied.
        if (
            old in name
            and any(pattern.fullmatch(candidate) for pattern in _ALLOWED)
            and not any(pattern.fullmatch(candidate) for pattern, _ in _REFUSED)
        ):
            return candidate
    return None


def _forwarding_refusal(option: str, value: str) -> str | None:
    """What is wrong with the first bad part of a forwarding option's comma-separated value."""
    host = option in ("Xcompiler", "compiler-options")
    tool, known, others = ("the host compiler", None, "") if host else _FORWARDED_TO[option]
    for part in value.split(","):
        why: str | None
        if not part:
            return f"gives {tool} an empty option (two commas, or one at an end)"
        if known is None:
            why = _refusal(part, host_part=True)
        elif known.fullmatch(part):
            why = None
        else:
            why = f"is not a {tool} switch build2cmake passes ({others})"
        if why is not None:
            return f"gives {tool} {part!r}, which {why}"
    return None
