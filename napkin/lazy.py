"""Attributes of a package imported on first use (PEP 562 ``__getattr__``): a command pays at start-up only for
the modules its own question needs."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_attributes(package: str, targets: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name in ``targets`` from its module (``"module"`` or
    ``"module:attribute"``; a module starting with ``.`` is ``package``'s own), imported when first asked for."""

    def __getattr__(name: str) -> Any:
        target = targets.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        return getattr(import_module(package + module if module.startswith(".") else module), attribute or name)

    return __getattr__
