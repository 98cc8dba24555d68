"""The one place build2cmake writes, deletes and reads project state: never outside the project.

A cloned kernel repository is untrusted: any folder in it may be a symlink to somewhere else, and
the manifest and records it carries may name `../` or absolute paths. Every operation here takes a
path *relative to the project folder*, checks that it is a normalized relative path, and walks to
it one component at a time with directory file descriptors opened with `O_NOFOLLOW`, so that
neither a planted symlink nor one swapped in while we work can lead a write or a delete outside
the folder. Every `OSError` becomes one `Build2CMakeError` naming the path.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import pwd
import re
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

from build2cmake.ground.errors import Build2CMakeError

# Limits for the files build2cmake reads: its own records are small; build.toml files of real
# kernels are a few KiB (the largest in kernels-community is under 10 KiB).
RECORD_LIMIT_BYTES = 1 << 20
# How deep a build folder may nest (check_real_tree): CMake's object folders mirror the sources'
# paths below CMakeFiles/<target>.dir/, a few levels for real kernels.
BUILD_TREE_DEPTH_LIMIT = 64
BUILD_TOML_LIMIT_BYTES = 1 << 20

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Folders _remove_tree holds open at once; a folder below that depth is moved up first.
_REMOVE_OPEN_FOLDERS = 32

# Folders no project lives in: generating into them or cleaning them would damage the system.
SYSTEM_FOLDERS = frozenset(
    Path(p)
    for p in (
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
        "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp",
        "/usr", "/usr/bin", "/usr/lib", "/usr/local", "/usr/sbin", "/usr/share", "/var",
        "/var/lib", "/var/tmp",
    )
)  # fmt: skip
# Nothing under these is ever a project folder.
SYSTEM_TREES = tuple(Path(p) for p in ("/boot", "/dev", "/etc", "/proc", "/sys"))


def _why(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "is a symlink; build2cmake does not follow symlinks inside the project"
    if error.errno == errno.ENAMETOOLONG:
        return "name too long for the filesystem"
    return error.strerror or str(error)


def relative_path(name: str | PurePosixPath) -> PurePosixPath | None:
    """`name` as a normalized relative path inside a folder, or None when it is not one.

    Refused: absolute paths, empty names, `.` and `..` components, doubled or trailing slashes,
    NUL bytes and backslashes (a Windows separator that POSIX would keep in one name).
    """
    text = str(name)
    if not text or "\0" in text or "\\" in text or text.startswith("/"):
        return None
    parts = text.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    return PurePosixPath(text)


def _checked(name: str | PurePosixPath) -> PurePosixPath:
    checked = relative_path(name)
    if checked is None:
        raise Build2CMakeError(f"{name!r}: not a normalized path inside the project")
    return checked


def checked_target(target: Path) -> Path:
    """`target` if it is an existing folder build2cmake may write into and delete from.

    Refuses the filesystem root, system folders and every user's home folder (from the password
    database as well as `$HOME`): a build.toml dropped there must not make clean empty it.
    """
    try:
        if not target.exists():
            raise Build2CMakeError(f"{target}: target folder does not exist")
        if not target.is_dir():
            raise Build2CMakeError(f"{target}: target is a file, not a folder")
        resolved = target.resolve(strict=True)
    except (OSError, ValueError) as e:
        raise Build2CMakeError(f"{target}: cannot use as target folder ({e})") from None
    refused = system_folder_refusal(resolved)
    if refused is not None:
        raise Build2CMakeError(
            f"{target}: refusing to generate into, build in or clean {refused} ({resolved}); "
            "put build.toml in its own project folder"
        )
    return target


def system_folder_refusal(resolved: Path) -> str | None:
    """What `resolved` is ("the filesystem root", "a system folder", "a home folder") when no
    project may live there (nor be created there), else None."""
    if resolved == Path(resolved.anchor):
        return "the filesystem root"
    if resolved in SYSTEM_FOLDERS or any(resolved.is_relative_to(t) for t in SYSTEM_TREES):
        return "a system folder"
    if resolved in _home_folders():
        return "a home folder"
    return None


def _home_folders() -> set[Path]:
    homes = set()
    with contextlib.suppress(OSError, KeyError):
        homes.add(Path.home().resolve())
    for entry in pwd.getpwall():
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            if entry.pw_dir:
                homes.add(Path(entry.pw_dir).resolve())
    return homes


def read_regular_file(
    path: Path, limit_bytes: int, what: str, *, root: Path | None = None
) -> bytes:
    """The bytes of `path`, which must be a regular file of at most `limit_bytes`.

    Refuses FIFOs, devices, sockets and folders without blocking on them, symlinks that lead out
    of `root` (default: the folder holding `path`), and files over the limit; every OSError
    becomes one Build2CMakeError naming `what` (e.g. "build.toml") and the file.
    """
    folder = root if root is not None else path.parent
    try:
        if path.is_symlink():
            real = path.resolve(strict=True)
            if not real.is_relative_to(folder.resolve(strict=True)):
                raise Build2CMakeError(
                    f"{path}: {what} is a symlink to {real}, outside {folder}; "
                    "use a regular file inside the project"
                )
        # O_NONBLOCK: opening a FIFO must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except Build2CMakeError:
        raise
    except (OSError, ValueError, RuntimeError) as e:
        # RuntimeError: Path.resolve's "Symlink loop" before Python 3.13.
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise Build2CMakeError(f"{path}: cannot read {what} ({reason})") from None
    try:
        return _read_fd(fd, limit_bytes, f"{path}: {what}")
    finally:
        os.close(fd)


def _read_fd(fd: int, limit_bytes: int, where: str) -> bytes:
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Build2CMakeError(f"{where} is not a regular file (it is {_kind(info.st_mode)})")
        if info.st_size > limit_bytes:
            raise Build2CMakeError(
                f"{where} is {info.st_size} bytes; the limit is {limit_bytes} bytes"
            )
        chunks = []
        size = 0
        # Read one byte past the limit: a file growing while we read is caught too.
        while size <= limit_bytes:
            chunk = os.read(fd, limit_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise Build2CMakeError(f"{where}: cannot read ({e.strerror})") from None
    if size > limit_bytes:
        raise Build2CMakeError(f"{where} is over the limit of {limit_bytes} bytes")
    return b"".join(chunks)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symlink"
    return "not a regular file"


class ProjectFolder:
    """An open project folder; all paths given to its methods are relative to it.

    Holding the folder's descriptor means a rename of the folder itself while we work cannot
    redirect us; walking with `O_NOFOLLOW` means no component below it can either.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (OSError, ValueError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise Build2CMakeError(f"{path}: cannot open the project folder ({reason})") from None

    def close(self) -> None:
        """Release the folder (and any lock held on it)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> ProjectFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def locked(self) -> Iterator[ProjectFolder]:
        """Hold an exclusive lock on the folder so generate, build and clean take turns."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield self
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def _error(self, rel: PurePosixPath | str, action: str, error: OSError) -> Build2CMakeError:
        return Build2CMakeError(f"{self.path / str(rel)}: cannot {action} ({_why(error)})")

    @contextlib.contextmanager
    def _parent(self, rel: PurePosixPath, *, create: bool = False) -> Iterator[int]:
        """A descriptor of `rel`'s parent folder, reached without following any symlink."""
        fd = os.dup(self.fd)
        try:
            walked = PurePosixPath()
            for part in rel.parts[:-1]:
                walked /= part
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise Build2CMakeError(
                            f"{self.path / str(walked)}: is a symlink or a file; build2cmake "
                            "only writes and deletes through real folders inside the project"
                        ) from None
                    raise
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def lstat(self, name: str | PurePosixPath) -> os.stat_result | None:
        """The entry's own status (a symlink is not followed), or None when it does not exist
        or is not reachable through real folders."""
        rel = _checked(name)
        try:
            with self._parent(rel) as parent:
                return os.stat(rel.name, dir_fd=parent, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except Build2CMakeError:
            return None
        except OSError as e:
            raise self._error(rel, "inspect", e) from None

    def is_file(self, name: str | PurePosixPath) -> bool:
        """Whether `name` is a regular file (not a symlink) reached through real folders."""
        info = self.lstat(name)
        return info is not None and stat.S_ISREG(info.st_mode)

    def is_dir(self, name: str | PurePosixPath) -> bool:
        """Whether `name` is a real folder (not a symlink to one)."""
        info = self.lstat(name)
        return info is not None and stat.S_ISDIR(info.st_mode)

    def read(self, name: str | PurePosixPath, limit_bytes: int, what: str) -> bytes | None:
        """The bytes of regular file `name`, or None when it does not exist."""
        rel = _checked(name)
        try:
            with self._parent(rel) as parent:
                fd = os.open(
                    rel.name,
                    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                    dir_fd=parent,
                )
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise Build2CMakeError(
                    f"{self.path / str(rel)}: {what} is a symlink; build2cmake reads it only as "
                    "a regular file"
                ) from None
            raise self._error(rel, f"read {what}", e) from None
        try:
            return _read_fd(fd, limit_bytes, f"{self.path / str(rel)}: {what}")
        finally:
            os.close(fd)

    def listdir(self, name: str | PurePosixPath | None = None) -> list[str]:
        """Names in folder `name` (default: the project folder); [] when it is not a real
        folder."""
        if name is None:
            return sorted(os.listdir(self.fd))
        rel = _checked(name)
        try:
            with self._parent(rel) as parent:
                fd = os.open(rel.name, _DIR_FLAGS, dir_fd=parent)
        except (OSError, Build2CMakeError):
            return []
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def check_real_tree(self, name: str | PurePosixPath, why: str) -> None:
        """Refuse when folder `name`, or anything in it, is a symlink or neither a regular file
        nor a folder; an absent `name` passes. `why` says who writes there, for the error.

        A build folder is written by CMake, Ninja, compilers and our scripts, all of which follow
        symlinks: one planted anywhere in it would lead their writes out of the project.
        """
        root = _checked(name)
        pending = [root]
        while pending:
            rel = pending.pop()
            try:
                with self._parent(rel) as parent:
                    info = os.stat(rel.name, dir_fd=parent, follow_symlinks=False)
                    if stat.S_ISLNK(info.st_mode):
                        kind = f"a symlink (to {os.readlink(rel.name, dir_fd=parent)})"
                    elif (
                        stat.S_ISDIR(info.st_mode)
                        and len(rel.parts) - len(root.parts) > BUILD_TREE_DEPTH_LIMIT
                    ):
                        # What CMake makes nests ~10 levels; a planted tree thousands deep
                        # would cost this walk (and the removal) time and recursion.
                        kind = f"a folder more than {BUILD_TREE_DEPTH_LIMIT} levels deep"
                    elif stat.S_ISDIR(info.st_mode):
                        fd = os.open(rel.name, _DIR_FLAGS, dir_fd=parent)
                        try:
                            pending.extend(rel / child for child in sorted(os.listdir(fd)))
                        finally:
                            os.close(fd)
                        continue
                    elif stat.S_ISREG(info.st_mode):
                        continue
                    else:
                        kind = _kind(info.st_mode)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise self._error(rel, "inspect", e) from None
            raise Build2CMakeError(
                f"{self.path / str(rel)}: is {kind}; {root}/ is a build folder ({why}, following "
                f"symlinks), so it may hold only real files and folders: remove it, or {root}/"
            )

    def makedirs(self, name: str | PurePosixPath) -> None:
        """Create folder `name` and its parents as real folders; refuse symlinks on the way."""
        rel = _checked(name)
        try:
            with self._parent(rel / "x", create=True):
                pass
        except OSError as e:
            raise self._error(rel, "create the folder", e) from None

    def write_atomic(self, name: str | PurePosixPath, content: bytes, mode: int = 0o644) -> None:
        """Write `content` to `name` through a temporary file beside it, renamed over it.

        The temporary file is created with O_EXCL|O_NOFOLLOW, so a planted symlink with its name
        is never written through; the rename replaces a symlink at `name` itself rather than
        following it. A killed run leaves the old file or the new one, never a mix.
        """
        rel = _checked(name)
        try:
            with self._parent(rel, create=True) as parent:
                tmp = temporary_name(rel.name, secrets.token_hex(4))
                fd = os.open(
                    tmp,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    mode,
                    dir_fd=parent,
                )
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(content)
                        os.fchmod(f.fileno(), mode)
                    os.replace(tmp, rel.name, src_dir_fd=parent, dst_dir_fd=parent)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp, dir_fd=parent)
                    raise
        except OSError as e:
            raise self._error(rel, "write", e) from None

    def unlink(self, name: str | PurePosixPath) -> bool:
        """Remove file or symlink `name` (never what a symlink points to); False if absent."""
        rel = _checked(name)
        try:
            with self._parent(rel) as parent:
                info = os.stat(rel.name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    raise Build2CMakeError(f"{self.path / str(rel)}: is a folder; expected a file")
                os.unlink(rel.name, dir_fd=parent)
                return True
        except FileNotFoundError:
            return False
        except OSError as e:
            raise self._error(rel, "delete", e) from None

    def rmtree(self, name: str | PurePosixPath) -> bool:
        """Remove real folder `name` and everything in it, following no symlink; a symlink in
        its place is refused. False when absent."""
        rel = _checked(name)
        try:
            with self._parent(rel) as parent:
                info = os.stat(rel.name, dir_fd=parent, follow_symlinks=False)
                if not stat.S_ISDIR(info.st_mode):
                    raise Build2CMakeError(
                        f"{self.path / str(rel)}: is not a real folder; refusing to delete it"
                    )
                _remove_tree(parent, rel.name)
                return True
        except FileNotFoundError:
            return False
        except OSError as e:
            raise self._error(rel, "delete", e) from None

    def rename(self, source: str | PurePosixPath, destination: str | PurePosixPath) -> None:
        """Rename `source` to `destination`, both inside the project."""
        src = _checked(source)
        dst = _checked(destination)
        try:
            with self._parent(src) as src_parent, self._parent(dst, create=True) as dst_parent:
                os.replace(src.name, dst.name, src_dir_fd=src_parent, dst_dir_fd=dst_parent)
        except OSError as e:
            raise self._error(dst, f"rename {src} to", e) from None

    def make_dir(self, name: str | PurePosixPath) -> bool:
        """Create the one folder `name` (its parent must exist or is made); False when something
        of that name exists already (it is left as it is)."""
        rel = _checked(name)
        try:
            with self._parent(rel, create=True) as parent:
                os.mkdir(rel.name, 0o755, dir_fd=parent)
            return True
        except FileExistsError:
            return False
        except OSError as e:
            raise self._error(rel, "create the folder", e) from None

    def write_new(self, name: str | PurePosixPath, content: bytes, mode: int = 0o644) -> bool:
        """Write `content` to a new file `name`, making its folders as real folders on the way
        (a symlink or file on the way is refused before anything is made through it); False
        when something of that name exists already (it is left as it is)."""
        rel = _checked(name)
        try:
            with self._parent(rel, create=True) as parent:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(rel.name, flags, mode, dir_fd=parent)
                with os.fdopen(fd, "wb") as out:
                    out.write(content)
            return True
        except FileExistsError:
            return False
        except OSError as e:
            raise self._error(rel, "write", e) from None

    def exchange(self, first: str | PurePosixPath, second: str | PurePosixPath) -> bool:
        """Swap `first` and `second` (both existing, in one folder) in one step: no moment in
        which either name is missing (renameat2's RENAME_EXCHANGE). False where the kernel or
        the file system cannot (the caller falls back to two renames)."""
        one, two = _checked(first), _checked(second)
        if one.parent != two.parent:
            raise ValueError("exchange: both names must be in one folder")
        try:
            with self._parent(one) as parent:
                return _rename_exchange(parent, one.name, two.name)
        except OSError as e:
            raise self._error(one, f"exchange {two} with", e) from None

    def make_temporary_dir(self, parent: str | PurePosixPath, prefix: str) -> PurePosixPath:
        """Create a fresh, empty folder named `prefix<random>` inside `parent`."""
        rel = _checked(parent)
        for _ in range(100):
            name = rel / f"{prefix}{secrets.token_hex(4)}"
            try:
                with self._parent(name, create=True) as fd:
                    os.mkdir(name.name, 0o755, dir_fd=fd)
                return name
            except FileExistsError:
                continue
            except OSError as e:
                raise self._error(name, "create the folder", e) from None
        raise Build2CMakeError(f"{self.path / str(rel)}: cannot create a temporary folder")

    def remove_empty_parents(self, name: str | PurePosixPath) -> None:
        """Remove the parent folders of `name` that are empty, up to the project folder."""
        rel = _checked(name)
        for folder in list(rel.parents)[:-1]:
            try:
                with self._parent(folder) as parent:
                    os.rmdir(folder.name, dir_fd=parent)
            except (OSError, Build2CMakeError):
                return

    def remove_stale_temporaries(self, names: list[PurePosixPath]) -> None:
        """Delete the temporary files a killed write left beside the files in `names`.

        Only names `write_atomic` makes (`is_temporary_name`) are touched: a user's
        `.pyproject.toml.notes.tmp` is theirs.
        """
        for rel in names:
            folder = rel.parent
            listing = self.listdir(folder) if folder.parts else self.listdir()
            for entry in listing:
                if is_temporary_name(rel.name, entry):
                    stale = folder / entry
                    info = self.lstat(stale)
                    # Only files we could have made: a folder of that name is the user's.
                    if info is not None and not stat.S_ISDIR(info.st_mode):
                        with contextlib.suppress(Build2CMakeError):
                            self.unlink(stale)


# What `write_atomic` names its temporary file beside `name`: `.<name>.b2c-<8 hex digits>.tmp`.
_TEMPORARY_TAG = "b2c-"
_TEMPORARY_TOKEN = re.compile(r"[0-9a-f]{8}")


def temporary_name(name: str, token: str) -> str:
    """The temporary file `write_atomic` writes before renaming it over `name`."""
    return f".{name}.{_TEMPORARY_TAG}{token}.tmp"


def is_temporary_name(name: str, entry: str) -> bool:
    """Whether `entry` is a name `write_atomic` gives its temporary files for `name`."""
    prefix, suffix = f".{name}.{_TEMPORARY_TAG}", ".tmp"
    if not (entry.startswith(prefix) and entry.endswith(suffix)):
        return False
    return _TEMPORARY_TOKEN.fullmatch(entry[len(prefix) : -len(suffix)]) is not None


def anchored(path: Path, anchors: Sequence[Path]) -> tuple[Path, PurePosixPath]:
    """(folder, relative path) for writing `path` through `ProjectFolder(folder)`: the first of
    `anchors` (e.g. the project folder, the current folder) that `path` lies strictly inside,
    so that every folder on the way from it is walked without following a symlink; else the
    nearest existing folder above `path` (folders the user named outside those folders)."""
    absolute = Path(os.path.abspath(path))
    above = absolute.parent
    while not above.is_dir() and above != above.parent:
        above = above.parent
    for base in [*(Path(os.path.abspath(a)) for a in anchors), above]:
        if absolute != base and absolute.is_relative_to(base):
            return base, _checked(absolute.relative_to(base).as_posix())
    raise Build2CMakeError(f"{path}: not a path build2cmake can write to")


def write_user_file(path: Path, content: bytes, anchors: Sequence[Path]) -> None:
    """Write a file the user named on the command line (e.g. `ci github -o`) through the gate:
    from the anchor folder it lies in (see `anchored`), no folder on the way may be a symlink
    (a planted `.github` link is refused), and a link at its own name is replaced, never
    followed."""
    folder_path, relative = anchored(path, anchors)
    with ProjectFolder(folder_path) as folder:
        folder.write_atomic(relative, content)


# renameat2(2)'s flag (Linux 3.15+, glibc 2.28+).
_RENAME_EXCHANGE = 2


def _rename_exchange(folder: int, first: str, second: str) -> bool:
    """renameat2(folder, first, folder, second, RENAME_EXCHANGE); False when unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    if renameat2(folder, os.fsencode(first), folder, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(error, os.strerror(error), second)


def _remove_tree(parent: int, name: str) -> None:
    """Remove folder `name` of the open folder `parent` and everything in it, at any depth,
    following no symlink (each folder is opened with O_NOFOLLOW from the one above it; a link
    is removed as a file). Iterative, with at most _REMOVE_OPEN_FOLDERS folders open: a folder
    deeper than that is renamed into the top folder, which cuts the chain, and removed by a
    later pass. So no tree, however deep (shutil.rmtree recursed once per level before Python
    3.13), is left half removed."""
    top = os.open(name, _DIR_FLAGS, dir_fd=parent)
    try:
        while _remove_contents(top):
            pass  # folders were moved up into top: another pass removes them
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=parent)


def _remove_contents(top: int) -> bool:
    """One depth-first pass emptying open folder `top`; True when it moved deep folders up into
    `top`, which then needs another pass."""
    moved = False
    # Each level: the open folder, its name in the level above, the entries left to remove.
    stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = [
        (top, "", iter(list(os.scandir(top))))
    ]
    try:
        while stack:
            fd, fd_name, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                if stack:  # a folder below top, now empty
                    os.close(fd)
                    os.rmdir(fd_name, dir_fd=stack[-1][0])
                continue
            if not entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.name, dir_fd=fd)
                continue
            if len(stack) >= _REMOVE_OPEN_FOLDERS:
                os.rename(
                    entry.name, f".b2c-remove-{secrets.token_hex(8)}", src_dir_fd=fd, dst_dir_fd=top
                )
                moved = True
                continue
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                # Swapped for a link or a file since the scan: remove it as a file.
                os.unlink(entry.name, dir_fd=fd)
                continue
            stack.append((child, entry.name, iter(list(os.scandir(child)))))
    finally:
        for fd, _, _ in stack[1:]:
            os.close(fd)
    return moved
