"""The compute capability a probe found, remembered per host and GPU
(grading/remembered_capability.py): read back for the same host and GPU,
not for another GPU of the host or once the driver shows other GPUs, and
nothing without a driver or from a file that is not understood."""

import json

import pytest

from tilelab.grading import remembered_capability as remembered


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A driver's view of one GPU, and a cache folder of the test's own."""
    gpus = tmp_path / "gpus"
    (gpus / "0000:01:00.0").mkdir(parents=True)
    (gpus / "0000:01:00.0" / "information").write_text("Model: \t NVIDIA H100 80GB HBM3\nBus Location: 0000:01:00.0\n")
    monkeypatch.setattr(remembered, "NVIDIA_GPUS", gpus)
    monkeypatch.setenv("TILELAB_CACHE_DIR", str(tmp_path / "cache"))
    return gpus


def test_a_capability_is_read_back_for_the_same_host_and_gpu(host):
    assert remembered.recall_capability(()) is None
    remembered.remember_capability((), "9.0")
    assert remembered.recall_capability(()) == "9.0"
    assert remembered.recall_capability((("CUDA_VISIBLE_DEVICES", "1"),)) is None
    remembered.remember_capability((), "8.6")
    assert remembered.recall_capability(()) == "8.6"


def test_other_gpus_shown_by_the_driver_forget_it(host):
    remembered.remember_capability((), "9.0")
    (host / "0000:01:00.0" / "information").write_text("Model: \t NVIDIA A100-SXM4-80GB\n")
    assert remembered.recall_capability(()) is None


def test_without_a_driver_nothing_is_remembered(host, tmp_path, monkeypatch):
    monkeypatch.setattr(remembered, "NVIDIA_GPUS", tmp_path / "none")
    remembered.remember_capability((), "9.0")
    assert remembered.recall_capability(()) is None
    assert not (tmp_path / "cache" / remembered.FILE_NAME).exists()


@pytest.mark.parametrize("text", ["not json", "[]", '{"k": 9.0}'])
def test_a_file_not_understood_is_ignored_and_written_anew(host, tmp_path, text):
    path = tmp_path / "cache" / remembered.FILE_NAME
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert remembered.recall_capability(()) is None
    remembered.remember_capability((), "9.0")
    assert remembered.recall_capability(()) == "9.0"
    assert list(json.loads(path.read_text()).values()) == ["9.0"]


def test_a_capability_that_is_not_one_is_not_kept(host):
    for wrong in ("9", "9.0; rm -rf /", "", "sm_90"):
        remembered.remember_capability((), wrong)
        assert remembered.recall_capability(()) is None


def test_only_the_latest_hosts_are_kept(host, monkeypatch):
    for n in range(remembered.MOST_REMEMBERED + 5):
        monkeypatch.setattr(remembered.socket, "gethostname", lambda n=n: f"node{n}")
        remembered.remember_capability((), "9.0")
    path = remembered.gpu_cache.cache_dir() / remembered.FILE_NAME
    assert len(json.loads(path.read_text())) == remembered.MOST_REMEMBERED
    assert remembered.recall_capability(()) == "9.0"  # the last host's
