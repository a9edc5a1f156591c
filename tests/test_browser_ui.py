"""The report and its instance browser in a real browser (Playwright driving Debian's Chromium, no browser download),
on a real small build: Spider's wine_1 as a HoloBench build (2,048 and 4,096 tokens, relevant rows at the beginning
or the end: every instance the build keeps), answered by two fake models through tests/fakeserver.py — one with a long name whose
replies carry ``<think>`` blocks holding HTML and a script, one whose replies end in a chat special token — then
scored and reported with the CLI.

Checked, with every expected value computed from the stored Parquet or from the fake models' own replies: the
browser shows every answer of the build (opened as a file and served over HTTP), with reasoning apart and markup
shown as text (no script runs); filters give the counts the tables give; a count in the report opens exactly its
instances; the context's highlight covers the evidence text (decoded from its tokens by tiktoken); the figures'
legends name the models in full; and nothing is requested from the network (every request other than file:// and
127.0.0.1 is blocked and recorded; none may be). A new user's path — from the report's first page to one model's
wrong answer to a chosen question — is walked by clicks. Screenshots go to the test's temporary directory (the path
is printed; ``CTXBENCH_TEST_OUTPUT=DIR`` copies them there).

Skipped where Chromium or Playwright is absent; under ``CI=true`` their absence fails the test.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fakeserver import FakeOpenAIServer, message_text

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
LONG = "openai/a-very-long-model-name-that-used-to-be-cut-off-in-legends-2025-05-preview"
SMALL = "openai/fake-small"
SCRIPT = "<script>window.__pwned = 1; alert('pwned')</script>"


def _require(cond: bool, why: str) -> None:
    if not cond:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why + " (required under CI=true)")
        pytest.skip(why)


def _gold_text(gold: str) -> str:
    return " | ".join(str(int(v) if isinstance(v, float) and v.is_integer() else v) for v in json.loads(gold)[0])


@pytest.fixture(scope="module")
def scored(tmp_path_factory, spider_db):
    """(build dir, {(instance_id, model): reply}, screenshots dir): built, evaluated by both fake models, scored
    and reported through the CLI."""
    _require(os.path.exists(CHROMIUM), f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _require(False, "playwright is not installed (pip install -e '.[service]')")
    from ctxbench.cli import app

    d = tmp_path_factory.mktemp("browser")
    mp = pytest.MonkeyPatch()
    mp.setenv("CTXBENCH_HOME", str(d / "home"))
    mp.setenv("OPENAI_API_KEY", "sk-test")
    runner = CliRunner()
    build = d / "build"
    r = runner.invoke(app, ["build", "holobench", "--db", str(spider_db("wine_1")), "--lengths", "2048,4096",
                            "--setting", "density", "--position", "beginning,end", "--out", str(build)])
    assert r.exit_code == 0, r.output
    inst = pq.read_table(build / "instances.parquet", columns=["instance_id", "context", "question", "gold"]).to_pylist()
    replies: dict[tuple[str, str], str] = {}

    def answer(body: dict) -> str:
        user = message_text([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
        k, row = next((k, x) for k, x in enumerate(inst) if x["context"] in user and x["question"] in user)
        val = _gold_text(row["gold"])
        if body["model"] == LONG.split("/", 1)[1]:
            text = (f"<think>The rows say <b>{val}</b> &amp; more</think>\nAnswer: 999999" if k % 3 == 0 else
                    f"<think>Let me count. {SCRIPT}</think>\nAnswer: {val}")
        else:
            text = f"Answer: {val if k % 2 else 'nothing'}<|im_end|>"
        replies[(row["instance_id"], "openai/" + body["model"])] = text
        return text

    with FakeOpenAIServer(answer_fn=answer) as srv:
        for m in (LONG, SMALL):
            r = runner.invoke(app, ["evaluate", "--build", str(build), "--model", m, "--base-url", srv.base_url])
            assert r.exit_code == 0, r.output
    for cmd in (["score", "--build", str(build)], ["report", "--build", str(build)]):
        r = runner.invoke(app, cmd)
        assert r.exit_code == 0, r.output
    shots = d / "screenshots"
    shots.mkdir()
    yield build, replies, shots
    mp.undo()
    out = os.environ.get("CTXBENCH_TEST_OUTPUT")
    if out:
        shutil.copytree(shots, Path(out) / "browser", dirs_exist_ok=True)
    print(f"screenshots: {sorted(str(p) for p in shots.iterdir())}")


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


class Page:
    """A page whose every request off this machine is blocked and recorded, and whose dialogs and script errors
    are recorded too."""

    def __init__(self, browser):
        self.ctx = browser.new_context(viewport={"width": 1300, "height": 950})
        self.external: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.ctx.route("**/*", self._route)
        self.page = self.ctx.new_page()
        self.page.set_default_timeout(30_000)
        self.page.on("request", self._seen)
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    @staticmethod
    def local(url: str) -> bool:
        u = urlparse(url)
        return u.scheme in ("file", "data", "about", "blob") or u.hostname in ("127.0.0.1", "localhost")

    def _seen(self, req) -> None:
        if not self.local(req.url):
            self.external.append(req.url)

    def _route(self, route) -> None:
        if self.local(route.request.url):
            route.continue_()
        else:
            self.external.append(route.request.url)
            route.abort()

    def close(self) -> None:
        assert self.external == [], f"requests off the machine: {self.external}"
        assert self.errors == [], self.errors
        assert self.dialogs == [], f"a reply's script ran: {self.dialogs}"
        self.ctx.close()


@pytest.fixture
def page(chromium):
    p = Page(chromium)
    yield p
    p.close()


def _n(build: Path) -> int:
    """The build's instances: every question x context the wine_1 build kept (its quarantine holds the rest)."""
    n = pq.read_table(build / "instances.parquet", columns=["instance_id"]).num_rows
    assert n > 40  # 2 tiers x 2 positions of wine_1's questions, less the quarantined ones
    return n


def counts(page) -> tuple[int, int]:
    c = page.locator("#count")
    return int(c.get_attribute("data-instances")), int(c.get_attribute("data-answers"))


def _expected_visible(reply: str) -> str:
    return reply.split("</think>", 1)[1].strip() if "</think>" in reply else reply.strip()


def _check_every_answer(pg, build: Path, replies: dict) -> None:
    resp = pq.read_table(build / "responses.parquet", columns=["instance_id", "model"]).to_pylist()
    arts = pg.locator("article.ans")
    assert arts.count() == len(resp) == 2 * _n(build)
    shown = pg.evaluate("""() => Array.from(document.querySelectorAll('article.ans')).map(a =>
        [a.dataset.instance, a.dataset.model, a.querySelector('.reply pre').textContent,
         Array.from(a.querySelectorAll('details.reasoning pre')).map(p => p.textContent).join('\\n')])""")
    assert sorted((i, m) for i, m, _, _ in shown) == sorted((r["instance_id"], r["model"]) for r in resp)
    for i, m, visible, reasoning in shown:
        reply = replies[(i, m)]
        assert visible == _expected_visible(reply), (i, m)       # markup and special tokens shown as written
        if "</think>" in reply:
            assert reasoning == reply.split("</think>")[0] + "</think>"
        else:
            assert reasoning == ""
    assert pg.evaluate("() => window.__pwned === undefined")


@pytest.mark.slow
def test_every_answer_is_shown_as_a_file_and_over_http(scored, page):
    build, replies, shots = scored
    pg = page.page
    pg.goto((build / "report" / "instances.html").as_uri())
    assert counts(pg) == (_n(build), 2 * _n(build))
    _check_every_answer(pg, build, replies)
    pg.screenshot(path=str(shots / "1-browser-file.png"))
    # a reasoning block holding a script, opened: shown as text
    det = pg.locator("details.reasoning").filter(has_text="Let me count").first
    det.locator("summary").click()
    assert SCRIPT in det.inner_text()
    det.scroll_into_view_if_needed()
    pg.screenshot(path=str(shots / "2-reasoning-apart.png"))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          functools.partial(Quiet, directory=str(build / "report")))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        pg.goto(f"http://127.0.0.1:{srv.server_address[1]}/instances.html")
        assert counts(pg) == (_n(build), 2 * _n(build))
        _check_every_answer(pg, build, replies)
    finally:
        srv.shutdown()
        srv.server_close()


def test_filters_sorting_and_the_address_keep_what_the_tables_count(scored, page):
    build, _, shots = scored
    pg = page.page
    inst = {r["instance_id"]: r for r in pq.read_table(
        build / "instances.parquet", columns=["instance_id", "position", "query_types", "target_tokens"]).to_pylist()}
    sc = pq.read_table(build / "scores.parquet", columns=["instance_id", "model", "matcher", "score"]).to_pylist()
    assert {r["matcher"] for r in sc} == {"row_match"}
    pg.goto((build / "report" / "instances.html").as_uri())

    pg.select_option("#f-model", SMALL)
    assert counts(pg) == (_n(build), _n(build))
    assert set(pg.evaluate("() => Array.from(document.querySelectorAll('article.ans')).map(a => a.dataset.model)")) \
        == {SMALL}
    wrong = {r["instance_id"] for r in sc if r["model"] == SMALL and r["score"] == 0}
    pg.select_option("#f-score", "wrong")
    assert counts(pg) == (len(wrong), len(wrong)) and 0 < len(wrong) < _n(build)
    pg.select_option("#f-position", "end")
    want = {i for i in wrong if inst[i]["position"] == "end"}
    assert counts(pg) == (len(want), len(want)) and want
    shown = set(pg.evaluate("() => Array.from(document.querySelectorAll('section.inst')).map(s => s.dataset.instance)"))
    assert shown == want
    pg.screenshot(path=str(shots / "3-filtered.png"))
    # the filters are in the address: a reload (or a shared link) shows the same
    assert "model=openai%2Ffake-small" in pg.url and "score=wrong" in pg.url and "position=end" in pg.url
    pg.reload()
    assert counts(pg) == (len(want), len(want))

    # a list-valued column (query_types) filters on any of its values
    pg.click("text=clear filters")
    assert counts(pg) == (_n(build), 2 * _n(build))
    pg.select_option("#f-query_types", "Join")
    joins = [i for i, r in inst.items() if "Join" in json.loads(r["query_types"])]
    assert counts(pg) == (len(joins), 2 * len(joins)) and joins
    pg.select_option("#f-length", "4096")
    n4096 = [i for i in joins if inst[i]["target_tokens"] == 4096]
    assert counts(pg) == (len(n4096), 2 * len(n4096))

    # sorting by score, worst first: the instances' mean scores never decrease down the page
    pg.click("text=clear filters")
    pg.select_option("#f-model", LONG)
    pg.select_option("#f-sort", "score")
    order = pg.evaluate("() => Array.from(document.querySelectorAll('section.inst')).map(s => s.dataset.instance)")
    mean = {r["instance_id"]: r["score"] for r in sc if r["model"] == LONG}
    assert [mean[i] for i in order] == sorted(mean[i] for i in order) and len(order) == _n(build)
    pg.select_option("#f-sort", "-score")
    order = pg.evaluate("() => Array.from(document.querySelectorAll('section.inst')).map(s => s.dataset.instance)")
    assert [mean[i] for i in order] == sorted((mean[i] for i in order), reverse=True)


def test_an_aggregate_cell_opens_its_instances(scored, page):
    build, _, shots = scored
    pg = page.page
    by_len = pq.read_table(build / "report" / "by_length.parquet").to_pylist()
    row = next(r for r in by_len if r["model"] == LONG and r["context_length"] == 4096)
    pg.goto((build / "report" / "index.html").as_uri())
    tr = pg.locator("table tr").filter(has_text=LONG).filter(has_text="4096").first
    tr.locator("td a").first.click()
    pg.wait_for_url("**/instances.html#*")
    assert counts(pg) == (row["n"], row["n"])
    inst = {r["instance_id"]: r["target_tokens"] for r in
            pq.read_table(build / "instances.parquet", columns=["instance_id", "target_tokens"]).to_pylist()}
    scored_ids = {r["instance_id"] for r in pq.read_table(build / "scores.parquet").to_pylist()
                  if r["model"] == LONG and inst[r["instance_id"]] == 4096}
    shown = set(pg.evaluate("() => Array.from(document.querySelectorAll('section.inst')).map(s => s.dataset.instance)"))
    assert shown == scored_ids
    assert set(pg.evaluate("() => Array.from(document.querySelectorAll('article.ans')).map(a => a.dataset.model)")) \
        == {LONG}
    # the mean of the scores the page shows is the table's score
    shown_scores = pg.evaluate("() => Array.from(document.querySelectorAll('article.ans .score.primary')).map(s => "
                               "parseFloat(s.textContent.split(' ').pop()))")
    assert len(shown_scores) == row["n"] and sum(shown_scores) / row["n"] == pytest.approx(row["score"], abs=1e-2)
    pg.screenshot(path=str(shots / "4-from-a-table-cell.png"))


def test_the_context_highlight_covers_the_evidence(scored, page, tiktoken_enc):
    build, _, shots = scored
    pg = page.page
    enc = tiktoken_enc("cl100k_base")
    rows = pq.read_table(build / "instances.parquet", columns=["instance_id", "context", "evidence_spans",
                                                               "position"]).to_pylist()
    r = next(x for x in rows if x["position"] == "end")
    spans = json.loads(r["evidence_spans"])
    toks = enc.encode(r["context"])
    pg.goto((build / "report" / "instances.html").as_uri() + f"#q={r['instance_id']}")
    assert counts(pg)[0] == 1
    pg.locator("details.context summary").click()
    pg.wait_for_selector("mark.evidence")
    marks = pg.evaluate("() => Array.from(document.querySelectorAll('mark.evidence')).map(m => m.textContent)")
    assert "".join(marks) == "".join(enc.decode(toks[s:e]) for s, e in sorted(spans))
    # and the whole context is there, in order
    assert pg.locator("details.context pre.ctx").text_content() == r["context"]
    pg.screenshot(path=str(shots / "5-context-evidence.png"))


def test_figures_name_the_models_in_full(scored, page):
    build, _, shots = scored
    pg = page.page
    pg.goto((build / "report" / "index.html").as_uri())
    pg.wait_for_selector(".legendtext")
    legend = pg.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot')).slice(0, 1).map(p => {
        const box = p.getBoundingClientRect();
        return Array.from(p.querySelectorAll('.legendtext')).map(t => {
            const r = t.getBoundingClientRect();
            return [t.textContent, r.left >= box.left - 1 && r.right <= box.right + 1];
        });
    })[0]""")
    assert sorted(t for t, _ in legend) == sorted([f"{LONG} (lc)", f"{SMALL} (lc)"])
    assert all(inside for _, inside in legend), legend       # drawn whole inside the figure
    pg.screenshot(path=str(shots / "6-report.png"))
    # the browser's model filter is wide enough for the longest name
    pg.goto((build / "report" / "instances.html").as_uri())
    pg.select_option("#f-model", LONG)
    fits = pg.evaluate("""() => {
        const s = document.querySelector('#f-model'), c = document.createElement('canvas').getContext('2d');
        c.font = getComputedStyle(s).font;
        return [c.measureText(s.options[s.selectedIndex].text).width, s.clientWidth];
    }""")
    assert fits[0] < fits[1], fits


def test_a_new_user_finds_a_wrong_answer_to_a_chosen_question(scored, page):
    """From the report's first page: the model's "wrong answers" link, then words of the question."""
    build, replies, shots = scored
    pg = page.page
    inst = {r["instance_id"]: r for r in pq.read_table(build / "instances.parquet",
                                                       columns=["instance_id", "question"]).to_pylist()}
    sc = pq.read_table(build / "scores.parquet").to_pylist()
    target = next(r for r in sc if r["model"] == LONG and r["score"] == 0)
    question = inst[target["instance_id"]]["question"]
    same_q_wrong = {r["instance_id"] for r in sc if r["model"] == LONG and r["score"] == 0
                    and inst[r["instance_id"]]["question"] == question}
    pg.goto((build / "report" / "index.html").as_uri())
    pg.screenshot(path=str(shots / "7-new-user-start.png"))
    pg.locator("nav.browse a", has_text=LONG).click()
    pg.wait_for_url("**/instances.html#*")
    pg.select_option("#f-question", question)          # picked from the list of the build's questions
    assert counts(pg) == (len(same_q_wrong), len(same_q_wrong))
    pg.select_option("#f-question", "")
    pg.fill("#f-q", " ".join(question.split()[2:6]))   # or found by a few of its words
    assert counts(pg)[1] >= len(same_q_wrong)
    pg.fill("#f-q", "")
    pg.select_option("#f-question", question)
    art = pg.locator("article.ans").first
    assert art.get_attribute("data-model") == LONG and art.get_attribute("data-verdict") == "wrong"
    assert art.locator(".reply pre").text_content() == "Answer: 999999"
    pg.screenshot(path=str(shots / "8-new-user-found.png"))
