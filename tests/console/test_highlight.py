"""The console's highlighter: everything escaped, the error line marked, broken code shown whole."""

from __future__ import annotations

import re

from codeact.engine.service.console._highlight import highlight


def test_source_text_is_escaped_and_tokens_are_classed() -> None:
    lines = highlight('def f(x):\n    return "<b>" if x else None  # <i>\n')
    assert [line.number for line in lines] == [1, 2]
    assert str(lines[0].html) == '<span class="t-kw">def</span> <span class="t-fn">f</span>(x):'
    html = str(lines[1].html)
    assert "&lt;b&gt;" in html and "<b>" not in html and "&lt;i&gt;" in html
    assert '<span class="t-str">"&lt;b&gt;"</span>' in html


def test_the_error_line_is_marked() -> None:
    lines = highlight("a = 1\nb = a / 0\nc = 2\n", error_line=2)
    assert [line.error for line in lines] == [False, True, False]


def test_broken_code_is_shown_whole() -> None:
    code = 'x = (1, 2\ny = """never closed\nprint(y\n  def broken(:\n'
    lines = highlight(code)
    assert len(lines) == 4
    text = re.sub(r"<[^>]+>", "", "\n".join(str(line.html) for line in lines))
    assert text == code.rstrip("\n")
    for piece in ("x = (1, 2", "never closed", "print", "broken(:"):
        assert piece in text


def test_a_multi_line_string_keeps_one_span_per_line() -> None:
    lines = highlight('s = """one\n<two>\nthree"""\n')
    assert str(lines[1].html) == '<span class="t-str">&lt;two&gt;</span>'
    assert all(str(line.html).count("<span") == str(line.html).count("</span>") for line in lines)
