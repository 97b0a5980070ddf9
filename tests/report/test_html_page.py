"""`xla-sentinel report DIR --html` on a real campaign (an injected fusion miscompile, one
finding bisected into a repro bundle), rendered by headless Chromium as a person's browser
renders it: the signature rows, the findings-over-time plot, a repro link that opens the
bundle, and the bundle's issue text, whose reproducer shows the bug and whose curing flag
cures it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest
from xla_sentinel.campaign.engine import run_campaign
from xla_sentinel.cli.main import main
from xla_sentinel.spec.campaign import parse_spec
from xla_sentinel.storage.store import Store
from xla_sentinel.xla.faults import fault_path

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium missing: make system-deps")


def browse(url: str) -> str:
    """The DOM Chromium builds for `url`, headless, with a fresh profile."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", url],
            capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


class Dom(HTMLParser):
    """The parts of a page a test reads: table rows by data attribute (their cells' text),
    links, and the plot's lines and legend."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self.links: dict[str, str] = {}  # class -> href
        self.series: dict[str, str] = {}  # data-series -> points
        self.svg_text: list[str] = []
        self._row: str | None = None
        self._cell: list[str] | None = None
        self._svg = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and a.get("data-signature"):
            self._row = a["data-signature"]
            self.rows[self._row] = []
        elif tag == "td" and self._row:
            self._cell = []
        elif tag == "a" and self._row and a.get("class"):
            self.links[f"{self._row}:{a['class']}"] = a["href"] or ""
        elif tag == "svg":
            self._svg += 1
        elif tag == "polyline" and a.get("data-series"):
            self.series[a["data-series"]] = a["points"] or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row and self._cell is not None:
            self.rows[self._row].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr":
            self._row = None
        elif tag == "svg":
            self._svg -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._svg:
            self.svg_text.append(data)


def _campaign(out: Path) -> None:
    spec = parse_spec({
        "seed": 3, "workers": 1, "targets": ["default"], "references": ["f64_numpy", "eager"],
        # exp is what fusion_bf16_rounding corrupts here; seed 3 finds it in two programs
        # and bisects the first.
        "generator": {"version": 1, "minOps": 4, "maxOps": 8, "dtypes": ["f32"], "ops": ["exp", "add", "mul", "sub"],
                      "maxDimSize": 8, "specialValues": 0.0},
        "budget": {"programs": 4}, "bisect": {"enabled": True, "perSignature": 1},
    })
    run_campaign(spec, out, inject_passes=[fault_path("fusion_bf16_rounding")])


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "campaign"
    _campaign(out)
    assert main(["report", str(out), "--html"]) == 0
    return out


@pytest.fixture(scope="module")
def page(campaign: Path) -> Dom:
    return Dom(browse((campaign / "report.html").as_uri()))


def _signatures(out: Path) -> list:
    store = Store(out / "campaign.sqlite")
    try:
        return store.signatures()
    finally:
        store.close()


def test_page_shows_a_row_per_signature_with_verdict_culprit_and_count(campaign: Path, page: Dom) -> None:
    sigs = _signatures(campaign)
    assert sigs and set(page.rows) == {s.id for s in sigs}
    for s in sigs:
        cells = page.rows[s.id]
        assert cells[1] == "mismatch"
        assert cells[2].startswith(s.culprit_op or "not localized")
        assert cells[5] == str(s.count)
    bisected = [s for s in sigs if s.culprit_op]
    assert bisected and page.rows[bisected[0].id][3] == bisected[0].culprit_pass


def test_plot_counts_every_finding_over_time(campaign: Path, page: Dom) -> None:
    findings = sum(s.count for s in _signatures(campaign))
    points = page.series["mismatch"].split()
    # A step line: start, two points per finding, end.
    assert len(points) == 2 * findings + 2
    assert f"mismatch ({findings})" in page.svg_text


def test_repro_link_opens_the_bundle(campaign: Path, page: Dom) -> None:
    (bisected,) = [s for s in _signatures(campaign) if s.culprit_op]
    href = page.links[f"{bisected.id}:repro"]
    target = urljoin((campaign / "report.html").as_uri(), href)
    assert Path(unquote(urlparse(target).path)) == (campaign / bisected.repro).resolve()
    listing = browse(target)  # what a person sees after the click: the bundle's files
    assert "repro.py" in listing and "issue.md" in listing
    issue = urljoin((campaign / "report.html").as_uri(), page.links[f"{bisected.id}:issue"])
    assert Path(unquote(urlparse(issue).path)).is_file()


def test_page_loads_nothing_from_elsewhere(campaign: Path) -> None:
    text = (campaign / "report.html").read_text()
    assert "<script" not in text and "<link" not in text and "url(" not in text
    refs = re.findall(r'(?:src|href)="([^"]*)"', text)
    assert refs and all(not urlparse(r).scheme and not r.startswith("/") for r in refs)


def _snippet(issue: str) -> str:
    return re.search(r"```python\n(.*?)```", issue, re.S).group(1)


def test_issue_text_reproduces_the_bug_and_names_the_flag_that_cures_it(campaign: Path) -> None:
    (bisected,) = [s for s in _signatures(campaign) if s.culprit_op]
    bundle = campaign / bisected.repro
    issue = (bundle / "issue.md").read_text()
    assert "## What is wrong" in issue and "jax 0.10.2" in issue and "Do not file upstream" in issue
    cures = re.findall(r"`XLA_FLAGS=(--[^`]+)`", issue)
    assert cures
    script = bundle / "issue_repro.py"
    script.write_text(_snippet(issue))
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    shows = subprocess.run([sys.executable, script.name], cwd=bundle, capture_output=True,
                           text=True, timeout=120, env=env)
    assert shows.returncode == 1, shows.stdout + shows.stderr
    for flag in cures:
        cured = subprocess.run([sys.executable, script.name], cwd=bundle, capture_output=True,
                               text=True, timeout=120, env={**env, "XLA_FLAGS": flag})
        assert cured.returncode == 0, flag + cured.stdout + cured.stderr
