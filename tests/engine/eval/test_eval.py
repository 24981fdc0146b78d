"""``codeact eval``: the oracle scores 100 % on the shipped suite in every mode; reports; a broken toolkit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codeact.engine.eval import EvalConfig, EvalError, load_suite, run_eval
from codeact.engine.eval.report import render_table, summarize
from codeact.engine.eval.suite import BUILTIN_SUITES, check_answer

CODEACT = str(Path(sys.executable).parent / "codeact")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"CODEACT_HOME": str(tmp_path / "home"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    return env


def _eval(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CODEACT, "eval", "--suite", "multitool", "--model", "oracle", "--concurrency", "4", *args],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=tmp_path,
        check=False,
        timeout=300,
    )


def test_the_oracle_solves_the_whole_suite_and_the_reports_are_written(tmp_path: Path) -> None:
    out = tmp_path / "full"
    run = _eval(tmp_path, "--modes", "fim-chat", "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    (config,) = report["configs"]
    assert config["mode"] == "fim-chat" and config["tasks"] >= 60
    failed = [t for t in report["tasks"] if not t["passed"]]
    assert failed == [] and config["success_rate"] == 1.0
    assert len(config["domains"]) >= 5
    assert config["avg_rounds"] > 1.5  # tasks need several rounds
    assert config["per_round"][0]["avg_prompt_tokens"] > 0 and config["per_round"][0]["avg_completion_tokens"] > 0
    assert "[64/64] PASS" in run.stderr or f"[{config['tasks']}/{config['tasks']}] PASS" in run.stderr
    markdown = (out / "report.md").read_text()
    assert "| fim-chat (oracle) | 64 | 100.0 % |" in markdown
    assert "tokens per round" in markdown
    page = (out / "report.html").read_text()
    assert (
        page.count("<svg") == 4
        and "<script" not in page
        and "http" not in page.split("<svg", 1)[1].replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    assert json.loads((out / "report.json").read_text())["configs"][0]["passed"] == config["tasks"]
    assert len(list((out / "results" / "oracle" / "fim-chat").glob("*.json"))) == config["tasks"]


def test_the_other_modes_compare_on_a_subset_and_an_eval_resumes(tmp_path: Path) -> None:
    out = tmp_path / "modes"
    args = ("--modes", "fim-completion,chat-blocks", "--modes", "react", "--per-domain", "1", "--out", str(out))
    first = _eval(tmp_path, *args)
    assert first.returncode == 0, first.stderr
    assert "blueprint.field.unknown" not in first.stderr  # the generated blueprints use known fields only
    assert "blueprint.workflow.codeact.ignored" not in first.stderr  # react does not inherit codeact-base's block
    lines = first.stdout.splitlines()
    assert lines[0].split()[:3] == ["config", "tasks", "success"]
    for mode in ("fim-completion", "chat-blocks", "react"):
        (row,) = [line for line in lines if line.startswith(f"{mode} (oracle)")]
        assert row.split()[2:4] == ["5", "100.0"], row
    report = json.loads((out / "report.json").read_text())
    rounds = {c["mode"]: c["avg_rounds"] for c in report["configs"]}
    assert rounds["react"] > rounds["chat-blocks"]  # one call per turn: more turns than code rounds
    # Interrupted or not, the same command again runs nothing that has a result file.
    (out / "results" / "oracle" / "react" / "dna-01.json").unlink()
    again = _eval(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("(done before)") == 14
    assert "PASS react dna-01  " in again.stderr


async def test_a_broken_toolkit_lowers_the_score(tmp_path: Path) -> None:
    suite_dir = tmp_path / "broken"
    shutil.copytree(BUILTIN_SUITES / "multitool", suite_dir)
    source = (suite_dir / "toolkits.py").read_text()
    broken = source.replace("return text[::-1]", "return text").replace("max(2.0, abs(amount) * 0.005)", "3.0")
    assert broken != source
    (suite_dir / "toolkits.py").write_text(broken)
    suite = load_suite(suite_dir)
    tasks = suite.select(["cipher-01", "cipher-02", "trade-01", "trade-02"])
    config = EvalConfig(modes=("fim-chat", "react"), out=tmp_path / "out", concurrency=4)
    results = await run_eval(suite, tasks, config)
    outcome = {(r["mode"], r["task"]): r["passed"] for r in results}
    for mode in ("fim-chat", "react"):
        assert outcome[(mode, "cipher-01")] and outcome[(mode, "trade-02")]  # untouched tools
        assert not outcome[(mode, "cipher-02")] and not outcome[(mode, "trade-01")]
    summary = summarize(results, suite=suite.name)
    assert [c["success_rate"] for c in summary["configs"]] == [0.5, 0.5]
    for c in summary["configs"]:  # every token spent, failed tasks' too, per task solved
        assert c["tokens_per_solved"] == round((c["input_tokens"] + c["output_tokens"]) / 2)
    assert "tok/solved" in render_table(summary).splitlines()[0]


def test_checkers() -> None:
    suite = load_suite("multitool")
    numeric = next(t for t in suite.tasks if t.checker.type == "numeric")
    assert check_answer(suite, numeric, numeric.expected)[0]
    assert check_answer(suite, numeric, str(numeric.expected))[0]
    passed, why = check_answer(suite, numeric, float(numeric.expected) + 1)
    assert not passed and "differs" in why
    assert not check_answer(suite, numeric, "about forty")[0]
    python = next(t for t in suite.tasks if t.checker.type == "python")
    assert check_answer(suite, python, f"  {str(python.expected).upper()}. ")[0]
    exact = next(t for t in suite.tasks if isinstance(t.expected, list))
    assert check_answer(suite, exact, tuple(exact.expected))[0]
    assert not check_answer(suite, exact, [*exact.expected, 99])[0]


def _write_suite(root: Path, tasks: list[dict[str, Any]]) -> Path:
    root.mkdir()
    (root / "suite.yaml").write_text("name: tiny\ntoolkits: tools.py\ntasks: tasks.yaml\n")
    (root / "tools.py").write_text("from codeact.toolkits import operation, toolkit\n")
    (root / "tasks.yaml").write_text(json.dumps({"tasks": tasks}))
    return root


def test_suite_errors_name_the_problem(tmp_path: Path) -> None:
    task = {"id": "a", "instruction": "x", "expected": 1, "toolkits": ["calc"]}
    with pytest.raises(EvalError, match="needs toolkits calc the suite does not define"):
        load_suite(_write_suite(tmp_path / "one", [task]))
    with pytest.raises(EvalError, match="duplicate task ids a"):
        load_suite(_write_suite(tmp_path / "two", [{**task, "toolkits": []}, {**task, "toolkits": []}]))
    with pytest.raises(EvalError, match="lacks expected"):
        load_suite(_write_suite(tmp_path / "three", [{"id": "a", "instruction": "x"}]))
    with pytest.raises(EvalError, match="no suite 'nope'.*multitool"):
        load_suite("nope")


def test_a_real_model_over_http_is_evaluated(
    tmp_path: Path, openai_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from codeact.engine.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    suite = load_suite("multitool")
    task = suite.select(["cipher-01"])[0]
    secret = task.instruction.split(": ", 1)[1].split("'")[1]
    openai_server.push(
        f"Let me decode it.\n```python\nplain = cipher.caesar(text={secret!r}, shift=4)\nprint(plain)\n```",
        f"That shifted the wrong way; undo it instead:\n```python\nplain = cipher.caesar(text={secret!r}, shift=-4)\n"
        "system.finish(plain)\n```",
    )
    out = tmp_path / "http"
    result = CliRunner().invoke(
        app,
        ["eval", "--suite", "multitool", "--task", "cipher-01", "--modes", "chat-blocks", "--json"]
        + ["--model", "openai/test-model", "--base-url", openai_server.base_url, "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (row,) = report["tasks"]
    assert row["passed"] and row["rounds"] == 2 and row["model"] == "openai/test-model"
    assert row["input_tokens"] > 0 and len(row["per_round"]) == 2
    posts = [r for r in openai_server.requests if r.method == "POST"]
    assert len(posts) == 2 and posts[0].body["model"] == "test-model"
    # no user answers an eval task: the model is offered system.finish, never system.ask_user
    prompt = json.dumps(posts[0].body["messages"])
    assert "def finish(" in prompt and "ask_user" not in prompt
    # the checker compares the answer itself: the task says which form it takes
    assert task.instruction + "\\nFinish with the text alone, not a sentence." in prompt
    assert (out / "results" / "openai_test-model" / "chat-blocks" / "cipher-01.json").is_file()


def test_an_answer_computed_but_not_returned_is_counted_as_lost(
    tmp_path: Path, openai_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 1.5B printed the right GC content, then answered the final-answer step with something else."""
    from typer.testing import CliRunner

    from codeact.engine.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    compute = (
        "```python\nrev = dna.reverse_complement(seq='ATGGAGCCCCCGCTCGGAGTCTGGGGAGTCTCC')\n"
        "gc = dna.gc_content(seq=rev)\nprint(gc)\n```"
    )
    openai_server.push(compute, compute, "0.5")  # round 2 repeats round 1: the final-answer step answers wrong
    out = tmp_path / "lost"
    result = CliRunner().invoke(
        app,
        ["eval", "--suite", "multitool", "--task", "dna-01", "--modes", "fim-chat", "--json"]
        + ["--model", "openai/test-model", "--base-url", openai_server.base_url, "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (row,) = report["tasks"]
    assert not row["passed"] and row["answer"] == 0.5
    assert row["lost"] == "round 1 printed '0.697'"
    assert report["configs"][0]["lost"] == 1
    assert "[answer computed, not returned: round 1 printed '0.697']" in result.stderr


def test_the_thought_mode_is_chosen_on_the_command_line(
    tmp_path: Path, openai_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--thought inline`` (issue 36's NextGoal measurement): the goal a reply states reaches the next prompt."""
    from typer.testing import CliRunner

    from codeact.engine.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    openai_server.push(
        "Thought: the GC content of the reverse complement.\n```python\n"
        "rev = dna.reverse_complement(seq='ATGGAGCCCCCGCTCGGAGTCTGGGGAGTCTCC')\ngc = dna.gc_content(seq=rev)\n"
        "print(gc)\n```\nNextGoal: finish with gc rounded to 3 places",
        "```python\nawait system.finish(answer=round(gc, 3))\n```",
    )
    out = tmp_path / "inline"
    args = ["eval", "--suite", "multitool", "--task", "dna-01", "--modes", "fim-chat", "--json", "--out", str(out)]
    args += ["--model", "openai/test-model", "--base-url", openai_server.base_url]
    result = CliRunner().invoke(app, [*args, "--thought", "inline"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["tasks"]
    assert row["passed"] and row["rounds"] == 2
    assert "thought: 'inline'" in (out / "blueprints" / "fim-chat" / "dna-01.yaml").read_text(encoding="utf-8")
    posts = [r for r in openai_server.requests if r.method == "POST"]
    assert "NextGoal" in json.dumps(posts[0].body["messages"][0])  # the system prompt invites one
    assert "finish with gc rounded to 3 places" in json.dumps(posts[1].body["messages"])

    refused = CliRunner().invoke(app, [*args, "--thought", "loud"])
    assert refused.exit_code == 2 and "--thought must be off, inline or separate, not 'loud'" in refused.output
