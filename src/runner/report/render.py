"""The report as one self-contained HTML page: inline CSS, no script, no network; images
are relative links to the run's own PNG files, shown as thumbnails that open full size.

Per task: the selection (chosen rollout, the judge's reasoning, or why there is none),
failures per module (guide, narrative, judge, critic, policy) at the top; the rollouts side by side (model, seed, outcome, evaluator score, seconds, cost; each
step's action, its facts and its augmented before/after/zoom pictures), and seconds,
tokens and dollars per module. At the top, each module's model as configured and as
called. Scripted models are labelled SCRIPTED.
"""

from __future__ import annotations

from html import escape

from core.llm import ModuleTotals

from ..module_errors import ErrorTally
from ..task_errors import TaskErrors, counts_line
from .bench import bench_section
from .collect import RolloutView, RunView, StepView, TaskView
from .guide import render_guide
from .models import ModuleModels

__all__ = ["render_report"]

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1,h2,h3{margin:.4em 0} table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:right} th:first-child,td:first-child{text-align:left}
.task{border-top:3px solid #444;margin-top:2em;padding-top:.5em}
.rollouts{display:grid;gap:12px;overflow-x:auto;grid-auto-flow:column;grid-auto-columns:minmax(420px,1fr)}
.rollout{background:#fff;border:2px solid #ddd;border-radius:6px;padding:8px;min-width:0}
.rollout.chosen{border-color:#1a7f37;box-shadow:0 0 0 3px #1a7f3744}
.badge{display:inline-block;padding:0 6px;border-radius:4px;font-weight:bold;font-size:12px}
.mark{background:#1a7f37;color:#fff} .scripted{background:#b35900;color:#fff}
.status-done{color:#1a7f37}
.status-errored,.status-environment_lost,.status-setup_failed{color:#c00}
.step{border-top:1px solid #eee;margin-top:6px;padding-top:6px}
.step code{background:#f3f3f3;padding:0 3px;word-break:break-all}
.pics{display:flex;gap:4px;flex-wrap:wrap} .pics figure{margin:0;font-size:11px;color:#666}
.pics img{width:176px;border:1px solid #ccc;display:block}
.facts{margin:4px 0 0 1.2em;padding:0} .error{color:#c00} .thought{color:#555;font-size:12px}
pre{white-space:pre-wrap;background:#fff;border:1px solid #ddd;padding:8px;max-height:28em;overflow:auto}
"""


def _money(x: float) -> str:
    return f"${x:.4f}"


def _modules(modules: dict[str, ModuleTotals]) -> str:
    if not modules:
        return "<p>No model calls were recorded.</p>"
    rows = ["<tr><th>module</th><th>calls</th><th>seconds</th><th>input tokens</th><th>output tokens</th>"
            "<th>dollars</th></tr>"]
    total = ModuleTotals()
    for name, t in modules.items():
        rows.append(f"<tr><td>{escape(name)}</td><td>{t.calls}</td><td>{t.seconds:.1f}</td><td>{t.input_tokens}</td>"
                    f"<td>{t.output_tokens}</td><td>{_money(t.dollars)}</td></tr>")
        for key in ("calls", "seconds", "input_tokens", "output_tokens", "dollars"):
            setattr(total, key, getattr(total, key) + getattr(t, key))
    rows.append(f"<tr><th>total</th><th>{total.calls}</th><th>{total.seconds:.1f}</th><th>{total.input_tokens}</th>"
                f"<th>{total.output_tokens}</th><th>{_money(total.dollars)}</th></tr>")
    return "<table>" + "".join(rows) + "</table><p><small>Seconds are summed over calls, which overlap.</small></p>"


def _models(rows: list[ModuleModels]) -> str:
    if not rows:
        return ""
    out = ["<h2>models per module</h2><table><tr><th>module</th><th>configured</th><th>called (calls)</th></tr>"]
    for row in rows:
        configured = escape(row.configured) if row.configured else "not used"
        if row.configured and row.inherited_from:
            configured += f" <small>(the {escape(row.inherited_from)}'s)</small>"
        called = ", ".join(f"{escape(m)} ({n})" for m, n in row.called.items()) or "no calls"
        out.append(f"<tr><td class=\"role\">{escape(row.role)}</td><td>{configured}</td><td>{called}</td></tr>")
    return "".join(out) + "</table>"


def _task_errors(errors: TaskErrors) -> str:
    """Tasks whose setup or scorer failed: each errored rollout with its one-line cause."""
    if not errors.errored:
        return f"<p>{escape(counts_line(errors))}: no task's setup or scorer failed.</p>" if errors.run else ""
    rows = ["<tr><th>task</th><th>rollout</th><th>outcome</th><th>cause</th></tr>"]
    for task_id, by_k in sorted(errors.errored.items()):
        for k, e in sorted(by_k.items()):
            anchor = escape(f"task-{task_id}", quote=True)
            rows.append(f'<tr class="error"><td><a href="#{anchor}">{escape(task_id)}</a></td><td>{k}</td>'
                        f'<td>{escape(e.outcome)}</td><td style="text-align:left">{escape(e.reason)}</td></tr>')
    return (f'<h3 class="error">{escape(counts_line(errors))}</h3><p>These tasks have no score: their setup or '
            "their scorer failed, an error of the task or the environment, not of the agent. They are left out "
            "of every rate (never counted as 0) and out of the OSWorld export.</p><table>" + "".join(rows)
            + "</table>")


def _errors(tally: ErrorTally, tasks: TaskErrors | None = None) -> str:
    """Failures of tasks, then per module, at the top of the page so they cannot be missed."""
    tasks = tasks or TaskErrors()
    calls = ", ".join(f"{escape(m)} {n}" + (f" ({escape(tally.kind_text(m))})" if tally.kinds.get(m) else "")
                      for m, n in sorted(tally.failed_calls.items()))
    calls_line = (f"<p class=\"error\">Model calls that failed for good (after retries), from the ledger: "
                  f"{calls}.</p>") if calls else ""
    failures = [what for what, there in (("some tasks errored", tasks.errored), ("some modules failed", tally.failed),
                                         ("some model calls failed", calls and not tally.failed)) if there]
    head = (f'<h2 class="error">errors: {", ".join(failures)}</h2>' if failures else "<h2>errors</h2>")
    if not tally.failed:
        modules = ("<p>No module record says it failed: every guide, narrator, judge, critic and policy record "
                   "succeeded.</p>")
    else:
        rows = ["<tr><th>module</th><th>records</th><th>failed</th><th>share</th><th>kinds of failed calls</th>"
                "<th>first failure</th></tr>"]
        for name, c in tally.counts.items():
            if not c.total:
                continue
            klass = ' class="error"' if c.errors else ""
            rows.append(f"<tr{klass}><td>{escape(name)}</td><td>{c.total}</td><td>{c.errors}</td>"
                        f'<td>{c.share:.0%}</td><td style="text-align:left">{escape(tally.kind_text(name))}</td>'
                        f'<td style="text-align:left">{escape(c.first or "")}</td></tr>')
        modules = ("<p>These records say a module's calls failed for good (after retries); such a step was not "
                   "guided, such a rollout not narrated, such a verdict not given.</p><table>" + "".join(rows)
                   + "</table>")
    return f'<section id="errors">{head}{_task_errors(tasks)}{modules}{calls_line}</section>'


def _img(path: str | None, caption: str) -> str:
    if path is None:
        return ""
    src = escape(path, quote=True)
    return (f'<figure><a href="{src}"><img src="{src}" loading="lazy" alt="{escape(caption)}"></a>'
            f"<figcaption>{escape(caption)}</figcaption></figure>")


def _step(step: StepView) -> str:
    pics = step.images
    kind = "marked" if pics.augmented else "screen"
    facts = "".join(f"<li>{escape(f)}</li>" for f in step.facts)
    parts = [
        f'<div class="step"><b>step {step.index + 1}</b> <code>{escape(step.action)}</code> '
        f"<small>({step.seconds:.1f} s)</small>",
        f'<div class="thought">{escape(step.thought[:400])}</div>' if step.thought else "",
        f'<div class="error">{escape(step.error)}</div>' if step.error else "",
        f'<ul class="facts">{facts}</ul>' if facts else "",
        render_guide(step.guide) if step.guide is not None else "",
        '<div class="pics">' + _img(pics.before, f"before ({kind})") + _img(pics.after, f"after ({kind})")
        + _img(pics.zoom, "zoom") + "</div></div>",
    ]
    return "".join(parts)


def _rollout(view: RolloutView, score: float | None) -> str:
    info = view.info
    status = info.status if info else "unknown"
    head = [f"<h3>rollout {view.index}"]
    if view.chosen:
        head.append(' <span class="badge mark">CHOSEN</span>')
    if view.scripted:
        head.append(' <span class="badge scripted">SCRIPTED</span>')
    if view.simulated:
        head.append(' <span class="badge scripted">SIMULATED</span>')
    head.append("</h3>")
    cost = sum(t.dollars for t in view.modules.values())
    tokens = sum(t.input_tokens + t.output_tokens for t in view.modules.values())
    seconds = f"{view.seconds:.1f} s" if view.seconds is not None else "?"
    facts = [
        f"model <b>{escape(info.model if info else '?')}</b>, seed {info.seed if info else '?'}",
        f'outcome <b class="status-{escape(status)}">{escape(status)}</b>'
        + (f": {escape(info.reason)}" if info and info.reason else ""),
        f"evaluator score: {'—' if score is None else f'{score:g}'} (reported only, never used to choose)"
        + (f' <span class="error"><b>scoring_failed</b>: {escape(info.score_error)}</span>'
           if info and info.score_error else ""),
        f"{len(view.steps)} steps, {seconds}, {tokens} tokens, {_money(cost)}"
        + (f", {info.attempts} attempts" if info and info.attempts > 1 else "")
        + (f", on {escape(info.environment)}" if info and info.environment else ""),
    ]
    klass = "rollout chosen" if view.chosen else "rollout"
    narrator = (f'<div class="error"><b>narrator failed</b>: {escape(view.narrative_error)}</div>'
                if view.narrative_error else "")
    return (f'<div class="{klass}" id="rollout-{view.index}">' + "".join(head)
            + "<br>".join(facts) + narrator + _recording(view) + "".join(_critic(lines) for lines in view.critics)
            + "".join(_step(s) for s in view.steps) + "</div>")


def _recording(view: RolloutView) -> str:
    """The rollout's screen recording: a player and a link to the mp4 (or why there is none)."""
    if view.recording is not None:
        src = escape(view.recording, quote=True)
        return (f'<div class="recording"><video controls preload="none" width="400" src="{src}"></video>'
                f'<br><a href="{src}">recording.mp4</a></div>')
    if view.recording_error is not None:
        return f'<div class="error"><b>no recording</b>: {escape(view.recording_error)}</div>'
    return ""


def _critic(lines: list[str]) -> str:
    """A critic's verdict: the headline, and its deliberation folded under it."""
    head, rest = lines[0], lines[1:]
    body = f"<pre>{escape(chr(10).join(rest))}</pre>" if rest else ""
    return f'<details class="critic"><summary><b>critic</b> {escape(head)}</summary>{body}</details>'


def _task(view: TaskView) -> str:
    result, selection = view.result, view.selection
    scores = result.scores if result else {}
    out = [f'<section class="task" id="task-{escape(view.task_id, quote=True)}"><h2>{escape(view.task_id)}</h2>',
           f"<p><b>instruction</b>: {escape(view.instruction)}</p>"]
    if result is not None and result.errored:
        causes = "; ".join(f"rollout {k} {e.outcome}: {e.reason}" for k, e in sorted(result.errors.items()))
        out.append(f'<p class="error"><b>errored</b>: no score (left out of every rate, not counted as 0): '
                   f"{escape(causes)}</p>")
    if result is not None:
        pass_n = "—" if result.pass_at_n is None else f"{result.pass_at_n:g}"
        chosen_score = "—" if result.selected_score is None else f"{result.selected_score:g}"
        out.append(f"<p><b>selected</b>: {'no selection' if result.selected is None else f'rollout {result.selected}'}"
                   f", its score {chosen_score}; pass@{result.n} {pass_n}</p>")
    if selection is None:
        out.append("<p><b>judge</b>: none ran for this task.</p>")
    else:
        chosen = "no selection" if selection.chosen is None else f"rollout {selection.chosen}"
        failed = f' <span class="error"><b>failed</b>: {escape(selection.error)}</span>' if selection.error else ""
        out.append(f"<p><b>judge</b> {escape(selection.strategy)}: {chosen} among {selection.candidates}, "
                   f"seed {selection.seed}, {_money(selection.dollars)}{failed}</p>"
                   f"<details open><summary>reasoning</summary><pre>{escape(selection.reasoning)}</pre></details>")
    out.append('<div class="rollouts">' + "".join(_rollout(r, scores.get(r.index)) for r in view.rollouts) + "</div>")
    out.append("<h3>per module, this task</h3>" + _modules(view.modules) + "</section>")
    return "".join(out)


def render_report(view: RunView) -> str:
    """The whole page for `view`."""
    banner = ('<p><span class="badge scripted">SCRIPTED</span> Some replies in this run came from a script, not a '
              f"model{': ' + escape(view.label) if view.label else ''}.</p>") if view.scripted else ""
    if view.simulated:
        banner += ('<p id="simulated"><span class="badge scripted">SIMULATED</span> No desktop ran and no model '
                   "was called: the environments, the models' replies, their latencies, token counts and rate "
                   "limits, and the scores are simulated (environments/sim/fleet.yaml, core/llm/sim/models.yaml); "
                   "seconds are simulated seconds.</p>")
    if view.scoring is not None:
        klass = "" if view.comparable else ' class="error"'
        banner += f'<p id="scoring"{klass}><b>{escape(view.scoring)}</b></p>'
    body = "".join(_task(t) for t in view.tasks) or "<p>This run has no task folders.</p>"
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>run {escape(view.run_id)}</title><style>{_CSS}</style></head><body>"
        f"<h1>run {escape(view.run_id)}</h1>{banner}{_errors(view.errors, view.task_errors)}"
        f"{_models(view.models)}"
        f"{bench_section(view.path)}"
        f"<h2>per module, whole run</h2>{_modules(view.modules)}{body}</body></html>"
    )
