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
