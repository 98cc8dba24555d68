"""Slices of kernels-community projects too big to build whole in one 10-minute call on a 16-core
machine (issue #59): a copy of the project with fewer instantiation sources, the project's own
switches defined so that what is left links, and the matching subset of its own tests.

    python3 benchmarks/slices.py CORPUS DEST PROJECT...

writes DEST/PROJECT (a copy of CORPUS/PROJECT, sliced) and DEST/PROJECT/SLICE.json: the
instantiation sources kept and how many were left out, the macros defined, the files edited, and
the environment and pytest arguments that choose the tests of what was kept
(benchmarks/device_corpus.py uses them). Each slice is chosen by the project's own mechanism where
it has one: flash-attention 3's `FLASHATTENTION_DISABLE_*` macros, which its setup.py defines
from `FLASH_ATTENTION_DISABLE_*` variables while leaving the matching instantiation files out,
and which its tests read from the same variables.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit


@dataclass(frozen=True)
class Edit:
    """A source edit where the project has no switch: `pattern` (a regex, DOTALL) replaced by
    `replacement` in `path`, exactly `count` times."""

    path: str
    pattern: str
    replacement: str
    count: int = 1


@dataclass(frozen=True)
class Slice:
    # Instantiation sources (src entries matching `instantiations`) kept: those matching `keep`.
    keep: str
    # Macros defined for every C++ and CUDA compile of the project.
    defines: tuple[str, ...] = ()
    # The environment its tests read, and pytest's arguments that choose the matching tests.
    test_env: dict[str, str] = field(default_factory=dict)
    pytest_args: tuple[str, ...] = ()
    instantiations: str = r"/instantiations/[^/]+\.cu$"
    # Kernels left out whole (their [kernel.*] tables removed).
    drop_kernels: tuple[str, ...] = ()
    edits: tuple[Edit, ...] = ()


# flash-attention 3 on sm_90a: head dim 128, bf16, without softcap; forward with its paged, split
# and pack-GQA variants, and backward. The sm80 kernel is left out by TORCH_CUDA_ARCH_LIST=9.0a,
# so the dispatch must not reach it (FLASHATTENTION_DISABLE_SM8x, as setup.py does when it builds
# sm90 only).
_FA3_DISABLED = (
    "SM8x",
    "HDIM64",
    "HDIM96",
    "HDIM192",
    "HDIM256",
    "HDIMDIFF64",
    "HDIMDIFF192",
    "FP16",
    "FP8",
    "SOFTCAP",
)
_FA3_TESTS_DISABLED = ("FP16", "FP8", "SOFTCAP", "HDIM64", "HDIM96", "HDIM192", "HDIM256")
_FA3 = dict(
    defines=tuple(f"FLASHATTENTION_DISABLE_{name}" for name in _FA3_DISABLED),
    test_env={f"FLASH_ATTENTION_DISABLE_{name}": "TRUE" for name in _FA3_TESTS_DISABLED},
)
SLICES = {
    "flash-attn3": Slice(
        keep=r"/flash_(fwd_hdim128_bf16(_paged)?(_split)?(_packgqa)?|bwd_hdim128_bf16)_sm90\.cu$",
        **_FA3,
    ),
    # Forward only (the project has no backward); its forward files are flash-attn3's.
    "sgl-flash-attn3": Slice(
        keep=r"/flash_fwd_hdim128_bf16(_paged)?(_split)?(_packgqa)?_sm90\.cu$", **_FA3
    ),
    # Its forward files each hold every head dim (`hdimall`), behind the same macros. Its
    # test_flash_attn_kvcache runs at head dim 64 only (`parametrize("d", [64])`, whatever the
    # variables say): left out with it.
    "vllm-flash-attn3": Slice(
        keep=r"/flash_(fwd_hdimall_bf16(_paged)?(_split)?(_packgqa)?|bwd_hdim128_bf16)_sm90\.cu$",
        pytest_args=("-k", "not test_flash_attn_kvcache"),
        **_FA3,
    ),
}


# flash-attention 2 (sm80 code, compiled for sm_90 by TORCH_CUDA_ARCH_LIST=9.0a): head dim 128,
# fp16 and bf16, forward, split-KV forward and backward: 12 of its 72 units, without dropout,
# softcap and head dims that are not a multiple of 32 (its FLASHATTENTION_DISABLE_* switches;
# each unit is then about an eighth). It has no head-dim switch: HEADDIM_SWITCH instantiates
# every head dim, so it is cut to 128 (others throw). Its tests read no environment: -k picks
# d = 128 by its place in each test's id, without dropout (0.17) and softcap (50.0) cases;
# test_flash_attn_raw.py imports `flash_attn`, which this package is not.
_FA2_SPLIT = "(splitkv or _causal or deterministic)"
_FA2_TESTS = (
    f"not 0.17 and not 50.0 and (({_FA2_SPLIT} and (-True-128- or -False-128-)) or "
    f"(not {_FA2_SPLIT} and (-128-True- or -128-False-)))"
)
SLICES["flash-attn2"] = Slice(
    keep=r"/flash_(fwd|fwd_split|bwd)_hdim128_(fp16|bf16)(_causal)?_sm80\.cu$",
    instantiations=r"/flash_attn/src/flash_[a-z_]+hdim\d+_[a-z0-9_]+\.cu$",
    defines=tuple(f"FLASHATTENTION_DISABLE_{n}" for n in ("DROPOUT", "SOFTCAP", "UNEVEN_K")),
    pytest_args=("-k", _FA2_TESTS, "--ignore=tests/test_flash_attn_raw.py"),
    edits=(
        Edit(
            "flash_attn/src/static_switch.h",
            r"    if \(HEADDIM <= 32\) \{.*?kHeadDim = 256;.*?\n    \}[ ]*\\\n",
            "    if (HEADDIM > 96 && HEADDIM <= 128) {  \\\n"
            "      constexpr static int kHeadDim = 128; \\\n"
            "      return __VA_ARGS__();                \\\n"
            "    }                                      \\\n"
            '    throw std::runtime_error("this slice of flash-attn2 has head dim 128 only"); \\\n',
        ),
    ),
)
# NATTEN: its Hopper and Blackwell kernels left out (each Hopper instantiation file holds 30-73
# CUTLASS 3 kernels, 10-45 CPU minutes), with its own switches saying so; of the CUTLASS 2
# kernels (sm80 code, compiled for sm_90), the 1-D neighbourhood attention (10 of its 64
# instantiation files): the 2-D and 3-D cases of its dispatch removed, so that they reach its
# `throw`. Tests: what does not choose the Hopper path by itself (it does on an sm90 GPU,
# whatever was compiled), and only 1-D.
SLICES["natten"] = Slice(
    keep=r"/fna/source_([0-4]|3[1-5])\.cu$",
    instantiations=r"/autogen/src/cuda/fna/source_\d+\.cu$",
    defines=("NATTEN_DISABLE_HOPPER_FNA", "NATTEN_DISABLE_BLACKWELL_FNA"),
    drop_kernels=("natten_hopper", "natten_blackwell"),
    pytest_args=(
        "-k",
        "not hopper and not blackwell and not flex and not test_fused_matches_reference "
        "and not compile and not _2d_ and not _3d_",
    ),
    edits=(
        Edit(
            "csrc/autogen/include/natten_autogen/cuda/fna/interface.h",
            r"    else if constexpr \(rank == [23]\) \{ \\\n.*?\n    \} \\\n",
            "",
            count=4,
        ),
    ),
)


def _flags(table, key: str, flags: list[str]) -> None:
    existing = list(table.get(key, []))
    table[key] = existing + [flag for flag in flags if flag not in existing]


def slice_project(source: Path, dest: Path, recipe: Slice) -> dict[str, object]:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, symlinks=True)
    build_toml = dest / "build.toml"
    document = tomlkit.parse(build_toml.read_text())
    flags = [f"-D{define}" for define in recipe.defines]
    left_out = 0
    kept: list[str] = []
    for name in recipe.drop_kernels:
        del document["kernel"][name]
    for edit in recipe.edits:
        path = dest / edit.path
        text, count = re.subn(edit.pattern, edit.replacement, path.read_text(), flags=re.DOTALL)
        if count != edit.count:
            raise SystemExit(f"{path}: {count} places match, {edit.count} expected")
        path.write_text(text)
    for kernel in document.get("kernel", {}).values():
        sources = []
        for src in kernel.get("src", []):
            if re.search(recipe.instantiations, "/" + src):
                if not re.search(recipe.keep, "/" + src):
                    left_out += 1
                    continue
                kept.append(src)
            sources.append(src)
        kernel["src"] = sources
        if kernel.get("backend") == "cuda":
            _flags(kernel, "cuda-flags", flags)
        _flags(kernel, "cxx-flags", flags)
    _flags(document["torch"], "cxx-flags", flags)
    build_toml.write_text(tomlkit.dumps(document))
    record = {
        "kept": kept,
        "left_out": left_out,
        "defines": list(recipe.defines),
        "test_env": recipe.test_env,
        "pytest_args": list(recipe.pytest_args),
        "edits": [edit.path for edit in recipe.edits],
    }
    (dest / "SLICE.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("projects", nargs="+", choices=sorted(SLICES))
    args = parser.parse_args()
    for name in args.projects:
        record = slice_project(args.corpus / name, args.dest / name, SLICES[name])
        print(
            f"{name}: {len(record['kept'])} instantiation sources kept "  # type: ignore[arg-type]
            f"({', '.join(Path(s).name for s in record['kept'])}), {record['left_out']} left out"
        )


if __name__ == "__main__":
    main()
