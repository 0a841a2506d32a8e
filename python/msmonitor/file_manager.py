"""Small file helpers shared by the package: path validation for user-supplied output paths
and owner-only file creation."""
import os

MAX_PATH_LEN = 4096


def is_valid_path(path) -> bool:
    """A non-empty str without NUL bytes, at most MAX_PATH_LEN bytes of UTF-8."""
    if not isinstance(path, str) or not path or "\0" in path:
        return False
    try:
        return len(path.encode("utf-8")) <= MAX_PATH_LEN
    except UnicodeEncodeError:
        return False


def open_private(path: str, mode: int = 0o640):
    """Create or truncate a regular file for writing; refuses to follow a symlink."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    os.fchmod(fd, mode)
    return os.fdopen(fd, "w")
