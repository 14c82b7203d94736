"""The one YAML reader for napkin's data files (hardware profiles, model presets, measurements), and its
strict JSON reader (Hugging Face ``config.json``).

* The safe loader only (``!!python/object`` and other tags are rejected), the C one when available, with
  numbers of at most 100 characters (the command line's bound).
* No anchors or aliases: a profile has no use for them, and a nested-alias "billion laughs" file would
  otherwise expand to gigabytes when validated. The composed node graph is checked before anything
  is constructed, in time linear in the file.
* Errors carry the file and line (``h100.yaml:7: peak_flops.bf16: …``) and never quote the content.
* Files are read through :func:`napkin.io.files.read_text` (regular files only, size-capped).
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, Final, TypeVar

import yaml

from napkin.errors import NapkinError, ProfileError
from napkin.units import MAX_TEXT

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound="BaseModel")

#: The longest number napkin reads from a file: the command line's bound. A longer one (a 5,000-digit integer,
#: which Python refuses to convert) is an error with its line, never a ValueError.
MAX_NUMBER_CHARS: Final = MAX_TEXT


class _BoundedLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader (the C one when available) whose numbers are at most MAX_NUMBER_CHARS characters."""


class _Overlong(yaml.YAMLError):
    """A number longer than napkin reads, at ``line``."""

    def __init__(self, chars: int, line: int) -> None:
        super().__init__(f"a number of {chars} characters is longer than napkin reads ({MAX_NUMBER_CHARS})")
        self.line = line


def _bounded(construct: Any) -> Any:
    def build(loader: Any, node: yaml.ScalarNode) -> Any:
        if len(str(node.value)) > MAX_NUMBER_CHARS:
            raise _Overlong(len(str(node.value)), node.start_mark.line + 1)
        return construct(loader, node)

    return build


for _tag, _construct in (
    ("int", yaml.constructor.SafeConstructor.construct_yaml_int),
    ("float", yaml.constructor.SafeConstructor.construct_yaml_float),
):
    _BoundedLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _bounded(_construct))
_SafeLoader: type[yaml.SafeLoader] = _BoundedLoader
#: Keys longer than this are shortened in messages (a file that is not a profile may have whole lines as keys).
_KEY_CHARS: Final = 40


def normalize(name: str) -> str:
    """Case- and punctuation-insensitive key of a name: ``H100-SXM`` and ``h100_sxm`` → ``h100sxm``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _reject_aliases(root: yaml.Node, label: str) -> None:
    """A node reached twice is an alias (``*name``) or a merge (``<<: *name``); both are refused."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            line = node.start_mark.line + 1
            raise ProfileError(
                f"{label}:{line}: YAML anchors and aliases (&name, *name) are not allowed in napkin's files; "
                "write the value out"
            )
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def parse(text: str, label: str) -> tuple[Any, yaml.Node | None]:
    """Parse YAML text; returns the data and the root node (for line numbers)."""
    try:
        loader = _SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None, None
            _reject_aliases(node, label)
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except _Overlong as exc:
        raise ProfileError(f"{label}:{exc.line}: {exc}; napkin computes with numbers up to 1e36") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = (exc.problem or "invalid YAML").split("\n")[0][:80]
        raise ProfileError(f"{label}:{line}: not valid YAML (safe subset): {problem}") from None
    except yaml.YAMLError:
        raise ProfileError(f"{label}: not valid YAML") from None
    except RecursionError:
        raise ProfileError(f"{label}: nested too deeply to be a napkin file") from None
    return data, node


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"the key {clean(key)[:_KEY_CHARS]!r} is given twice")
        data[key] = value
    return data


def _json_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number of {len(text)} digits is longer than napkin reads ({MAX_NUMBER_CHARS})")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:_KEY_CHARS]} is not a finite number")
    return value


def _json_constant(text: str) -> float:
    raise ValueError(f"{text} is not a JSON number (JSON has no NaN or Infinity)")


def _python_constant(text: str) -> float:
    return float(text)  # NaN, Infinity, -Infinity: what Python's json.dumps writes for a non-finite float


def parse_json(text: str, *, python_constants: bool = False) -> Any:
    """Strict JSON, as napkin reads a file (a Hugging Face config.json): a leading UTF-8 byte-order mark is
    skipped (RFC 8259 §8.1 lets a parser ignore it); a key given twice, NaN or Infinity, a number that is not
    finite as a float or longer than MAX_NUMBER_CHARS are ValueErrors (Python's json would take the last
    key, NaN, inf, and fail on 4,300 digits). With ``python_constants``, NaN, Infinity and -Infinity are read
    as floats: transformers writes its config.json with Python's json, which spells a non-finite float so
    (Nemotron-H's ``time_step_limit: [0.0, Infinity]``); the reader of the object then refuses one wherever it
    takes a number."""
    return json.loads(
        text.removeprefix("\ufeff"),
        object_pairs_hook=_unique_keys,
        parse_int=_json_int,
        parse_float=_json_float,
        parse_constant=_python_constant if python_constants else _json_constant,
    )


def load_file(path: Any, label: str | None = None) -> tuple[Any, yaml.Node | None, str]:
    """Read (regular file, size cap) and parse a YAML file: (data, root node, text)."""
    from napkin.io.files import read_text

    try:
        text = read_text(path)
    except NapkinError as exc:
        raise ProfileError(str(exc)) from None
    data, node = parse(text, label or str(path))
    return data, node, text


def line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int:
    """The 1-based line of the YAML node at ``loc`` (or of its closest existing parent)."""
    line = node.start_mark.line + 1 if node is not None else 1
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == str(key):
                    node, line = value_node, key_node.start_mark.line + 1
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def clean(text: str) -> str:
    """A string from a file, safe for a terminal: control characters (ESC, C1, bidi overrides) removed."""
    return _CONTROL.sub("", text)


def _key(part: object) -> str:
    text = clean(str(part))
    return text if len(text) <= _KEY_CHARS else text[: _KEY_CHARS - 1] + "…"


def validation_messages(exc: ValidationError, node: yaml.Node | None, label: str, schema_hint: str) -> list[str]:
    """``h100.yaml:7: peak_flops.bf16: must be positive``, one per pydantic error; never a value."""
    messages = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = ".".join(_key(part) for part in loc) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown field (check the spelling; {schema_hint})"
        messages.append(f"{label}:{line_of(node, loc)}: {where}: {message}")
    return messages


def validated(model: type[M], text: str, label: str, kind: str) -> M:
    """One napkin data file (a ``kind``: hardware, cluster …) validated as ``model``; every problem names the
    file, the line and the field, never a value."""
    from pydantic import ValidationError

    data, node = parse(text, label)
    if not isinstance(data, dict):
        raise ProfileError(f"{label}:1: a {kind} profile must be a YAML mapping of fields")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = validation_messages(exc, node, label, f"napkin {kind} schema lists the fields")
        raise ProfileError("; ".join(problems), problems) from None
