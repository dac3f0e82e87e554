"""Error types. A ``KairoxUserError`` is the user's to fix: the CLI prints it and exits 2."""

from __future__ import annotations


class KairoxError(Exception):
    """Base of every error Kairox raises on purpose."""


class KairoxUserError(KairoxError):
    """Bad input from the user (config, CLI arguments, ids): shown without a traceback."""

    exit_code = 2


class UnknownSessionError(KairoxUserError):
    """No session with that id in this database."""


class ConfigError(KairoxUserError):
    """A configuration problem, located by file and key path, with a suggested fix."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        key: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.file = file
        self.key = key
        self.fix = fix
        self.detail = message
        parts = []
        where = ", ".join(p for p in (file, f"key '{key}'" if key else None) if p)
        parts.append(f"{where}: {message}" if where else message)
        if fix:
            parts.append(f"  fix: {fix}")
        super().__init__("\n".join(parts))

    def located(self, file: str) -> ConfigError:
        """The same error, naming ``file`` (raised where only the key was known)."""
        return ConfigError(self.detail, file=file, key=self.key, fix=self.fix)


class PluginError(KairoxError):
    """A plugin could not be loaded or registered something invalid."""


class DuplicateRegistrationError(PluginError):
    """Two plugins registered the same name for the same kind of thing."""


class UnknownNameError(KairoxUserError):
    """A configured name (knowledge-base kind, backend, provider...) that no plugin provides."""


class StorageError(KairoxUserError):
    """The database could not be opened, read or written (damaged, read-only, full,
    locked, a server away). The message names the database and what to do; nothing of
    the failed action was recorded. ``http_status`` is what ``kairox serve`` answers."""

    http_status = 503


class StorageDamagedError(StorageError):
    """The database file is corrupt, truncated or not a database."""


class StorageReadOnlyError(StorageError):
    """The database (its file, folder or mount) cannot be written."""


class StorageFullError(StorageError):
    """The disk (or the database's size limit) is full."""

    http_status = 507


class StorageUnavailableError(StorageError):
    """The database is busy (locked) or its server cannot be reached: try again later."""
