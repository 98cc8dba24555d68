"""Checks before sharing a kernel: op registrations in Python, and kernel-abi-check.

Ops a kernel registers from Python must name their namespace through `add_op_namespace_prefix`
(from the generated `_ops.py`): every build has its own namespace, so a literal such as
"relu::relu_fwd" collides when two builds (or two kernels) are loaded. kernel-builder rejects
torch.library decorators whose first argument is anything else; we apply the same rule, at any
nesting depth, and also to direct calls that name an op with a string literal.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from build2cmake.errors import Build2CMakeError

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

# What kernel-builder's check-abi checks by default: the Python 3.9 stable ABI, manylinux_2_28.
PYTHON_ABI = "3.9"
MANYLINUX = "manylinux_2_28"


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
    """The registrations in one Python file that do not use add_op_namespace_prefix."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as error:
        return [OpRegistrationViolation(path, error.lineno or 0, f"not valid Python: {error.msg}")]
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
    for path in sorted(package_dir.rglob("*.py")):
        if path.suffix.lstrip(".") not in pyext or "__pycache__" in path.parts:
            continue
        if path.is_symlink() or not path.is_file():
            continue
        violations += op_registration_violations(path, path.read_text("utf-8", errors="replace"))
    if violations:
        raise Build2CMakeError(
            "torch.library registrations that do not use add_op_namespace_prefix (each build has "
            "its own op namespace; `from ._ops import add_op_namespace_prefix` and register "
            'add_op_namespace_prefix("my_op") instead of "ns::my_op"):',
            *(str(v) for v in violations),
        )


@dataclass(frozen=True)
class AbiReport:
    """kernel-abi-check's verdict on one extension (checked False: the package is missing)."""

    library: Path
    checked: bool
    python_abi: tuple[str, ...] = field(default=())
    manylinux: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """No violation found (or nothing could be checked)."""
        return not self.python_abi and not self.manylinux

    def summary(self) -> str:
        """One line per finding, as `build` prints it."""
        if not self.checked:
            return (
                f"kernel-abi-check: not installed, {self.library.name} not checked "
                "(pip install kernel-abi-check)"
            )
        if self.ok:
            return (
                f"kernel-abi-check: {self.library.name}: Python {PYTHON_ABI} stable ABI ok, "
                f"{MANYLINUX} ok"
            )
        lines = [f"kernel-abi-check: {self.library.name}: violations"]
        lines += [f"  not in the Python {PYTHON_ABI} stable ABI: {s}" for s in self.python_abi]
        lines += [f"  not within {MANYLINUX}: {s}" for s in self.manylinux]
        return "\n".join(lines)


def abi_check(library: Path) -> AbiReport:
    """Run kernel-abi-check (PyPI) on one extension, if it is installed."""
    try:
        import kernel_abi_check
    except ImportError:
        return AbiReport(library, checked=False)
    try:
        checked = kernel_abi_check.ObjectFile(library)
        python_abi = checked.check_python_abi(PYTHON_ABI)
        manylinux = checked.check_manylinux(MANYLINUX)
    except Exception as error:  # its errors are not one type; any of them means "cannot check"
        raise Build2CMakeError(f"kernel-abi-check cannot read {library}: {error}") from None
    return AbiReport(
        library,
        checked=True,
        python_abi=tuple(sorted({_describe(v) for v in python_abi})),
        manylinux=tuple(sorted({_describe(v) for v in manylinux})),
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
