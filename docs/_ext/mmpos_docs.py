"""Sphinx extension of the mmpos docs.

* Generates, at every build, the pages' measured tables into
  ``docs/_generated/`` (pages include them with MyST's ``{include}``):
  ``benchmarks.md`` from ``benchmarks/results/*.json`` (every row with its
  date and machine), ``rehearsals.md`` from ``results/rehearsals/*.json``
  (:func:`mmpos_harness.rehearsal.markdown`), ``paper_tables/<paper>.md``
  (every table of the paper tables' manifest, paper-only rows included:
  the method pages' comparison tables) and ``model_zoo.md`` (only the rows with a number of ours),
  both with the table tool (``mmpos_harness.paper_tables``) from the runs
  under ``mmpos_paper_work_root``, and ``faq.md``, one question per row of
  the failures page's tables (:func:`faq_markdown`).
* Marks every stored result that ``results/status.json`` lists as stale
  (``tools/misc/results_status.py --write``) where a page includes it
  (:func:`mark_stale`), on the benchmarks page and above the rehearsals.
* Checks every repository path a page mentions (:mod:`repo_paths`); a
  missing one is a warning, i.e. an error under ``-W``.
"""
import functools
import importlib
import json
import math
import os
import re
import sys
from pathlib import Path

from sphinx.util import logging

import repo_paths

logger = logging.getLogger(__name__)


def _machine(settings: dict) -> str:
    if settings.get('gpu'):
        return str(settings['gpu'])
    if settings.get('device', 'cpu') != 'cpu':
        return str(settings['device'])
    if 'provenance' in settings:
        return settings['provenance']['machine']
    cores = settings.get('cpu_count')
    return f"{settings.get('cpu', 'CPU')} ({cores} cores)" if cores \
        else str(settings.get('cpu', 'CPU'))


def _num(value, fmt='{:.3f}'):
    return '' if value is None else fmt.format(value)


def _time_ratio(row: dict) -> str:
    """The time ratio with its 95 % interval (``run.py``'s format; ``[no
    rounds]`` for a result stored without its rounds)."""
    if row.get('time_ratio') is None:
        return ''
    if 'time_ratio_low' not in row:
        return f"{row['time_ratio']:.3f} [no rounds]"
    return _bench()._timing.format_ratio(row)


def scope(settings: dict) -> str:
    """What a run's verdicts hold for: ``'<CPU model>, torch <version>'``
    (from its provenance's machine) or ``'<GPU>, torch <version>'``;
    ``''`` for a result that records neither."""
    torch = settings.get('torch')
    if settings.get('device', 'cpu') != 'cpu':
        what = str(settings.get('gpu') or settings['device'])
    elif 'provenance' in settings:
        parts = [p.strip() for p in
                 settings['provenance']['machine'].split(',')]
        what = ', '.join(p for p in parts if not p.endswith(' CPUs')
                         and not p.startswith('torch '))
        torch = next((p[len('torch '):] for p in parts
                      if p.startswith('torch ')), torch)
    else:
        return ''
    return f'{what}, torch {torch}' if torch else what


def _target(row: dict, where: str = '') -> str:
    """The target and, where tested, its verdict scoped to what measured
    it (``where``: :func:`scope`, e.g. ``met on AMD EPYC 7B13, torch
    2.14.1``) and its Holm-adjusted p."""
    test = row.get('target_test')
    if not test:
        return row.get('target', '')
    p = '' if test['p_adj'] is None else f" (p {test['p_adj']:.2g})"
    on = f' on {where}' if where else ''
    return f"{row['target']}: {row['target_verdict']}{on}{p}"


def _suite_table(name: str, data: dict) -> list:
    s = data['settings']
    date = str(s.get('provenance', s).get('date', ''))[:10]
    machine = _machine(s)
    setup = (f"torch {s.get('torch')}, {s.get('amp')}, "
             f"{s.get('threads')} thread(s)")
    # a script's own summary names it as its code; run.py's may name the
    # code state it measured
    code = str(s.get('code', ''))
    script = code if code.endswith('.py') else 'benchmarks/run.py'
    if 'provenance' in s:
        code = f"commit {s['provenance']['commit'][:10]}"
    argv = list(s.get('argv', []))
    if '--out' in argv:  # where this machine wrote it, not how
        del argv[argv.index('--out'):argv.index('--out') + 2]
    cmd = f'python {script} ' + ' '.join(
        a for a in argv if not a.startswith('/'))
    lines = [f'### `{name}`', '',
             f'`{cmd}` ({setup}' +
             (f'; code: {code}' if code and code != script else '') + ')',
             '',
             '| date | machine | benchmark | ours | baseline | time ratio '
             '[95% CI] | memory ratio | ours ms | baseline ms | target |',
             '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |']
    for r in data['rows']:
        if r.get('error'):
            continue
        lines.append(
            f"| {date} | {machine} | {r.get('benchmark', '')} | "
            f"{r.get('ours', '')} | {r.get('baseline', '')} | "
            f"{_time_ratio(r)} | {_num(r.get('mem_ratio'))} | "
            f"{_num(r.get('ours_ms'), '{:.1f}')} | "
            f"{_num(r.get('baseline_ms'), '{:.1f}')} | "
            f'{_target(r, scope(s))} |')
    return lines + ['']


def _device_table(name: str, data: dict, mtime: str) -> list:
    lines = [f'### `{name}`', '',
             '`python benchmarks/rope_attention_device.py` (one attention '
             f"layer forward + backward, ViT-B width, {data['autocast']})", '',
             '| date | machine | tokens | batch | no RoPE ms | axial / none '
             '| mixed / none |', '| --- | --- | --- | --- | --- | --- | --- |']
    for r in data['attention_fwd_bwd']:
        lines.append(f"| {mtime} | {data['device']} | {r['tokens']} | "
                     f"{r['batch']} | {r['ms_none']:.3f} | "
                     f"{r['ratio_axial']:.3f} | {r['ratio_mixed']:.3f} |")
    return lines + ['']


def _same_command(command: str) -> str:
    """A ``run.py`` command without its ``--name``: runs of one command."""
    words = command.split()
    if '--name' in words:
        del words[words.index('--name'):words.index('--name') + 2]
    return ' '.join(words)


def between_runs(results: dict) -> list:
    """Rows measured by every run of a command stored more than once on
    one kind of machine (``results``: ``{file name: summary}``; the
    machine: :func:`scope`, its CPU model or GPU and torch version): the
    runs are the replicates. Per row, each run's time ratio (the geometric
    mean of its rounds) is one value; the interval is the one-sample t
    over the runs' log ratios and a bounded target
    (``_timing.time_bound``) is tested against the log bound, all such
    tests one family (``run.judge_targets``: Holm). Returns ``[{command,
    scope, files, benchmark, ours, baseline, ratios, time_ratio,
    time_ratio_low, time_ratio_high, target[, target_test,
    target_verdict]}]``."""
    bench = _bench()
    groups = {}
    for name, data in results.items():
        record = data.get('settings', {}).get('provenance')
        if record and 'benchmarks/run.py' in record['command']:
            groups.setdefault((_same_command(record['command']),
                               scope(data['settings'])), []).append(name)
    rows = []
    for (command, where), files in groups.items():
        if len(files) < 2:
            continue
        per_run = [{(r['benchmark'], r['ours'], r['baseline']): r
                    for r in results[f]['rows'] if 'time_ratio_low' in r}
                   for f in files]
        for key in [k for k in per_run[0] if all(k in p for p in per_run)]:
            logs = [math.log(p[key]['time_ratio']) for p in per_run]
            target = per_run[0][key].get('target')
            rows.append(dict(
                command=command, scope=where, files=files,
                benchmark=key[0], ours=key[1],
                baseline=key[2], ratios=[math.exp(x) for x in logs],
                target=target or '',
                **bench._timing.ratio_of_logs(logs, target=target)))
    bench.judge_targets(rows)
    return rows


def _between_runs_table(results: dict) -> list:
    rows = between_runs(results)
    if not rows:
        return []
    lines = ['### Between runs', '',
             'Commands stored more than once on one kind of machine: each '
             'run is one replicate (its time ratio, the geometric mean of '
             'its rounds); the interval is the t interval over the runs, '
             'and the bounded targets of this table are one family (Holm). '
             'A verdict holds for what was measured: the command\'s '
             'settings on that CPU (or GPU) with that torch.', '',
             '| command | ours | baseline | per run | ratio [95% CI over runs] '
             '| target |', '| --- | --- | --- | --- | --- | --- |']
    for r in rows:
        lines.append(
            f"| `{r['command']}` | {r['ours']} | {r['baseline']} | "
            + ', '.join(f'{x:.3f}' for x in r['ratios'])
            + f" | {_time_ratio(r)} | {_target(r, r['scope'])} |")
    return lines + ['']


@functools.lru_cache(maxsize=None)
def _bench():
    """``benchmarks/run.py`` (its verdicts; ``run._timing``: the interval
    format and the target parser), imported as the runner imports it."""
    folder = str(Path(__file__).resolve().parents[2] / 'benchmarks')
    sys.path.insert(0, folder)
    try:
        return importlib.import_module('run')
    finally:
        sys.path.remove(folder)


def benchmark_markdown(results_dir: Path, marks: dict) -> str:
    """The benchmarks page's tables; a result stale by ``marks``
    (``results/status.json``) under its mark, and the between-runs table
    under one naming its stale inputs."""
    from mmpos_harness.fingerprint import mark
    results = {path.name: json.loads(path.read_text())
               for path in sorted(results_dir.glob('*.json'))}
    stale = [f'benchmarks/results/{name}' for name in results
             if f'benchmarks/results/{name}' in marks]
    out = _between_runs_table(results)
    if out and stale:
        out = [f'> **Stale:** the runs of {", ".join(stale)} measured code '
               'that has changed since (`python '
               'tools/misc/results_status.py`).', ''] + out
    for name, data in results.items():
        rel = f'benchmarks/results/{name}'
        if rel in marks:
            out.append(mark(rel, marks))
        if 'settings' in data and 'rows' in data:
            out += _suite_table(rel, data)
        elif 'attention_fwd_bwd' in data:
            date = data.get('date', 'date not recorded')
            out += _device_table(rel, data, date)
        else:
            raise ValueError(f'{rel}: neither a benchmarks/run.py summary '
                             "('settings', 'rows') nor a device result")
    return '\n'.join(out)


def paper_table_pages(work_root: str, out_dir: Path) -> None:
    from mmpos_harness.paper_tables.manifest import load_manifest
    from mmpos_harness.paper_tables.tables import (LEGEND, build_table,
                                                   run_results, to_markdown)
    manifest = load_manifest('tools/paper_tables/manifest.yaml')
    results = run_results(manifest, work_root)
    (out_dir / 'paper_tables').mkdir(parents=True, exist_ok=True)
    papers = list(dict.fromkeys(t.paper for t in manifest.tables))
    zoo = []
    for paper in papers:
        tables = [t for t in manifest.tables if t.paper == paper]
        parts = []
        for table in tables:
            rows = build_table(manifest, table, results)
            parts.append(to_markdown(table, rows))
            ours = [r for r in rows if any(c.ours is not None
                                           for c in r.cells)]
            if ours:
                zoo.append(to_markdown(table, ours).replace(
                    '### ', '## ', 1).replace(LEGEND, ''))
        slug = re.sub(r'[^a-z0-9]+', '_', paper.lower()).strip('_')
        (out_dir / 'paper_tables' / f'{slug}.md').write_text(
            '\n'.join(parts))
    if not zoo:
        zoo = ['No run of `tools/paper_tables/manifest.yaml` has finished '
               f'under `{os.path.relpath(work_root)}` in this build, so no '
               'row has a number of ours yet. The measured mini-scale runs '
               'are on the method pages and in the method ranking.']
    else:
        zoo.append(LEGEND)
    (out_dir / 'model_zoo.md').write_text('\n\n'.join(zoo) + '\n')


# The failures page's tables that the FAQ is made of (their first column)
FAQ_TABLES = ('bad input', 'fault')


def _cells(row: str) -> list:
    """The cells of a Markdown table row (``|`` inside backticks kept)."""
    cells, cell, code = [], '', False
    for char in row.strip().strip('|'):
        if char == '`':
            code = not code
        if char == '|' and not code:
            cells.append(cell.strip())
            cell = ''
        else:
            cell += char
    return cells + [cell.strip()]


def faq_markdown(failures: str) -> str:
    """The FAQ: one entry per row of the failures page's tables (what the
    user meets, what they see, where it is handled or tested), so each
    fact stays on the failures page."""
    out, kind = [], None
    for line in failures.splitlines():
        if not line.startswith('|'):
            kind = None
            continue
        cells = _cells(line)
        if kind is None:
            kind = cells[0] if cells[0] in FAQ_TABLES else ''
            header = True
            continue
        if header or not kind:  # the |---| line, or another table
            header = False
            continue
        out += [f'## {cells[0][0].upper()}{cells[0][1:]}', '',
                f'**What you see:** {cells[1]}', '',
                f'**Where:** {cells[2]}', '']
    return '\n'.join(out)


def generate(app):
    root = Path(app.config.mmpos_repo_root)
    out_dir = Path(app.srcdir) / '_generated'
    out_dir.mkdir(exist_ok=True)
    from mmpos_harness.fingerprint import mark, read_marks
    app.env.mmpos_marks = read_marks(str(root))
    (out_dir / 'benchmarks.md').write_text(benchmark_markdown(
        root / 'benchmarks' / 'results', app.env.mmpos_marks))
    from mmpos_harness import rehearsal
    (out_dir / 'rehearsals.md').write_text(mark(
        rehearsal.OUT_DIR, app.env.mmpos_marks) + rehearsal.markdown())
    (out_dir / 'faq.md').write_text(faq_markdown(
        (Path(app.srcdir) / 'advanced' / 'failures.md').read_text()))
    cwd = os.getcwd()
    os.chdir(root)  # the manifest names configs relative to the repo
    try:
        paper_table_pages(app.config.mmpos_paper_work_root, out_dir)
    finally:
        os.chdir(cwd)
    app.env.mmpos_index = repo_paths.RepoIndex(str(root))


def check_paths(app, docname, source):
    index = getattr(app.env, 'mmpos_index', None) or \
        repo_paths.RepoIndex(app.config.mmpos_repo_root)
    for lineno, path, problem in repo_paths.check_text(source[0], index):
        logger.warning(f'`{path}`: {problem}',
                       location=(docname, lineno))


def mark_stale(app, relative_path, parent_docname, content):
    """An included stored result (``results/...``) that
    ``results/status.json`` lists as stale starts with its mark."""
    from mmpos_harness.fingerprint import mark, read_marks, result_of
    marks = getattr(app.env, 'mmpos_marks', None)
    if marks is None:
        marks = read_marks(app.config.mmpos_repo_root)
    path = Path(app.srcdir, relative_path).resolve()
    root = Path(app.config.mmpos_repo_root).resolve()
    if root in path.parents:
        content[0] = mark(result_of(str(path.relative_to(root))),
                          marks) + content[0]


def setup(app):
    app.add_config_value('mmpos_repo_root', '..', 'env')
    app.add_config_value('mmpos_paper_work_root', 'work_dirs/paper_tables',
                         'env')
    app.connect('builder-inited', generate)
    app.connect('source-read', check_paths)
    app.connect('include-read', mark_stale)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
