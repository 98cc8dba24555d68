"""`update-build`: rewrite a build.toml of an older format as edition 5, keeping comments.

The document is edited in place with tomlkit (so comments and the order of what stays are
kept); what the model already knows (backends inferred from kernels, a cuda-hipify kernel's ROCm
twin) fills what the older format left implicit. A table the rewrite adds takes its parent's
form: a `[header]` table under a header table, an inline table inside an inline table or under
dotted keys (`general.name = ...`), where a header would capture the keys written after it.

`rewrite` checks its own result: the new text must read back as edition 5 describing the same
build, or nothing is written.
"""

from __future__ import annotations

import dataclasses
import re
import stat
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.container import Container
from tomlkit.items import InlineTable, Table

from build2cmake.config import (
    CURRENT_FORMAT,
    detect_format,
    load_project,
    parse_project,
    read_document,
)
from build2cmake.config.model import Project
from build2cmake.config.sections import HUB_NAME
from build2cmake.ground.errors import Build2CMakeError, BuildConfigError, BuildConfigErrors
from build2cmake.ground.safefs import ProjectFolder, checked_target


def rewrite(build_toml: Path, project: Project) -> str:
    """The edition-5 text of `build_toml` (read as `project`), checked to read back as the
    same build; raise one BuildConfigError when no such text can be written."""
    problem = ""
    for inline in (False, True):
        document = read_document(build_toml)
        to_edition5(document, project, build_toml, inline=inline)
        text = tomlkit.dumps(document)
        problem = _check_rewritten(text, project, build_toml)
        if not problem:
            return text
    raise BuildConfigError(
        build_toml,
        "",
        f"update-build cannot rewrite this file as edition 5 ({problem}); nothing was "
        "written: write it as edition 5 by hand (see the README's key reference)",
    )


def _check_rewritten(text: str, project: Project, build_toml: Path) -> str:
    """'' when `text` is a valid edition-5 file describing `project`'s build, else why not."""
    try:
        data = tomlkit.parse(text).unwrap()
        if detect_format(data, build_toml) != CURRENT_FORMAT:
            return "the result is not recognised as edition 5"
        rewritten = parse_project(data, build_toml)
    except BuildConfigErrors as errors:
        return f"the result would not be valid: {errors.errors[0].key}: {errors.errors[0].message}"
    except BuildConfigError as error:
        return f"the result would not be valid: {error.key}: {error.message}"
    except (tomlkit.exceptions.TOMLKitError, ValueError) as error:
        return f"the result would not be valid TOML: {error}"
    old, new = _comparable(project), _comparable(rewritten)
    differs = [
        f.name
        for f in dataclasses.fields(Project)
        if f.compare and getattr(old, f.name) != getattr(new, f.name)
    ]
    if differs:
        return f"the result would describe another build (it differs in {', '.join(differs)})"
    return ""


def _comparable(project: Project) -> Project:
    """What update-build keeps: all but the format, the version it may fill in, the kernels'
    order (a cuda-hipify twin moves to the end) and the universal spelling of noarch."""
    noarch = project.noarch
    if noarch is not None:
        noarch = dataclasses.replace(noarch, universal=False)
    return dataclasses.replace(
        project,
        source_format=CURRENT_FORMAT,
        version=project.version if project.version is not None else 1,
        kernels=tuple(sorted(project.kernels, key=lambda k: k.name)),
        noarch=noarch,
    )


def to_edition5(
    document: tomlkit.TOMLDocument, project: Project, build_toml: Path, *, inline: bool = False
) -> None:
    """Turn `document` (of `project.source_format`) into edition 5; raise what blocks it.

    `inline`: add every new table as an inline table (`rewrite`'s second try).
    """
    general = document["general"]
    if not isinstance(general, MutableMapping):
        raise BuildConfigError(build_toml, "[general]", "expected a table")
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
        _kernels_from_languages(document, project, inline=inline)
        torch = document.get("torch")
        if isinstance(torch, MutableMapping) and "universal" in torch:
            del torch["universal"]
    if project.source_format == "v2":
        for old, new in (("cuda-minver", "minver"), ("cuda-maxver", "maxver")):
            if old in general:
                if "cuda" not in general:
                    general["cuda"] = _new_table(document, "general", general, inline=inline)
                general["cuda"][new] = general[old]
                del general[old]
        # v2 read a backend's own dependency (nvidia-cutlass-dsl) from [general]; edition 5
        # lists it in that backend's table, where kernel-builder looks for it.
        if project.backend_python_depends:
            if project.python_depends:
                general["python-depends"] = list(project.python_depends)
            else:
                del general["python-depends"]
            for backend, names in project.backend_python_depends:
                if backend not in general:
                    general[backend] = _new_table(document, "general", general, inline=inline)
                general[backend]["python-depends"] = list(names)
    general.pop("universal", None)
    if "version" not in general:
        general["version"] = project.version if project.version is not None else 1
    general["edition"] = 5
    if "backends" not in general:
        backends = tomlkit.array()
        backends.extend(project.backends)
        general["backends"] = backends
    if project.framework == "torch-noarch" and "torch-noarch" not in document:
        pyext = project.noarch.pyext if project.noarch else ("py", "pyi")
        if "torch" in document:
            del document["torch"]
        # At the end of the document, a header table captures no key written before it.
        noarch = tomlkit.table()
        if tuple(pyext) != ("py", "pyi"):
            noarch["pyext"] = list(pyext)
        document["torch-noarch"] = noarch


def _new_table(
    document: tomlkit.TOMLDocument, top: str, parent: Any, *, inline: bool
) -> Table | InlineTable:
    """An empty table to add under `parent` (reached from the document's key `top`), in the
    form `parent` is written in."""
    if inline or not isinstance(parent, Table) or _dotted(document, top):
        return tomlkit.inline_table()
    return tomlkit.table()


def _dotted(container: Container | tomlkit.TOMLDocument, top: str) -> bool:
    """Whether the document writes `top` with dotted keys (`general.name = ...`)."""
    return any(key is not None and key.key == top and key.is_dotted() for key, _ in container.body)


def _kernels_from_languages(
    document: tomlkit.TOMLDocument, project: Project, *, inline: bool
) -> None:
    """v1's `language` becomes `backend`; a cuda-hipify kernel gets its `<name>_rocm` twin."""
    kernels = document.get("kernel")
    if not isinstance(kernels, MutableMapping):
        return
    by_name = {k.name: k for k in project.kernels}
    for name in list(kernels):
        section = kernels[name]
        if not isinstance(section, MutableMapping):
            continue  # the reader refused it already
        language = section.pop("language", "cuda")
        section["backend"] = "metal" if language == "metal" else "cuda"
        archs: Any = section.pop("rocm-archs", None)
        twin = by_name.get(f"{name}_rocm")
        if language == "cuda-hipify" and twin is not None:
            rocm = _new_table(document, "kernel", kernels, inline=inline)
            rocm["backend"] = "rocm"
            rocm["depends"] = list(twin.depends)
            if archs:
                rocm["rocm-archs"] = archs
            if twin.includes:
                rocm["include"] = [str(p) for p in twin.includes]
            rocm["src"] = [str(p) for p in twin.sources]
            kernels[f"{name}_rocm"] = rocm


def update_build(build_toml: Path) -> bool:
    """Rewrite a build.toml of an older format as edition 5, keeping comments.

    Returns False when the file is already edition 5. The file is replaced atomically, never
    written through a symlink or a planted temporary file.
    """
    project = load_project(build_toml)
    if project.source_format == CURRENT_FORMAT:
        return False
    # Checked to read back as the same build before anything is written.
    text = rewrite(build_toml, project)
    folder_path = checked_target(build_toml.parent)
    with ProjectFolder(folder_path) as folder, folder.locked():
        info = folder.lstat(build_toml.name)
        if info is None or not stat.S_ISREG(info.st_mode):
            raise Build2CMakeError(
                f"{build_toml}: update-build rewrites only a regular file, not a symlink"
            )
        folder.write_atomic(build_toml.name, text.encode("utf-8"), mode=info.st_mode & 0o777)
    return True
