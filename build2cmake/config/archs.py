"""What counts as a GPU architecture name in build.toml."""

from __future__ import annotations

import difflib
import re

# AMDGPU processors LLVM knows (from the LLVM AMDGPU usage table), plus the generic targets.
# A name outside this list is a typo or not an AMD GPU, whatever compiler is installed.
ROCM_ARCHS = (
    "gfx600",
    "gfx601",
    "gfx602",
    "gfx700",
    "gfx701",
    "gfx702",
    "gfx703",
    "gfx704",
    "gfx705",
    "gfx801",
    "gfx802",
    "gfx803",
    "gfx805",
    "gfx810",
    "gfx900",
    "gfx902",
    "gfx904",
    "gfx906",
    "gfx908",
    "gfx909",
    "gfx90a",
    "gfx90c",
    "gfx940",
    "gfx941",
    "gfx942",
    "gfx950",
    "gfx1010",
    "gfx1011",
    "gfx1012",
    "gfx1013",
    "gfx1030",
    "gfx1031",
    "gfx1032",
    "gfx1033",
    "gfx1034",
    "gfx1035",
    "gfx1036",
    "gfx1100",
    "gfx1101",
    "gfx1102",
    "gfx1103",
    "gfx1150",
    "gfx1151",
    "gfx1152",
    "gfx1153",
    "gfx1200",
    "gfx1201",
    "gfx9-generic",
    "gfx9-4-generic",
    "gfx10-1-generic",
    "gfx10-3-generic",
    "gfx11-generic",
    "gfx12-generic",
)

# Every pattern here is used with fullmatch and spells digits [0-9]: `$` also matches before a
# trailing newline, and `\d` matches every Unicode digit (Arabic-Indic ones too); either would
# reach the generated files.
# Target features that may follow a processor, e.g. "gfx90a:xnack-" or "gfx942:sramecc+:xnack-".
_ROCM_FEATURE = re.compile(r"(sramecc|xnack)[+-]")

# "8.0", "9.0a", "10.0f", optionally "+PTX" to also embed PTX for that capability.
_CUDA_CAPABILITY = re.compile(r"([0-9]{1,2})\.([0-9])([af]?)(\+PTX)?")


def rocm_arch_problem(arch: str) -> str | None:
    """Why `arch` is not a ROCm architecture, or None when it is one."""
    processor, *features = arch.split(":")
    if processor not in ROCM_ARCHS:
        hint = did_you_mean(processor, ROCM_ARCHS)
        return f"{arch!r} is not a ROCm architecture{hint}"
    for feature in features:
        if not _ROCM_FEATURE.fullmatch(feature):
            return (
                f"{arch!r} has an unknown target feature {feature!r} "
                "(valid: 'xnack+', 'xnack-', 'sramecc+', 'sramecc-')"
            )
    return None


def rocm_processor(arch: str) -> str:
    """The processor part of an arch with target features: 'gfx90a:xnack-' -> 'gfx90a'."""
    return arch.split(":", 1)[0]


def cuda_capability_problem(capability: str) -> str | None:
    """Why `capability` is not a CUDA compute capability, or None when it is one."""
    if _CUDA_CAPABILITY.fullmatch(capability):
        return None
    return (
        f"{capability!r} is not a CUDA compute capability "
        "(write it like '8.0', '9.0a', '10.0f' or '8.9+PTX')"
    )


def did_you_mean(word: str, choices: tuple[str, ...] | list[str]) -> str:
    """A ' (did you mean ...?)' hint for a misspelling, or '' when nothing is close."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
