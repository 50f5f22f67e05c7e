"""report.html: every section from a hand-made workdir and from a real (tiny) co-evolution run, text
escaped, nothing fetched, missing optional pieces noted instead of failing; then the page in headless
Chromium: a screenshot that is not blank, and no console error, script error or resource load.

How the browser check works (and why it is trusted):

* The screenshot is taken of report.html itself (``--screenshot``, 1200x2000) and decoded with
  ``matplotlib.image.imread``; the page is "not blank" when its grey levels vary and a fair share of
  pixels is not background.
* Errors are caught two ways. (1) ``--enable-logging=stderr --v=0`` makes Chromium print every
  console message of the page as an ``INFO:CONSOLE`` line (whatever its level, uncaught exceptions
  included); the report has no JavaScript, so any such line is a failure. (2) A copy of the page,
  in another folder (so a relative reference to a workdir file would break too), gets a small
  probe script as the first child of ``<head>``: it records uncaught errors, failed loads (a
  capturing ``error`` listener sees ``<img>``/``<link>`` failures, which never reach
  ``window.onerror``) and ``console.error``/``warn`` calls, and at ``load`` writes them, with every
  entry of ``performance.getEntriesByType('resource')`` (anything fetched at all), into attributes of
  ``<html>``; ``--dump-dom`` prints the DOM after ``load`` (``--virtual-time-budget`` waits for it).
* A negative control page with a script error, a ``console.error`` and an external image must be
  caught by both mechanisms, so a green test does not just mean the probe saw nothing.

Chromium is Debian's ``chromium`` package (``.ci/run`` tries to install it); where no Chromium is
found, the browser tests skip with that reason (``-ra`` lists it).
"""

import html.parser
import json
import pathlib
import re
import shutil
import subprocess

import matplotlib.image
import numpy as np
import pytest

from cocoda_jax.library import LibrarySnapshot, Tool
from cocoda_jax.report import MetricsWriter, build_report, draw_library, write_html_report, write_report
from cocoda_jax.report.html import REPORT_HTML, _nice_ticks, render_html_report

EVIL = '<script>alert("x")</script> & "quoted"'
EVIL_CATEGORY = 'a<b & "c"'


# -- a hand-made workdir ------------------------------------------------------------------------

class _NoRunner:
    """INSERTTOOL's runner for tools without examples: nothing may run."""

    def run_many(self, *args, **kwargs):
        raise AssertionError("no check program should run for tools without examples")


def _tool(source, description):
    return Tool.from_source(source, description)


def _libraries():
    lib0 = LibrarySnapshot.empty()
    for src in ("def add(a: float, b: float) -> float:\n    return a + b\n",
                "def mul(a: float, b: float) -> float:\n    return a * b\n",
                "def neg(a: float) -> float:\n    return -a\n"):
        lib0 = lib0.insert(_tool(src, "a primitive"), runner=_NoRunner())
    lib0 = lib0.insert(_tool("def axpb(a: float, x: float, b: float) -> float:\n    return add(mul(a, x), b)\n",
                             "a * x + b"), runner=_NoRunner())
    lib1 = lib0.insert(_tool("def axpb2(a: float, x: float, b: float) -> float:\n"
                             "    return axpb(a, axpb(a, x, b), b)\n", "axpb twice"), runner=_NoRunner())
    return lib0, lib1


def _record(r, outcome, lib, *, val, train=None, reason=None, inserted=(), uses=None, tokens=100.0):
    names = lib.names()
    composites = sum(1 for n in names if lib.children(n))
    return {"round": r, "outcome": outcome, "reason": reason or f"reason of round {r}",
            "library_size": len(names), "primitives": len(names) - composites, "composites": composites,
            "max_depth": max(lib.depth(n) for n in names), "val_accuracy": val, "val_reward": val,
            "train_accuracy": train, "tool_calls_per_solved": 2.5, "composite_share": 0.25,
            "retrieval_tokens_per_query": tokens, "inserted": list(inserted), "composite_uses": dict(uses or {}),
            "wall_s": 12.0}


def _decision(r, outcome, reward, reference, reason):
    return {"round": r, "outcome": outcome, "reason": reason, "reward": reward, "reference": reference,
            "tolerance": 0.04, "kept": "new planner and new library" if outcome == "accept" else "the incumbent",
            "missing_tools": []}


def make_workdir(wd, *, full=True):
    """A finished run's workdir by hand: rounds 0-3 (accept, reject, accept_planner), two RODS
    epochs, test accuracy per category, library snapshots, metrics and the DAG drawing. ``full=False``:
    report.json only, without any optional key."""
    lib0, lib1 = _libraries()
    rounds = [
        _record(0, "initial", lib0, val=0.40, inserted=["axpb"], reason="the SFT planner with the warm library"),
        _record(1, "accept", lib1, val=0.50, train=0.45, inserted=["axpb2"], uses={"axpb": 3, "axpb2": 5}),
        _record(2, "reject", lib1, val=0.50, train=0.55, reason=EVIL, uses={"axpb": 1, "axpb2": 2}, tokens=None),
        _record(3, "accept_planner", lib1, val=0.55, train=0.60, uses={"axpb2": 4}, tokens=120.0),
    ]
    extra = None
    if full:
        extra = {
            "test_accuracy": 0.625, "frozen_library": False,
            "decisions": [_decision(1, "accept", 0.50, 0.40, "within tolerance"),
                          _decision(2, "reject", 0.30, 0.50, EVIL),
                          _decision(3, "accept_planner", 0.55, 0.50, "planner only")],
            "retrieval": {"mode": "cascade", "k": 8, "all_gold_found": 0.75, "gold_recall": 0.9,
                          "prompt_tokens_per_episode": 210.5, "overflow_episodes": 0, "tasks": 8},
            "test_per_category": {"multi_turn_base": {"n": 4, "accuracy": 0.75},
                                  EVIL_CATEGORY: {"n": 4, "accuracy": 0.5}},
            "test_outcomes": {f"t{i}": i < 5 for i in range(8)},
            "rods_per_epoch": [
                {"epoch": 0, "live": 16, "live_generated": 0, "injected": 0,
                 "region_sizes": {"hard": 2, "boundary": 5, "mastered": 1, "unobserved": 8},
                 "synthesis": {"jobs": 2, "accepted": 1}, "boundary_variance_ratio": 1.5,
                 "injected_mean_reward": None},
                {"epoch": 1, "live": 17, "live_generated": 1, "injected": 1,
                 "region_sizes": {"hard": 3, "boundary": 7, "mastered": 4, "unobserved": 3},
                 "synthesis": {"jobs": 2, "accepted": 2}, "boundary_variance_ratio": 2.25,
                 "injected_mean_reward": 0.5},
            ],
            "warm": {"demos": 48, "seconds": 1.5, "rounds": [{"accepted": ["axpb"]}]},
        }
    report = build_report(rounds, sft_accuracy=0.40, final_accuracy=0.55, final_library=lib1,
                          primitive_names=["add", "mul", "neg"], wall_s=48.0, extra=extra)
    wd.mkdir(parents=True, exist_ok=True)
    write_report(report, wd / "report.json")
    if full:
        (wd / "library").mkdir()
        for r, lib in ((0, lib0), (1, lib1), (2, lib1), (3, lib1)):
            (wd / "library" / f"round_{r:03d}.json").write_text(lib.to_json())
        with MetricsWriter(wd, tensorboard=False) as w:
            for step in range(1, 5):
                w.write(step, {"sft/loss": 6.0 - step})
            for step in range(5, 9):
                w.write(step, {"reward_mean": 0.1 * step, "accuracy": 0.05 * step, "grpo/kl": 0.01 * step})
            w.write(8, {"val/accuracy": 0.5})
        draw_library(lib1, wd / "plots" / "library_dag.svg", primitive_names=["add", "mul", "neg"])
    return wd


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    return make_workdir(tmp_path_factory.mktemp("handmade") / "run")


# -- static checks --------------------------------------------------------------------------------

class _Scan(html.parser.HTMLParser):
    """Tags, and every reference the page could make the browser load."""

    LOADING_TAGS = {"script", "link", "iframe", "object", "embed", "base", "frame", "audio", "video", "source"}
    URL_ATTRS = {"src", "href", "xlink:href", "srcset", "poster", "action", "data", "formaction"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.external, self.in_style, self.styles = [], [], False, []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in self.LOADING_TAGS:
            self.external.append(f"<{tag}>")
        for name, value in attrs:
            value = (value or "").strip()
            if name in self.URL_ATTRS and not (value.startswith("#") or value.startswith("data:")):
                self.external.append(f"{tag} {name}={value!r}")
            if name == "style":
                self.styles.append(value)
        self.in_style = tag == "style"

    def handle_endtag(self, tag):
        self.in_style = False

    def handle_data(self, data):
        if self.in_style:
            self.styles.append(data)


def scan(text):
    s = _Scan()
    s.feed(text)
    s.close()
    for css in s.styles:
        if "@import" in css or re.search(r"url\(\s*['\"]?(?!#)", css):
            s.external.append(f"css {css[:80]!r}")
    return s


def test_nice_ticks():
    assert _nice_ticks(0.0, 1.0, 5) == (0.0, 1.0, [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0])
    lo, hi, ticks = _nice_ticks(3.0, 37.0, 5, integer=True)
    assert lo <= 3 and hi >= 37 and all(float(t).is_integer() for t in ticks)
    assert _nice_ticks(0.0, 0.0)[:2] == (0.0, 1.0)  # a zero series: 0..1, not -1..1
    lo, hi, _ = _nice_ticks(5.0, 5.0)
    assert lo < 5 < hi


def test_sections_numbers_and_escaping(handmade):
    path = write_html_report(handmade)
    assert path == handmade / REPORT_HTML and path.is_file()
    text = path.read_text(encoding="utf-8")
    for anchor in ("accuracy", "library", "dag", "composites", "rods", "retrieval", "test", "curves"):
        assert f'<section id="{anchor}">' in text
    # accuracy and decisions: every round, its outcome, the reason escaped (never as markup)
    assert "62.5%" in text and "40.0%" in text and "55.0%" in text
    for label in ("initial (after SFT)", "accepted", "rejected", "accepted (planner only)"):
        assert label in text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;quoted&quot;" in text
    assert "<script" not in text.lower()
    assert "refused proposal" in text                   # the rejected round's own score is drawn
    # library growth: the snapshots' diff (axpb2 added in round 1, depth 2)
    assert "round_001.json" in text and "axpb2 (depth 2)" in text
    assert "Warm library (stage 1): 1 composite(s)" in text
    # the DAG drawing inlined as SVG (its prolog dropped)
    dag = text.split('<section id="dag">')[1].split("</section>")[0]
    assert "<svg" in dag and "<?xml" not in text and "<!DOCTYPE svg" not in text
    # composite uses summed over the rounds: axpb 3 + 1, axpb2 5 + 2 + 4
    comps = text.split('<section id="composites">')[1].split("</section>")[0]
    assert "axpb2: 11 uses" in comps and "axpb: 4 uses" in comps
    # RODS regions per epoch, retrieval cost, per-category test accuracy (category escaped)
    rods = text.split('<section id="rods">')[1].split("</section>")[0]
    assert "boundary" in rods and "epoch 1: boundary 7" in rods and "2 / 2" in rods
    assert "retrieval cost model per round" in text and "90.0%" in text
    assert "a&lt;b &amp; &quot;c&quot;" in text and 'a<b & "c"' not in text
    assert "5 of 8 test tasks solved" in text
    assert "SFT loss" in text and "KL to the reference policy" in text
    assert '<div class="notes">' not in text             # nothing missing


def test_self_contained(handmade):
    text = render_html_report(handmade)
    s = scan(text)
    assert s.external == []
    assert "svg" in s.tags and "style" in s.tags
    assert text.count("<svg") >= 6                      # the DAG plus the charts drawn here


def test_deterministic(handmade):
    assert render_html_report(handmade) == render_html_report(handmade)


def test_missing_optional_pieces(tmp_path):
    wd = make_workdir(tmp_path / "bare", full=False)
    text = write_html_report(wd).read_text(encoding="utf-8")
    assert scan(text).external == []
    assert "No RODS curriculum in this run" in text
    dag = text.split('<section id="dag">')[1].split("</section>")[0]
    assert 'class="dag-own"' in dag and "from the composites of report.json" in dag   # no library file needed
    assert "No per-category breakdown" in text
    assert "No metrics records." in text
    notes = text.split('<div class="notes">')[1].split("</div>")[0]
    for what in ("no library/ folder", "no metrics.jsonl", "no RODS epochs"):
        assert what in notes
    # the per-round records still give the accuracy and library charts
    assert "accuracy per round" in text and "library size per round" in text


def test_unreadable_pieces_are_noted(tmp_path, handmade):
    wd = tmp_path / "run"
    shutil.copytree(handmade, wd)
    (wd / "library" / "round_002.json").write_text("{not json")
    (wd / "metrics.jsonl").write_text("[1, 2]\n")
    text = write_html_report(wd).read_text(encoding="utf-8")
    notes = text.split('<div class="notes">')[1].split("</div>")[0]
    assert "library/round_002.json could not be read" in notes
    assert "metrics.jsonl could not be read" in notes
    assert scan(text).external == []
    assert "round_003.json" in text                      # the other snapshots are still listed


def test_a_drawing_file_is_the_fallback_and_never_runs(tmp_path, handmade):
    """Without a library file or composites to draw from, plots/library_dag.svg is shown; one that
    holds a script or a link goes in as a data URI, where the browser runs and loads nothing."""
    wd = tmp_path / "run"
    shutil.copytree(handmade, wd)
    shutil.rmtree(wd / "library")
    report = json.loads((wd / "report.json").read_text())
    report["composites"] = []
    (wd / "report.json").write_text(json.dumps(report))
    (wd / "plots" / "library_dag.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script>'
        '<image href="https://example.com/x.png"/></svg>')
    text = write_html_report(wd).read_text(encoding="utf-8")
    notes = text.split('<div class="notes">')[1].split("</div>")[0]
    assert "embedded as an image, not inline" in notes
    assert "<script" not in text and "example.com" not in text  # only inside the base64 data URI
    assert 'src="data:image/svg+xml;base64,' in text
    assert scan(text).external == []
    (wd / "plots" / "library_dag.svg").unlink()
    text = write_html_report(wd).read_text(encoding="utf-8")
    assert "No drawing" in text and "the DAG drawing is not shown" in text


class _Tables(html.parser.HTMLParser):
    """The class of the element that holds each table."""

    def __init__(self):
        super().__init__()
        self.stack, self.parents = [], []

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.parents.append(self.stack[-1] if self.stack else None)
        if tag not in ("br", "wbr", "meta", "img", "line", "rect", "circle", "path", "polyline"):
            self.stack.append((tag, dict(attrs).get("class")))

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break


def test_every_table_scrolls_in_its_own_box(handmade):
    text = render_html_report(handmade)
    t = _Tables()
    t.feed(text)
    assert len(t.parents) >= 5 and set(t.parents) == {("div", "tablebox")}, t.parents
    css = text.split("<style>")[1].split("</style>")[0]
    assert re.search(r"\.tablebox\{[^}]*overflow-x:auto", css)
    assert "white-space:nowrap}" not in css.split("th{")[1][:40]   # headers wrap
    assert "floor_<wbr>div" not in text and "_<wbr>" in text           # long names may wrap at "_"


def test_retrieval_numbers_say_what_they_count(handmade):
    from cocoda_jax.report.html import COST_MODEL_LABEL, PROMPT_LABEL
    text = render_html_report(handmade)
    cards = text.split('<div class="cards">')[1].split('<div class="notes">')[0].split("<section")[0]
    assert COST_MODEL_LABEL in cards and "tokens / query" in cards and "modelled" in cards
    assert PROMPT_LABEL in cards and "210.5" in cards and "tokens / episode" in cards
    assert "8 cards" in cards and "cascade retrieval" in cards
    section = text.split('<section id="retrieval">')[1].split("</section>")[0]
    assert f"{COST_MODEL_LABEL}: 120 tokens per query" in section
    assert f"{PROMPT_LABEL}: 210.5 tokens per" in section
    assert "not what this run's planner was shown" in section


def test_dag_is_drawn_from_the_final_library(handmade):
    from cocoda_jax.library.draw import overlaps
    from cocoda_jax.report.html import dag_svg
    text = render_html_report(handmade)
    dag = text.split('<section id="dag">')[1].split("</section>")[0]
    assert 'class="dag-own"' in dag and "from library/round_003.json" in dag
    assert "<title>axpb2: depth 2" in dag and "calls axpb \u00d72" in dag   # hover: whole name and calls
    lib = LibrarySnapshot.from_json((handmade / "library" / "round_003.json").read_bytes())
    _, layout = dag_svg(lib.to_networkx())
    assert overlaps(layout.boxes) == []


def test_no_report_json(tmp_path):
    with pytest.raises(FileNotFoundError, match="report.json"):
        write_html_report(tmp_path)
    (tmp_path / "report.json").write_text("[1]")
    with pytest.raises(ValueError, match="JSON object"):
        write_html_report(tmp_path)
    assert not (tmp_path / REPORT_HTML).exists()


# -- headless Chromium ------------------------------------------------------------------------------

PROBE = """<script>(function(){var errs=[],root=document.documentElement;
function rec(s){errs.push(String(s));root.setAttribute('data-probe-errors',JSON.stringify(errs));}
window.addEventListener('error',function(e){var t=e.target;
 if(t&&t!==window&&t.nodeType===1){var u=t.src||(t.href&&(t.href.baseVal||t.href))||t.tagName;rec('load failed: '+u);}
 else{rec('uncaught: '+e.message);}},true);
['error','warn'].forEach(function(k){var o=console[k];console[k]=function(){
 rec('console.'+k+': '+Array.prototype.join.call(arguments,' '));return o.apply(console,arguments);};});
window.addEventListener('load',function(){
 root.setAttribute('data-probe-errors',JSON.stringify(errs));
 root.setAttribute('data-probe-resources',JSON.stringify(
   performance.getEntriesByType('resource').map(function(e){return e.name;})));
 root.setAttribute('data-probe-done','1');});})();</script>"""


@pytest.fixture(scope="module")
def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        exe = shutil.which(name)
        if exe:
            return exe
    pytest.skip("chromium not installed (Debian: apt-get install chromium; .ci/run tries): "
                "report.html was not checked in a browser")


def _chromium(exe, tmp_path, *args, timeout=180):
    cmd = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _console_lines(stderr):
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


class _Root(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.attrs = None

    def handle_starttag(self, tag, attrs):
        if tag == "html" and self.attrs is None:
            self.attrs = dict(attrs)


def probe_page(exe, page_text, tmp_path):
    """(errors, resources fetched, console lines) of ``page_text`` loaded in Chromium with the probe."""
    folder = tmp_path / "probe"
    folder.mkdir(exist_ok=True)
    m = re.search(r"<head[^>]*>", page_text, re.IGNORECASE)
    probed = page_text[:m.end()] + PROBE + page_text[m.end():] if m else PROBE + page_text
    page = folder / "page.html"
    page.write_text(probed, encoding="utf-8")
    out = _chromium(exe, tmp_path, "--virtual-time-budget=10000", "--dump-dom", page.as_uri())
    root = _Root()
    root.feed(out.stdout)
    attrs = root.attrs or {}
    assert attrs.get("data-probe-done") == "1", (
        f"the probe did not finish (rc {out.returncode}); stdout head: {out.stdout[:300]!r}; "
        f"stderr tail: {out.stderr[-1500:]}")
    return (json.loads(attrs.get("data-probe-errors") or "[]"), json.loads(attrs.get("data-probe-resources") or "[]"),
            _console_lines(out.stderr))


def screenshot(exe, html_path, tmp_path):
    """(pixels, console lines) of ``html_path`` at 1200x2000."""
    png = tmp_path / "shot.png"
    out = _chromium(exe, tmp_path, f"--screenshot={png}", "--window-size=1200,2000", html_path.as_uri())
    assert png.is_file(), f"no screenshot (rc {out.returncode}); stderr tail: {out.stderr[-1500:]}"
    return matplotlib.image.imread(str(png)), _console_lines(out.stderr)


def assert_not_blank(pixels):
    assert pixels.shape[:2] == (2000, 1200), pixels.shape
    grey = pixels[..., :3].mean(axis=-1)
    assert grey.std() > 0.05, f"the screenshot is nearly uniform (std {grey.std():.4f})"
    assert (grey < 0.9).mean() > 0.02, "less than 2% of the screenshot is drawn"
    colours = np.unique((pixels[..., :3] * 15).round().reshape(-1, 3), axis=0)
    assert len(colours) >= 8, f"only {len(colours)} colours: no charts?"


def browser_check(exe, html_path, tmp_path):
    pixels, console = screenshot(exe, html_path, tmp_path)
    assert console == [], console
    assert_not_blank(pixels)
    errors, resources, console = probe_page(exe, html_path.read_text(encoding="utf-8"), tmp_path)
    assert errors == [] and resources == [] and console == [], (errors, resources, console)


def test_probe_catches_errors(chromium, tmp_path):
    """The negative control: a broken page is caught by the probe and by the console log."""
    bad = ('<!DOCTYPE html><html><head><title>bad</title></head><body><h1>bad</h1>'
           '<img src="https://example.invalid/x.png"><img src="missing.png">'
           '<script>console.error("probe-check"); notDefined();</script></body></html>')
    errors, resources, console = probe_page(chromium, bad, tmp_path)
    joined = " ".join(errors + resources)
    assert "console.error: probe-check" in errors
    assert any("notDefined" in e for e in errors)
    assert "missing.png" in joined and "example.invalid" in joined
    assert any("notDefined" in c for c in console) and any("probe-check" in c for c in console)


def test_handmade_report_in_chromium(chromium, handmade, tmp_path):
    browser_check(chromium, write_html_report(handmade), tmp_path)


def test_bare_report_in_chromium(chromium, tmp_path):
    wd = make_workdir(tmp_path / "bare", full=False)
    browser_check(chromium, write_html_report(wd), tmp_path)


MEASURE = """<script>window.addEventListener('load',function(){var r=document.documentElement,out={};
out.page=[r.scrollWidth,r.clientWidth];
out.boxes=[].map.call(document.querySelectorAll('.tablebox'),function(b){return [b.scrollWidth,b.clientWidth];});
var t=[].map.call(document.querySelectorAll('svg.dag-own text'),function(e){var b=e.getBoundingClientRect();
 return [b.left,b.top,b.right,b.bottom,e.textContent];});var bad=[];
for(var i=0;i<t.length;i++)for(var j=i+1;j<t.length;j++){var a=t[i],c=t[j];
 if(a[0]<c[2]&&c[0]<a[2]&&a[1]<c[3]&&c[1]<a[3])bad.push(a[4]+' / '+c[4]);}
out.labels=t.length;out.overlaps=bad;r.setAttribute('data-measure',JSON.stringify(out));});</script>"""


def measure_layout(exe, page_text, tmp_path, width):
    """The page's layout in Chromium at ``width`` px: (scrollWidth, clientWidth) of the page and of
    each table box, the DAG's label count and its pairs of label boxes that meet."""
    folder = tmp_path / "measure"
    folder.mkdir(exist_ok=True)
    m = re.search(r"<head[^>]*>", page_text)
    page = folder / "page.html"
    page.write_text(page_text[:m.end()] + MEASURE + page_text[m.end():], encoding="utf-8")
    out = _chromium(exe, tmp_path, f"--window-size={width},1200", "--virtual-time-budget=5000", "--dump-dom",
                    page.as_uri())
    root = _Root()
    root.feed(out.stdout)
    assert root.attrs and root.attrs.get("data-measure"), f"no measurement; stderr tail: {out.stderr[-1500:]}"
    return json.loads(root.attrs["data-measure"])


@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
    """The main job's committed report.json and metrics, in a scratch workdir."""
    src = pathlib.Path(__file__).resolve().parents[2] / "docs/results/loop_2026-12-04/main_job"
    wd = tmp_path_factory.mktemp("main_job") / "main_job"
    wd.mkdir()
    for name in ("report.json", "metrics.jsonl"):
        shutil.copy(src / name, wd / name)
    return wd


def test_main_job_report_in_chromium(chromium, main_job, tmp_path):
    """The 39-tool main job at a laptop's width: no sideways page scroll, every table fits its box,
    and no two DAG labels meet as Chromium lays them out; at a phone's width the page still does not
    widen (the table boxes scroll instead)."""
    path = write_html_report(main_job)
    browser_check(chromium, path, tmp_path)
    wide = measure_layout(chromium, path.read_text(encoding="utf-8"), tmp_path, 1200)
    assert wide["page"][0] <= wide["page"][1], wide["page"]
    assert wide["boxes"] and all(sw <= cw for sw, cw in wide["boxes"]), wide["boxes"]
    assert wide["labels"] >= 19 + 9 and wide["overlaps"] == [], wide["overlaps"][:5]
    narrow = measure_layout(chromium, path.read_text(encoding="utf-8"), tmp_path, 480)
    assert narrow["page"][0] <= narrow["page"][1], narrow["page"]
    assert narrow["overlaps"] == []


def test_a_120_tool_dag_in_chromium(chromium, tmp_path):
    """Labels of a large library (long, similar names) do not meet in the browser either."""
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "library"))
    from test_lib_draw import synthetic_library

    from cocoda_jax.library.draw import graph_from_composites
    from cocoda_jax.report.html import dag_svg
    markup, layout = dag_svg(graph_from_composites(*synthetic_library(120, 40)))
    assert len(layout.boxes) == 120
    page = f"<!DOCTYPE html><html><head><meta charset=utf-8></head><body>{markup}</body></html>"
    got = measure_layout(chromium, page, tmp_path, 1200)
    assert got["labels"] >= 120 and got["overlaps"] == [], got["overlaps"][:5]


# -- a real (tiny) co-evolution run ---------------------------------------------------------------

@pytest.fixture(scope="module")
def real_run(tiny_run, tmp_path_factory):
    """A copy of the session's tiny run (these tests rewrite its report.html)."""
    wd = tmp_path_factory.mktemp("coevolve") / "run"
    shutil.copytree(tiny_run[0], wd)
    return wd


@pytest.mark.slow
def test_real_run_report(real_run):
    report = json.loads((real_run / "report.json").read_text())
    text = write_html_report(real_run).read_text(encoding="utf-8")
    assert scan(text).external == []
    assert '<div class="notes">' not in text, text.split('<div class="notes">')[1][:500]
    for r in report["per_round"]:
        assert f"round_{r['round']:03d}.json" in text
    for c in report["composites"]:
        assert f"<code>{c['name']}</code>" in text
    assert ("RODS live pool by region per epoch" in text) == bool(report.get("rods_per_epoch"))
    dag = text.split('<section id="dag">')[1].split("</section>")[0]
    assert "<svg" in dag


@pytest.mark.slow
def test_real_run_report_in_chromium(chromium, real_run, tmp_path):
    browser_check(chromium, write_html_report(real_run), tmp_path)
