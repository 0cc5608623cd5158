"""Timing the comparison page's filter and sort in Chromium (flows/report.py's page).

MEASURE_JS runs in the page: it filters by GPU and by region text, clears, and sorts by four
columns, timing each action with the layout it causes, and reads how many rows are rendered
and how many the GPU filter kept. tests/test_report.py's 100,000-offer test and benchmark 1
(bench/world_lines.py) both run it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MEASURE_JS = """() => {
  const ms = {};
  function time(name, act) {
    const t0 = performance.now();
    act();
    document.getElementById('scroller').getBoundingClientRect();  // layout included
    ms[name] = performance.now() - t0;
  }
  const set = (id, v) => { const e = document.getElementById(id); e.value = v;
                           e.dispatchEvent(new Event('change', {bubbles: true})); };
  const sort = key => document.querySelector('#offers th[data-key=' + key + ']').click();
  time('filter_gpu', () => set('f-gpu', 'H100-SXM'));
  const filtered = document.getElementById('count').textContent;
  time('filter_region_text', () => set('f-region', 'us-'));
  time('clear', () => document.getElementById('clear').click());
  time('sort_price', () => sort('price'));
  time('sort_price_desc', () => sort('price'));
  time('sort_instance', () => sort('instance'));
  time('sort_age', () => sort('age'));
  ms.rendered = document.querySelectorAll('#offers tbody tr:not(.pad)').length;
  ms.filtered = Number(filtered);
  return ms;
}"""

# The floor any sort of n rows pays in the same engine: sorting n numbers in a typed array.
SORT_FLOOR_JS = """n => {
  const a = Float64Array.from({length: n}, (_, i) => ((i * 2654435761) % 1000003) / 7);
  const t0 = performance.now();
  a.sort();
  return performance.now() - t0;
}"""


def open_page(browser: Any, url: str, width: int = 1400, height: int = 900) -> Any:
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    return page


def measure(page_file: Path, runs: int = 5) -> dict[str, Any]:
    """Best of `runs` of each action (ms) on the page's offers view, the offers it holds, and
    the sort floor for that many rows (best of `runs`)."""
    from playwright.sync_api import sync_playwright

    from gpuledger.adapters.base import SourceContext
    from gpuledger.spiders.browser import find_chromium, launch_args

    chromium = find_chromium(SourceContext(provider="bench"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=launch_args(), headless=True)
        try:
            page = open_page(browser, page_file.as_uri() + "#view=offers")
            offers = int(page.text_content("#count") or 0)
            samples = []
            for _ in range(runs):  # the best of several: on a shared machine a run may wait for the CPU
                samples.append(page.evaluate(MEASURE_JS))
                page.wait_for_timeout(100)
            floor = min(page.evaluate(SORT_FLOOR_JS, offers) for _ in range(runs))
            page.close()
        finally:
            browser.close()
    best = {k: min(s[k] for s in samples) for k in samples[0] if k not in ("rendered", "filtered")}
    return {"offers": offers, "best_ms": best, "rendered": max(s["rendered"] for s in samples),
            "sort_floor_ms": floor}
