"""report.html in headless Debian chromium: every figure renders, the console stays clean.

The test command installs chromium when missing (scripts/bootstrap.sh with
AIRLINK_EXTRA_APT="chromium:chromium"); without it this test skips and says so.
"""
from __future__ import annotations

import pytest

from tests.loop._chromium import chromium_path, inspect_page
from airlink.report import write_report

pytestmark = pytest.mark.skipif(
    chromium_path() is None,
    reason="chromium not installed (the test command installs it with AIRLINK_EXTRA_APT=chromium:chromium)")

CHECK = """JSON.stringify({
  figures: document.querySelectorAll('figure').length,
  images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete,
      width: i.naturalWidth, height: i.naturalHeight, shown: i.getBoundingClientRect().width})),
  sections: Array.from(document.querySelectorAll('section h2')).map(h => h.textContent),
  external: Array.from(document.querySelectorAll('[src],[href]')).map(e => e.getAttribute('src') || e.getAttribute('href'))
      .filter(u => !u.startsWith('data:') && !u.startsWith('#')),
  scripts: document.scripts.length,
  height: document.body.scrollHeight
})"""


def _bad_messages(result):
    bad = [f"console.{c['type']}: {c['text']}" for c in result["console"] if c["type"] in ("error", "assert")]
    bad += [f"exception: {e}" for e in result["exceptions"]]
    bad += [f"log {e['level']}: {e['text']} ({e['url']})" for e in result["log"] if e["level"] == "error"]
    return bad


def _check_screenshot(path):
    import matplotlib.image as mpimg
    import numpy as np
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] > 900 and img.shape[1] >= 1000, img.shape
    # a rendered report is not blank: plenty of non-white pixels, several colours
    rgb = img[..., :3]
    assert (rgb.min(axis=2) < 0.9).mean() > 0.02
    assert len(np.unique((rgb[::7, ::7] * 255).astype(int).reshape(-1, 3), axis=0)) > 20


def test_report_renders_in_chromium(synthetic_run, tmp_path):
    out, _ = synthetic_run
    page = write_report(out)
    shot = tmp_path / "report.png"
    result = inspect_page(page, CHECK, shot)
    v = result["value"]
    assert v["scripts"] == 0 and v["external"] == []
    assert v["figures"] == len(v["images"]) >= 7
    for img in v["images"]:
        assert img["complete"] and img["width"] > 300 and img["height"] > 150, img
        assert img["shown"] > 100, img
    assert {"Run parameters", "Summary", "TCP", "Queue", "Fairness and jitter"} <= set(v["sections"])
    assert not _bad_messages(result), _bad_messages(result)
    _check_screenshot(shot)


def test_the_checker_sees_a_broken_figure_and_a_console_error(tmp_path):
    """The browser check is real: a broken image and a script error are caught."""
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><figure><img class="plot" alt="broken" '
                    'src="data:image/png;base64,AAAA"></figure>'
                    '<script>console.error("boom"); undefined_function();</script></body></html>')
    result = inspect_page(page, CHECK, tmp_path / "bad.png")
    img = result["value"]["images"][0]
    assert img["width"] == 0
    bad = _bad_messages(result)
    assert any("boom" in b for b in bad) and any("undefined_function" in b or "exception" in b for b in bad), bad


def test_report_of_a_real_offline_run_renders(tmp_path, shared_data):
    """A report built from real artifacts: a simulated cell and a real capture."""
    from airlink.experiment import run_experiment
    spec = {"name": "browser", "radio": {"preset": "quick", "seed": 3, "duration": "3s"},
            "applications": [{"bulk": {"seconds": 1}}], "infer": {"surrogates": 5},
            "offline": {"captures": [str(shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap")]}}
    res = run_experiment(spec, tmp_path / "run", live=False, progress=False)
    result = inspect_page(res.report, CHECK, tmp_path / "real.png")
    v = result["value"]
    assert v["scripts"] == 0 and v["external"] == []
    assert v["figures"] == len(v["images"]) >= 7
    assert all(i["complete"] and i["width"] > 300 and i["shown"] > 100 for i in v["images"]), v["images"]
    assert not _bad_messages(result), _bad_messages(result)
    _check_screenshot(tmp_path / "real.png")
