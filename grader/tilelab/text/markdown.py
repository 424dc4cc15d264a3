"""Untrusted text made safe for Markdown, and long output cut to what a page can show.

md_text escapes for a paragraph or a table cell, md_code makes an inline
code span, md_fence a fenced block that no line of the text can close.
The Jinja templates use them as the filters md, code, code_cell and fence.
"""

from __future__ import annotations

import re

# A failed stage's details (compiler or sanitizer output) are cut to this many
# lines: the first errors are the ones to fix, and a page of template
# instantiation noise hides them.
DETAIL_LINE_CAP = 40
# One line of output can be enormous (a macro expansion, a minified dump).
DETAIL_LINE_WIDTH_CAP = 400

# Characters that start Markdown syntax inline. '|' is among them so that any
# text is also safe inside a table cell ('\|' renders as '|' everywhere).
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|~])")
# '_' only opens emphasis at a word's edge; 'sharedMemPerBlock_x' stays readable.
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_MD_ENTITY = re.compile(r"&(?=#?\w+;)")


def cap_lines(text: str, max_lines: int = DETAIL_LINE_CAP, max_width: int = DETAIL_LINE_WIDTH_CAP) -> tuple:
    """The first `max_lines` lines of `text` (each cut to `max_width`
    characters) and how many lines were left out."""
    lines = text.rstrip().splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    kept = []
    for line in lines[:max_lines]:
        line = line.rstrip()
        if len(line) > max_width:
            line = f"{line[:max_width]} … [{len(line) - max_width} characters cut]"
        kept.append(line)
    return kept, max(0, len(lines) - max_lines)


def md_text(value) -> str:
    """Plain text made safe for a Markdown paragraph or table cell."""
    text = " ".join(str(value).split())  # a newline would end a table row
    text = _MD_ENTITY.sub("&amp;", text)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return _MD_UNDERSCORE.sub(r"\\_", text)


def md_code(value, cell: bool = False) -> str:
    """Text as an inline code span, fenced with more backticks than it holds."""
    text = " ".join(str(value).split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    span = f"{fence}{text}{fence}"
    # GFM splits table cells on '|' even inside code spans; '\|' is its escape.
    return span.replace("|", "\\|") if cell else span


def md_fence(lines, info: str = "text") -> str:
    """Lines (a list, or one string) as a fenced code block whose fence no
    line can close."""
    if isinstance(lines, str):
        lines = lines.split("\n")
    longest = max((len(run) for line in lines for run in re.findall(r"`{3,}", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence + info, *lines, fence])
