"""End to end against the GCS emulator: `xla-sentinel run --out gs://...` with an injected
fault writes its findings and repro bundle to the bucket; the emulator is stopped while the
campaign runs and started again, and every finding still arrives; triage, report and bisect
read them back from the URI. A misspelled bucket keeps the findings in staging, and a second
run uploads them once the bucket exists."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from gcs_emulator import BUCKET, Emulator
from xla_sentinel.cli import main as cli
from xla_sentinel.storage.objects import ObjectStore
from xla_sentinel.xla.faults import fault_path

CAMPAIGN = Path(__file__).parent / "campaign.yaml"
URI = f"gs://{BUCKET}/campaigns/e2e"
CLI = str(Path(sys.executable).parent / "xla-sentinel")


def _run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=400)


def _findings(folder: Path) -> set[str]:
    return {p.parent.name for p in folder.glob("findings/*/finding.json")}


def _outage(emulator: Emulator, staging: Path, log: dict[str, Any]) -> None:
    """Stop the store once the first finding is in it; start it again once the campaign has
    found more while it was down (or after 20 s)."""
    store = ObjectStore(URI, patient=False)
    while not store_has_findings(store):
        time.sleep(0.2)
    emulator.stop()
    log["stored_before"] = len(_findings(staging))
    deadline = time.monotonic() + 20
    while len(_findings(staging)) <= log["stored_before"] and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    log["found_while_down"] = len(_findings(staging)) - log["stored_before"]
    emulator.start()


def store_has_findings(store: ObjectStore) -> bool:
    try:
        return bool(store.find("findings/*/finding.json"))
    except Exception:
        return False


@pytest.fixture(scope="module")
def env(emulator: Emulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The emulator's address for this process (gcsfs reads it when a store is first used)
    and for the CLI's subprocesses."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STORAGE_EMULATOR_HOST", emulator.host)
        mp.setenv("XLA_SENTINEL_STAGING", str(tmp_path_factory.mktemp("staging")))
        yield dict(os.environ)


@pytest.fixture(scope="module")
def campaign(emulator: Emulator, env: dict[str, str],
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    staging = tmp_path_factory.mktemp("e2e")
    outage: dict[str, Any] = {}
    watcher = threading.Thread(target=_outage, args=(emulator, staging, outage), daemon=True)
    watcher.start()
    proc = _run_cli("run", str(CAMPAIGN), "--out", URI, "--staging", str(staging), "--quiet",
                    "--inject-pass", str(fault_path("fusion_bf16_rounding")), env=env)
    watcher.join(timeout=60)
    return {"proc": proc, "staging": staging, "outage": outage, "store": ObjectStore(URI)}


def test_every_finding_arrives_despite_the_outage(campaign: dict[str, Any]) -> None:
    proc, staging, store = campaign["proc"], campaign["staging"], campaign["store"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    local = sorted(p.relative_to(staging).as_posix() for p in staging.glob("findings/**/*") if p.is_file())
    assert len(_findings(staging)) >= 3
    assert [k for k in store.find("findings/**") if "." in k.rsplit("/", 1)[-1]] == local
    assert all(store.read(k) == (staging / k).read_bytes() for k in local)


def test_the_outage_is_reported_in_the_log_and_summary(campaign: dict[str, Any]) -> None:
    proc, store = campaign["proc"], campaign["store"]
    assert campaign["outage"]["found_while_down"] >= 1
    assert "storage unavailable" in proc.stdout and f"{URI}/findings/" in proc.stdout
    assert "unreachable" in proc.stdout and "storage available again" in proc.stdout
    state = json.loads(store.read("summary.json"))["storage"]
    assert state["failed_attempts"] >= 1
    assert (state["available"], state["pending_objects"], state["error"]) == (True, 0, None)


def test_summary_points_at_the_stored_bundle(campaign: dict[str, Any]) -> None:
    store = campaign["store"]
    summary = json.loads(store.read("summary.json"))
    bisected = [s for s in summary["signatures"] if s["culprit_op"]]
    assert len(bisected) == 1 and bisected[0]["culprit_op"].startswith("exponential")
    repro = bisected[0]["repro"]
    assert repro.startswith(f"{URI}/findings/") and repro.endswith("/repro")
    assert b"import jax" in store.read(repro.removeprefix(URI + "/") + "/repro.py")


def _rows(text: str) -> set[tuple[str, str]]:
    lines = text.strip().splitlines()[1:]
    return {(cols[0], cols[5]) for cols in (line.split() for line in lines)}


def test_triage_from_the_uri_lists_what_the_local_store_holds(
        campaign: dict[str, Any], env: dict[str, str], capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["triage", str(campaign["staging"])]) == cli.EXIT_OK
    local = _rows(capsys.readouterr().out)
    assert cli.main(["triage", URI]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert _rows(out) == local and len(local) == 2
    assert f"{URI}/findings/" in out  # the bundle's column is a URI


def test_report_reads_the_stored_campaign(campaign: dict[str, Any], env: dict[str, str],
                                          capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["report", URI]) == cli.EXIT_OK
    assert f"chart: {URI}/coverage.png" in capsys.readouterr().out
    assert campaign["store"].read("coverage.png").startswith(b"\x89PNG")


def test_report_html_from_the_uri_shows_the_stored_signatures(
        campaign: dict[str, Any], env: dict[str, str], tmp_path: Path,
        capsys: pytest.CaptureFixture) -> None:
    page = tmp_path / "page" / "report.html"
    assert cli.main(["report", URI, "--html", str(page)]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip() == f"page: {page}"
    text = page.read_text()
    with sqlite3.connect(campaign["staging"] / "campaign.sqlite") as con:
        local = dict(con.execute("SELECT id, count FROM signatures"))
        bundles = dict(con.execute("SELECT id, repro FROM signatures WHERE repro IS NOT NULL"))
    rows = dict(re.findall(r'<tr data-signature="([0-9a-f]+)">.*?<td class="n">(\d+)</td>', text))
    assert {k: int(v) for k, v in rows.items()} == local and len(local) == 2
    # Each signature names its stored bundle (or first finding's folder); a browser cannot
    # open gs://, so it is text, not a link, and nothing points into the download folder.
    assert bundles.keys() == local.keys()
    assert all(f"<code>{URI}/{repro}</code>" in text and repro.startswith("findings/")
               for repro in bundles.values())
    assert 'class="repro"' not in text and "xla-sentinel-report-" not in text
    assert f"<p class=\"meta\">{URI} · generated" in text
    assert "jaxlib version" in text  # the stored summary.json was read


def test_report_html_without_a_stored_snapshot_names_the_uri(
        env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    uri = f"gs://{BUCKET}/campaigns/never-run"
    assert cli.main(["report", uri, "--html", str(tmp_path / "p.html")]) == cli.EXIT_BAD_INPUT
    assert f"{uri}/campaign.sqlite: no such object" in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists()


def test_bisect_reads_a_stored_finding_and_stores_its_bundle(campaign: dict[str, Any],
                                                             env: dict[str, str]) -> None:
    store = campaign["store"]
    unbisected = [k for k in store.find("findings/*/finding.json")
                  if "repro" not in json.loads(store.read(k))]
    finding = unbisected[0].removesuffix("/finding.json")
    proc = _run_cli("bisect", f"{URI}/{finding}", env=env)
    assert proc.returncode == cli.EXIT_BUGS, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["repro"] == f"{URI}/{finding}/repro"
    assert b"import jax" in store.read(f"{finding}/repro/repro.py")
    assert json.loads(store.read(f"{finding}/finding.json"))["culprit_op"].startswith("exponential")


def test_a_misspelled_bucket_keeps_the_findings_until_it_exists(
        emulator: Emulator, env: dict[str, str], tmp_path: Path) -> None:
    spec = yaml.safe_load(CAMPAIGN.read_text())
    spec.update(budget={"programs": 1}, bisect={"enabled": False})
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(spec))
    uri, staging = "gs://findigns/c", tmp_path / "staging"
    args = ("run", str(tmp_path / "one.yaml"), "--out", uri, "--staging", str(staging), "--quiet",
            "--storage-wait", "3", "--inject-pass", str(fault_path("fusion_bf16_rounding")))
    first = _run_cli(*args, env=env)
    assert first.returncode == cli.EXIT_BAD_INPUT
    assert re.search(rf"xla-sentinel: error: storage: {uri}/\S+: bucket 'findigns' not found "
                     r"\(misspelled", first.stderr), first.stderr
    assert len(_findings(staging)) == 1
    assert json.loads((staging / "summary.json").read_text())["storage"]["pending_findings"] == 1
    ObjectStore(uri).fs().mkdir("findigns")
    second = _run_cli(*args, env=env)
    assert second.returncode == cli.EXIT_OK, second.stderr[-2000:]
    stored = ObjectStore(uri)
    assert {k.split("/")[1] for k in stored.find("findings/*/finding.json")} == _findings(staging)


def test_a_worker_mirrors_its_shard_to_the_campaign_bucket(env: dict[str, str], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    spec = yaml.safe_load(CAMPAIGN.read_text())
    spec.update(budget={"programs": 1}, bisect={"enabled": False},
                artifacts={"bucketURI": f"gs://{BUCKET}/cluster"})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    proc = _run_cli("worker", "--spec-file", str(tmp_path / "spec.yaml"), "--campaign", "nightly",
                    "--report", "none", "--shard-count", "1", "--out", str(tmp_path / "pod"),
                    "--inject-pass", str(fault_path("fusion_bf16_rounding")), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (found,) = _findings(tmp_path / "pod")
    store = ObjectStore(f"gs://{BUCKET}/cluster/nightly")
    assert store.find("*/findings/*/finding.json") == [f"main-0/findings/{found}/finding.json"]
    # triage over the campaign's folder reads every worker's findings
    assert cli.main(["triage", store.uri]) == cli.EXIT_OK
    assert len(_rows(capsys.readouterr().out)) == 1
