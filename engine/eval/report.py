"""Eval reports: totals per configuration (model x mode), as a table, JSON, Markdown and HTML.

The HTML is one self-contained file: inline SVG charts (success rate, tokens per task, prompt and
completion tokens per round for each mode), no scripts, no CDN.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["render_html", "render_markdown", "render_table", "summarize", "write_reports"]

_COLORS = ("#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#a463f2", "#97bbf5", "#9c6b4e", "#3ca951")


def _avg(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarize(results: Sequence[dict[str, Any]], *, suite: str) -> dict[str, Any]:
    """Totals per configuration (``model`` x ``mode``, in first-seen order) and the task rows."""
    configs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in results:
        configs.setdefault((str(row.get("model")), str(row.get("mode"))), []).append(row)
    out = []
    for (model, mode), rows in configs.items():
        costs = [r["cost_usd"] for r in rows if isinstance(r.get("cost_usd"), int | float)]
        rounds: dict[int, list[dict[str, Any]]] = {}
        for row in rows:
            for i, item in enumerate(row.get("per_round") or (), start=1):
                rounds.setdefault(i, []).append(item)
        domains: dict[str, dict[str, int]] = {}
        for row in rows:
            entry = domains.setdefault(str(row.get("domain") or "-"), {"tasks": 0, "passed": 0})
            entry["tasks"] += 1
            entry["passed"] += int(bool(row.get("passed")))
        passed = sum(1 for r in rows if r.get("passed"))
        lost = sum(1 for r in rows if not r.get("passed") and r.get("lost"))
        tokens = sum(int(r.get("input_tokens", 0)) + int(r.get("output_tokens", 0)) for r in rows)
        out.append(
            {
                "model": model,
                "mode": mode,
                "tasks": len(rows),
                "passed": passed,
                "success_rate": round(passed / len(rows), 4) if rows else 0.0,
                # failed tasks whose right answer was printed or held in a variable: the finishing protocol's gap
                "lost": lost,
                "avg_rounds": round(_avg([r.get("rounds", 0) for r in rows]), 2),
                "input_tokens": sum(int(r.get("input_tokens", 0)) for r in rows),
                "output_tokens": sum(int(r.get("output_tokens", 0)) for r in rows),
                # the measure: every token spent (failed tasks too) per task solved
                "tokens_per_solved": round(tokens / passed) if passed else None,
                "avg_input_tokens": round(_avg([r.get("input_tokens", 0) for r in rows]), 1),
                "avg_output_tokens": round(_avg([r.get("output_tokens", 0) for r in rows]), 1),
                "wall_s": round(sum(float(r.get("wall_s", 0.0)) for r in rows), 2),
                "avg_wall_s": round(_avg([float(r.get("wall_s", 0.0)) for r in rows]), 3),
                "cost_usd": round(sum(costs), 6) if costs else None,
                "per_round": [
                    {
                        "round": index,
                        "tasks": len(items),
                        "avg_prompt_tokens": round(_avg([it.get("prompt_tokens", 0) for it in items]), 1),
                        "avg_completion_tokens": round(_avg([it.get("completion_tokens", 0) for it in items]), 1),
                    }
                    for index, items in sorted(rounds.items())
                ],
                "domains": domains,
            }
        )
    return {"suite": suite, "generated_at": time.time(), "configs": out, "tasks": list(results)}


def _label(config: dict[str, Any]) -> str:
    return f"{config['mode']} ({config['model']})"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


_HEAD = (
    "config",
    "tasks",
    "success",
    "lost",
    "avg rounds",
    "avg in tok",
    "avg out tok",
    "total in",
    "total out",
    "tok/solved",
    "wall s",
    "cost",
)


def _rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    return [
        (
            _label(c),
            str(c["tasks"]),
            f"{c['success_rate'] * 100:.1f} %",
            str(c.get("lost", 0)),
            f"{c['avg_rounds']:.2f}",
            f"{c['avg_input_tokens']:.0f}",
            f"{c['avg_output_tokens']:.0f}",
            str(c["input_tokens"]),
            str(c["output_tokens"]),
            "-" if c["tokens_per_solved"] is None else str(c["tokens_per_solved"]),
            f"{c['wall_s']:.1f}",
            _cost(c["cost_usd"]),
        )
        for c in summary["configs"]
    ]


def render_table(summary: dict[str, Any]) -> str:
    """A plain-text table of the totals (one line per configuration)."""
    rows = [_HEAD, *_rows(summary)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD))]
    lines = [
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _per_round_rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    depth = max((len(c["per_round"]) for c in summary["configs"]), default=0)
    head = ["config", *[f"round {i}" for i in range(1, depth + 1)]]
    rows = []
    for c in summary["configs"]:
        cells = [f"{r['avg_prompt_tokens']:.0f} / {r['avg_completion_tokens']:.0f}" for r in c["per_round"]]
        rows.append([_label(c), *cells, *["-"] * (depth - len(cells))])
    return head, rows


def render_markdown(summary: dict[str, Any]) -> str:
    """The report as Markdown: totals, tokens per round, success per domain, failed tasks."""
    lines = [f"# Eval report: suite `{summary['suite']}`", "", *_md_table(_HEAD, _rows(summary)), ""]
    head, rows = _per_round_rows(summary)
    lines += ["## Prompt / completion tokens per round (average over the tasks that reached the round)", ""]
    lines += [*_md_table(head, rows), ""]
    domains = sorted({d for c in summary["configs"] for d in c["domains"]})
    lines += ["## Success per domain", ""]
    lines += _md_table(
        ["config", *domains],
        [
            [_label(c)]
            + [f"{c['domains'].get(d, {}).get('passed', 0)}/{c['domains'].get(d, {}).get('tasks', 0)}" for d in domains]
            for c in summary["configs"]
        ],
    )
    failed = [t for t in summary["tasks"] if not t.get("passed")]
    if failed:
        lines += ["", "## Failed tasks", ""]
        lines += _md_table(
            ["task", "mode", "model", "why"],
            [[t["task"], t["mode"], t["model"], str(t.get("detail", "")).replace("|", "\\|")[:160]] for t in failed],
        )
    return "\n".join(lines) + "\n"


def _bars(title: str, labels: Sequence[str], series: Sequence[tuple[str, Sequence[float]]], unit: str = "") -> str:
    width, height, left, bottom, top = 640, 260, 60, 60, 30
    peak = max((v for _, values in series for v in values), default=0.0) or 1.0
    plot_w, plot_h = width - left - 20, height - bottom - top
    group = plot_w / max(1, len(labels))
    bar = group * 0.8 / max(1, len(series))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    parts.append(f'<text x="{width / 2}" y="18" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>')
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 20}" y2="{top + plot_h}" stroke="#888"/>')
    for s, (name, values) in enumerate(series):
        for i, value in enumerate(values):
            h = plot_h * value / peak
            x = left + i * group + group * 0.1 + s * bar
            y = top + plot_h - h
            color = _COLORS[s % len(_COLORS)] if len(series) > 1 else _COLORS[i % len(_COLORS)]
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar * 0.95:.1f}" height="{h:.1f}" fill="{color}">'
                f"<title>{html.escape(name)} {html.escape(labels[i])}: {value:g}{unit}</title></rect>"
            )
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="10">'
                f"{value:g}{unit}</text>"
            )
    for i, label in enumerate(labels):
        x = left + i * group + group / 2
        parts.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" font-size="11">{html.escape(label)}</text>'
        )
    if len(series) > 1:
        for s, (name, _) in enumerate(series):
            x = left + s * 160
            parts.append(f'<rect x="{x}" y="{height - 22}" width="10" height="10" fill="{_COLORS[s % len(_COLORS)]}"/>')
            parts.append(f'<text x="{x + 14}" y="{height - 13}" font-size="11">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _lines(title: str, series: Sequence[tuple[str, Sequence[tuple[int, float]]]]) -> str:
    width, height, left, bottom, top = 640, 280, 60, 70, 30
    points = [p for _, pts in series for p in pts]
    max_x = max((x for x, _ in points), default=1) or 1
    max_y = max((y for _, y in points), default=0.0) or 1.0
    plot_w, plot_h = width - left - 20, height - bottom - top

    def at(x: int, y: float) -> tuple[float, float]:
        return left + (x - 1) / max(1, max_x - 1) * plot_w, top + plot_h - y / max_y * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    parts.append(f'<text x="{width / 2}" y="18" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>')
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 20}" y2="{top + plot_h}" stroke="#888"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#888"/>')
    parts.append(f'<text x="{left - 4}" y="{top + 4}" text-anchor="end" font-size="10">{max_y:.0f}</text>')
    for x in range(1, max_x + 1):
        px, _ = at(x, 0)
        parts.append(f'<text x="{px:.1f}" y="{top + plot_h + 14}" text-anchor="middle" font-size="10">{x}</text>')
    for s, (name, pts) in enumerate(series):
        color = _COLORS[s % len(_COLORS)]
        coords = " ".join(f"{at(x, y)[0]:.1f},{at(x, y)[1]:.1f}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        for x, y in pts:
            px, py = at(x, y)
            tip = f"<title>{html.escape(name)} round {x}: {y:g}</title>"
            parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}">{tip}</circle>')
        lx = left + (s % 3) * 200
        ly = height - 34 + (s // 3) * 14
        parts.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{lx + 14}" y="{ly + 9}" font-size="11">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(summary: dict[str, Any]) -> str:
    """One self-contained HTML page: the tables and inline SVG charts comparing the configurations."""
    configs = summary["configs"]
    labels = [_label(c) for c in configs]
    charts = [
        _bars("Success rate", labels, [("success", [round(c["success_rate"] * 100, 1) for c in configs])], "%"),
        _bars(
            "Tokens per task (average)",
            labels,
            [
                ("input", [c["avg_input_tokens"] for c in configs]),
                ("output", [c["avg_output_tokens"] for c in configs]),
            ],
        ),
        _lines(
            "Prompt tokens per round",
            [(_label(c), [(r["round"], r["avg_prompt_tokens"]) for r in c["per_round"]]) for c in configs],
        ),
        _lines(
            "Completion tokens per round",
            [(_label(c), [(r["round"], r["avg_completion_tokens"]) for r in c["per_round"]]) for c in configs],
        ),
    ]

    def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
        cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"

    head, rows = _per_round_rows(summary)
    failed = [t for t in summary["tasks"] if not t.get("passed")]
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Eval report: {html.escape(summary['suite'])}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child{text-align:left}"
        "svg{margin:1em 1em 0 0}</style></head><body>"
        f"<h1>Eval report: suite {html.escape(summary['suite'])}</h1>"
        + table(_HEAD, _rows(summary))
        + "<div>"
        + "".join(charts)
        + "</div><h2>Prompt / completion tokens per round</h2>"
        + table(head, rows)
        + (
            "<h2>Failed tasks</h2>"
            + table(
                ["task", "mode", "model", "why"],
                [[t["task"], t["mode"], t["model"], str(t.get("detail", ""))] for t in failed],
            )
            if failed
            else ""
        )
        + "</body></html>\n"
    )


def write_reports(out: Path, summary: dict[str, Any]) -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` and ``report.html`` to ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "markdown": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")
    paths["markdown"].write_text(render_markdown(summary), encoding="utf-8")
    paths["html"].write_text(render_html(summary), encoding="utf-8")
    return paths
