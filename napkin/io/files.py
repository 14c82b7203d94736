"""napkin's own files: where they live, reading them safely, writing them atomically and exclusively.

* Reading: only regular files, never more than a size cap, and never blocking (a FIFO or a symlink to
  ``/dev/zero`` named ``*.yaml`` is reported, not read).
* Writing: a temporary file in the same directory, then an atomic rename, so readers see the old file
  or the new one. Creating is exclusive (``os.link`` fails if the name exists, so two concurrent
  ``hardware new`` never both succeed); replacing writes through a symlink to its target and keeps the
  file's mode.
* Read-modify-write of a napkin-owned file (``measurements.yaml``) holds an advisory ``fcntl.flock``
  on a ``.NAME.lock`` file beside it (POSIX only; where ``fcntl`` is missing the lock is a no-op).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable
from typing import Final

from napkin.errors import NapkinError

ENV_CONFIG_DIR: Final = "NAPKIN_CONFIG_DIR"
#: The largest file napkin reads (profiles are about 2 KB; the model presets about 10 KB).
MAX_FILE_BYTES: Final = 1 << 20


def config_dir() -> Path:
    """napkin's user configuration directory (``$NAPKIN_CONFIG_DIR`` overrides the platform's)."""
    override = os.environ.get(ENV_CONFIG_DIR)
    if override:
        return Path(override).expanduser()
    import platformdirs  # imported here: only commands that touch user files need it

    return platformdirs.user_config_path("napkin", appauthor=False)


def read_text(path: str | os.PathLike[str], *, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes; anything else is a NapkinError.

    The file is opened non-blocking and checked with ``fstat`` before a byte is read, so a FIFO, a
    device (``/dev/zero``) or a directory fails at once. The message never quotes the file's content.
    """
    name = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        raise NapkinError(f"cannot read {name!r}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NapkinError(f"{name}: not a regular file (a directory, FIFO or device); napkin reads only files")
        if info.st_size > limit:
            raise NapkinError(f"{name}: {info.st_size} bytes is larger than napkin reads ({limit} bytes)")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise NapkinError(f"{name}: larger than napkin reads ({limit} bytes)")
    except OSError as exc:
        raise NapkinError(f"{name}: cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NapkinError(f"{name}: not UTF-8 text (byte {exc.start})") from None


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomic(path: Path, text: str, *, overwrite: bool = False) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory and a rename.

    Readers see either the old file or the new one, never half of either. With ``overwrite=False``
    the file is created exclusively (an existing file, even one created a moment ago by another
    process, is an error and is left untouched). With ``overwrite=True`` a symlink is written through
    to its target, and an existing file keeps its mode. Every OS error is a one-line NapkinError.
    """
    if overwrite:
        path = Path(os.path.realpath(path))
    elif path.exists() or path.is_symlink():
        raise NapkinError(f"{path} already exists; napkin does not overwrite it (use --force to replace it)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = _new_file_mode()
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise NapkinError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if overwrite:
            os.replace(tmp, path)
        else:
            _create_exclusive(tmp, path)
    except FileExistsError:
        raise NapkinError(f"{path} already exists; napkin does not overwrite it (use --force to replace it)") from None
    except OSError as exc:
        raise NapkinError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def _create_exclusive(tmp: str, path: Path) -> None:
    """Give ``tmp`` the name ``path`` only if no file has it: ``os.link`` fails if the name exists.

    Where a file system has no hard links, the name is reserved with ``O_EXCL`` and then replaced
    (a reader may see an empty file for that moment, never a half-written one).
    """
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
            raise
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.replace(tmp, path)


@contextmanager
def locked(path: Path, *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive advisory lock for a read-modify-write of ``path`` (``.NAME.lock`` beside it).

    With ``wait=False`` a lock held by another process is an error instead of a wait.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    lock = path.with_name(f".{path.name}.lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise NapkinError(f"cannot lock {path}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NapkinError(f"{path} is being changed by another napkin process; try again when it ends") from None
        yield
    finally:
        os.close(fd)


def env_dirs(variable: str) -> list[Path]:
    """The directories an ``os.pathsep``-separated environment variable names (``~`` expanded), in order."""
    return [
        Path(entry.strip()).expanduser() for entry in os.environ.get(variable, "").split(os.pathsep) if entry.strip()
    ]


def bundled(kind: str) -> Traversable:
    """Data shipped with napkin: ``napkin/<kind>`` in a wheel, the checkout's top-level ``<kind>/`` otherwise."""
    from importlib.resources import files

    packaged = files("napkin") / kind
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / kind
