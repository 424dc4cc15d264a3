"""Deciding whether an uploaded hand-in is acceptable, and unpacking it in memory.

- An upload is a zip, tar, tar.gz or tar.bz2, told by its bytes and never by
  its name, or one bare part file or answers.yaml sent under that name. All of
  it is untrusted: read_upload returns a HandIn or raises UploadRefused, whose
  status (413 past an UploadLimits limit, 400 otherwise), code (REFUSAL_CODES)
  and one-sentence message go back to the client as they are.
- Sizes an archive declares are never trusted. Members are unpacked in chunks
  and counted as they come, so a bomb stops within a few MB; a zip member is
  inflated from its raw data until its deflate stream ends, whatever its
  headers say, and a tar's decompressed stream is capped as a whole.
- Only the assignment's part files and answers.yaml are taken, at the top of
  the archive or in one folder that wraps them all. Links, devices, FIFOs,
  unsafe paths, unknown names and duplicates are refused. macOS's __MACOSX/,
  ._* and .DS_Store entries are ignored, not refused: Finder and bsdtar add
  them to students' archives unasked, and they are never unpacked.
- A HandIn's digest depends on its files alone (see _digest), whatever archive
  carried them; to_zip gives its one canonical byte form, stored uncompressed
  with fixed timestamps so that no zlib version can change it.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import os
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ...errors import TilelabError
from ...grading.answers_file import ANSWERS_FILE, cut
from ...grading.handin_files import ignored
from ...spec.assignment import Assignment

MIB = 1024 * 1024

# What each refusal means; the first three are limits (HTTP 413), the rest 400.
REFUSAL_CODES = {
    "too_large": "the upload, a file in it, or all its files together are over a size limit",
    "too_many_files": "more files, or entries of any kind, than allowed",
    "compression_ratio": "a file unpacks to far more than its compressed size, as a zip bomb does",
    "not_an_archive": "neither a zip, tar, tar.gz or tar.bz2 nor a bare file of the hand-in",
    "damaged": "an archive that cannot be read to its end (truncated, bad checksum)",
    "unsupported": "an encrypted zip member, or one compressed other than by deflate",
    "unsafe_path": "an absolute path, '..', a backslash, NUL, a drive letter, or a name not in UTF-8",
    "link": "a symbolic or hard link",
    "special_file": "a device file, FIFO, socket or other entry that is not a regular file",
    "nested": "a file below the one folder that may wrap the hand-in",
    "unknown_file": "a file that is not a part file or answers.yaml",
    "duplicate": "the same file twice",
    "empty": "no file of the hand-in at all",
}
_OVER_A_LIMIT = ("too_large", "too_many_files", "compression_ratio")

_CHUNK = 64 * 1024  # unpacked bytes taken at a time
_FEED = 4 * 1024  # compressed bytes given to zlib at a time, so a bomb is seen early
# A tar stream holds headers and padding besides its files: 1 MiB is room for
# far more than max_entries of them, and still caps what a .tar.gz can inflate to.
_TAR_OVERHEAD = MIB
_ZIP_LOCAL = b"PK\x03\x04"
_ZIP_CENTRAL = b"PK\x01\x02"
_ZIP_EMPTY = b"PK\x05\x06"  # an end-of-directory record first: a zip with no entries
_DRIVE = re.compile(r"[A-Za-z]:")
_DIGEST_TAG = b"tilelab hand-in v1\n"
_LABELS = {"zip": "zip", "tar": "tar", "gz": "tar.gz", "bz2": "tar.bz2"}


class UploadRefused(TilelabError):
    """Why an upload was refused: `status` the HTTP status, `code` one of
    REFUSAL_CODES, and a message that says what was wrong and what to send."""

    def __init__(self, code: str, message: str):
        if code not in REFUSAL_CODES:
            raise ValueError(f"unknown refusal code {code!r}")
        super().__init__(message)
        self.code, self.message = code, message
        self.status = 413 if code in _OVER_A_LIMIT else 400


@dataclass(frozen=True)
class UploadLimits:
    max_upload_bytes: int = 2 * MIB  # the bytes received
    max_files: int = 16  # files taken: not folders, not macOS metadata
    max_file_bytes: int = MIB  # each file unpacked
    max_total_bytes: int = 4 * MIB  # all files unpacked
    max_ratio: float = 100  # unpacked over compressed, per member
    # Every entry, folders and ignored ones included, so that a flood of empty
    # entries is refused before it is parsed.
    max_entries: int = 64


@dataclass(frozen=True)
class HandIn:
    """The files of one hand-in, by plain name, sorted; `digest` is theirs."""

    files: dict[str, bytes]
    digest: str = field(init=False)

    def __post_init__(self):
        for name, content in self.files.items():
            # write_to puts each name in a folder: it must be a plain file name.
            if not isinstance(content, bytes) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
                raise ValueError(f"a hand-in holds plain file names and bytes, not {name!r}")
        files = dict(sorted(self.files.items()))
        object.__setattr__(self, "files", files)
        object.__setattr__(self, "digest", _digest(files))

    def write_to(self, folder: Path) -> None:
        """Writes the files, mode 0644, into `folder`, which exists and is empty."""
        folder = Path(folder)
        if not folder.is_dir() or any(folder.iterdir()):
            raise ValueError(f"{folder} is not an existing empty folder")
        for name, content in self.files.items():
            # O_EXCL | O_NOFOLLOW: never write through a link or over a file that appeared meanwhile.
            fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as out:
                os.fchmod(fd, 0o644)  # whatever the umask
                out.write(content)

    def to_zip(self) -> bytes:
        """The files as a zip whose bytes depend on the files alone."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
            for name, content in self.files.items():
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.create_system = 3  # unix, on any machine, so that the mode below is read as one
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                archive.writestr(info, content)
        return buffer.getvalue()


def _digest(files: dict) -> str:
    """sha256 over a tag, then for each file sorted by name: the name's UTF-8
    length (8 bytes, big-endian), the name, the content's length, the content."""
    digest = hashlib.sha256(_DIGEST_TAG)
    for name, content in sorted(files.items()):
        raw = name.encode("utf-8")
        for piece in (struct.pack(">Q", len(raw)), raw, struct.pack(">Q", len(content)), content):
            digest.update(piece)
    return digest.hexdigest()


def read_upload(data: bytes, filename: str, assignment: Assignment, limits: UploadLimits = UploadLimits()) -> HandIn:
    """The hand-in in `data`, uploaded as `filename`, or UploadRefused."""
    allowed = tuple(p.file for p in assignment.parts) + (ANSWERS_FILE,)
    if len(data) > limits.max_upload_bytes:
        raise UploadRefused("too_large", f"The upload is {len(data):,} bytes, over the limit of "
                                         f"{_amount(limits.max_upload_bytes)}; send only {_listing(allowed)}.")
    kind = _archive_kind(data)
    meter = _Meter(limits)
    if kind is None:
        if filename in allowed:
            return HandIn({filename: meter.take(_shown(filename), [(data, len(data))])})
        raise UploadRefused("not_an_archive", f"{_shown(filename)} is not a zip, tar, tar.gz or tar.bz2 archive; "
                                              f"send one holding {_listing(allowed)}, or one of those files "
                                              "under its own name.")
    try:
        entries = _zip_entries(data, limits) if kind == "zip" else _tar_entries(data, kind, limits)
        found = _unpack(entries, meter, limits)
    except UnicodeDecodeError:  # zipfile decoding a name flagged as UTF-8
        raise UploadRefused("unsafe_path", "A file name in the zip is not valid UTF-8; rename the files to "
                                           f"{_listing(allowed)} and zip them again.") from None
    except (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError,
            EOFError, zlib.error, struct.error, ValueError) as e:
        raise UploadRefused("damaged", f"The {_LABELS[kind]} archive could not be read to its end "
                                       f"({cut(str(e) or type(e).__name__, 100)}); make it again and send "
                                       "it again.") from None
    return HandIn(_arrange(found, allowed))


def _archive_kind(data: bytes):
    """The archive's kind by its bytes, never its name: "zip", "tar", "gz", "bz2", or None."""
    if data[:4] in (_ZIP_LOCAL, _ZIP_EMPTY):
        return "zip"
    if data[:2] == b"\x1f\x8b":
        return "gz"
    if data[:3] == b"BZh":
        return "bz2"
    # is_tarfile would also open an .xz, which is not taken.
    if data[:6] != b"\xfd7zXZ\x00" and tarfile.is_tarfile(io.BytesIO(data)):
        return "tar"
    return None


@dataclass(frozen=True)
class _Entry:
    raw: bytes  # the name as stored in the archive
    kind: str  # "file", "dir", "link" or "special_file"
    what: str  # the kind in words, for a refusal
    declared: int  # the size the archive gives: refused early when too large, never relied upon
    read: Callable[[], Iterable]  # (unpacked piece, compressed bytes behind the member so far) pairs


class _Meter:
    """Counts what one upload unpacks and refuses it as soon as a limit is passed."""

    def __init__(self, limits: UploadLimits):
        self.limits, self.total = limits, 0

    def take(self, shown: str, pieces: Iterable) -> bytes:
        limits, out = self.limits, bytearray()
        for piece, compressed in pieces:
            out += piece
            self.total += len(piece)
            if len(out) > limits.max_file_bytes:
                self.file_too_large(shown)
            if self.total > limits.max_total_bytes:
                raise UploadRefused("too_large", f"The files unpack to more than {_amount(limits.max_total_bytes)}"
                                                 f" together (at {shown}); send only the part files and "
                                                 "answers.yaml.")
            if len(out) > limits.max_ratio * max(compressed, 1):
                raise UploadRefused("compression_ratio", f"{shown} unpacks to more than {limits.max_ratio:g} "
                                                         "times its compressed size; send the file as written "
                                                         "for the assignment, zipped or tarred normally.")
        return bytes(out)

    def file_too_large(self, shown: str):
        raise UploadRefused("too_large", f"{shown} unpacks to more than {_amount(self.limits.max_file_bytes)}, the "
                                         "most one file may hold; send the file as written for the assignment.")


def _unpack(entries: Iterator[_Entry], meter: _Meter, limits: UploadLimits) -> list:
    """(path parts, content) of every file to be taken, unpacked under the limits."""
    found, seen, files = [], 0, 0
    for entry in entries:
        seen += 1
        if seen > limits.max_entries:
            raise UploadRefused("too_many_files", f"The archive holds more than {limits.max_entries} entries, "
                                                  "folders included; send only the part files and answers.yaml.")
        parts, shown = _safe_parts(entry.raw)
        if entry.kind in ("link", "special_file"):
            raise UploadRefused(entry.kind, f"{shown} is {entry.what}, not a regular file; send the file "
                                            "itself.")
        if entry.kind == "dir" or (parts and ("__MACOSX" in parts or ignored(parts[-1]))):
            continue
        if not parts:
            raise UploadRefused("unsafe_path", "The archive holds a file with no name; send files by their "
                                               "plain names.")
        files += 1
        if files > limits.max_files:
            raise UploadRefused("too_many_files", f"The archive holds more than {limits.max_files} files; "
                                                  "send only the part files and answers.yaml.")
        if entry.declared > limits.max_file_bytes:  # honest and too large: no need to unpack it
            meter.file_too_large(shown)
        found.append((parts, meter.take(shown, entry.read())))
    return found


def _safe_parts(raw: bytes) -> tuple:
    """The path's parts, "." and empty ones dropped, and the name for messages; or unsafe_path."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UploadRefused("unsafe_path", f"The name {cut(repr(raw), 100)} is not valid UTF-8; rename the file "
                                           "to its name in the assignment.") from None
    shown = _shown(text)
    parts = tuple(p for p in text.split("/") if p not in ("", "."))
    problem = ("contains a NUL byte" if "\0" in text else "contains a backslash" if "\\" in text
               else "is absolute" if text.startswith("/") else "starts with a drive letter" if _DRIVE.match(text)
               else "contains '..'" if ".." in parts else None)
    if problem:
        raise UploadRefused("unsafe_path", f"The path {shown} {problem}; send the files by their plain names, "
                                           "at the top of the archive or in one folder.")
    return parts, shown


def _arrange(found: list, allowed: tuple) -> dict:
    """The files by plain name, the one wrapping folder stripped; the names judged."""
    files = {}
    for parts, content in found:
        shown = _shown("/".join(parts))
        if parts[-1] not in allowed:
            raise UploadRefused("unknown_file", f"{shown} is not a file of this hand-in; send only "
                                                f"{_listing(allowed)}.")
        if len(parts) > 2:
            raise UploadRefused("nested", f"{shown} is in a folder within a folder; put the files at the top "
                                          "of the archive, or in one folder that holds them all.")
        if parts[-1] in files:
            raise UploadRefused("duplicate", f"The archive holds {parts[-1]} twice (the second at {shown}); "
                                             "send each file once.")
        files[parts[-1]] = content
    if not files:
        raise UploadRefused("empty", f"The archive holds none of the files of this hand-in; send "
                                     f"{_listing(allowed)}.")
    wrapped = [parts for parts, _ in found if len(parts) == 2]
    top = [parts for parts, _ in found if len(parts) == 1]
    if len({parts[0] for parts in wrapped}) > 1 or (wrapped and top):
        first, other = wrapped[0], next((p for p in wrapped + top if p[:-1] != wrapped[0][:-1]))
        raise UploadRefused("nested", f"{_shown('/'.join(first))} and {_shown('/'.join(other))} are not in the "
                                      "same folder; put all the files at the top of the archive, or all in one "
                                      "folder.")
    return files


def _zip_entries(data: bytes, limits: UploadLimits) -> Iterator[_Entry]:
    # Every central directory entry zipfile parses begins with this signature,
    # so the count bounds them before zipfile builds them all.
    if data.count(_ZIP_CENTRAL) > limits.max_entries:
        raise UploadRefused("too_many_files", f"The zip holds more than {limits.max_entries} entries; send only "
                                              "the part files and answers.yaml.")
    for info in zipfile.ZipFile(io.BytesIO(data)).infolist():
        # orig_filename, not filename: zipfile cuts a name at its first NUL.
        raw = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")
        kind, what = _zip_kind(info, raw)
        yield _Entry(raw, kind, what, info.file_size, lambda info=info, raw=raw: _zip_member(data, info, raw))


def _zip_kind(info: zipfile.ZipInfo, raw: bytes) -> tuple:
    """The entry's kind from the unix mode in external_attr (none on Windows) and its trailing slash."""
    kind = stat.S_IFMT(info.external_attr >> 16)
    named = {stat.S_IFLNK: ("link", "a symbolic link"), stat.S_IFCHR: ("special_file", "a device file"),
             stat.S_IFBLK: ("special_file", "a device file"), stat.S_IFIFO: ("special_file", "a FIFO"),
             stat.S_IFSOCK: ("special_file", "a socket")}
    if kind in named:
        return named[kind]
    if kind == stat.S_IFDIR or raw.endswith(b"/"):
        return "dir", "a folder"
    if kind in (0, stat.S_IFREG):
        return "file", "a file"
    return "special_file", "an entry of an unknown type"


def _zip_member(data: bytes, info: zipfile.ZipInfo, raw: bytes) -> Iterator[tuple]:
    """The member's content in pieces, read from its local header on, its declared sizes checked only at the end."""
    if info.flag_bits & 0x1:
        raise UploadRefused("unsupported", f"{_shown(info.orig_filename)} is encrypted; send the zip without a "
                                           "password.")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise UploadRefused("unsupported", f"{_shown(info.orig_filename)} is compressed by method "
                                           f"{info.compress_type}; make the zip again with deflate, the usual "
                                           "method.")
    start = info.header_offset
    header = data[start:start + 30]
    if len(header) < 30 or header[:4] != _ZIP_LOCAL:
        raise zipfile.BadZipFile("a member's local header is missing")
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    # Two names for one member could make tools disagree about what it is.
    if data[start + 30:start + 30 + name_length] != raw:
        raise zipfile.BadZipFile("a member's names in its two headers differ")
    begin = start + 30 + name_length + extra_length
    crc = size = 0
    if info.compress_type == zipfile.ZIP_STORED:
        end = begin + info.compress_size
        if end > len(data):
            raise zipfile.BadZipFile("a member ends past the end of the zip")
        for at in range(begin, end, _CHUNK):
            piece = data[at:min(at + _CHUNK, end)]
            crc, size = zlib.crc32(piece, crc), size + len(piece)
            yield piece, size
    else:
        inflater, at = zlib.decompressobj(-zlib.MAX_WBITS), begin
        while not inflater.eof:
            feed = inflater.unconsumed_tail
            if not feed:
                if at >= len(data):
                    raise zipfile.BadZipFile("a member's compressed data ends early")
                feed, at = data[at:at + _FEED], at + _FEED
            piece = inflater.decompress(feed, _CHUNK)
            crc, size = zlib.crc32(piece, crc), size + len(piece)
            consumed = min(at, len(data)) - begin - len(inflater.unconsumed_tail) - len(inflater.unused_data)
            yield piece, consumed
    if size != info.file_size or crc != info.CRC:
        raise zipfile.BadZipFile(f"{info.orig_filename!r} does not match its declared size or checksum")


def _tar_entries(data: bytes, kind: str, limits: UploadLimits) -> Iterator[_Entry]:
    source = {"gz": lambda: gzip.GzipFile(fileobj=io.BytesIO(data)), "bz2": lambda: bz2.BZ2File(io.BytesIO(data)),
              "tar": lambda: io.BytesIO(data)}[kind]()
    stream = _Capped(source, limits.max_total_bytes + _TAR_OVERHEAD)
    # "r|": one pass in order, so only what the stream gives is ever read.
    with tarfile.open(fileobj=stream, mode="r|", encoding="utf-8", errors="surrogateescape") as archive:
        for member in archive:
            kind_of, what = _tar_kind(member)
            # A tar stream has no compressed size per member: the whole upload stands for it.
            yield _Entry(member.name.encode("utf-8", "surrogateescape"), kind_of, what, member.size,
                         lambda member=member: _tar_member(archive, member, len(data)))


def _tar_kind(member: tarfile.TarInfo) -> tuple:
    if member.issym():
        return "link", "a symbolic link"
    if member.islnk():
        return "link", "a hard link"
    if member.ischr() or member.isblk():
        return "special_file", "a device file"
    if member.isfifo():
        return "special_file", "a FIFO"
    if member.isdir():
        return "dir", "a folder"
    if member.type in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE) and member.sparse is None:
        return "file", "a file"
    return "special_file", "a sparse file" if member.sparse is not None else f"a tar entry of type {member.type!r}"


def _tar_member(archive: tarfile.TarFile, member: tarfile.TarInfo, compressed: int) -> Iterator[tuple]:
    content = archive.extractfile(member)
    while piece := content.read(_CHUNK):
        yield piece, compressed


class _Capped:
    """A stream that refuses the upload once more than `cap` bytes have come out of it."""

    def __init__(self, stream, cap: int):
        self.stream, self.cap, self.count = stream, cap, 0

    def read(self, size: int = -1) -> bytes:
        piece = self.stream.read(size if size >= 0 else _CHUNK)
        self.count += len(piece)
        if self.count > self.cap:
            raise UploadRefused("too_large", f"The archive unpacks to more than {_amount(self.cap)}; send only "
                                             "the part files and answers.yaml.")
        return piece


def _shown(name: str) -> str:
    return cut(repr(name), 100)


def _listing(allowed: tuple) -> str:
    return ", ".join(allowed[:-1]) + f" and {allowed[-1]}" if len(allowed) > 1 else allowed[0]


def _amount(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n // 1024} KiB" if n % 1024 == 0 else f"{n:,} bytes"
