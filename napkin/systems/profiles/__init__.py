"""Hardware profiles: the validated model, the YAML reader, and the lookup order.

A profile is one YAML file per device. Built-in profiles ship inside the wheel (``napkin/hardware``,
mapped from the repository's ``hardware/`` folder) and are read through ``importlib.resources``;
users add or override profiles in their own directories. Lookup order, highest priority first:

1. an explicit file (``--hardware-file PATH``);
2. the directories in ``$NAPKIN_HARDWARE_PATH`` (``os.pathsep``-separated), in order;
3. the user directory (``<user config dir>/napkin/hardware``; ``$NAPKIN_CONFIG_DIR`` overrides it);
4. the built-in profiles.

A profile is found by its ``name`` or any alias, compared case- and punctuation-insensitively
(``H100-SXM`` = ``h100_sxm``). Nothing is shadowed silently:

* a name or alias claimed by two files is an error that names both files (two user files with the
  same ``name``, a user alias that takes a built-in's name or alias, …);
* the one exception is a user profile (user directory or ``$NAPKIN_HARDWARE_PATH``) whose ``name`` is a
  built-in's ``name``: it replaces that built-in as a whole file (no merging), and the resolved profile
  carries a note ("h100-sxm → your profile at …") that every command prints.

Files are read only if they are regular files under a size cap (``napkin.io.files.read_text``); YAML
anchors and aliases are refused (``napkin.io.yamlio``). Peaks are DENSE: 2:4-sparsity headline figures
are halved in the files, and the file says so.

This package reads files but never prints; it imports neither typer nor rich. One job per module: ``records``
(what a profile file is made of: quantities, slugs, sources, the ``Profile`` base, the YAML reader),
``catalog`` (the lookup, shadowing and conflict rules every kind of profile shares) and ``hardware``
(``HardwareProfile`` and its lookups); the names are re-exported here.
"""

from __future__ import annotations

from napkin.io.files import ENV_CONFIG_DIR, config_dir
from napkin.io.yamlio import normalize
from napkin.systems.measurements import Measurement
from napkin.systems.profiles.catalog import (
    SCHEMA_FILE,
    BrokenProfile,
    Catalog,
    Kind,
    Loaded,
    Named,
    Origin,
    catalog_of,
    copy_text,
    file_of,
    find_in,
    is_builtin_name,
    unknown_name_message,
)
from napkin.systems.profiles.hardware import (
    DEFAULT_HARDWARE,
    ENV_HARDWARE,
    ENV_HARDWARE_PATH,
    HARDWARE,
    HardwareProfile,
    LoadedProfile,
    builtin_dir,
    find,
    find_by_device,
    load_catalog,
    load_file,
    parse_profile,
    resolve,
    schema,
    search_path,
    user_hardware_dir,
)
from napkin.systems.profiles.records import (
    SLUG_RULE,
    Bytes,
    BytesOrZero,
    BytesPerSecond,
    FlopsPerSecond,
    Profile,
    Slug,
    Source,
    Watts,
    is_slug,
    parse_as,
)

__all__ = [
    "DEFAULT_HARDWARE",
    "ENV_CONFIG_DIR",
    "ENV_HARDWARE",
    "ENV_HARDWARE_PATH",
    "HARDWARE",
    "SCHEMA_FILE",
    "SLUG_RULE",
    "BrokenProfile",
    "Bytes",
    "BytesOrZero",
    "BytesPerSecond",
    "Catalog",
    "FlopsPerSecond",
    "HardwareProfile",
    "Kind",
    "Loaded",
    "LoadedProfile",
    "Measurement",
    "Named",
    "Origin",
    "Profile",
    "Slug",
    "Source",
    "Watts",
    "builtin_dir",
    "catalog_of",
    "config_dir",
    "copy_text",
    "file_of",
    "find",
    "find_by_device",
    "find_in",
    "is_builtin_name",
    "is_slug",
    "load_catalog",
    "load_file",
    "normalize",
    "parse_as",
    "parse_profile",
    "resolve",
    "schema",
    "search_path",
    "unknown_name_message",
    "user_hardware_dir",
]
