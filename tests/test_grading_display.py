"""How check() shows its report: coloured HTML in a notebook, plain text everywhere else.

The plain text is the contract the grading tests read; the HTML says the same thing with
colour and wrapping, and escapes everything (messages quote the learner's code and errors).
"""

import json
import sys

import nbformat

from durable_lite.grading import checker, checks
from durable_lite.grading.checks import FAILED, NOT_ATTEMPTED, PASSED, QuestionResult

Outcome = checks.TestResult      # (a name pytest would try to collect)


def result(*tests, title="predict the refunds"):
    return QuestionResult("01_naive_retry", "q2", title, list(tests))


MIXED = result(Outcome("no crash: one refund", PASSED),
               Outcome("crash after <refund>", FAILED,
                           "expected 2 refunds, got 1\n(at: if x < 3 and y > 1: pay())",
                           "a crash <b>after</b> the effect repeats it & more"))


def test_html_says_what_the_text_says_with_colours():
    text, page = MIXED.report(), MIXED.html()
    assert "1/2 — some tests failed" in text and "1/2 — some tests failed" in page
    assert "q2 · predict the refunds" in page
    assert "#c0392b" in page                                  # the failure, in red
    assert page.count("#1e7b34") == 1                         # the one pass, in green
    assert "✓ no crash: one refund" in page and "✗ crash after &lt;refund&gt;" in page
    assert "white-space:pre-wrap" in page and "overflow-wrap:anywhere" in page
    passed = result(Outcome("a", PASSED), Outcome("b", PASSED))
    assert "all tests passed ✓" in passed.html() and "#c0392b" not in passed.html()


def test_html_escapes_every_piece_of_learner_text():
    page = MIXED.html()
    for raw in ("<refund>", "x < 3 and y > 1", "<b>after</b>", "& more"):
        assert raw not in page
    for escaped in ("&lt;refund&gt;", "x &lt; 3 and y &gt; 1", "&lt;b&gt;after&lt;/b&gt;",
                    "&amp; more"):
        assert escaped in page
    hostile = result(Outcome("t", NOT_ATTEMPTED, "<script>alert(1)</script>", "<img src=x>"),
                     title="<i>title</i>")
    page = hostile.html()
    assert "<script>" not in page and "<img" not in page and "<i>title</i>" not in page
    assert "not attempted yet (0/1 tests)" in page and "&lt;script&gt;" in page


def test_in_a_terminal_or_under_pytest_check_prints_plain_text(capsys):
    check = checker("01_naive_retry")
    check("q2", lambda step, when: 0)
    out = capsys.readouterr().out
    assert "q2 · predict the refunds:" in out and "✗" in out and "<div" not in out


class FakeShell:
    kernel = object()


def test_in_a_notebook_check_displays_html_with_the_text_beside_it(monkeypatch, capsys):
    import IPython
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: FakeShell())
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append((obj, raw)))
    checker("01_naive_retry")("q2", lambda step, when: 0)
    assert capsys.readouterr().out == ""
    ((bundle, raw),) = shown
    assert raw is True
    assert bundle["text/plain"].startswith("q2 · predict the refunds:")
    assert "<div" in bundle["text/html"] and "#c0392b" in bundle["text/html"]


def test_the_grader_gets_plain_text_even_in_a_kernel(monkeypatch, capsys, tmp_path):
    import IPython

    monkeypatch.setattr(checks, "PLAIN_TEXT", True)            # what the grader's first cell sets
    monkeypatch.setattr(IPython, "get_ipython", lambda: FakeShell())
    checker("01_naive_retry")("q2", lambda step, when: 0)
    assert "q2 · predict the refunds:" in capsys.readouterr().out


def test_checking_does_not_import_ipython(monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    checks._notebook_is_watching()
    assert "IPython" not in sys.modules


def test_a_real_kernel_shows_the_html(tmp_path, monkeypatch):
    """What a learner's notebook saves: one display output with HTML and the plain text."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'from durable_lite.grading import checker\n'
        'check = checker("01_naive_retry")\n'
        'check("q2", lambda step, when: 0)')])
    NotebookClient(nb, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    (out,) = nb.cells[0].outputs
    assert out.output_type == "display_data", json.dumps(out)
    assert out.data["text/plain"].startswith("q2 · predict the refunds:")
    assert "#c0392b" in out.data["text/html"]
