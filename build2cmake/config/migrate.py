"""`update-build`: rewrite a build.toml of an older format as edition 5, keeping comments.

The document is edited in place with tomlkit (so comments and the order of what stays are
kept); what the model already knows (backends inferred from kernels, a cuda-hipify kernel's ROCm
twin) fills what the older format left implicit.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Table

from build2cmake.config.sections import HUB_NAME
from build2cmake.errors import BuildConfigError, BuildConfigErrors
from build2cmake.model import Project


def to_edition5(document: tomlkit.TOMLDocument, project: Project, build_toml: Path) -> None:
    """Turn `document` (of `project.source_format`) into edition 5; raise what blocks it."""
    general = document["general"]
    assert isinstance(general, MutableMapping)
    problems: list[BuildConfigError] = []
    if not HUB_NAME.fullmatch(project.name):
        suggestion = re.sub(r"[^a-z0-9-]+", "-", project.name.lower()).strip("-")
        problems.append(
            BuildConfigError(
                build_toml,
                "[general].name",
                f"edition 5 needs a kernel name of lowercase letters, digits and '-' "
                f"(e.g. {suggestion!r}); rename it, then run update-build again",
            )
        )
    if project.license is None:
        problems.append(
            BuildConfigError(
                build_toml,
                "[general].license",
                'edition 5 needs the kernel\'s license; add e.g. license = "Apache-2.0" '
                "(an SPDX id) to [general], then run update-build again",
            )
        )
    if problems:
        raise BuildConfigErrors(problems)

    if project.source_format == "v1":
        _kernels_from_languages(document, project)
        torch = document.get("torch")
        if isinstance(torch, MutableMapping) and "universal" in torch:
            del torch["universal"]
    if project.source_format == "v2":
        for old, new in (("cuda-minver", "minver"), ("cuda-maxver", "maxver")):
            if old in general:
                cuda = general.setdefault("cuda", tomlkit.table())
                cuda[new] = general[old]
                del general[old]
    general.pop("universal", None)
    if "version" not in general:
        general["version"] = project.version if project.version is not None else 1
    general["edition"] = 5
    if "backends" not in general:
        backends = tomlkit.array()
        backends.extend(project.backends)
        general["backends"] = backends
    if project.framework == "torch-noarch" and "torch-noarch" not in document:
        noarch = tomlkit.table()
        torch = document.get("torch")
        pyext = project.noarch.pyext if project.noarch else ("py", "pyi")
        if tuple(pyext) != ("py", "pyi"):
            noarch["pyext"] = list(pyext)
        if isinstance(torch, MutableMapping):
            del document["torch"]
        document["torch-noarch"] = noarch


def _kernels_from_languages(document: tomlkit.TOMLDocument, project: Project) -> None:
    """v1's `language` becomes `backend`; a cuda-hipify kernel gets its `<name>_rocm` twin."""
    kernels = document.get("kernel")
    if not isinstance(kernels, MutableMapping):
        return
    by_name = {k.name: k for k in project.kernels}
    for name in list(kernels):
        section = kernels[name]
        assert isinstance(section, MutableMapping)
        language = section.pop("language", "cuda")
        section["backend"] = "metal" if language == "metal" else "cuda"
        archs: Any = section.pop("rocm-archs", None)
        twin = by_name.get(f"{name}_rocm")
        if language == "cuda-hipify" and twin is not None:
            rocm = tomlkit.table()
            rocm["backend"] = "rocm"
            rocm["depends"] = list(twin.depends)
            if archs:
                rocm["rocm-archs"] = archs
            if twin.includes:
                rocm["include"] = [str(p) for p in twin.includes]
            rocm["src"] = [str(p) for p in twin.sources]
            assert isinstance(kernels, Table)
            kernels.add(f"{name}_rocm", rocm)
