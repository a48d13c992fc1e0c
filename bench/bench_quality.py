"""Extraction and recall quality on the project's labelled sets (issue 23).

Scores the word-matching paths (always) and, when a model endpoint is configured the usual way
(``QMEM_LLM_BASE_URL``/``QMEM_LLM_MODEL`` or the config file, see ``qmem_git.modelconfig``), the
model paths on the same cases. The sets are ``tests/fixtures/eval/*.json``; ``tuned`` cases are
the ones the rules were developed on, ``holdout`` cases were written afterwards. Prints markdown
tables; exits 1 when a heuristic target of the issue is missed on the whole set.

    python bench/bench_quality.py [--misses] [--no-model]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from qmem_git.core.planner import plan_heuristic  # noqa: E402
from qmem_git.core.recall import select_heuristic  # noqa: E402
from qmem_git.modelconfig import load_model_config  # noqa: E402
from qmem_git.ops.evaluate import (  # noqa: E402
    ExtractScores,
    ModelPlanner,
    RecallScores,
    documents,
    model_selector,
    score_extraction,
    score_recall,
)

EVAL = REPO / "tests" / "fixtures" / "eval"
QWEN_FIXTURE = REPO / "tests" / "fixtures" / "eval" / "qwen-recall-eval.json"
QWEN_SILENT = {"no-result", "semantic-no-lexical"}
BATCHES: tuple[str | None, ...] = ("tuned", "holdout", None)


def pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def batch_name(batch: str | None) -> str:
    return batch or "all"


def extraction_table(rows: list[tuple[str, str | None, ExtractScores]]) -> list[str]:
    lines = [
        "| extraction | cases | durable kept (recall) | precision | type right "
        "| questions/requests kept | duplicates created | lead-ins left |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for path, batch, s in rows:
        talk = sum(s.talk.values())
        cells = [
            path,
            f"{batch_name(batch)} ({s.durable} durable, {talk} not)",
            f"{pct(s.recall)} ({s.durable_kept}/{s.durable})",
            pct(s.precision),
            f"{pct(s.type_accuracy)} ({s.type_right}/{s.durable_kept})",
            str(s.questions_or_requests_kept),
            f"{s.duplicates}/{s.restated}",
            f"{s.lead_ins_left}/{s.lead_ins}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def recall_table(rows: list[tuple[str, str | None, RecallScores]]) -> list[str]:
    lines = [
        "| recall | prompts | right memory first | relevant chosen (recall) | precision "
        "| silent when nothing fits | irrelevant per prompt | errors |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for path, batch, s in rows:
        cells = [
            path,
            f"{batch_name(batch)} ({s.answerable} answerable, {s.unanswerable} not)",
            f"{pct(s.top1)} ({s.first_right}/{s.answerable})",
            pct(s.recall),
            pct(s.precision),
            f"{pct(s.silence)} ({s.silent}/{s.unanswerable})",
            f"{s.irrelevant_per_prompt:.2f} ({s.irrelevant}/{s.prompts})",
            str(s.errors),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def qwen_set() -> dict[str, Any]:
    """Qwen's recall fixture in this bench's shape."""
    data = json.loads(QWEN_FIXTURE.read_text(encoding="utf-8"))
    cases = []
    for case in data["cases"]:
        top = case.get("expectedTopId")
        relevant = [] if case["category"] in QWEN_SILENT else list(case["relevantIds"])
        if top and top in relevant:
            relevant = [top] + [r for r in relevant if r != top]
        cases.append({"id": case["id"], "query": case["query"], "relevant": relevant})
    return {"docs": data["docs"], "cases": cases}


def targets_met(extract: ExtractScores, recall: RecallScores) -> list[str]:
    """The issue's heuristic targets that the whole set misses."""
    missed = []
    if extract.recall < 0.9:
        missed.append("extraction: durable facts kept < 90%")
    if extract.questions_or_requests_kept:
        missed.append("extraction: questions or requests kept")
    if extract.type_accuracy < 0.9:
        missed.append("extraction: type right < 90%")
    if extract.duplicates:
        missed.append("extraction: duplicates of an existing memory")
    if recall.top1 < 0.9:
        missed.append("recall: right memory first < 90%")
    if recall.silence < 0.9:
        missed.append("recall: silent on < 90% of prompts with nothing relevant")
    if recall.irrelevant_per_prompt > 0.2:
        missed.append("recall: more than 1 irrelevant memory per 5 prompts")
    return missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list every miss")
    parser.add_argument("--no-model", action="store_true", help="skip the model rows")
    options = parser.parse_args(argv)
    extract_set = json.loads((EVAL / "extract-eval.json").read_text(encoding="utf-8"))
    recall_set = json.loads((EVAL / "recall-eval.json").read_text(encoding="utf-8"))

    ext_rows = [("heuristic", b, score_extraction(extract_set, plan_heuristic, b)) for b in BATCHES]
    rec_rows = [("heuristic", b, score_recall(recall_set, select_heuristic, b)) for b in BATCHES]
    config = None if options.no_model else load_model_config(os.environ, str(Path.home())).config
    qwen = qwen_set()
    rec_rows.append(("heuristic, Qwen's fixture", None, score_recall(qwen, select_heuristic)))
    planner = None
    if config is not None:
        planner = ModelPlanner(config, documents(extract_set["existing"]))
        ext_rows.append(("model", None, score_extraction(extract_set, planner)))
        rec_rows.append(("model", None, score_recall(recall_set, model_selector(config))))

    print("Extraction and recall on tests/fixtures/eval (hand-labelled; holdout = not tuned on)")
    print()
    print("\n".join(extraction_table(ext_rows)))
    print()
    print("\n".join(recall_table(rec_rows)))
    print()
    if config is None:
        print("model rows: no model endpoint configured (QMEM_LLM_BASE_URL, QMEM_LLM_MODEL)")
    else:
        failed = len(planner.failures) if planner else 0
        print(f"model rows: {config.model} at {config.base_url}")
        print(f"extraction turns the model did not answer (nothing kept): {failed}")
    if options.misses:
        for path, batch, s in [*ext_rows, *rec_rows]:
            if batch is None:
                for miss in s.misses:
                    print(f"- {path}: {miss}")
    missed = targets_met(ext_rows[2][2], rec_rows[2][2])
    qwen_scores = rec_rows[3][2]
    if qwen_scores.top1 < 1.0 or qwen_scores.silence < 1.0:
        missed.append("Qwen's fixture: an answerable case not first or a no-result case not silent")
    print()
    print("targets (whole set): " + ("all met" if not missed else "; ".join(missed)))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
