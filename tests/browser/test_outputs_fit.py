"""Every lesson's outputs fit a laptop's screen: nothing to scroll sideways at 1100×800.

Each lesson opens as the course ships it (its committed outputs, before any cell runs), in
one JupyterLab page at 1100×800 with the file browser open, as `make lab` starts it; there a code
cell's output area is about 670 px wide. No output may need a horizontal scroll bar (a
table, a line of text), and no figure may be shrunk below 85% of its width: JupyterLab
scales a wide image down to fit, and the course's figures are drawn at 100 dpi with text
of 8 pt or more (11 px), so at 85% their smallest text is still 9 px or more. Lessons 13 to
15 keep to that. The earlier lessons' figures are drawn about 1,000 px wide and shown at
66-73% here: their 10-pt text stays above 9 px, their 8-pt notes do not (about 7.5 px).
For them the test holds the line at 65%, so that none gets smaller than today.

JupyterLab renders only the cells in view unless told otherwise: the server here is told
to render them all (`windowingMode: none`), so every output is laid out and measured.
"""

import pytest

from jupyter_driver import LabServer, launched_chromium
from widget_lessons import NOTEBOOKS

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1100, "height": 800}
SMALLEST_SCALE = {"13": 0.85, "14": 0.85, "15": 0.85}      # by lesson number
NO_SMALLER_THAN_TODAY = 0.65
RENDER_EVERY_CELL = {"@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
                     {"windowingMode": "none"}}
LESSONS = sorted(NOTEBOOKS.glob("*.ipynb"))

# Open a lesson in the page's JupyterLab, in a tab of its own (no page load per lesson), on
# the one kernel all the lessons share: nothing runs, and a kernel started per lesson would
# cost more than looking at it.
_OPEN_JS = """async ([path, id]) => {
  const panel = await window.jupyterapp.commands.execute('docmanager:open',
                                                         {path, kernel: {id}});
  await panel.context.ready;
  window.jupyterapp.shell.activateById(panel.id);
  window.__fitPanel = panel;
}"""

# Every output area of the open notebook laid out, once the notebook's model is loaded:
# as many rendered outputs as its cells hold.
_RENDERED_JS = """() => {
  const panel = window.__fitPanel;
  if (!panel || !panel.isVisible || !panel.content) { return false; }
  let outputs = 0;
  for (const cell of panel.content.model.cells) {
    if (cell.type === 'code') { outputs += cell.outputs.length; }
  }
  const shown = panel.node.querySelectorAll('.jp-OutputArea-output');
  const images = Array.from(panel.node.querySelectorAll('.jp-OutputArea-output img'));
  return shown.length === outputs && images.every(img => img.complete);
}"""

# What would need a sideways scroll, or is shrunk, with the cell it belongs to.
_MEASURE_JS = """scale => {
  const panel = window.__fitPanel;
  const cells = Array.from(panel.node.querySelectorAll('.jp-Notebook .jp-Cell'));
  const found = [];
  for (const out of panel.node.querySelectorAll('.jp-OutputArea-output')) {
    const cell = cells.indexOf(out.closest('.jp-Cell'));
    const what = (out.innerText || '').trim().split('\\n')[0].slice(0, 60);
    const wide = [out, ...out.querySelectorAll('*')].find(
      el => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible');
    if (out.scrollWidth > out.clientWidth + 1 || wide) {
      const el = wide || out;
      found.push(`cell ${cell}: ${el.scrollWidth} px wide in ${el.clientWidth} px (${what})`);
    }
    for (const img of out.querySelectorAll('img')) {
      if (img.naturalWidth && img.clientWidth < scale * img.naturalWidth) {
        found.push(`cell ${cell}: a figure ${img.naturalWidth} px wide shown at ` +
                   `${img.clientWidth} px (${Math.round(100 * img.clientWidth / img.naturalWidth)}%)`);
      }
    }
  }
  const area = panel.node.querySelector('.jp-OutputArea-output');
  return {found, width: area ? area.clientWidth : null};
}"""


@pytest.fixture(scope="module")
def laptop(tmp_path_factory):
    """A page 1100×800 on a JupyterLab that lays out every cell."""
    server = LabServer(NOTEBOOKS, tmp_path_factory.mktemp("fit"), settings=RENDER_EVERY_CELL).start()
    try:
        with launched_chromium() as browser:
            page = browser.new_context(viewport=LAPTOP).new_page()
            page.set_default_timeout(120_000)
            page.goto(f"{server.url}/lab?token={server.token}&reset")
            page.wait_for_function("() => window.jupyterapp && "
                                   "window.jupyterapp.commands.hasCommand('docmanager:open')")
            kernel = server._api("POST", "/api/kernels", {"name": "python3"})["id"]
            yield server, page, kernel
    finally:
        server.stop()


@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_no_output_needs_a_sideways_scroll_at_1100_by_800(laptop, lesson, screenshot_folder):
    server, page, kernel = laptop
    served = server.fresh_copy(lesson)
    page.evaluate(_OPEN_JS, [served, kernel])
    page.wait_for_function(_RENDERED_JS)
    page.evaluate("document.fonts.ready")
    measured = page.evaluate(_MEASURE_JS, SMALLEST_SCALE.get(lesson.name[:2], NO_SMALLER_THAN_TODAY))
    if measured["found"]:
        page.screenshot(path=str(screenshot_folder() / f"too-wide-{lesson.stem}.png"))
    page.evaluate("() => window.__fitPanel.dispose()")        # the shared kernel stays
    assert measured["width"] and measured["width"] < 700, measured     # a laptop's output area
    assert not measured["found"], (f"{lesson.name} at 1100×800 (output area "
                                   f"{measured['width']} px):\n  " + "\n  ".join(measured["found"]))
