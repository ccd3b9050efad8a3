"""Jinja2 templates (md, tex, html) for tables and claims, and the scale wording they share.

Kept inline so the package needs no data files; the html pages are standalone (inline CSS).
"""

from __future__ import annotations

import re
from typing import Any

import jinja2
from markupsafe import Markup

MINI_NOTE = (
    "numbers from synthetic stand-in data, tiny backbones and short schedules. "
    "They are NOT a reproduction of the paper's numbers; "
    "the paper's values are shown for reference only."
)
PAPER_NOTE = (
    "the paper's datasets, backbones and hyperparameters; "
    "the paper's reported values are shown beside ours for comparison."
)

METRIC_NAMES = {
    "final_acc": "final-round test accuracy (%)",
    "best_acc": "best test accuracy over rounds (%)",
    "final_acc_mean": "final-round accuracy, unweighted mean over clients (%)",
    "final_loss": "final-round test loss",
    "comm.total_bytes": "total communicated bytes",
    "acc": "test accuracy (%)",
    "loss": "test loss",
}


def scale_note(scale: str) -> str:
    """One sentence saying what the scale means for the numbers shown."""
    if scale == "mini":
        return MINI_NOTE
    if scale == "paper":
        return PAPER_NOTE
    return "not the paper's setup; the paper's values are shown for reference only."


def short_scale_note(scale: str) -> str:
    """The few words written into a figure."""
    if scale == "mini":
        return "mini scale — synthetic data, tiny backbones; not the paper's numbers"
    return f"{scale} scale"


def metric_name(metric: str, override: str | None = None) -> str:
    """Human wording of a metrics.json / history.csv key."""
    return override or METRIC_NAMES.get(metric, metric)


_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "−": "$-$",
    "–": "--",
    "…": r"\ldots{}",
    "—": "---",
    "†": r"$^\dagger$",
    "‡": r"$^\ddagger$",
}
_TEX_RE = re.compile("|".join(re.escape(k) for k in _TEX_SPECIAL))


def tex_escape(text: Any) -> str:
    """Escape LaTeX specials (``#M=1`` → ``\\#M=1``) and map ±, —, † to LaTeX."""
    return _TEX_RE.sub(lambda m: _TEX_SPECIAL[m.group(0)], str(text))


def md_escape(text: Any) -> str:
    """Escape the characters that would break a markdown table cell."""
    return str(text).replace("|", r"\|").replace("\n", " ")


CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
       max-width: 1400px; padding: 0 1rem; color: #222; }
h1 { font-size: 1.3rem; margin-bottom: .3rem; }
p.meta { color: #555; margin: .2rem 0; }
.warn { background: #fff4d6; border: 1px solid #e2c36b; border-radius: 4px;
        padding: .5rem .8rem; margin: .8rem 0; }
table { border-collapse: collapse; font-size: .85rem; margin: 1rem 0; }
th, td { border-bottom: 1px solid #ddd; padding: .3rem .55rem; text-align: center; }
thead th { background: #f3f4f6; border-bottom: 2px solid #bbb; }
td.label { text-align: left; font-weight: 600; background: #fafafa; }
td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
td.diff { background: #f6f8fb; }
.paper { display: block; color: #777; font-size: .75rem; }
.missing { color: #aaa; }
.yes { color: #1a7f37; font-weight: 600; }
.no { color: #c62828; font-weight: 600; }
.na { color: #999; }
ol.notes { color: #555; font-size: .85rem; }
"""

TABLE_MD = """\
**{{ title }}** — scale `{{ scale }}`: {{ scale_note }}

{% for line in caption_lines %}
{{ line }}

{% endfor %}
| {% for name in row_label_names %}{{ name | md }} | {% endfor %}\
{% for h in md_headers %}{{ h | md }} | {% endfor %}

|{% for _ in row_label_names %}---|{% endfor %}{% for _ in md_headers %}---:|{% endfor %}

{% for row in rows %}
| {% for lab in row.labels %}{{ (lab.text if lab.show else "") | md }} | {% endfor %}\
{% for c in row.cells %}{{ c.text | md }}{% if c.paper %} [paper {{ c.paper }}]{% endif %} | \
{% endfor %}

{% endfor %}
{% for note in footnotes %}

{{ note }}
{% endfor %}
"""

TABLE_TEX = r"""% {{ title }} -- scale {{ scale }}: {{ scale_note }}
\begin{table}[t]
\centering
\caption{ {{- title | tex }} ({{ scale | tex }} scale). {{ scale_note | tex }}
{% for line in caption_lines %} {{ line | tex }}{% endfor %}}
\label{tab:{{ label }}}
\resizebox{\linewidth}{!}{
\begin{tabular}{ {{- "l" * (row_label_names | length) }}|{{ "c" * ncols }}}
\hline
{% for hrow in tex_header_rows %}
{{ hrow | join(" & ") }} \\
{% endfor %}
\hline
{% for row in rows %}
{{ row | tex_row }} \\
{% endfor %}
\hline
\end{tabular}}
{% for note in footnotes %}
\par\footnotesize {{ note | tex }}
{% endfor %}
\end{table}
"""

TABLE_HTML = """\
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{{ title }}</title>
<style>{{ css }}</style></head>
<body>
<h1>{{ title }}</h1>
<div class="{{ 'warn' if is_mini else 'meta' }}"><b>Scale: {{ scale }}.</b> {{ scale_note }}</div>
{% for line in caption_lines %}<p class="meta">{{ line }}</p>
{% endfor %}
<table>
<thead>
{% for hrow in header_rows %}
<tr>{% if loop.first %}{% for name in row_label_names %}\
<th rowspan="{{ header_rows | length }}">{{ name }}</th>{% endfor %}{% endif %}\
{% for h in hrow %}<th colspan="{{ h.colspan }}" rowspan="{{ h.rowspan }}">{{ h.text }}</th>\
{% endfor %}</tr>
{% endfor %}
</thead>
<tbody>
{% for row in rows %}
<tr>{% for lab in row.labels %}{% if lab.show %}\
<td class="label" rowspan="{{ lab.rowspan }}">{{ lab.text }}</td>{% endif %}{% endfor %}\
{% for c in row.cells %}<td class="num{{ ' diff' if c.is_diff }}">\
<span{% if c.missing %} class="missing"{% endif %}>{{ c.text }}</span>\
{% if c.paper %}<span class="paper">[paper {{ c.paper }}]</span>{% endif %}</td>{% endfor %}</tr>
{% endfor %}
</tbody>
</table>
{% if footnotes %}<ol class="notes" style="list-style: none; padding-left: 0">
{% for note in footnotes %}<li>{{ note }}</li>
{% endfor %}</ol>{% endif %}
</body></html>
"""

CLAIMS_MD = """\
**{{ title }}** — scale `{{ scale }}`: {{ scale_note }}

Each claim is checked twice: on the numbers the paper reports and on ours.

| claim | statement | paper | holds (paper) | ours | holds (ours) | detail |
|---|---|---|:-:|---|:-:|---|
{% for r in rows %}
| {{ r.claim | md }} | {{ r.text | md }} | {{ r.paper_value | md }} | {{ r.holds_paper | mark }} \
| {{ r.ours | md }} | {{ r.holds_ours | mark }} | {{ r.detail | md }} |
{% endfor %}
"""

CLAIMS_HTML = """\
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>{{ title }}</title>
<style>{{ css }}</style></head>
<body>
<h1>{{ title }}</h1>
<div class="{{ 'warn' if is_mini else 'meta' }}"><b>Scale: {{ scale }}.</b> {{ scale_note }}</div>
<p class="meta">Each claim is checked twice: on the numbers the paper reports and on ours.</p>
<table>
<thead><tr><th>claim</th><th>statement</th><th>paper</th><th>holds (paper)</th>
<th>ours</th><th>holds (ours)</th><th>detail</th></tr></thead>
<tbody>
{% for r in rows %}
<tr><td class="label">{{ r.claim }}</td><td style="text-align:left">{{ r.text }}</td>
<td class="num">{{ r.paper_value }}</td><td>{{ r.holds_paper | badge }}</td>
<td class="num">{{ r.ours }}</td><td>{{ r.holds_ours | badge }}</td>
<td style="text-align:left; font-size:.8rem">{{ r.detail }}</td></tr>
{% endfor %}
</tbody>
</table>
</body></html>
"""


OVERVIEW_MD = """\
**How each paper reproduces** — scale `{{ scale }}`: {{ scale_note }}

| paper | regenerated (of its result tables and figures) | accuracy cells with a paper value \
| median \\|ours − paper\\| (points) | within {{ near }} points | r | structural counts as printed \
| claims holding (paper's numbers) | claims holding (ours) | paper-scale GPU-hours | runs |
|---|---|---|---|---|---|---|---|---|---|---|
{% for r in rows %}
| {{ r.paper | md }} | {{ r.regenerated_text }} | {{ r.cells_text }} | {{ r.gap_text }} \
| {{ r.near_text }} | {{ r.r_text }} | {{ r.structural_text }} | {{ r.claims_paper_text }} \
| {{ r.claims_ours_text }} | {{ r.cost_text }} | {{ r.runs_text }} |
{% endfor %}

In all: {{ totals.regenerated }} of {{ totals.results }} result tables and figures regenerated, \
{{ totals.cells }} accuracy cells beside a paper value, {{ totals.gpu_hours }} GPU-hours at paper \
scale ({{ cost_device }}; {{ cost_throughput }}).
{% for r in rows if r.not_regenerated %}

Not regenerated ({{ r.paper }}): {{ r.not_regenerated | md }}.
{% endfor %}

The scatter: `overview.png`.
"""

# the report's first page (included into workflow.rst): its style scoped to its own block,
# the scatter inline, so the self-contained report needs nothing else
OVERVIEW_FRAGMENT = """\
<div class="fro-overview">
<style>
.fro-overview .wide { max-width: 100%; overflow-x: auto; }
.fro-overview table { border-collapse: collapse; font-size: .8rem; margin: .8rem 0; }
.fro-overview th, .fro-overview td { border-bottom: 1px solid #ddd; padding: .3rem .5rem;
  text-align: center; }
.fro-overview thead th { background: #f3f4f6; border-bottom: 2px solid #bbb; }
.fro-overview td.label { text-align: left; font-weight: 600; }
.fro-overview .warn { background: #fff4d6; border: 1px solid #e2c36b; border-radius: 4px;
  padding: .5rem .8rem; margin: .8rem 0; }
.fro-overview .meta { color: #555; font-size: .85rem; }
</style>
<h2>How each paper reproduces</h2>
<div class="{{ 'warn' if is_mini else 'meta' }}"><b>Scale: {{ scale }}.</b> {{ scale_note }}</div>
<div class="wide"><table>
<thead><tr><th>paper</th><th>regenerated<br>(of its result tables and figures)</th>
<th>accuracy cells with<br>a paper value</th><th>median |ours − paper|<br>(points)</th>
<th>within {{ near }}<br>points</th><th>r</th><th>structural counts<br>as printed</th>
<th>claims holding<br>(paper's numbers)</th><th>claims holding<br>(ours)</th>
<th>paper-scale<br>GPU-hours</th><th>runs</th></tr></thead>
<tbody>
{% for r in rows %}
<tr><td class="label" title="{{ r.title }}">{{ r.paper }}</td><td>{{ r.regenerated_text }}</td>
<td>{{ r.cells_text }}</td><td>{{ r.gap_text }}</td><td>{{ r.near_text }}</td>
<td>{{ r.r_text }}</td>
<td>{{ r.structural_text }}</td><td>{{ r.claims_paper_text }}</td><td>{{ r.claims_ours_text }}</td>
<td>{{ r.cost_text }}</td><td>{{ r.runs_text }}</td></tr>
{% endfor %}
</tbody>
</table></div>
<p class="meta">In all: {{ totals.regenerated }} of {{ totals.results }} result tables and figures
regenerated, {{ totals.cells }} accuracy cells beside a paper value; the paper scale would take
{{ totals.gpu_hours }} GPU-hours ({{ cost_device }}; {{ cost_throughput }}).
{% for r in rows if r.not_regenerated %}
Not regenerated ({{ r.paper }}): {{ r.not_regenerated }}.
{% endfor %}
A claim is counted where it could be evaluated; each paper's category lists its tables, figures
and claims.</p>
<img alt="our accuracy cells against the paper's, one colour per paper"
 src="data:image/png;base64,{{ png }}" style="max-width: 560px; width: 100%;">
</div>
"""

OVERVIEW_HTML = """\
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>How each paper reproduces</title>
<style>body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto;
max-width: 1400px; padding: 0 1rem; color: #222; }</style></head>
<body>
{{ fragment }}
</body></html>
"""


def _tex_row(row: dict[str, Any]) -> str:
    """One LaTeX table row: label cells (blank when repeated), then value cells."""
    parts = [tex_escape(lab["text"]) if lab["show"] else "" for lab in row["labels"]]
    for cell in row["cells"]:
        text = tex_escape(cell["text"])
        if cell["paper"]:
            text += r" {\footnotesize [" + tex_escape(cell["paper"]) + "]}"
        parts.append(text)
    return " & ".join(parts)


def _mark(value: Any) -> str:
    """✓ / ✗ / — for True / False / not evaluable."""
    if value is True:
        return "✓"
    if value is False:
        return "✗"
    return "—"


def _badge(value: Any) -> Markup:
    cls = {"✓": "yes", "✗": "no"}.get(_mark(value), "na")
    return Markup(f'<span class="{cls}">{_mark(value)}</span>')


def _environment(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(tex=tex_escape, tex_row=_tex_row, md=md_escape, mark=_mark, badge=_badge)
    return env


_TEMPLATES = {
    "table.md": TABLE_MD,
    "table.tex": TABLE_TEX,
    "table.html": TABLE_HTML,
    "claims.md": CLAIMS_MD,
    "claims.html": CLAIMS_HTML,
    "overview.md": OVERVIEW_MD,
    "overview_fragment.html": OVERVIEW_FRAGMENT,
    "overview.html": OVERVIEW_HTML,
}


def render(name: str, **context: Any) -> str:
    """Render one of the inline templates; html ones are autoescaped and get the CSS."""
    html = name.endswith(".html")
    template = _environment(autoescape=html).from_string(_TEMPLATES[name])
    return template.render(css=Markup(CSS), **context)
