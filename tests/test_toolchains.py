"""build2cmake's toolchains (build2cmake/toolchains/): recipes and their stamps, the store, the
rule that picks one for a build, include folders, and (marker `toolchains`) a small toolchain
really made, run in and removed, as root and rootless.

The small toolchain is a Debian trixie base system (mmdebstrap's `essential` variant, about
100 MB, under a minute): what every toolchain is made of, without ROCm's gigabytes. It needs
mmdebstrap and the Debian mirror; the tests skip, saying why, without them.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from build2cmake.builds import choice
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.toolchains import install, probe, sandbox, store
from build2cmake.toolchains.recipes import RECIPES, DebianArchive, Recipe, recipe
from tests.conftest import FIXTURES, REPO, run_cli

# What scripts/rocm-chroot.sh wrote into .b2c-stamp (its stamp_text, before 2026-11-28): the
# chroots it made are reused only if the recipes write the same text.
SCRIPT_STAMPS = {
    "sid": "suite=sid\n"
    "apt=hipcc libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev python3-torch libtorch-dev "
    "librocthrust-dev librocprim-dev libhipcub-dev libhipblaslt-dev librocwmma-dev python3-dev "
    "python3-venv g++ ccache ca-certificates\n"
    "pip=scikit-build-core==0.11.6 cmake==3.31.6 ninja==1.11.1.4 tomlkit==0.13.2 jinja2==3.1.6 "
    "pytest==8.3.5 uv==0.13.9\n"
    "dpkg=\n"
    "Package: librocwmma-dev\nPin: release a=experimental\nPin-Priority: 990\n",
    "rocm72": "suite=rocm72\n"
    "apt=hipcc libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev librocthrust-dev "
    "librocprim-dev libhipcub-dev libhipblaslt-dev librocwmma-dev libhipsparselt-dev "
    "python3-dev python3-venv g++ g++-15 ccache ca-certificates\n"
    "pip=scikit-build-core==0.11.6 cmake==3.31.6 ninja==1.11.1.4 tomlkit==0.13.2 jinja2==3.1.6 "
    "pytest==8.3.5 uv==0.13.9\n"
    "dpkg=--dpkgopt=force-overwrite\n"
    "Package: hipcc libamdhip64* libhiprtc* libamd-comgr* libhsa-runtime* rocm-* librocthrust* "
    "librocprim* libhipcub* libhipblaslt* libhipsparselt* librocwmma* libroctx64*\n"
    "Pin: release a=experimental\nPin-Priority: 990\n",
}
# trixie's list named hipBLASLt and rocWMMA, which trixie does not have: no trixie chroot could be
# made from it, so the rocm-5.7 recipe leaves them out.
TRIXIE_STAMP = (
    "suite=trixie\n"
    "apt=hipcc libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev python3-torch libtorch-dev "
    "librocthrust-dev librocprim-dev libhipcub-dev python3-dev python3-venv g++ ccache "
    "ca-certificates\n"
    "pip=scikit-build-core==0.11.6 cmake==3.31.6 ninja==1.11.1.4 tomlkit==0.13.2 jinja2==3.1.6 "
    "pytest==8.3.5 uv==0.13.9\n"
    "dpkg=\n"
)

# A Debian trixie base system and nothing else: the small toolchain the slow tests make.
BASE = Recipe(
    name="base",
    release=None,
    suite="base",
    source=DebianArchive("trixie"),
    packages=(),
    variant="essential",
    tools=("usr/bin/dpkg",),
    summary="a Debian trixie base system (tests)",
)


def test_the_recipes_write_the_stamps_the_chroot_script_wrote() -> None:
    by_suite = {r.suite: r for r in RECIPES}
    for suite, stamp in SCRIPT_STAMPS.items():
        assert by_suite[suite].stamp() == stamp, suite
        assert by_suite[suite].folder == f"rocm-chroot-{suite}"
    assert by_suite["trixie"].stamp() == TRIXIE_STAMP
    assert [r.name for r in RECIPES] == ["rocm-5.7", "rocm-6.4", "rocm-7.2"]
    with pytest.raises(Build2CMakeError, match=r"no toolchain 'rocm-9\.9': build2cmake makes "):
        recipe("rocm-9.9")


def _toolchain(root: Path, suite: str, stamp: str, version: str = "7.2.4-1~exp2\n") -> Path:
    folder = root / f"rocm-chroot-{suite}"
    for tool in ("usr/bin/hipcc", "opt/b2c-venv/bin/cmake", "opt/b2c-venv/bin/uv"):
        (folder / tool).parent.mkdir(parents=True, exist_ok=True)
        (folder / tool).write_text("")
    (folder / store.STAMP).write_text(stamp)
    (folder / store.VERSION).write_text(version)
    return folder


def test_the_store_lists_complete_toolchains_and_says_which_an_install_would_remake(
    tmp_path: Path,
) -> None:
    _toolchain(tmp_path, "rocm72", SCRIPT_STAMPS["rocm72"])
    _toolchain(tmp_path, "sid", "suite=sid\napt=hipcc\n", "6.4.3-5\n")  # an older recipe
    being_made = _toolchain(tmp_path, "trixie", TRIXIE_STAMP, "5.7.1\n")
    being_made.rename(tmp_path / "rocm-chroot-trixie.tmp.123")
    (tmp_path / "rocm-chroot-x").mkdir()  # no stamp: never finished
    found = store.installed(tmp_path)
    assert [(t.name, t.version, t.release, t.current) for t in found] == [
        ("rocm-6.4", "6.4.3-5", (6, 4), False),
        ("rocm-7.2", "7.2.4-1~exp2", (7, 2), True),
    ]
    assert found[0].status.startswith("installed (older recipe")
    assert found[1].env == {"CUDAHOSTCXX": "/usr/bin/g++-15"}
    (tmp_path / "rocm-chroot-rocm72" / "usr/bin/hipcc").unlink()
    assert store.find("rocm-7.2", tmp_path).status.startswith("damaged (no usr/bin/hipcc")
    with pytest.raises(Build2CMakeError, match=r"build2cmake toolchain install rocm-5\.7"):
        store.find("rocm-5.7", tmp_path)


def test_the_store_is_the_users_cache_and_roots_is_the_machines() -> None:
    home = {"HOME": "/home/u"}
    assert store.default_root(home, 1000) == Path("/home/u/.cache/build2cmake/toolchains")
    xdg = {**home, "XDG_CACHE_HOME": "/c"}
    assert store.default_root(xdg, 1000) == Path("/c/build2cmake/toolchains")
    assert store.default_root(xdg, 0) == Path("/var/cache/build2cmake")
    assert store.default_root({**xdg, "BUILD2CMAKE_TOOLCHAINS": "/t"}, 0) == Path("/t")


def test_include_folders_are_mounted_unless_they_would_hide_the_toolchains_own(
    tmp_path: Path,
) -> None:
    folder = _toolchain(tmp_path / "store", "rocm72", SCRIPT_STAMPS["rocm72"])
    (folder / "usr/include/hip").mkdir(parents=True)
    (folder / "usr/include/hip/hip_runtime.h").write_text("")
    toolchain = store.find("rocm-7.2", tmp_path / "store")
    ours, theirs = tmp_path / "rocwmma", tmp_path / "more"
    ours.mkdir()
    theirs.mkdir()
    env = {
        "CPATH": f"/usr/include:relative:{tmp_path / 'missing'}:{theirs}",
        "BUILD2CMAKE_INCLUDE_DIRS": str(ours),
        "CPLUS_INCLUDE_PATH": str(theirs),
    }
    found = sandbox.include_folders(toolchain, env)
    assert found.variables == {"CPATH": f"{theirs}:{ours}", "CPLUS_INCLUDE_PATH": str(theirs)}
    assert found.folders == (theirs, ours)
    assert found.notes == (
        "CPATH entry /usr/include: not mounted: toolchain rocm-7.2 has its own /usr/include",
        "CPATH entry relative: not an absolute path, not mounted",
    )
    # A folder named to build2cmake itself must be there.
    with pytest.raises(Build2CMakeError, match=r"BUILD2CMAKE_INCLUDE_DIRS .*missing: not a fold"):
        sandbox.include_folders(toolchain, {"BUILD2CMAKE_INCLUDE_DIRS": str(tmp_path / "missing")})


def test_rootless_needs_a_subordinate_id_range_and_says_how_to_get_one(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root makes toolchains in root mode")
    problem, _ = sandbox.rootless_problem(etc=tmp_path)
    assert problem is not None and "\n" not in problem
    assert "usermod --add-subuids" in problem or "user namespace" in problem or "uidmap" in problem


def _capability(label: str, targets: str, release: tuple[int, int] = (7, 2)) -> probe.Capability:
    toolchain = None
    if label != "host":
        version = f"{release[0]}.{release[1]}.0"
        toolchain = store.Toolchain(label, Path("/t") / label, label, version, None, True, 0)
    return probe.Capability(
        label, "", f"{release[0]}.{release[1]}.0", compiler="clang++",
        targets=tuple(targets.split()), toolchain=toolchain,
    )  # fmt: skip


def test_a_toolchain_builds_only_when_it_compiles_everything_the_host_does_and_more() -> None:
    host = _capability("host", "gfx90a gfx940", (5, 2))
    older = _capability("rocm-6.4", "gfx90a gfx942", (6, 4))
    newer = _capability("rocm-7.2", "gfx90a gfx942", (7, 2))
    # The guide's project (gfx942 only): the newest of the toolchains that compile it.
    guide = choice.rank(["gfx942"], host, [older, newer])
    assert guide.chosen is newer and [c.label for c in guide.builders_of("gfx942")] == [
        "rocm-6.4", "rocm-7.2",
    ]  # fmt: skip
    # kernels/gemm: each loses an arch the other has; the host builds, as before.
    gemm = choice.rank(["gfx90a", "gfx940", "gfx942"], host, [older, newer])
    assert gemm.chosen is None and gemm.partial is newer
    # Everything on the host: nothing to choose.
    assert choice.rank(["gfx90a"], host, [older, newer]).chosen is None
    # A ROCm build of torch names its variant after its ROCm: only that release may build it.
    assert choice.rank(["gfx942"], host, [older, newer], release=(6, 4)).chosen is older
    # No ROCm on the host at all.
    nothing = probe.Capability("host", "", "", problem="no HIP compiler")
    assert choice.rank(["gfx942"], nothing, [older]).chosen is older


def test_the_wanted_archs_are_rocm_archs_unless_the_build_names_them() -> None:
    from build2cmake.config import load_project

    project = load_project(REPO / "kernels" / "gemm" / "build.toml")
    assert choice.wanted_archs(project) == ["gfx90a", "gfx940", "gfx942"]
    assert choice.wanted_archs(project, ["BUILD2CMAKE_ROCM_ARCHS=gfx942;gfx90a"]) == [
        "gfx90a", "gfx942",
    ]  # fmt: skip


def test_the_toolchain_command_lists_every_recipe_and_explains_a_wrong_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUILD2CMAKE_TOOLCHAINS", str(tmp_path))
    _toolchain(tmp_path, "rocm72", SCRIPT_STAMPS["rocm72"])
    listed = run_cli("toolchain", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].startswith(f"toolchains in {tmp_path} (")
    assert any(line.startswith("rocm-5.7 ") and "not installed (build2cmake toolchain install "
               "rocm-5.7)" in line for line in lines)  # fmt: skip
    assert any(line.startswith("rocm-7.2  7.2.4-1~exp2  Debian sid + experimental  installed: ")
               for line in lines), lines  # fmt: skip
    path = run_cli("toolchain", "path", "rocm-7.2")
    assert path.returncode == 0 and path.stdout.strip() == str(tmp_path / "rocm-chroot-rocm72")
    absent = run_cli("toolchain", "path", "rocm-6.4")
    assert absent.returncode == 1 and "build2cmake toolchain install rocm-6.4" in absent.stderr
    wrong = run_cli("toolchain", "install", "rocm-9.9")
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == (
        "build2cmake: error: no toolchain 'rocm-9.9': build2cmake makes rocm-5.7, rocm-6.4, "
        "rocm-7.2"
    )
    empty = run_cli("toolchain", "run", "rocm-7.2", "--")
    assert empty.returncode == 2 and "no command given" in empty.stderr


# The small toolchain, really made.


def _mirror_unreachable() -> str | None:
    if sys.platform != "linux" or shutil.which("mmdebstrap") is None:
        return "toolchains are made with mmdebstrap (Linux), not installed here"
    return BASE.source.unreachable(timeout=10)


@pytest.mark.toolchains
def test_a_toolchain_is_made_aside_run_in_and_removed_leaving_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("this test makes the toolchain as root; the next one rootless")
    why = _mirror_unreachable()
    if why:
        pytest.skip(why)
    root = tmp_path / "store"
    progress = tmp_path / "progress.txt"
    with open(progress, "w") as out:
        made = install.install(BASE, root=root, out=out)
    lines = progress.read_text().splitlines()
    print("\n".join(lines))
    assert made.made and made.size > 50_000_000, made
    for stage in ("checking the source", "downloading packages", "installing the base system",
                  "checking the tools", "moving it into place"):  # fmt: skip
        assert any(stage in line for line in lines), (stage, lines)
    assert lines[-1].startswith("base: installed in ") and " MB on disk: " in lines[-1]
    assert sorted(p.name for p in root.iterdir()) == [
        "rocm-chroot-base", "rocm-chroot-base.lock", "rocm-chroot-base.log",
    ]  # fmt: skip
    # A second install finds it made from the same recipe: nothing is made again.
    with open(os.devnull, "w") as quiet:
        assert not install.install(BASE, root=root, out=quiet).made

    # Run inside: in the current folder (mounted read-write), an include folder read-only.
    toolchain = store.find("base", root, [BASE])
    work, headers = tmp_path / "work", tmp_path / "headers"
    work.mkdir()
    headers.mkdir()
    (headers / "lib.h").write_text("#pragma once\n")
    script = (
        'cat /etc/debian_version; echo "CPATH=$CPATH"; ls "$1"; '
        'touch "$1/mine" 2>/dev/null || echo read-only; echo made > written'
    )
    result = sandbox.run(
        toolchain, ["sh", "-c", script, "sh", str(headers)], cwd=work,
        env={"BUILD2CMAKE_INCLUDE_DIRS": str(headers)}, root=root, capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].startswith("13.")  # trixie
    assert f"CPATH={headers}" in result.stdout and "lib.h" in result.stdout
    assert "read-only" in result.stdout and not (headers / "mine").exists()
    assert (work / "written").read_text() == "made\n"

    removed = install.remove("base", root=root, recipes=[BASE])
    assert root / "rocm-chroot-base" in removed
    assert list(root.iterdir()) == []


def _unprivileged() -> tuple[int, int]:
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


@pytest.mark.toolchains
def test_a_toolchain_is_made_and_removed_rootless_where_user_namespaces_work() -> None:
    """Rootless: as this (non-root) user when its subordinate ids are set up; as root, as
    `nobody`, given a range of subordinate ids in a copy of /etc seen only by this test's own
    mount namespace (nothing of the machine changes)."""
    why = _mirror_unreachable()
    if why:
        pytest.skip(why)
    work = Path(tempfile.mkdtemp(prefix="b2c-rootless-"))
    work.chmod(0o755)  # pytest's folders are private to root; nobody works in this one
    package = sandbox.copy_package(work / "python")
    program = work / "rootless.py"
    program.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from tests_base import BASE\n"
        "from build2cmake.toolchains import install, sandbox, store\n"
        "root = store.default_root()\n"
        "print('store', root, 'mode', sandbox.current_mode().name, flush=True)\n"
        "install.install(BASE, root=root, out=sys.stdout)\n"
        "toolchain = store.find('base', root, [BASE])\n"
        "home = Path.home()\n"
        "ran = sandbox.run(toolchain, ['sh', '-c', 'id -u; echo made > written'], cwd=home)\n"
        "written = home / 'written'\n"
        "print('written', written.read_text().strip(), written.stat().st_uid)\n"
        "print('removed', len(install.remove('base', root=root, recipes=[BASE])))\n"
        "print('left', sorted(p.name for p in root.iterdir()))\n"
    )
    (package / "tests_base.py").write_text(
        "from build2cmake.toolchains.recipes import DebianArchive, Recipe\n"
        "BASE = Recipe(name='base', release=None, suite='base', source=DebianArchive('trixie'), "
        "packages=(), variant='essential', tools=('usr/bin/dpkg',))\n"
    )
    home = work / "home"
    home.mkdir()
    python = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
    env = {"HOME": str(home), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(package)}
    if os.geteuid() != 0:
        problem, _ = sandbox.rootless_problem()
        if problem is not None:
            pytest.skip(problem)
        command = [python, str(program)]
    else:
        uid, gid = _unprivileged()
        if shutil.which("setpriv") is None or shutil.which("newuidmap") is None:
            pytest.skip("needs setpriv (util-linux) and newuidmap (uidmap) to try it as nobody")
        probe_ns = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
             "unshare", "--user", "--map-root-user", "true"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if probe_ns.returncode != 0:
            pytest.skip(f"this kernel refuses user namespaces: {probe_ns.stderr.strip()}")
        os.chown(work, uid, gid)
        os.chown(home, uid, gid)
        etc = work / "etc"
        shutil.copytree("/etc", etc, symlinks=True)
        for name in ("subuid", "subgid"):
            (etc / name).write_text("nobody:300000:65536\n")
        inner = (
            f'mount --bind "$1" /etc && shift && exec setpriv --reuid={uid} --regid={gid} '
            '--clear-groups env -i "$@"'
        )
        command = [
            "unshare", "--mount", "--propagation", "private", "sh", "-c", inner, "sh",
            str(etc), *(f"{k}={v}" for k, v in env.items()), python, str(program),
        ]  # fmt: skip
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, env=env, cwd=work, timeout=900, check=False
        )
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)
    print(result.stdout, result.stderr)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "mode rootless" in out and "base: installed in " in out
    owner = os.getuid() if os.geteuid() != 0 else _unprivileged()[0]
    assert f"written made {owner}" in out  # root inside, the user's own file outside
    assert "removed 3" in out and "left []" in out


def tempfile_dir(factory: pytest.TempPathFactory) -> str:
    """A folder other users may enter (pytest's own is private to its user)."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="b2c-rootless-")
    os.chmod(folder, 0o755)
    return folder


def test_doctor_without_toolchains_says_which_to_install_for_an_arch_the_host_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BUILD2CMAKE_TOOLCHAINS", str(tmp_path))
    result = run_cli("doctor", FIXTURES / "rocm_guide" / "build.toml")
    out = result.stdout
    assert (
        f"toolchains: none installed in {tmp_path} (build2cmake toolchain install rocm-7.2" in out
    )
    if "buildable here: gfx942" in out:
        pytest.skip("this machine's ROCm compiles gfx942: nothing to install")
    assert result.returncode == 1
    assert "(build2cmake toolchain install rocm-7.2 is one)" in out, out


def test_a_folder_of_earlier_mount_points_is_mounted_over_and_the_toolchains_own_is_not(
    tmp_path: Path,
) -> None:
    """Binding /a/b leaves empty folders /a/b in the toolchain; a later bind of /a (a local
    mirror's root after its simple/ folder) mounts over them. A folder holding a file, or a
    symlink, anywhere below is the toolchain's own and is never hidden."""
    from types import SimpleNamespace

    from build2cmake.toolchains.sandbox import _shadows

    toolchain = SimpleNamespace(folder=tmp_path, name="rocm-7.2")
    (tmp_path / "opt" / "pypi" / "simple").mkdir(parents=True)
    (tmp_path / "opt" / "pypi" / "files").mkdir()
    assert _shadows(toolchain, Path("/opt/pypi")) is None  # type: ignore[arg-type]
    (tmp_path / "opt" / "pypi" / "files" / "x.whl").write_bytes(b"")
    assert _shadows(toolchain, Path("/opt/pypi")) == "toolchain rocm-7.2 has its own /opt/pypi"  # type: ignore[arg-type]
    (tmp_path / "opt" / "pypi" / "files" / "x.whl").unlink()
    (tmp_path / "opt" / "pypi" / "files" / "link").symlink_to("/")
    assert _shadows(toolchain, Path("/opt/pypi")) is not None  # type: ignore[arg-type]
