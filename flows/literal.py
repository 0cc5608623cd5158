"""Provider text and user input on a terminal: shown as the characters they are, never obeyed (no markup,
emoji, ANSI escapes or bidirectional controls; long values bounded). JSON and CSV keep the full value."""

from __future__ import annotations

import logging
import re
import unicodedata
from typing import Any

from rich.console import ConsoleRenderable
from rich.logging import RichHandler
from rich.text import Text

# A table cell longer than this is cut (with an ellipsis); the full value stays in JSON and CSV.
CELL_LIMIT = 200
# A message (an error, a note) longer than this is cut on the terminal; scrape_runs keeps it whole.
MESSAGE_LIMIT = 1000
ELLIPSIS = "\u2026"

# ECMA-48: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), and the two-character escapes.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -~]?)|\x9b[0-?]*[ -/]*[@-~]?")
# Unicode's explicit bidirectional formatting characters (UAX #9): they reorder the text around them.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def plain(value: Any, limit: int | None = None) -> str:
    """`value` as text a terminal shows as it is, cut to `limit` characters (an ellipsis last)."""
    text = "" if value is None else str(value)
    if not text.isprintable() or "\x1b" in text:
        kept = (ch for ch in _ESCAPES.sub("", text) if ch not in _BIDI)
        # C0 and C1 controls, \r \n \t included, become spaces: one line stays one line
        text = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in kept)
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + ELLIPSIS
    return text


def escaped(text: str) -> str:
    """`text` whole, its control and bidirectional characters written as escapes (ESC as \\x1b, U+202E as
    \\u202e): every character still there, none obeyed by a terminal."""
    if text.isprintable() and not _BIDI.intersection(text):
        return text
    return "".join(ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) == "Cc" or ch in _BIDI
                   else ch for ch in text)


def literal(value: Any, limit: int | None = None, style: str = "") -> Text:
    """`value` as a rich Text: printed literally (no markup, no emoji codes), cleaned by `plain`."""
    return Text(plain(value, limit), style=style)


def cell(value: Any, style: str = "") -> Text:
    """A table cell: `literal`, bounded by CELL_LIMIT; None shows empty."""
    return literal(value, CELL_LIMIT, style)


def labelled(label: str, style: str, message: Any, limit: int | None = MESSAGE_LIMIT) -> Text:
    """`label` in `style` (our own words), then `message` literally: "error: <what failed>"."""
    return Text.assemble((label, style), " " if label else "", literal(message, limit))


class LiteralRichHandler(RichHandler):
    """The command line's log handler: each line of a message (it may quote a provider's answer) passes `plain`."""

    def render_message(self, record: logging.LogRecord, message: str) -> ConsoleRenderable:
        return super().render_message(record, "\n".join(plain(line) for line in message.split("\n")))
