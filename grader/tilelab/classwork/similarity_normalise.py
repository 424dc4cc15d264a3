"""A CUDA part file as copydetect fingerprints it, with what copying
changes taken out.

copydetect's own normalisation (copydetect.utils.filter_code) turns
pygments' tokens into text with every variable a `V`, every function an
`F`, every string an `S`, every preprocessor token a `P`, and comments and
whitespace gone. It lexes the file itself; lexing is most of the time a
class takes (pygments' C++ lexer, a few milliseconds a file), and the two
normalisations below need the tokens too, so the file is lexed once here
and the same letters are written from those tokens. On top of them:

- Tile widths: a copy keeps its shape when its tile or block width changes
  (32 to 16, in a `constexpr` or a literal in a launch), so every integer
  literal but 0 and 1 reads as one constant.
- Statement order: a copy keeps its meaning when independent statements
  swap (`tx` and `ty`, the loads of Mds and Nds), so each run of simple
  statements between braces, barriers and calls is put in one order that
  depends only on what they say and on what each needs from another.

Each character of the result knows the line of the original it came from,
so that shared fragments are marked where the student wrote them.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text

LANGUAGE = "cuda"  # pygments' CUDA lexer: C++ with CUDA's qualifiers, types, built-in variables and barriers
ONE_CONSTANT = "2"  # what every integer literal but 0 and 1 becomes
_KEPT_LITERALS = {"0", "1"}  # loop starts, steps and guards: part of a kernel's shape, not a tuning choice
# A statement holding one of these keywords is control flow or a definition: it stays where it is.
_FIXED_KEYWORDS = {"if", "else", "for", "while", "do", "switch", "case", "default", "return", "break", "continue",
                   "goto", "asm", "template", "typedef", "struct", "class", "union", "enum", "using", "namespace"}
_OPEN, _CLOSE = {"(", "["}, {")", "]"}
# A longer run of simple statements is generated or unrolled code, not lines a copier swapped: it stays as it is
# (ordering a run costs its length cubed).
MAX_RUN = 64

_lexer = get_lexer_by_name(LANGUAGE)

# What a token is, for the statements: kinds of pygments' token types.
TRIVIA, DIRECTIVE, NAME, BUILTIN, KEYWORD, OPERATOR, PUNCTUATION, INTEGER, OTHER = range(9)


@functools.lru_cache(maxsize=None)
def _kind(ttype) -> int:
    if ttype in Comment.Preproc or ttype in Comment.PreprocFile:
        return DIRECTIVE
    if ttype in Text or ttype in Comment:
        return TRIVIA
    if ttype in Name:
        return BUILTIN if ttype in Name.Builtin else NAME
    for kind, parent in ((KEYWORD, Keyword), (OPERATOR, Operator), (PUNCTUATION, Punctuation)):
        if ttype in parent:
            return kind
    if ttype in Number.Integer or ttype in Number.Hex or ttype in Number.Oct or ttype in Number.Bin:
        return INTEGER
    return OTHER


@functools.lru_cache(maxsize=None)
def _letter(ttype):
    """copydetect's letter for a token type (filter_code's rules, in its
    order), "" for what it drops, or None where the token's text is kept."""
    if ttype in (Name, Name.Variable, Name.Attribute):
        return "V"
    if ttype in Name.Function:
        return "F"
    if ttype in Name.Class:
        return "O"
    if ttype is Comment.Preproc or ttype is Comment.Hashbang:
        return "P"
    if ttype in Text or ttype in Comment:
        return ""
    if ttype in String:
        return "S"
    return None


def _filtered(ttype, value: str) -> str:
    letter = _letter(ttype)
    if letter == "S" and value in ('"', "'"):
        return '"'  # copydetect keeps a string's quotes as one mark
    if letter is not None:
        return letter
    return ONE_CONSTANT if _kind(ttype) == INTEGER and value not in _KEPT_LITERALS else value


@dataclass(frozen=True)
class Normalised:
    text: str  # copydetect's filtered form of the file, literals and independent statements normalised
    lines: np.ndarray  # for each character of text, the 1-based line of the original it came from


@dataclass
class _Statement:
    tokens: list  # (kind, pygments type, text, line)
    movable: bool = False
    written: frozenset = frozenset()  # the names a movable statement assigns
    names: frozenset = frozenset()  # every name it mentions
    key: str = ""  # its filtered text: what orders it within its run


def _statements(code: str) -> list:
    """The file cut at `;` outside parentheses, at braces and after each
    preprocessor directive; comments and whitespace go with what follows them."""
    out, current, depth, directive, line = [], [], 0, False, 1

    def close() -> None:
        nonlocal current, directive
        if current:
            out.append(_Statement(current))
        current, directive = [], False

    for _, ttype, value in _lexer.get_tokens_unprocessed(code):
        kind = _kind(ttype)
        current.append((kind, ttype, value, line))
        line += value.count("\n")
        if directive:
            # A directive ends with its line, unless the line ends in a backslash.
            if "\n" in value and not current[-2][2].rstrip(" \t").endswith("\\"):
                close()
        elif kind == DIRECTIVE and all(t[0] == TRIVIA for t in current[:-1]):
            directive = True
        elif kind == PUNCTUATION:
            if value in _OPEN:
                depth += 1
            elif value in _CLOSE:
                depth = max(0, depth - 1)
            elif value in ("{", "}") or (value == ";" and depth == 0):
                depth = 0
                close()
    close()
    for statement in out:
        _classify(statement)
    return out


def _leading_names(code: list) -> list:
    """The names of a statement's leading run of types, qualifiers, `*`, `&`
    and names: `const dim3 block`, `float* Nds`, `Mds`, `__syncthreads`."""
    names = []
    for kind, _, value, _ in code:
        if kind == NAME:
            names.append(value)
        elif not (kind == KEYWORD or (kind == OPERATOR and value in ("*", "&"))):
            break
    return names


def _classify(statement: _Statement) -> None:
    """Whether a statement may move within its run, and what it writes and
    mentions: a declaration (`int a = 1, b = 2;` included) or an assignment
    to one name, with no call (a barrier or a launch has effects) and no
    control flow."""
    statement.key = "".join(_filtered(ttype, value) for _, ttype, value, _ in statement.tokens)
    code = [t for t in statement.tokens if t[0] != TRIVIA]
    if not code or code[-1][2] != ";" or "<<<" in statement.key:
        return
    leading = _leading_names(code)
    written = leading[-1] if leading else next((v for k, _, v, _ in code if k == NAME), "")
    # `dim3 block(...)` declares block; `f(...)` alone, or anywhere else, is a call.
    declaration = len(leading) > 1 or code[0][0] == KEYWORD
    writes, depth = {written}, 0
    for i, (kind, _, value, _) in enumerate(code):
        follows = code[i + 1] if i + 1 < len(code) else (None, None, "", 0)
        if kind == DIRECTIVE or (kind == KEYWORD and value in _FIXED_KEYWORDS):
            return
        if kind == PUNCTUATION and value in _OPEN:
            depth += 1
        elif kind == PUNCTUATION and value in _CLOSE:
            depth -= 1
        elif value == "," and depth == 0:
            if not (declaration and follows[0] == NAME):
                return  # the comma operator: more than one assignment
            writes.add(follows[2])
        if kind in (NAME, BUILTIN) and follows[2] == "(" and not (declaration and value in writes):
            return
    if written:
        statement.movable, statement.written = True, frozenset(writes)
        statement.names = frozenset(v for k, _, v, _ in code if k == NAME)


def _depends(a: _Statement, b: _Statement) -> bool:
    return bool(a.written & b.names or b.written & a.names)


def _canonical(run: list) -> list:
    """The statements of a run in one order: of those whose earlier
    dependencies are placed, the smallest first, by key and then by what
    depends on them (so that `tx; ty; col(tx); row(ty)` and `ty; tx; row(ty);
    col(tx)` come out alike when tx and ty read the same)."""
    if len(run) > MAX_RUN:
        return run
    below = [[j for j in range(i + 1, len(run)) if _depends(run[i], run[j])] for i in range(len(run))]
    digests = [""] * len(run)
    for i in reversed(range(len(run))):
        # A digest of the statement and of all that depends on it: the same in every order the run may take.
        digests[i] = hashlib.blake2b("\0".join([run[i].key, *sorted(digests[j] for j in below[i])]).encode(),
                                     digest_size=8).hexdigest()
    placed, order = set(), []
    while len(order) < len(run):
        ready = [i for i in range(len(run)) if i not in placed
                 and all(j in placed for j in range(i) if i in below[j])]
        best = min(ready, key=lambda i: (run[i].key, digests[i], i))
        placed.add(best)
        order.append(run[best])
    return order


def _plain(code: str) -> str:
    """The code with one kind of newline (and no byte-order mark), as its line numbers are counted."""
    return code.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def source_lines(code: str) -> list:
    """The file's lines, numbered as Normalised.lines numbers them."""
    return _plain(code).split("\n")


def normalise(code: str) -> Normalised:
    """The part file as copydetect should fingerprint it, and where each of its characters came from."""
    code = _plain(code)
    ordered, run = [], []
    for statement in _statements(code):
        if statement.movable:
            run.append(statement)
            continue
        ordered += _canonical(run) + [statement]
        run = []
    ordered += _canonical(run)
    pieces, lines = [], []
    for statement in ordered:
        for _, ttype, value, line in statement.tokens:
            piece = _filtered(ttype, value)
            pieces.append(piece)
            lines.extend([line] * len(piece))
    return Normalised("".join(pieces), np.array(lines, dtype=np.int32))
