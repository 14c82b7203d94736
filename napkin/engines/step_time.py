"""The step-time model's former module name: ``napkin.engines.step`` (a package since it outgrew one file)
re-exported for code written against the old name. New code imports ``napkin.engines.step``."""

from napkin.engines.step import *  # noqa: F403
from napkin.engines.step import __all__  # noqa: F401
