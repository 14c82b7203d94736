"""A Hugging Face model by what a user has: a config.json, a model folder, or a Hub id (``org/name``).

A Hub id is resolved by ``huggingface_hub`` (the optional ``hf`` extra: ``pip install 'napkin-math[hf]'``), which
reads the local cache first and honours ``HF_HUB_OFFLINE``, ``HF_HOME`` and ``HF_HUB_CACHE``; only
``config.json`` is fetched, and nothing else in napkin touches the network. The model is named by its Hub
id, or its config's ``_name_or_path``, never by its folder.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

from napkin.domain.hf_config import HfModel, from_data
from napkin.errors import UsageError
from napkin.io.hf_files import read_config_file, read_object

#: ``org/name`` as the Hub spells repository ids (huggingface_hub validate_repo_id: letters, digits, - _ .).
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
#: Values of HF_HUB_OFFLINE that mean "offline" (huggingface_hub constants._is_true).
TRUE = ("1", "on", "yes", "true")
#: Seconds to reach the Hub before saying it cannot be (huggingface_hub would retry five times over ~25 s).
CONNECT_TIMEOUT = 3.0


def load(spec: str | Path, field: str = "model_config", *, hub: bool = True) -> HfModel:
    """The model a config.json path, a model folder or (``hub``) a Hub id describes."""
    text = str(spec)
    path = Path(text).expanduser()
    if not path.exists() and not text.endswith(".json") and not (hub and HUB_ID.match(text)):
        ways = "a file, a folder or a Hugging Face Hub id (org/name, of letters, digits, '-', '_' and '.')"
        raise UsageError(f"{field}: {text!r} is not {ways if hub else 'a file or a folder'}", field=field)
    if path.exists() or text.endswith(".json"):
        return load_path(path, field=field)
    return from_data(read_object(_from_hub(text, field), field), text, field=field, name=text)


def load_path(spec: str | Path, *, field: str = "model_config", name: str | None = None) -> HfModel:
    """The model of a config.json file or of a model folder (its config.json), named ``name``, else by its
    ``_name_or_path``, else by the path given."""
    return from_data(read_config_file(spec, field), spec, field=field, name=name)


def _cache_dir() -> str | None:
    """The Hub cache as the environment names it now (huggingface_hub reads it once, when imported)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    return None


def _from_hub(repo_id: str, field: str) -> Path:
    """``repo_id``'s config.json from the local cache, or downloaded unless HF_HUB_OFFLINE is set."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import (
            EntryNotFoundError,
            GatedRepoError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
        )
    except ImportError:
        raise UsageError(
            f"{field}: {repo_id!r} is not a file, a folder or a preset; read as a Hugging Face Hub id it needs "
            "huggingface_hub: pip install 'napkin-math[hf]'",
            field=field,
        ) from None
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)  # its retries log a line each: one error is ours
    try:
        try:
            return Path(hf_hub_download(repo_id, "config.json", local_files_only=True, cache_dir=_cache_dir()))
        except LocalEntryNotFoundError:
            if offline:
                raise
        host = _unreachable()
        if host:
            raise UsageError(
                f"{field}: {repo_id!r} is not in the Hugging Face cache and the Hub ({host}) could not be reached "
                f"within {CONNECT_TIMEOUT:g} s; fetch it once online, or give its config.json or a folder holding one",
                field=field,
            )
        return Path(hf_hub_download(repo_id, "config.json", cache_dir=_cache_dir()))
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if offline else "the Hub could not be reached"
        raise UsageError(
            f"{field}: {repo_id!r} is not in the Hugging Face cache and {why}; fetch it once online, or give its "
            "config.json or a folder holding one",
            field=field,
        ) from None
    except GatedRepoError:
        raise UsageError(
            f"{field}: {repo_id!r} is gated on the Hub: accept its licence and log in (hf auth login), or give "
            "its config.json",
            field=field,
        ) from None
    except RepositoryNotFoundError:
        raise UsageError(
            f"{field}: {repo_id!r} is not a model on the Hugging Face Hub, a file, a folder or a preset", field=field
        ) from None
    except EntryNotFoundError:
        raise UsageError(f"{field}: {repo_id!r} has no config.json on the Hub", field=field) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{field}: {repo_id!r}: {str(exc).splitlines()[0]}", field=field) from None


def _unreachable() -> str | None:
    """The Hub's host when a TCP connection to it fails within ``CONNECT_TIMEOUT`` (no DNS, no route, refused),
    else None; ``HF_ENDPOINT`` names the Hub as huggingface_hub reads it."""
    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            return None
    except OSError:
        return f"{host}:{port}"
