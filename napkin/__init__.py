"""napkin: napkin math for deep-learning training runs.

The library is the product; the ``napkin`` command is a thin layer over it. Every quantity is
computed in base units (FLOP, bytes, seconds, watts) and converted only when shown.
"""

from napkin.errors import NapkinError, ProfileError, UsageError

__version__ = "0.1.0"

__all__ = ["NapkinError", "ProfileError", "UsageError", "__version__"]
