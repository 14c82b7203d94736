"""The user-facing exception hierarchy.

Every error a user can cause is one of these; the CLI converts them into a single line on stderr
(``napkin: error: …``) and an exit code, once, at its boundary. Messages are written for people:
they name the input that was wrong and say what is accepted.
"""


class NapkinError(Exception):
    """Base class: a problem the user can fix. Exit code 1 unless a subclass says otherwise."""

    exit_code = 1


class UsageError(NapkinError):
    """A bad value or combination of command-line inputs (exit code 2, like a usage error)."""

    exit_code = 2


class ProfileError(NapkinError):
    """A hardware profile or model preset file that cannot be read or is invalid.

    ``problems`` lists each problem on its own (``file:line: field: message``); the message joins them.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class MissingDependencyError(NapkinError):
    """An optional dependency (torch, for ``napkin bench`` and ``napkin verify``) is not installed."""
