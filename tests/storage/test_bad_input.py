"""Bad storage input: a misspelled bucket, missing credentials, a corrupt stored finding, a
finding from a newer format. Each gives one error line naming the URI and the reason, and
readers go on with what they can use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gcs_emulator import BUCKET, Emulator
from xla_sentinel.cli import main as cli
from xla_sentinel.storage.objects import FINDING_FORMAT, ObjectStore, StorageError

FINDING = {"format": FINDING_FORMAT, "id": "a1", "campaign": "c", "program": "s1-i0",
           "target": "default", "verdict": "mismatch", "signature": "sig-good", "dtype": "f32",
           "evidence": {}, "dir": "findings/a1", "time": "2026-01-01T00:00:00+00:00"}


def _store(tmp_path: Path, prefix: str, objects: dict[str, bytes]) -> str:
    uri = f"gs://{BUCKET}/{prefix}"
    store = ObjectStore(uri)
    for key, data in objects.items():
        (tmp_path / "obj").write_bytes(data)
        store.put(tmp_path / "obj", key)
    return uri


def test_misspelled_bucket_is_named_with_its_reason(gcs: Emulator, capsys: pytest.CaptureFixture) -> None:
    rc = cli.main(["triage", "gs://findngs-typo/campaign"])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_BAD_INPUT
    assert "gs://findngs-typo/campaign: bucket 'findngs-typo' not found (misspelled" in err


def test_missing_credentials_are_said_as_such(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    # No emulator: the real GCS path, whose credentials lookup fails before any request.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-key.json"))
    rc = cli.main(["triage", "gs://some-bucket/campaign"])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_BAD_INPUT
    assert "gs://some-bucket/campaign: no Google credentials" in err
    assert "Workload Identity" in err


def test_corrupt_and_newer_findings_are_named_and_skipped(gcs: Emulator, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    newer = {**FINDING, "id": "c3", "signature": "sig-newer", "format": FINDING_FORMAT + 1}
    uri = _store(tmp_path, "mixed", {
        "findings/a1/finding.json": json.dumps(FINDING).encode(),
        "findings/b2/finding.json": b'{"id": "b2", "verdict": "mism',
        "findings/c3/finding.json": json.dumps(newer).encode(),
    })
    rc = cli.main(["triage", uri])
    out, err = capsys.readouterr()
    assert rc == cli.EXIT_OK
    assert f"{uri}/findings/b2/finding.json: corrupt finding (not JSON" in err
    assert (f"{uri}/findings/c3/finding.json: finding format {FINDING_FORMAT + 1} is newer than "
            f"this xla-sentinel reads ({FINDING_FORMAT})") in err
    assert "sig-good" in out and "sig-newer" not in out


def test_bisect_refuses_a_stored_finding_of_a_newer_format(gcs: Emulator, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    newer = {**FINDING, "format": FINDING_FORMAT + 1}
    uri = _store(tmp_path, "newer", {"findings/a1/finding.json": json.dumps(newer).encode()})
    rc = cli.main(["bisect", f"{uri}/findings/a1"])
    assert rc == cli.EXIT_BAD_INPUT
    assert f"{uri}/findings/a1/finding.json: finding format" in capsys.readouterr().err


def test_a_stored_object_is_written_once(gcs: Emulator, tmp_path: Path) -> None:
    store = ObjectStore(f"gs://{BUCKET}/once")
    (tmp_path / "a").write_text("first")
    (tmp_path / "b").write_text("second")
    assert store.put(tmp_path / "a", "findings/x/finding.json") == "uploaded"
    assert store.put(tmp_path / "a", "findings/x/finding.json") == "present"
    assert store.put(tmp_path / "b", "findings/x/finding.json") == "kept"
    assert store.read("findings/x/finding.json") == b"first"
    assert store.put(tmp_path / "b", "summary.json", replace=True) == "uploaded"


def test_s3_without_s3fs_says_which_extra_to_install() -> None:
    try:
        import s3fs  # noqa: F401
        pytest.skip("s3fs is installed")
    except ImportError:
        pass
    with pytest.raises(StorageError, match=r"s3://b/p: s3:// needs s3fs: pip install 'xla-sentinel\[s3\]'"):
        ObjectStore("s3://b/p")


def test_a_local_path_goes_through_the_same_layer(tmp_path: Path) -> None:
    store = ObjectStore(str(tmp_path / "out"))
    (tmp_path / "f").write_text("x")
    assert store.put(tmp_path / "f", "findings/x/finding.json") == "uploaded"
    assert (tmp_path / "out" / "findings" / "x" / "finding.json").read_text() == "x"
    assert store.find("findings/*/finding.json") == ["findings/x/finding.json"]
