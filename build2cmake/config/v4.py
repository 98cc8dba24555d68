"""Edition 4 (no `edition` key; `version` and `license` required; one framework section).

Read as edition 5 with its own key tables: no kernel-depends, no [general.tpu], and
`[torch] stable-abi` as one version only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from build2cmake.config import v5
from build2cmake.config.model import Project
from build2cmake.config.schema import Keys, Reader

FORMAT = "v4"

GENERAL_KEYS: Keys = {
    k: v for k, v in v5.GENERAL_KEYS.items() if k not in ("edition", "kernel-depends", "tpu")
}
BACKEND_TABLES: Mapping[str, Keys] = {
    "cuda": {k: v for k, v in v5.BACKEND_TABLES["cuda"].items() if k != "kernel-depends"},
    "neuron": {"python-depends": v5.BACKEND_TABLES["neuron"]["python-depends"]},
    "xpu": {"python-depends": v5.BACKEND_TABLES["xpu"]["python-depends"]},
}

# What only v4 has compared with v3: how a file without `edition` is recognised as v4.
MARKERS = (
    "[torch-noarch]",
    "[torch].cxx-flags",
    "[torch].stable-abi",
    "[general].source",
    "[general].neuron",
)


def read(data: Mapping[str, Any], build_toml: Path) -> Project:
    """Convert a v4 document into the model."""
    r = Reader(build_toml, FORMAT)
    return v5.read_editioned(r, data, GENERAL_KEYS, BACKEND_TABLES, multi_stable_abi=False)
