"""Two kernels whose C++ sources name their static state alike keep separate state.

tests/fixtures/static_state_one and static_state_two are two kernels built from the same
sources: a static local of an inline function, an inline static data member, an inline variable
at namespace scope and a template's static data member (in a kernel's object library), and an
inline static member in the binding (compiled into the extension itself). g++ makes each an
STB_GNU_UNIQUE symbol (`u` in `nm -D`) unless given -fno-gnu-unique, and the dynamic loader then
binds the second kernel to the first one's copies. Both are built with `build2cmake build` and
loaded side by side with kernels.get_local_kernel, as users load them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from build2cmake.builds.digest import variant_digest
from tests.conftest import FIXTURES, run_cli

pytestmark = pytest.mark.compile


def _build(root: Path) -> Path:
    result = run_cli("build", root / "build.toml")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("built "), line
    return root / line.split()[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both fixture kernels, built in a temporary copy: name -> build/<variant>/."""
    root = tmp_path_factory.mktemp("static_state")
    variants: dict[str, Path] = {}
    for name in ("static_state_one", "static_state_two"):
        project = root / name
        shutil.copytree(FIXTURES / name, project)
        variants[name] = _build(project)
    return variants


def test_built_extensions_have_no_gnu_unique_symbols(built: dict[str, Path]) -> None:
    for variant in built.values():
        (library,) = variant.glob("*.so")
        symbols = subprocess.run(
            ["nm", "-D", "--defined-only", str(library)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        # The state exists (as ordinary weak objects), and none of it is a unique global.
        assert any("12ClassCounter5countE" in line for line in symbols), symbols[:20]
        unique = [line for line in symbols if line.split()[1:2] == ["u"]]
        assert unique == [], f"{library.name}: STB_GNU_UNIQUE symbols: {unique}"


def test_kernels_loaded_side_by_side_keep_separate_static_state(built: dict[str, Path]) -> None:
    # One interpreter loads both, as an application using the two kernels would; counter k of
    # kernel one is bumped k + 2 times first, then each of kernel two's must start from 1.
    code = f"""
import json
from pathlib import Path
from kernels import get_local_kernel

one = get_local_kernel(Path({str(built["static_state_one"].parent.parent)!r}), backend="cpu")
two = get_local_kernel(Path({str(built["static_state_two"].parent.parent)!r}), backend="cpu")
first = [[one.bump(k) for _ in range(k + 2)][-1] for k in range(4)]
first.append([one.binding_bump() for _ in range(6)][-1])
second = [two.bump(k) for k in range(4)] + [two.binding_bump()]
again = [one.bump(k) for k in range(4)] + [one.binding_bump()]
print(json.dumps([first, second, again]))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    first, second, again = json.loads(result.stdout.strip().splitlines()[-1])
    assert first == [2, 3, 4, 5, 6]
    assert second == [1, 1, 1, 1, 1], "kernel two saw kernel one's counters"
    assert again == [3, 4, 5, 6, 7], "kernel two's bumps reached kernel one's counters"


def test_compiled_variant_digest_is_what_kernels_computes(built: dict[str, Path]) -> None:
    from kernels._rust import (  # type: ignore[import-untyped]
        Digest,
        DigestAlgorithm,
        Metadata,
    )

    for variant in built.values():
        data = (variant / "metadata.json").read_bytes()
        parsed = Metadata.from_bytes(data)
        assert parsed.digest is not None
        upstream = Digest.hash_variant(DigestAlgorithm.SHA256, variant)
        # kernels' own check (what `kernels` runs on a signed download): raises on a mismatch.
        parsed.digest.validate(upstream)
        shipped = {p.name: p.read_bytes() for p in variant.iterdir() if p.is_file()}
        assert json.loads(data)["digest"] == variant_digest(shipped)
        assert any(name.endswith(".so") for name in upstream.files)
