"""Checks before sharing a kernel: op registrations in Python, and kernel-abi-check.

Ops a kernel registers from Python must name their namespace through `add_op_namespace_prefix`
(from the generated `_ops.py`): every build has its own namespace, so a literal such as
"relu::relu_fwd" collides when two builds (or two kernels) are loaded. kernel-builder rejects
torch.library decorators whose first argument is anything else; we apply the same rule, at any
nesting depth, and also to direct calls that name an op with a string literal.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from build2cmake.ground import bounded
from build2cmake.ground.errors import Build2CMakeError
from build2cmake.ground.safefs import read_regular_file

# The torch.library functions that take the op's qualified name as their first argument.
TORCH_LIBRARY_REGISTRATIONS = frozenset(
    {
        "custom_op",
        "triton_op",
        "register_kernel",
        "register_fake",
        "register_autograd",
        "register_vmap",
        "register_torch_dispatch",
        "register_autocast",
        "impl_abstract",
    }
)
PREFIX_FUNCTION = "add_op_namespace_prefix"

# What kernel-builder's check-abi checks by default: the Python 3.9 stable ABI, manylinux_2_28,
# macOS 15.0 (for Mach-O files); torch's stable ABI only when a version is given.
PYTHON_ABI = "3.9"
MANYLINUX = "manylinux_2_28"
MACOS = "15.0"


@dataclass(frozen=True)
class OpRegistrationViolation:
    """A torch.library registration that does not go through add_op_namespace_prefix."""

    file: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def _called_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _is_prefixed(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and _called_name(node) == PREFIX_FUNCTION


def _is_literal_name(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(
        node, ast.JoinedStr | ast.BinOp
    )


def op_registration_violations(path: Path, source: str) -> list[OpRegistrationViolation]:
    """The registrations in one Python file that do not use add_op_namespace_prefix.

    A file Python's parser cannot take (nesting too deep for it included) is one error naming it.
    """
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as error:
        return [OpRegistrationViolation(path, error.lineno or 0, f"not valid Python: {error.msg}")]
    except (RecursionError, MemoryError, ValueError):
        tree = bounded.parse_python(path, source)  # raises the one error naming the file
    found: list[OpRegistrationViolation] = []
    decorator_calls: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                if (
                    isinstance(decorator, ast.Call)
                    and decorator.args
                    and _called_name(decorator) in TORCH_LIBRARY_REGISTRATIONS
                ):
                    decorator_calls.add(id(decorator))
                    if not _is_prefixed(decorator.args[0]):
                        found.append(
                            OpRegistrationViolation(
                                path,
                                decorator.lineno,
                                f"@{_called_name(decorator)}(...) on {node.name}: name the op "
                                f"with {PREFIX_FUNCTION}(...)",
                            )
                        )
    for node in ast.walk(tree):
        # A direct call (not a decorator) that spells the qualified op name out.
        if (
            isinstance(node, ast.Call)
            and id(node) not in decorator_calls
            and node.args
            and _called_name(node) in TORCH_LIBRARY_REGISTRATIONS
            and _is_literal_name(node.args[0])
        ):
            found.append(
                OpRegistrationViolation(
                    path,
                    node.lineno,
                    f"{_called_name(node)}(...) names its op as a literal: use "
                    f"{PREFIX_FUNCTION}(...)",
                )
            )
    return sorted(found, key=lambda v: v.line)


def check_op_registrations(package_dir: Path, pyext: Sequence[str] = ("py",)) -> None:
    """Raise one error listing every registration under `package_dir` that is not prefixed."""
    violations: list[OpRegistrationViolation] = []
    if not package_dir.is_dir() or package_dir.is_symlink():
        return
    # Iterative, depth-bounded walk of real files; each read bounded (no FIFO, no huge file).
    root = package_dir.parent
    for path in sorted(bounded.walk_files(package_dir, "the Python package")):
        if path.suffix.lstrip(".") not in pyext:
            continue
        source = bounded.read_text(path, "package file", root=root)
        violations += op_registration_violations(path, source)
    if violations:
        raise Build2CMakeError(
            "torch.library registrations that do not use add_op_namespace_prefix (each build has "
            "its own op namespace; `from ._ops import add_op_namespace_prefix` and register "
            'add_op_namespace_prefix("my_op") instead of "ns::my_op"):',
            *(str(v) for v in violations),
        )


@dataclass(frozen=True)
class AbiPolicy:
    """What kernel-abi-check checks an extension against (kernel-builder check-abi's defaults)."""

    manylinux: str = MANYLINUX
    python_abi: str = PYTHON_ABI
    macos: str = MACOS
    # A torch version ("2.10"): the extension may use only torch's stable ABI of that version.
    torch_stable_abi: str | None = None


@dataclass(frozen=True)
class AbiReport:
    """kernel-abi-check's verdict on one extension (checked False: the package is missing)."""

    library: Path
    checked: bool
    python_abi: tuple[str, ...] = field(default=())
    manylinux: tuple[str, ...] = field(default=())
    macos: tuple[str, ...] = field(default=())
    torch_stable_abi: tuple[str, ...] = field(default=())
    policy: AbiPolicy = field(default=AbiPolicy())

    @property
    def ok(self) -> bool:
        """No violation found (or nothing could be checked)."""
        return not (self.python_abi or self.manylinux or self.macos or self.torch_stable_abi)

    def summary(self) -> str:
        """One line per finding, as `build` and `check-abi` print it."""
        policy = self.policy
        if not self.checked:
            return (
                f"kernel-abi-check: not installed, {self.library.name} not checked "
                "(pip install kernel-abi-check)"
            )
        if self.ok:
            stable = (
                f", torch {policy.torch_stable_abi} stable ABI ok"
                if policy.torch_stable_abi
                else ""
            )
            return (
                f"kernel-abi-check: {self.library.name}: Python {policy.python_abi} stable ABI "
                f"ok, {policy.manylinux} ok{stable}"
            )
        lines = [f"kernel-abi-check: {self.library.name}: violations"]
        lines += [
            f"  not in the Python {policy.python_abi} stable ABI: {s}" for s in self.python_abi
        ]
        lines += [f"  not within {policy.manylinux}: {s}" for s in self.manylinux]
        lines += [f"  not within macOS {policy.macos}: {s}" for s in self.macos]
        lines += [
            f"  not in torch's {policy.torch_stable_abi} stable ABI: {s}"
            for s in self.torch_stable_abi
        ]
        return "\n".join(lines)


def abi_check(library: Path, policy: AbiPolicy | None = None) -> AbiReport:
    """Run kernel-abi-check (PyPI) on one extension, if it is installed: manylinux (ELF) or
    macOS (Mach-O), the Python stable ABI, and with `policy.torch_stable_abi` torch's stable
    ABI (our check: kernel-abi-check's Python package does not have that one)."""
    policy = policy or AbiPolicy()
    try:
        import kernel_abi_check
    except ImportError:
        return AbiReport(library, checked=False, policy=policy)
    manylinux: list[object] = []
    macos: list[object] = []
    try:
        checked = kernel_abi_check.ObjectFile(library)
        is_macho = "mach" in str(checked.format()).lower()
        if is_macho:
            macos = list(checked.check_macos(policy.macos))
        else:
            manylinux = list(checked.check_manylinux(policy.manylinux))
        python_abi = checked.check_python_abi(policy.python_abi)
    except Exception as error:  # its errors are not one type; any of them means "cannot check"
        raise Build2CMakeError(f"kernel-abi-check cannot read {library}: {error}") from None
    stable: tuple[str, ...] = ()
    if policy.torch_stable_abi is not None:
        stable = tuple(torch_stable_abi_violations(library, policy.torch_stable_abi))
    return AbiReport(
        library,
        checked=True,
        python_abi=tuple(sorted({_describe(v) for v in python_abi})),
        manylinux=tuple(sorted({_describe(v) for v in manylinux})),
        macos=tuple(sorted({_describe(v) for v in macos})),
        torch_stable_abi=stable,
        policy=policy,
    )


def _describe(violation: object) -> str:
    name = getattr(violation, "name", None)
    version = getattr(violation, "version", None)
    dep = getattr(violation, "dep", None)
    if name is None:
        return str(violation)
    if version is not None:
        return f"{name}@{dep}_{version}" if dep else f"{name} ({version})"
    return str(name)


# torch's C shim headers gate each newer function behind its torch version.
_GATE = re.compile(r"#\s*if\s+TORCH_FEATURE_VERSION\s*>=\s*TORCH_VERSION_(\d+)_(\d+)_(\d+)")
_EXPORTED = re.compile(r"AOTI_TORCH_EXPORT\b[^;{(]*?\b(\w+)\s*\(", re.DOTALL)
# The C++ namespaces of torch's unstable ABI (torch::stable:: is the stable one).
_UNSTABLE_NAMESPACES = ("c10::", "at::", "torch::")
_SHIM_HEADER_LIMIT_BYTES = 4 << 20


def _release(parts: tuple[int, ...]) -> tuple[int, ...]:
    # 2.10 and 2.10.0 are one version: trailing zeros do not count.
    while parts and parts[-1] == 0:
        parts = parts[:-1]
    return parts


def _version(text: str) -> tuple[int, ...]:
    try:
        return _release(tuple(int(part) for part in text.split(".")))
    except ValueError:
        raise Build2CMakeError(
            f"--torch-stable-abi {text!r}: use a torch version such as 2.10"
        ) from None


def torch_shim_versions(torch_dir: Path | None = None) -> dict[str, tuple[int, ...]]:
    """Shim function -> the torch version that added it, read from the installed torch's
    headers (torch/csrc/stable/c/*.h, torch/csrc/inductor/aoti_torch/{c,generated}/*.h:
    declarations under `#if TORCH_FEATURE_VERSION >= TORCH_VERSION_X_Y_Z`); functions outside
    such a block are older than the stable ABI."""
    if torch_dir is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.origin is None:
            return {}
        torch_dir = Path(spec.origin).parent
    versions: dict[str, tuple[int, ...]] = {}
    include = torch_dir / "include" / "torch" / "csrc"
    headers = [
        header
        for folder in (
            include / "stable" / "c",
            include / "inductor" / "aoti_torch" / "c",
            include / "inductor" / "aoti_torch" / "generated",
        )
        if folder.is_dir()
        for header in sorted(folder.glob("*.h"))
    ]
    for header in headers:
        text = read_regular_file(header, _SHIM_HEADER_LIMIT_BYTES, "torch header").decode(
            "utf-8", "replace"
        )
        gates: list[tuple[int, ...] | None] = []
        block: list[str] = []
        for line in text.splitlines():
            stripped = line.strip()
            gate = _GATE.match(stripped)
            if gate or stripped.startswith(("#if", "#ifdef", "#ifndef")):
                _collect(block, gates, versions)
                gates.append(tuple(int(g) for g in gate.groups()) if gate else None)
            elif stripped.startswith(("#endif", "#else", "#elif")):
                _collect(block, gates, versions)
                if gates:
                    gates.pop()
                if not stripped.startswith("#endif"):
                    gates.append(None)
            else:
                block.append(line)
        _collect(block, gates, versions)
    return versions


def _collect(
    block: list[str], gates: list[tuple[int, ...] | None], versions: dict[str, tuple[int, ...]]
) -> None:
    gate = max((g for g in gates if g is not None), default=None)
    if gate is not None:
        for name in _EXPORTED.findall("\n".join(block)):
            versions[name] = gate
    block.clear()


def _undefined_symbols(library: Path) -> list[str]:
    nm = shutil.which("nm")
    if nm is None:
        raise Build2CMakeError("--torch-stable-abi needs `nm` (binutils) to list symbols")
    try:
        result = subprocess.run(
            [nm, "-D", "--undefined-only", "--demangle", "--", str(library)],
            capture_output=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise Build2CMakeError(f"nm cannot list the symbols of {library}: {error}") from None
    if result.returncode != 0:
        raise Build2CMakeError(f"nm cannot list the symbols of {library}")
    names = []
    for line in result.stdout.decode("utf-8", "replace").splitlines():
        # "                 U name@VERSION"
        _, _, name = line.strip().partition(" ")
        names.append(name.strip().split("@")[0])
    return names


def torch_stable_abi_violations(
    library: Path, version: str, torch_dir: Path | None = None
) -> list[str]:
    """What in `library` is outside torch's stable ABI of `version`: shim functions newer than
    it, and symbols of torch's C++ API (c10::, at::, torch:: but torch::stable::)."""
    target = _version(version)
    shims = torch_shim_versions(torch_dir)
    found: set[str] = set()
    for name in _undefined_symbols(library):
        if name in shims:
            if _release(shims[name]) > target:
                found.add(f"{name} (torch {'.'.join(map(str, shims[name]))})")
        elif name.startswith(_UNSTABLE_NAMESPACES) and not name.startswith("torch::stable::"):
            found.add(name)
    return sorted(found)
