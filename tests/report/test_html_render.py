"""The page builder as the operator uses it: importable without jax or numpy, and what it
is given is shown as text, never as markup."""

from __future__ import annotations

import subprocess
import sys

from xla_sentinel.report.html import Event, Page, SignatureRow, render_page


def test_page_builder_imports_neither_jax_nor_numpy() -> None:
    code = ("import sys, xla_sentinel.report.html; "
            "print(sorted(m for m in ('jax', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_values_are_escaped() -> None:
    evil = '<script>alert(1)</script>"'
    page = Page(title=evil, source="ns", generated="2026-01-01T00:00:00+00:00",
                signatures=[SignatureRow(id="abc", verdict="crash", count=1, first_seen="x",
                                         last_seen="y", state="new", culprit_op=evil, repro=evil)],
                events=[Event("2026-01-01T00:00:00+00:00", evil)])
    text = render_page(page)
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in text


def test_no_signatures_and_no_findings_say_so() -> None:
    text = render_page(Page(title="t", source="s", generated="2026-01-01T00:00:00+00:00"))
    assert "No bug signatures." in text and "No findings yet." in text


def test_kernel_decisions_section_lists_reached_and_never_reached() -> None:
    page = Page(title="t", source="s", generated="2026-01-01T00:00:00+00:00",
                decisions=[("fusion:ynn", "a <YNNPACK> fusion", 3), ("fusion:onednn", "oneDNN", 0)],
                decisions_with_hlo=5)
    text = render_page(page)
    assert '<h2 id="kernel-decisions">Kernel decisions</h2>' in text
    assert "1 of 2 reached, in the first target's optimized HLO of 5 programs" in text
    assert '<tr data-decision="fusion:ynn"><td>fusion:ynn</td><td>a &lt;YNNPACK&gt; fusion</td><td class="n">3</td>' in text
    assert '<tr data-decision="fusion:onednn"><td>fusion:onednn</td><td>oneDNN</td><td class="n empty">never</td>' in text
    # No decisions (a page of the operator's namespace view): no section.
    assert "kernel-decisions" not in render_page(Page(title="t", source="s", generated="2026-01-01T00:00:00+00:00"))


def test_every_verdict_has_its_own_colour_on_the_page() -> None:
    from xla_sentinel.core.model import VERDICT_TABLE

    rows = [SignatureRow(id=f"s{n}", verdict=v.value, count=1, first_seen="x", last_seen="y", state="new")
            for n, v in enumerate(VERDICT_TABLE)]
    text = render_page(Page(title="t", source="s", generated="2026-01-01T00:00:00+00:00", signatures=rows))
    for v, info in VERDICT_TABLE.items():
        assert f'<td class="verdict" style="color:{info.colour}">{v.value}</td>' in text
