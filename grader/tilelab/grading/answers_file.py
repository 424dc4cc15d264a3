"""Reading an answers file (a student's answers.yaml, or the key) safely.

The student's file is untrusted: missing, huge, binary, not YAML, not a
mapping, or built to exhaust the parser, it raises a FileProblem with a status
(FILE_STATUSES) and a message in the student's terms; nothing else escapes.
At most MAX_BYTES is read, and YAML is composed into nodes, never constructed
(_compose): every scalar keeps the text the student typed, duplicate keys are
all seen, and aliases are refused, so "billion laughs" files fail fast.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

import yaml
from yaml.composer import Composer
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

ANSWERS_FILE = "answers.yaml"
MAX_BYTES = 64 * 1024

FILE_STATUSES = (
    "read",  # parsed; the questions say the rest
    "empty",  # no YAML document in it (blank, or comments only)
    "missing",  # not handed in
    "too_large",  # over MAX_BYTES, not parsed
    "not_text",  # binary, or not UTF-8
    "invalid_yaml",  # YAML could not parse it
    "not_a_mapping",  # a list or a single value at the top
    "rejected",  # a link, a device, aliases, nesting too deep
)


def cut(text: str, limit: int) -> str:
    """`text` cut to `limit` characters for display, saying how many more there were."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … [{len(text) - limit} more characters cut]"


class FileProblem(Exception):
    """Why a file was not read: `status` (FILE_STATUSES), `message` for
    the student, `short` the same in a few words."""

    def __init__(self, status: str, message: str, short: str):
        super().__init__(message)
        self.status, self.message, self.short = status, message, short


class _AliasFound(Exception):
    def __init__(self, anchor: str, line: int):
        super().__init__(anchor)
        self.anchor, self.line = anchor, line


class _Loader(Reader, Scanner, Parser, Composer, BaseResolver):
    """Composes YAML into nodes, every scalar tagged as a plain string, and
    refuses aliases. Nothing is constructed from the nodes."""

    def __init__(self, stream):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        BaseResolver.__init__(self)

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _AliasFound(event.anchor, event.start_mark.line + 1)
        return super().compose_node(parent, index)


def _read_bytes(path: Path, limit: int, name: str) -> bytes:
    """The file's bytes, refusing links, devices and pipes (which could
    block), and anything over `limit` bytes."""
    try:
        if path.is_symlink():
            raise FileProblem("rejected", f"{name} is a symbolic link: hand in the file itself.",
                               f"{name} is a symbolic link")
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileProblem("missing", f"{name} was not handed in: every question counts as unanswered.",
                           f"{name} was not handed in") from None
    except OSError as e:
        raise FileProblem("rejected", f"{name} could not be opened ({e.strerror}).",
                           f"{name} could not be opened") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileProblem("rejected", f"{name} is not a regular file.", f"{name} is not a regular file")
        if info.st_size > limit:
            raise FileProblem("too_large", _too_large(name, info.st_size, limit),
                               f"{name} is over {limit // 1024} KB and was not read")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as e:
        raise FileProblem("rejected", f"{name} could not be read ({e.strerror}).",
                           f"{name} could not be read") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while being read
        raise FileProblem("too_large", _too_large(name, len(data), limit),
                           f"{name} is over {limit // 1024} KB and was not read")
    return data


def _too_large(name: str, size: int, limit: int) -> str:
    return (f"{name} is {size / 1024:,.0f} KB, over the {limit // 1024} KB limit: it was not read, and every "
            f"question counts as unanswered. Answers are a few lines each.")


def _decode(data: bytes, name: str) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise FileProblem("not_text", f"{name} is saved as UTF-16: save it as UTF-8 (plain text).",
                           f"{name} is not UTF-8 text")
    if b"\0" in data:
        raise FileProblem("not_text", f"{name} is not a text file (it holds binary data).",
                           f"{name} is not a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise FileProblem("not_text", f"{name} is not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}): "
                                       "save it as UTF-8.", f"{name} is not UTF-8 text") from None


_YAML_HINTS = (
    ("mapping values are not allowed", "an answer that contains ': ' must be quoted, e.g. why: \"because: ...\""),
    ("could not find expected ':'", "each answer is one line `question-id: answer`; quote text that holds "
                                    "special characters, or use `|` for several lines"),
    ("found character '\\t'", "YAML does not allow tabs here: indent with spaces"),
    ("special characters are not allowed", "the file holds a control character: remove it"),
    ("expected a single document", "the file holds more than one YAML document (a second `---`)"),
)


def _yaml_problem(e: yaml.YAMLError, name: str) -> FileProblem:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "somewhere"
    hint = next((h for needle, h in _YAML_HINTS if needle in str(e)), "")
    message = f"{name} is not valid YAML ({where}: {problem}); nothing in it was graded."
    if hint:
        message += f" Hint: {hint}."
    short = f"{name} is not valid YAML (line {mark.line + 1})" if mark is not None else f"{name} is not valid YAML"
    return FileProblem("invalid_yaml", message, short)


def _compose(text: str, name: str):
    """The document's root node, or None for a file without one. No Python
    object is made from it: `no` stays "no", `1e3` and `0516` read as the
    numbers they look like, `1:30` is not sexagesimal 90."""
    loader = None
    try:
        loader = _Loader(text)  # checks every character first
        return loader.get_single_node()
    except yaml.reader.ReaderError as e:
        line = text[: e.position].count("\n") + 1
        raise FileProblem(
            "invalid_yaml", f"{name} holds a character YAML does not allow (#x{e.character:04x} on line {line}): "
                            "remove it; nothing in the file was graded.", f"{name} is not valid YAML (line {line})"
        ) from None
    except _AliasFound as e:
        raise FileProblem(
            "rejected", f"{name} uses a YAML alias (*{e.anchor}, line {e.line}), which the grader does not "
                        "accept: write every answer out in full.", f"{name} uses YAML aliases") from None
    except yaml.YAMLError as e:
        raise _yaml_problem(e, name) from None
    except RecursionError:
        raise FileProblem("rejected", f"{name} is nested too deeply to read: answers are single values.",
                           f"{name} is nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def _entries(root, name: str) -> list:
    """(key text or None, key line, value node) of the top-level mapping."""
    if not isinstance(root, MappingNode):
        what = "a list" if isinstance(root, SequenceNode) else f"the single value {cut(root.value, 60)!r}"
        raise FileProblem(
            "not_a_mapping", f"{name} must map question ids to answers, one per line (`tile32-reduction: 32`), "
                             f"but it holds {what}; nothing in it was graded.", f"{name} is not a mapping of answers")
    out = []
    for key_node, value_node in root.value:
        key = key_node.value if isinstance(key_node, ScalarNode) else None
        out.append((key, key_node.start_mark.line + 1, value_node))
    return out


def read_answers_file(path: Path, name: str = ANSWERS_FILE, limit: int = MAX_BYTES, notes: Optional[list] = None) -> list:
    """The entries of an answers file; raises FileProblem, or returns [] for
    an empty one. YAML refuses a tab where it wants a space ("id:<tab>32");
    such a file is read again with its tabs as spaces, noted in `notes`."""
    text = _decode(_read_bytes(path, limit, name), name)
    try:
        root = _compose(text, name)
    except FileProblem as p:
        if p.status != "invalid_yaml" or "'\\t'" not in p.message:
            raise
        try:
            root = _compose(text.replace("\t", " "), name)
        except FileProblem:
            raise p from None
        if notes is not None:
            notes.append(f"{name} holds tabs, which YAML does not allow between an id and its answer: "
                         "they were read as spaces.")
    return [] if root is None else _entries(root, name)
