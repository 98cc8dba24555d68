"""Every build.toml format kernel-builder has used, read into the one model (no compiling).

Each test writes a file in one format with our scale_add fixture's sources and checks what the
reader makes of it, or the one clear error it gives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from build2cmake.api import generate_torch, update_build, validate
from build2cmake.ground.errors import BuildConfigError
from tests.conftest import run_cli


def write(root: Path, text: str) -> Path:
    path = root / "build.toml"
    path.write_text(text)
    return path


V1 = """\
[general]
name = "scale_add"

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.ops]
language = "cuda-hipify"
depends = ["torch"]
rocm-archs = ["gfx90a"]
cuda-capabilities = ["8.0"]
src = ["cuda/ops.cu"]

[kernel.cpu_like]
depends = []
src = ["cuda/launchers_cuda.h"]
"""


def test_v1_cuda_hipify_kernel_becomes_a_cuda_and_a_rocm_kernel(
    project: Callable[[str], Path],
) -> None:
    model = validate(write(project("scale_add"), V1))
    assert model.source_format == "v1"
    assert model.backends == ("cuda", "rocm")
    by_name = {k.name: k for k in model.kernels}
    assert by_name["ops"].backend == "cuda" and by_name["ops"].cuda_capabilities == ("8.0",)
    twin = by_name["ops_rocm"]
    assert twin.backend == "rocm" and twin.rocm_archs == ("gfx90a",)
    assert [str(s) for s in twin.sources] == ["cuda/ops.cu"]
    assert by_name["cpu_like"].backend == "cuda"  # language defaults to cuda


def test_v1_expansion_that_collides_with_a_kernel_name_is_an_error(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    text = V1 + '\n[kernel.ops_rocm]\ndepends = []\nsrc = ["cuda/ops.cu"]\n'
    with pytest.raises(BuildConfigError, match=r"two kernels are named 'ops_rocm'"):
        validate(write(root, text))


def test_v1_update_build_writes_edition5_with_the_rocm_twin(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    path = write(root, V1.replace('name = "scale_add"', 'name = "scale-add"\n# keep me'))
    # v1 has no license key: update-build asks for it.
    result = run_cli("update-build", path)
    assert result.returncode == 2 and "[general].license" in result.stderr
    path.write_text(path.read_text().replace("# keep me", 'license = "MIT"  # keep me'))
    assert update_build(path)
    text = path.read_text()
    assert "# keep me" in text and "edition = 5" in text and "language" not in text
    model = validate(path)
    assert model.source_format == "edition 5"
    assert {(k.name, k.backend) for k in model.kernels} == {
        ("ops", "cuda"),
        ("ops_rocm", "rocm"),
        ("cpu_like", "cuda"),
    }
    assert {k.name: k for k in model.kernels}["ops_rocm"].rocm_archs == ("gfx90a",)


V4 = """\
[general]
name = "scale-add"
version = 2
license = "Apache-2.0"
backends = ["cpu"]
source = "https://github.com/org/scale-add"

[torch]
src = ["torch-ext/torch_binding.cpp"]
cxx-flags = ["-DFROM_TORCH_SECTION"]
stable-abi = "2.10"

[kernel.ops_cpu]
backend = "cpu"
depends = ["torch"]
src = ["cpu/ops_cpu.cpp"]
"""


def test_v4_is_recognised_by_its_keys_and_read(project: Callable[[str], Path]) -> None:
    model = validate(write(project("scale_add"), V4))
    assert model.source_format == "v4"
    assert model.torch is not None
    assert model.torch.cxx_flags == ("-DFROM_TORCH_SECTION",)
    assert model.torch.stable_abi_for("cpu") == "2.10"
    assert model.source == "https://github.com/org/scale-add"


def test_v4_needs_version_and_license_and_one_stable_abi_version(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    text = V4.replace('license = "Apache-2.0"\n', "").replace(
        'stable-abi = "2.10"', 'stable-abi = { cpu = "2.10" }'
    )
    with pytest.raises(BuildConfigError) as caught:
        validate(write(root, text))
    message = str(caught.value)
    assert "[general].license: missing" in message
    assert "[torch].stable-abi: a per-backend table needs edition 5" in message


EDITION5 = """\
[general]
name = "scale-add"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "xpu"]
upstream = "git+https://github.com/org/scale-add.git"
kernel-depends = [{ repo-id = "kernels-community/relu", version = 1 }]

[general.cuda]
minver = "12.8"
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "kernels-community/activation", revision = "v0.1" }]

[general.xpu]
python-depends = ["onednn"]

[general.hub]
repo-id = "org/scale-add"
branch = "dev"

[torch]
src = ["torch-ext/torch_binding.cpp"]

[torch.stable-abi]
cuda = "2.11"
metal = "2.11"

[kernel.ops_cpu]
backend = "cpu"
depends = ["torch"]
src = ["cpu/ops_cpu.cpp"]
"""


def test_edition5_reads_every_general_key(project: Callable[[str], Path]) -> None:
    model = validate(write(project("scale_add"), EDITION5))
    assert model.source_format == "edition 5"
    assert model.upstream == "git+https://github.com/org/scale-add.git"
    assert model.hub_repo_id == "org/scale-add" and model.hub_branch == "dev"
    assert model.kernel_depends[0].repo_id == "kernels-community/relu"
    assert dict(model.backend_kernel_depends)["cuda"][0].revision == "v0.1"
    assert model.python_depends_for("cuda") == ("nvidia-cutlass-dsl",)
    assert model.python_depends_for("cpu") == ()
    assert model.torch is not None
    # metal is not a declared backend: its stable-abi entry is ignored, as kernel-builder does.
    assert model.torch.stable_abi == (("cuda", "2.11"),)


@pytest.mark.parametrize(
    ("edit", "key", "fragment"),
    [
        (("edition = 5", "edition = 4"), "[general].edition", "remove it, or write edition = 5"),
        (("edition = 5", "edition = 9"), "[general].edition", "edition 9 is not one"),
        (("edition = 5", 'edition = "5"'), "[general].edition", "expected an integer"),
        (('name = "scale-add"', 'name = "Scale_Add"'), "[general].name", "not a kernel name"),
        (
            ('license = "Apache-2.0"', 'license = "MIT"\nupstream2 = "x"'),
            "[general].upstream2",
            "unknown key",
        ),
        (
            ("version = 1 }", 'revision = "x", version = 1 }'),
            "[general].kernel-depends[0]",
            "exactly one of version",
        ),
        (('upstream = "git+https', 'upstream = "ftp'), "[general].upstream", "not a git URL"),
        (('branch = "dev"', 'branch = "dev"\nrepo = "x"'), "[general.hub].repo", "unknown key"),
        (('minver = "12.8"', "minver = 12.8"), "[general.cuda].minver", "write the version as"),
    ],
)
def test_edition5_errors_name_the_key(
    project: Callable[[str], Path], edit: tuple[str, str], key: str, fragment: str
) -> None:
    text = EDITION5.replace(*edit)
    assert text != EDITION5
    with pytest.raises(BuildConfigError) as caught:
        validate(write(project("scale_add"), text))
    assert any(e.key == key and fragment in e.message for e in _errors(caught.value)), str(
        caught.value
    )


def _errors(error: BuildConfigError) -> list[BuildConfigError]:
    return list(getattr(error, "errors", [error]))


def test_edition5_needs_exactly_one_framework_section(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    text = EDITION5 + '\n[torch-noarch]\npyext = ["py"]\n'
    with pytest.raises(BuildConfigError, match=r"give exactly one of \[torch\]"):
        validate(write(root, text))


def test_torch_noarch_accepts_kebab_or_snake_keys_not_both(project: Callable[[str], Path]) -> None:
    root = project("scale_add")
    base = (
        '[general]\nname = "noarch"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
        'backends = ["cuda", "rocm"]\n[torch-noarch]\n'
    )
    kebab = validate(write(root, base + 'cuda-capabilities = ["8.0"]\nrocm-archs = ["gfx942"]\n'))
    snake = validate(write(root, base + 'cuda_capabilities = ["8.0"]\nrocm_archs = ["gfx942"]\n'))
    assert kebab.noarch == snake.noarch
    assert kebab.noarch is not None and kebab.noarch.rocm_archs == ("gfx942",)
    with pytest.raises(BuildConfigError, match="not both"):
        validate(write(root, base + 'cuda-capabilities = ["8.0"]\ncuda_capabilities = ["8.0"]\n'))


def test_v3_without_a_framework_section_is_noarch_and_migrates(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    path = write(root, '[general]\nname = "pure"\nbackends = ["cuda"]\nlicense = "MIT"\n')
    model = validate(path)
    assert model.source_format == "v3" and model.framework == "torch-noarch"
    assert update_build(path)
    assert "[torch-noarch]" in path.read_text()
    assert validate(path).framework == "torch-noarch"


def test_tvm_ffi_generates_a_tvm_ffi_build_and_refuses_backends_it_cannot_build(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    text = (
        '[general]\nname = "tvm"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
        'backends = ["BACKENDS"]\n[tvm-ffi]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
    )
    path = write(root, text.replace("BACKENDS", "rocm"))
    assert validate(path).framework == "tvm-ffi"
    # tvm-ffi kernels build for cpu and cuda (upstream builds no ROCm tvm-ffi variant).
    with pytest.raises(BuildConfigError, match=r"declares rocm, none of which .* \[tvm-ffi\]"):
        generate_torch(path)
    assert not (root / "CMakeLists.txt").exists()
    report = generate_torch(write(root, text.replace("BACKENDS", "cpu")))
    assert "build2cmake_add_tvm_ffi_library" in (root / "CMakeLists.txt").read_text()
    assert "tvm-ffi-ext/tvm/_ops.py" in report.written


def test_a_dependency_only_a_skipped_backend_needs_does_not_block(
    project: Callable[[str], Path],
) -> None:
    root = project("scale_add")
    (root / "xpu.cpp").write_text("")
    text = (
        EDITION5
        + '\n[kernel.ops_xpu]\nbackend = "xpu"\ndepends = ["sycl_tla"]\nsrc = ["xpu.cpp"]\n'
    )
    report = generate_torch(write(root, text))
    assert report.skipped_backends == ("xpu",)
    assert "sycl_tla" not in (root / "CMakeLists.txt").read_text()
