"""The operator's triage page for a namespace, fetched over HTTP from its own port (opt-in,
behind a bearer token; not the metrics port) after real workers (the real reporter) reported findings to the real API server: a row per
BugSignature with what the operator recorded, the campaign, the plot; other namespaces are
not served."""

from __future__ import annotations

import re

import aiohttp

from .conftest import API, campaign, create, eventually
from .workers import Worker, finding

SIGS = f"{API}/bugsignatures"
ADD, EXP = "0123456789abcdef", "fedcba9876543210"


def rows(page: str, attribute: str) -> dict[str, list[str]]:
    """Table rows by their data attribute, as the cells' text."""
    out = {}
    for key, body in re.findall(rf'<tr {attribute}="([^"]+)">(.*?)</tr>', page, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)
        out[key] = [" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in cells]
    return out


async def test_namespace_page_lists_signatures_and_campaigns(api, ns, client, start_operator,
                                                             worker_kubeconfig, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    op = await start_operator(metrics={"page_port": 0, "page_token_file": str(token)})
    fc = await create(client, campaign(ns, workers=1))
    w = await Worker(worker_kubeconfig, fc, "main-0").start()
    await w.find(finding(ADD, 1, op="add"), finding(ADD, 2, op="add"),
                 finding(EXP, 3, op="exponential", verdict="nan_mismatch"))
    await eventually(lambda: (api.get(SIGS, ns, f"sig-{ADD}") or {}).get("status", {}).get("count") == 2)
    await eventually(lambda: (api.get(SIGS, ns, f"sig-{EXP}") or {}).get("status", {}).get("count") == 1)
    await eventually(lambda: api.get(f"{API}/fuzzcampaigns", ns, "nightly").get("status", {})
                     .get("findingsTotal") == 3)

    base = f"http://127.0.0.1:{op.runtime.page_port}"
    auth = {"Authorization": "Bearer s3cret"}
    async with aiohttp.ClientSession() as http:
        resp = await http.get(f"{base}/namespaces/{ns}", headers=auth)
        page = await resp.text()
        other = await http.get(f"{base}/namespaces/kube-system", headers=auth)
        # Not without the token, and not on the metrics port every scraper reaches.
        anonymous = await http.get(f"{base}/namespaces/{ns}")
        on_metrics = await http.get(f"http://127.0.0.1:{op.runtime.metrics_port}/namespaces/{ns}")
    assert anonymous.status == 401 and on_metrics.status == 404

    assert resp.status == 200 and resp.content_type == "text/html"
    assert "default-src 'none'" in resp.headers["Content-Security-Policy"]
    sigs = rows(page, "data-signature")
    assert set(sigs) == {ADD, EXP}
    # signature, verdict, culprit op, pass, dtype, count, first seen, last seen, state, repro
    assert sigs[ADD][1:6] == ["mismatch", "add target default fusion kLoop", "algsimp", "f32", "2"]
    assert sigs[EXP][1] == "nan_mismatch" and sigs[EXP][5] == "1" and sigs[EXP][8] == "new"
    assert sigs[ADD][9].startswith("/artifacts/nightly/main-0/findings/")
    (nightly,) = rows(page, "data-campaign").values()
    assert nightly[0] == "nightly" and nightly[3] == "3"
    assert 'data-series="mismatch"' in page and 'data-series="nan_mismatch"' in page
    assert other.status == 404
