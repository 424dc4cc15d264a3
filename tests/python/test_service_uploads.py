"""The service's upload check: real zip and tar archives built here, good ones
and every kind a client can send instead, against the real assignment."""

import io
import lzma
import os
import random
import stat
import tarfile
import tracemalloc
import warnings
import zipfile

import pytest

from tilelab.operations.service.uploads import HandIn, UploadLimits, UploadRefused, read_upload

MIB = 1024 * 1024
FILES = {"naive.cu": b"__global__ void naive_kernel() {}\n", "answers.yaml": b"q1: 4\nq2: b\n"}


def zip_of(entries, compression=zipfile.ZIP_DEFLATED) -> bytes:
    """A zip of (name or ZipInfo, content) pairs; a name ending in / is a folder."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicates some tests make on purpose
        with zipfile.ZipFile(buffer, "w", compression) as archive:
            for name, content in entries:
                archive.writestr(name, content)
    return buffer.getvalue()


def tar_of(entries, mode="w:gz") -> bytes:
    """A tar of (name, content) pairs or TarInfo objects; a name ending in / is a folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode, format=tarfile.GNU_FORMAT, encoding="utf-8",
                      errors="surrogateescape") as archive:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                archive.addfile(entry)
                continue
            name, content = entry
            info = tarfile.TarInfo(name.rstrip("/"))
            if name.endswith("/"):
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def special(name, kind, linkname="") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


def refused(assignment, data, filename="hand-in.zip", **limits) -> UploadRefused:
    with pytest.raises(UploadRefused) as caught:
        read_upload(data, filename, assignment, UploadLimits(**limits))
    return caught.value


def patched(data: bytes, old: bytes, new: bytes) -> bytes:
    """The archive with a name changed in both of its headers, as no writer would."""
    assert data.count(old) == 2 and len(old) == len(new)
    return data.replace(old, new)


GOOD = {
    "zip": lambda: zip_of(FILES.items()),
    "zip stored": lambda: zip_of(FILES.items(), zipfile.ZIP_STORED),
    "zip in a folder": lambda: zip_of([("hand-in/", b"")] + [(f"hand-in/{n}", c) for n, c in FILES.items()]),
    "tar.gz": lambda: tar_of(FILES.items()),
    "tar.gz of .": lambda: tar_of([("./", b"")] + [(f"./{n}", c) for n, c in FILES.items()]),
    "tar.bz2 in a folder": lambda: tar_of([(f"hand-in/{n}", c) for n, c in FILES.items()], "w:bz2"),
    "tar": lambda: tar_of(reversed(FILES.items()), "w"),
}


def test_every_format_gives_the_same_files_and_digest(assignment):
    hand_ins = {label: read_upload(make(), "anything.bin", assignment) for label, make in GOOD.items()}
    first = hand_ins["zip"]
    assert list(first.files) == sorted(FILES) and first.files == FILES
    assert len(first.digest) == 64
    for label, hand_in in hand_ins.items():
        assert (hand_in.files, hand_in.digest) == (first.files, first.digest), label


def test_a_bare_part_file_is_taken_under_its_own_name(assignment):
    bare = read_upload(FILES["naive.cu"], "naive.cu", assignment)
    zipped = read_upload(zip_of([("naive.cu", FILES["naive.cu"])]), "x.zip", assignment)
    assert bare.files == {"naive.cu": FILES["naive.cu"]} and bare.digest == zipped.digest
    answers = read_upload(FILES["answers.yaml"], "answers.yaml", assignment)
    assert answers.files == {"answers.yaml": FILES["answers.yaml"]}


def test_the_digest_follows_the_content_only():
    assert HandIn(dict(reversed(FILES.items()))).digest == HandIn(FILES).digest
    assert HandIn({**FILES, "naive.cu": b"changed"}).digest != HandIn(FILES).digest
    # Length prefixes: moving bytes between a name and its content changes the digest.
    assert HandIn({"ab": b"c"}).digest != HandIn({"a": b"bc"}).digest
    with pytest.raises(ValueError):
        HandIn({"../naive.cu": b""})


def test_to_zip_is_one_canonical_form(assignment):
    hand_in = read_upload(GOOD["tar.gz"](), "h.tgz", assignment)
    stored = hand_in.to_zip()
    assert stored == HandIn(dict(FILES)).to_zip()
    again = read_upload(stored, "stored.zip", assignment)
    assert (again.files, again.digest, again.to_zip()) == (hand_in.files, hand_in.digest, stored)
    with zipfile.ZipFile(io.BytesIO(stored)) as archive:
        assert [(i.filename, i.date_time, i.external_attr >> 16) for i in archive.infolist()] == [
            (name, (1980, 1, 1, 0, 0, 0), stat.S_IFREG | 0o644) for name in sorted(FILES)]


def test_write_to_writes_0644_into_an_empty_folder(tmp_path):
    old = os.umask(0o077)
    try:
        HandIn(FILES).write_to(tmp_path)
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)
    for name, content in FILES.items():
        assert (tmp_path / name).read_bytes() == content
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644
    with pytest.raises(ValueError, match="empty"):
        HandIn(FILES).write_to(tmp_path)


def test_an_oversized_upload(assignment):
    e = refused(assignment, zip_of(FILES.items()) + bytes(2 * MIB), "big.zip")
    assert (e.status, e.code) == (413, "too_large") and "over the limit of 2 MiB" in str(e)
    e = refused(assignment, b"x" * (MIB + 1), "naive.cu")
    assert (e.status, e.code) == (413, "too_large") and "'naive.cu' unpacks to more than 1 MiB" in str(e)


def bomb_zip(megabytes=50) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("naive.cu", "w") as member:
            for _ in range(megabytes):
                member.write(bytes(MIB))
    return buffer.getvalue()


def lying(data: bytes, size: int) -> bytes:
    """The zip with its one member's uncompressed size set to `size` in both headers."""
    data = bytearray(data)
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    data[local + 22:local + 26] = data[central + 24:central + 28] = size.to_bytes(4, "little")
    return bytes(data)


def peak_while_refused(assignment, data) -> tuple:
    tracemalloc.start()
    try:
        e = refused(assignment, data)
        return e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_zip_bomb_is_stopped_within_a_few_mb(assignment):
    bomb = bomb_zip()
    assert len(bomb) < 100_000 and zipfile.ZipFile(io.BytesIO(bomb)).infolist()[0].file_size == 50 * MIB
    e, peak = peak_while_refused(assignment, bomb)
    assert (e.status, e.code) == (413, "too_large") and "'naive.cu' unpacks to more than 1 MiB" in str(e)
    assert peak < 16 * MIB


def test_a_member_that_lies_about_its_size_is_stopped_too(assignment):
    liar = lying(bomb_zip(), 1000)
    assert zipfile.ZipFile(io.BytesIO(liar)).infolist()[0].file_size == 1000
    e, peak = peak_while_refused(assignment, liar)
    assert (e.status, e.code) == (413, "compression_ratio")
    assert "'naive.cu' unpacks to more than 100 times" in str(e)
    assert peak < 16 * MIB
    # Data that hardly compresses passes the ratio: the bytes counted as they come stop it.
    noise = lying(zip_of([("naive.cu", random.Random(0).randbytes(3 * MIB // 2))]), 1000)
    e, peak = peak_while_refused(assignment, noise)
    assert (e.status, e.code) == (413, "too_large") and "'naive.cu' unpacks to more than 1 MiB" in str(e)
    assert peak < 16 * MIB
    # A smaller lie fits the limits, and is then caught by the size check at the end.
    source = "".join(f"int x{i} = {i * i};\n" for i in range(2000)).encode()
    e = refused(assignment, lying(zip_of([("naive.cu", source)]), 100))
    assert (e.status, e.code) == (400, "damaged") and "declared size" in str(e)


def test_a_tar_gz_bomb_is_stopped_within_a_few_mb(assignment):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name in ("naive.cu", "__MACOSX/._naive.cu"):  # an ignored member is capped as well
            info = tarfile.TarInfo(name)
            info.size = 50 * MIB
            archive.addfile(info, io.BytesIO(bytes(info.size)))
    e, peak = peak_while_refused(assignment, buffer.getvalue())
    assert (e.status, e.code) == (413, "too_large") and "'naive.cu' unpacks to more than 1 MiB" in str(e)
    assert peak < 16 * MIB
    skipped = tar_of([("__MACOSX/._naive.cu", bytes(50 * MIB)), ("naive.cu", b"")])
    e, peak = peak_while_refused(assignment, skipped)
    assert (e.status, e.code) == (413, "too_large") and "archive unpacks to more than 5 MiB" in str(e)
    assert peak < 16 * MIB


@pytest.mark.parametrize("make", [lambda c: zip_of([("answers.yaml", c)]), lambda c: tar_of([("answers.yaml", c)])],
                         ids=["zip", "tar.gz"])
def test_a_high_compression_ratio(assignment, make):
    e = refused(assignment, make(bytes(512 * 1024)))  # under 1 MiB, but about 1000 to 1
    assert (e.status, e.code) == (413, "compression_ratio")
    assert "'answers.yaml' unpacks to more than 100 times its compressed size" in str(e)


@pytest.mark.parametrize("make", [zip_of, tar_of], ids=["zip", "tar.gz"])
def test_too_many_files(assignment, make):
    e = refused(assignment, make([(f"part{i}.cu", b"") for i in range(17)]))
    assert (e.status, e.code) == (413, "too_many_files") and "more than 16 files" in str(e)
    e = refused(assignment, make([(f"d{i}/", b"") for i in range(65)]))
    assert (e.status, e.code) == (413, "too_many_files") and "more than 64 entries" in str(e)


UNSAFE = {"/naive.cu": "is absolute", "../naive.cu": "contains '..'", "hand-in/../../naive.cu": "contains '..'",
          "hand-in\\naive.cu": "contains a backslash", "C:/naive.cu": "starts with a drive letter"}


@pytest.mark.parametrize("make", [zip_of, tar_of], ids=["zip", "tar.gz"])
@pytest.mark.parametrize("name", UNSAFE)
def test_unsafe_paths(assignment, make, name):
    e = refused(assignment, make([("answers.yaml", b""), (name, b"x")]))
    assert (e.status, e.code) == (400, "unsafe_path") and f"The path {name!r} {UNSAFE[name]}" in str(e)


def test_names_with_nul_or_not_in_utf8(assignment):
    e = refused(assignment, patched(zip_of([("naive.cuXtxt", b"")]), b"naive.cuXtxt", b"naive.cu\0txt"))
    assert (e.code, e.status) == ("unsafe_path", 400) and "contains a NUL byte" in str(e)
    for data in (patched(zip_of([("X.cu", b"")]), b"X.cu", b"\xff.cu"),  # no UTF-8 flag: read as cp437
                 patched(zip_of([("\u00f1.cu", b"")]), "\u00f1".encode(), b"\xff\xfe"),  # flagged UTF-8
                 tar_of([("\udcff.cu", b"")])):
        e = refused(assignment, data)
        assert (e.code, e.status) == ("unsafe_path", 400) and "not valid UTF-8" in str(e)


@pytest.mark.parametrize("entry, code, words", [
    (special("naive.cu", tarfile.SYMTYPE, "/etc/passwd"), "link", "a symbolic link"),
    (special("naive.cu", tarfile.LNKTYPE, "answers.yaml"), "link", "a hard link"),
    (special("naive.cu", tarfile.CHRTYPE), "special_file", "a device file"),
    (special("naive.cu", tarfile.FIFOTYPE), "special_file", "a FIFO"),
], ids=["symlink", "hard link", "device", "fifo"])
def test_links_and_special_files_in_tar(assignment, entry, code, words):
    e = refused(assignment, tar_of([("answers.yaml", b""), entry]))
    assert (e.status, e.code) == (400, code) and f"'naive.cu' is {words}, not a regular file" in str(e)


@pytest.mark.parametrize("mode, code, words", [(stat.S_IFLNK | 0o777, "link", "a symbolic link"),
                                               (stat.S_IFSOCK | 0o644, "special_file", "a socket")])
def test_links_and_special_files_in_zip(assignment, mode, code, words):
    info = zipfile.ZipInfo("naive.cu")
    info.create_system, info.external_attr = 3, mode << 16
    e = refused(assignment, zip_of([(info, b"/etc/passwd")]))
    assert (e.status, e.code) == (400, code) and f"'naive.cu' is {words}" in str(e)


def test_an_unknown_file(assignment):
    e = refused(assignment, zip_of([("naive.cu", b""), ("hand-in/notes.txt", b"hi")]))
    assert (e.status, e.code) == (400, "unknown_file")
    assert "'hand-in/notes.txt' is not a file of this hand-in" in str(e)
    for allowed in [p.file for p in assignment.parts] + ["answers.yaml"]:
        assert allowed in str(e)


@pytest.mark.parametrize("data", [
    lambda: zip_of([("naive.cu", b"a"), ("hand-in/naive.cu", b"b")]),
    lambda: zip_of([("naive.cu", b"a"), ("naive.cu", b"b")]),
    lambda: tar_of([("./naive.cu", b"a"), ("naive.cu", b"a")]),
], ids=["top and folder", "twice in a zip", "twice in a tar"])
def test_a_duplicate_name(assignment, data):
    e = refused(assignment, data())
    assert (e.status, e.code) == (400, "duplicate") and "holds naive.cu twice" in str(e)


@pytest.mark.parametrize("names", [["a/b/naive.cu"], ["a/naive.cu", "b/answers.yaml"],
                                   ["hand-in/naive.cu", "answers.yaml"]])
def test_files_in_more_than_one_folder(assignment, names):
    e = refused(assignment, zip_of([(name, b"") for name in names]))
    assert (e.status, e.code) == (400, "nested") and "folder" in str(e) and repr(names[0]) in str(e)


def test_not_an_archive(assignment):
    e = refused(assignment, b"some notes\n", "notes.txt")
    assert (e.status, e.code) == (400, "not_an_archive") and "'notes.txt' is not a zip, tar" in str(e)
    # Told by content: a source file named like a zip is no zip, and no part file either.
    e = refused(assignment, FILES["naive.cu"], "hand-in.zip")
    assert e.code == "not_an_archive" and "naive.cu" in str(e)
    xz = lzma.compress(tar_of(FILES.items(), "w"))
    assert refused(assignment, xz, "hand-in.tar.xz").code == "not_an_archive"


@pytest.mark.parametrize("data", [lambda: zip_of(FILES.items())[:-30], lambda: tar_of(FILES.items())[:-40],
                                  lambda: zip_of([("naive.cu", b"A" * 100)], zipfile.ZIP_STORED).replace(b"A" * 100,
                                                                                                        b"B" * 100)],
                         ids=["truncated zip", "truncated tar.gz", "bad checksum"])
def test_a_damaged_archive(assignment, data):
    e = refused(assignment, data())
    assert (e.status, e.code) == (400, "damaged") and "could not be read to its end" in str(e)


def test_an_encrypted_member(assignment):
    data = bytearray(zip_of(FILES.items()))
    central = data.find(b"PK\x01\x02")
    data[central + 8] |= 1
    e = refused(assignment, bytes(data))
    assert (e.status, e.code) == (400, "unsupported") and "encrypted" in str(e)


@pytest.mark.parametrize("data", [lambda: zip_of([]), lambda: tar_of([], "w"),
                                  lambda: zip_of([("hand-in/", b""), ("__MACOSX/hand-in/._naive.cu", b"x")])],
                         ids=["zip", "tar", "only folders and metadata"])
def test_an_empty_archive(assignment, data):
    e = refused(assignment, data())
    assert (e.status, e.code) == (400, "empty") and "none of the files of this hand-in" in str(e)


def test_macos_metadata_is_ignored(assignment):
    finder = zip_of([("hand-in/", b""), ("hand-in/naive.cu", FILES["naive.cu"]), ("hand-in/.DS_Store", b"\0\1"),
                     ("__MACOSX/", b""), ("__MACOSX/hand-in/", b""), ("__MACOSX/hand-in/._naive.cu", b"\0\5\x16\7")])
    bsdtar = tar_of([("./", b""), ("./._naive.cu", b"\0\5\x16\7"), ("./naive.cu", FILES["naive.cu"])])
    for data in (finder, bsdtar):
        assert read_upload(data, "h", assignment).files == {"naive.cu": FILES["naive.cu"]}
