"""Rendering for people: rich tables, derivations, bars. The only module that imports rich.

Results are printed to stdout; nothing here computes anything. Each function takes an engine result
and turns its base-unit numbers into labelled text (units.py does the formatting).
"""

from __future__ import annotations

import io
import math
import os
import re
import shutil
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO, cast

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.containers import Lines
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from napkin.io.terminal import env_columns
from napkin.results.explain import Step


class _NoTrailingSpaces(io.TextIOBase):
    """A text stream that drops the spaces rich pads each line with (output to a pipe or a file)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.pending = ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        for line in lines:
            self.stream.write(line.rstrip(" ") + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]  # rich draws ASCII boxes where this is ASCII
        return str(getattr(self.stream, "encoding", None) or "utf-8")

    def fileno(self) -> int:
        return self.stream.fileno()


class _SafeConsole(Console):
    """A console that treats every string as data: no markup, no emoji codes, no control characters.

    Profile names, titles and file names come from files a user (or anyone) wrote; ``[/]`` must print
    as itself, not raise a MarkupError, and an escape sequence must not reach the terminal.
    """

    def render_str(self, text: str, **kwargs: Any) -> Text:
        if isinstance(text, Glued):  # a title or caption: wrapped by rich, never at a space glue() holds
            rendered = super().render_str(glue(sanitize(text)), **kwargs)
            held = _HeldText(
                style=rendered.style,
                justify=rendered.justify,
                overflow=rendered.overflow,
                no_wrap=rendered.no_wrap,
                end=rendered.end,
            )
            return held.append_text(rendered)
        return super().render_str(sanitize(text), **kwargs)

    def on_broken_pipe(self) -> None:
        """The reader went away (``| head``): stop quietly with the shell's SIGPIPE status, 141."""
        self.quiet = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        raise SystemExit(141)


def sanitize(text: str) -> str:
    """``text`` without terminal control characters (ESC, C1, bidi overrides); markup is never parsed."""
    from napkin.io.yamlio import clean

    return clean(text)


def console(stderr: bool = False) -> Console:
    """A console honouring COLUMNS and NO_COLOR; 100 columns and no trailing spaces to a pipe or file.

    Where the stream cannot encode Unicode (``PYTHONIOENCODING=ascii``, a C locale), rich draws ASCII
    boxes itself and the CLI's stream error handler (``napkin.cli``) spells the remaining symbols in ASCII.
    """
    width = env_columns()
    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    if width is None and not tty:
        width = 100
    environ = dict(os.environ)  # rich reads COLUMNS and LINES itself and fails on '²'
    for name in ("COLUMNS", "LINES"):
        value = environ.get(name, "")
        if not (value.isascii() and value.isdigit() and len(value) <= 4):
            environ.pop(name, None)
    return _SafeConsole(  # to a pipe or a file: without the spaces rich pads each line with
        file=stream if tty else cast(TextIO, _NoTrailingSpaces(stream)),
        width=width,
        highlight=False,
        soft_wrap=False,
        markup=False,
        emoji=False,
        _environ=environ,
    )


#: Stands for a space no line may break at while text is wrapped; turned back into a space once it is.
_GLUE = "\ue000"
#: The spaces that hold two words together: a number and its unit or aside (``740 TFLOP/s``, ``85.5 GB``,
#: ``8 (moments)``), a short label and its number (``TP 8``, ``b 2``, ``(v 2)``), and an operator and the term after
#: it (``8 × 400``, ``− 1``, ``+ 4N``, ``≤ 2``, ``= S/t``, ``/ peak``): a line breaks before an operator, never after.
_GLUED = re.compile(r"(?<=\d) (?=[^\W\d_]|[%×(])|(?<=[×−+=≤≥≈±÷/]) (?=\S)|(?<![\w.])([^\W\d_]{1,3}) (?=\d)")


#: A short parenthesis is one word: ``(optimizer states)``, ``(v 2)``, never ``(optimizer`` / ``states)``.
_SHORT_ASIDE = re.compile(r"\([^()\n]{1,20}\)")


class Glued(str):
    """A table's title or caption: rich wraps it where the table's width ends, but (``_SafeConsole``) never at a
    space ``glue`` holds, so a number stays with its unit or sign ("− 1" never leaves its "1" on the next line).
    Only for a table's title or caption: a string printed on its own is joined with others into a plain Text,
    which would print the glue; text under a table is a ``Wrapped``."""


class _HeldText(Text):
    """Text whose ``_GLUE`` characters hold their words together while rich wraps it and print as spaces after."""

    def wrap(self, console: Console, width: int, **kwargs: Any) -> Lines:
        # a held word wider than the table is let go (its words wrap, never folded), the others kept
        self.plain = re.sub(r"\S+", lambda m: unglue(m[0]) if cell_len(m[0]) > width else m[0], self.plain)
        lines = super().wrap(console, width, **kwargs)
        for line in lines:
            line.plain = unglue(line.plain)  # the same length: the styles' spans still fit
        return lines


def glue(text: str) -> str:
    """``text`` with every space that must not become a line break (``_GLUED``, and those inside a short
    parenthesis) replaced by ``_GLUE``."""
    text = _SHORT_ASIDE.sub(lambda m: m.group(0).replace(" ", _GLUE), text)
    return _GLUED.sub(lambda m: (m.group(1) or "") + _GLUE, text)


def together(text: str) -> str:
    """``text`` as one word in a ``Glued`` text or a table cell: never broken across lines (``fp16 101.8 GFLOP/s``)."""
    return text.replace(" ", _GLUE)


def unglue(text: str) -> str:
    return text.replace(_GLUE, " ")


class Wrapped:
    """A table cell that wraps between words but never inside a number with its unit or a label with its
    number: at 80 columns ``TP 2 · … · b 2`` may break before ``b 2``, never between ``b`` and ``2``. A word
    longer than the whole cell (a URL) still folds."""

    def __init__(self, text: str) -> None:
        self.text = glue(sanitize(text))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        words = self.text.split()
        longest = max((cell_len(w) for w in words), default=0)
        full = max((cell_len(line) for line in self.text.split("\n")), default=0)
        return Measurement(min(longest, options.max_width), min(full, options.max_width))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = Text(self.text).wrap(console, options.max_width, overflow="fold")
        yield Text("\n".join(unglue(line.plain.rstrip()) for line in lines))


class Links(Text):
    """URLs one to a line, never broken: printed with ``soft_wrap`` (the CLI does), a terminal wraps a long one
    itself, so it still copies and opens whole. In a table a URL wider than its cell was folded into pieces."""


def links(urls: Sequence[str]) -> Links:
    """The numbered links a sheet's ``[n]`` marks point to."""
    out = Links("links\n", style="bold")
    for n, url in enumerate(urls, 1):
        out.append(f"  [{n}] {sanitize(url)}\n", style="")
    return out


def numbered(title: str, items: Sequence[str], mark: str) -> Table:
    """A titled list, each item behind its number (``mark``: ``"{}."`` or ``"[{}]"``), wrapped at the whole width
    between words: the long texts a sheet's values refer to."""
    table = Table(
        title=Glued(title), box=None, show_header=False, title_justify="left", title_style="bold", pad_edge=False
    )
    table.add_column("n", justify="right", no_wrap=True)
    table.add_column("text")
    for n, item in enumerate(items, 1):
        table.add_row(mark.format(n), Wrapped(item))
    return table


def key_values(title: str, rows: Iterable[tuple[str, str]], caption: str | None = None) -> Table:
    table = Table(
        title=Glued(title),
        box=box.SIMPLE_HEAD,
        show_header=False,
        title_justify="left",
        caption=None if caption is None else Glued(caption),
        caption_justify="left",
    )
    rows = list(rows)
    # a name is never cut: its column is as wide as the longest (up to 48, leaving 80 columns room for values)
    longest = min(48, max((len(key) for key, _ in rows), default=0))
    table.add_column("quantity", style="bold", min_width=longest)
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(key, Wrapped(value))
    return table


def width() -> int:
    """The width output is laid out for: $COLUMNS, else the terminal's, else 100 (a pipe or a file)."""
    columns = env_columns()
    if columns is not None:
        return columns
    return shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100


def _tokens(cell: str) -> list[str]:
    return glue(cell).split() or [""]


def _least(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    """Each column's narrowest width: its longest word (a name, a number with its unit)."""
    return [
        max(len(tok) for cell in (headers[i], *(row[i] for row in rows)) for tok in _tokens(cell))
        for i in range(len(headers))
    ]


def column_groups(headers: Sequence[str], rows: Sequence[Sequence[str]], available: int) -> list[list[int]]:
    """The columns after the first (the row labels), in groups in their order, each of which fits ``available``
    beside the first at their narrowest: a comparison of more profiles than a terminal holds is shown as several
    tables, never with a name or a number folded ('a100-sxm-80' / 'gb', 'TFLOP/' / 's')."""
    least = _least(headers, rows)
    groups: list[list[int]] = []
    for i in range(1, len(headers)):
        group = groups[-1] if groups else None
        if group is not None and least[0] + sum(least[j] + 3 for j in (*group, i)) + 2 <= available:
            group.append(i)
        else:
            groups.append([i])
    size = -(-(len(headers) - 1) // max(1, len(groups)))  # as many tables, their columns shared out evenly
    even = [list(range(start, min(start + size, len(headers)))) for start in range(1, len(headers), size)]
    fits = all(least[0] + sum(least[j] + 3 for j in group) + 2 <= available for group in even)
    return even if fits and len(even) == len(groups) else groups


def fit_columns(
    headers: Sequence[str], rows: Sequence[Sequence[str]], available: int, secondary: Sequence[int] = ()
) -> tuple[list[int], list[int]]:
    """(kept column indices, their widths) so that the table fits ``available`` characters.

    A cell may wrap between words but never inside one: no column is narrower than its longest word
    (an identifier, a number with its unit). The widest columns give way first, ``secondary`` ones
    before the others; if even the longest words do not fit, ``secondary`` columns are dropped, last
    first.
    """
    n = len(headers)
    cells = [[headers[i], *(row[i] for row in rows)] for i in range(n)]
    natural = [max(len(line) for cell in col for line in cell.split("\n")) for col in cells]
    least = _least(headers, rows)
    kept = list(range(n))

    def total(cols: list[int], widths: Sequence[int]) -> int:
        return sum(widths[i] for i in cols) + 3 * (len(cols) - 1) + 2  # " │ "-like gaps and the edges

    for i in reversed(secondary):
        if total(kept, least) <= available:
            break
        kept.remove(i)
    widths = list(natural)
    while total(kept, widths) > available:
        slack = [i for i in kept if widths[i] > least[i]]
        if not slack:
            break
        preferred = [i for i in slack if i in secondary] or slack
        widest = max(preferred, key=lambda i: (widths[i], i))
        widths[widest] -= 1
    return kept, [widths[i] for i in kept]


def grid(
    title: str,
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    caption: str | None = None,
    align: str = "",
    secondary: Sequence[int] = (),
) -> Table:
    """A table with a header row; ``align`` gives l/r per column (default: first left, the rest right).

    Laid out for ``width()`` by ``fit_columns``: cells wrap between words, never inside one, and the
    ``secondary`` columns shrink first and are dropped (the caption says which) if nothing else fits.
    """
    rows = [list(row) for row in rows]
    kept, widths = fit_columns(headers, rows, width(), secondary)
    dropped = [headers[i] for i in range(len(headers)) if i not in kept]
    if dropped:
        note = f"not shown at this width: {', '.join(dropped)} (widen the terminal, or --json)"
        caption = f"{caption}\n{note}" if caption else note
    table = Table(
        title=Glued(title),
        box=box.SIMPLE_HEAD,
        title_justify="left",
        caption=None if caption is None else Glued(caption),
        caption_justify="left",
        pad_edge=False,
        padding=(0, 1),
    )
    for i, w in zip(kept, widths, strict=True):
        side = align[i] if i < len(align) else ("l" if i == 0 else "r")
        table.add_column(headers[i], justify="left" if side == "l" else "right", width=w, overflow="fold")
    for row in rows:
        table.add_row(*(Wrapped(row[i]) for i in kept))
    return table


def number(x: float | None) -> str:
    """Compact and exact where it matters: ``448``, ``65504``, ``1.175e-38``, ``0.0078125``."""
    if x is None:
        return "–"
    if not math.isfinite(x):
        return str(x)
    if x == int(x) and abs(x) < 1e7:
        return f"{int(x)}"
    if 1e-4 <= abs(x) < 1e7:
        return f"{x:.6g}"
    mantissa, _, exponent = f"{x:.4g}".partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


def _hanging(prefix: str, body: str, columns: int) -> str:
    """``prefix + body`` wrapped at word breaks, the continuation lines indented under the body."""
    import textwrap

    lines = textwrap.wrap(
        glue(body),
        width=max(40, columns),
        initial_indent=prefix,
        subsequent_indent=" " * len(prefix),
        break_long_words=False,
        break_on_hyphens=False,
    )
    return unglue("\n".join(lines or [prefix.rstrip()])) + "\n"


def explanation(steps: Sequence[Step], columns: int | None = None) -> Text:
    """The napkin derivation, as a lecture writes it: formula, numbers put in, result, then the source; long
    lines wrap under their own indent (``columns``: the terminal's width by default)."""
    cols = columns if columns is not None else width()
    text = Text("Derivation\n", style="bold")
    for n, s in enumerate(steps, 1):
        text.append(_hanging(f"{n:>2}. ", s.quantity, cols), style="bold")
        text.append(_hanging("    ", s.formula, cols))
        if s.substituted:  # numbers put in; "with" when they are themselves assignments
            text.append(_hanging(f"      {'with' if '=' in s.substituted else '='} ", s.substituted, cols))
        text.append(_hanging(f"      {'→' if '=' in s.result else '='} ", s.result, cols))
        text.append(_hanging("    source: ", s.source, cols), style="dim")
    return text


def plain(renderable: object, width: int = 100) -> str:
    """What ``renderable`` prints, as plain text (no colour, no trailing spaces)."""
    import io

    out = _SafeConsole(
        file=io.StringIO(), width=width, no_color=True, highlight=False, soft_wrap=False, markup=False, emoji=False
    )
    out.print(renderable)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def html(renderables: Sequence[object], width: int = 100) -> str:
    """The same tables as the terminal, for a notebook cell (rich's HTML export, inline styles)."""
    import io

    out = _SafeConsole(
        file=io.StringIO(), record=True, width=width, highlight=False, soft_wrap=False, markup=False, emoji=False
    )
    for renderable in renderables:
        out.print(renderable)
    return out.export_html(inline_styles=True, code_format='<pre style="font-family:monospace">{code}</pre>')


def bar(parts: Sequence[tuple[str, float]], capacity: float, width: int = 50) -> Text:
    """A one-line stacked bar of ``parts`` against ``capacity`` (characters differ per part)."""
    glyphs = "█▓▒░#=+%@"  # one per part (a memory breakdown has up to 8), then repeats
    text = Text()
    used = 0
    legend = []
    for i, (label, value) in enumerate(parts):
        cells = round(width * value / capacity) if capacity > 0 else 0
        cells = min(cells, max(0, width - used)) if used < width else 0
        text.append(glyphs[i % len(glyphs)] * cells)
        used += cells
        legend.append(f"{glyphs[i % len(glyphs)]} {label}")
    text.append("·" * max(0, width - used))
    lines: list[str] = []  # the legend, wrapped between entries (never between a glyph and its label)
    for entry in [*legend, "· free"]:
        if lines and len(lines[-1]) + 3 + len(entry) <= 72:
            lines[-1] += "   " + entry
        else:
            lines.append(entry)
    text.append("\n" + "\n".join(lines))
    return text
