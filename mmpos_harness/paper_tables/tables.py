"""Fill the manifest's tables from work dirs and write Markdown / CSV.

Layout: one line per paper row, first the row's ``info`` fields (method,
backbone, ...), then ``eff. ep.`` where the table asks for it, a ``status``
column, and for every metric column three cells side by side: ours, the
paper's, and ``delta = ours - paper``.

Cell conventions (also in the legend under every table):

* ours ``42.2``: from a finished run; ``42.2*``: last validation of an
  unfinished run; ``missing``: no work dir yet; ``running``: work dir without
  an evaluation yet; ``pending``: the run's config is not written yet (listed
  in the manifest's ``pending``); ``no key``: the run finished but never
  logged the metric; empty: paper-only reference row.
* numbers are shown with one decimal as in the papers; the delta is computed
  from the *shown* (rounded) value, so it always matches the two cells beside
  it; ``-`` is a value the paper does not give.
* ``eff. ep.``: effective pretraining epochs (see
  :func:`mmpos_harness.paper_tables.manifest.effective_epochs`), computed
  from our pretraining run's epochs and views; for reference rows the
  paper's value, else computed from the row's ``epochs`` and ``views``.
  Such tables carry :data:`EFF_EP_LEGEND` too.
"""
import csv
import io
import os
import os.path as osp
from dataclasses import dataclass
from typing import Dict, List, Optional

from mmpos.checkpoint import write_atomically

from ..results import RunResult, read_run
from .manifest import Manifest, Table

LEGEND = ('ours / paper / delta (= ours - paper, from the shown values). '
          '`*` unfinished run (last evaluation so far); `missing` not run; '
          '`running` no evaluation yet; `pending` config not written yet; '
          '`no key` metric not logged; `-` not in the paper; empty ours: '
          'paper-only row.')

EFF_EP_LEGEND = ('`eff. ep.`: effective pretraining epochs after iBOT '
                 '(DropPos supp. "Effective training epochs", ICPF Table 1 '
                 'footnote): epochs x r, r = sum over view kinds of count x '
                 '(size / 224)², rounded to 0.5 (2 + (96/224)² x 10 ≈ 4 for '
                 'DINO, 2 + (96/224)² x 8 ≈ 3.5 for ICPF, 1 for one 224² '
                 'view); ours from our pretraining run, paper rows as '
                 'printed or from their epochs and views.')


@dataclass
class Cell:
    ours: Optional[float]
    paper: Optional[float]
    delta: Optional[float]
    ours_text: str
    paper_text: str
    delta_text: str


@dataclass
class RowResult:
    info: List[str]
    eff_ep: str
    status: str
    cells: List[Cell]


def fmt(value: Optional[float]) -> str:
    return '-' if value is None else f'{value:.1f}'


def fmt_delta(value: float) -> str:
    return f'{value + 0.0:+.1f}'  # + 0.0 turns -0.0 into +0.0


def run_results(manifest: Manifest,
                work_root: str,
                metrics_file: str = 'metrics.json') -> Dict[str, RunResult]:
    """:class:`RunResult` of every run of the manifest; a run whose config is
    pending and that has no work dir gets status ``'pending'``."""
    results = {}
    for run_id, run in manifest.runs.items():
        result = read_run(osp.join(work_root, run_id), metrics_file)
        if result.status == 'missing' and not manifest.config_exists(
                run.config):
            result = RunResult('pending')
        results[run_id] = result
    return results


def _cell(result: Optional[RunResult], key: str, scale: float,
          paper: Optional[float]) -> Cell:
    if result is None:  # reference row
        return Cell(None, paper, None, '', fmt(paper), '')
    if result.status in ('missing', 'pending'):
        return Cell(None, paper, None, result.status, fmt(paper), '')
    if key not in result.metrics:
        text = 'no key' if result.status == 'done' else 'running'
        return Cell(None, paper, None, text, fmt(paper), '')
    ours = float(result.metrics[key]) * scale
    shown = round(ours, 1)
    delta = None if paper is None else round(shown - float(paper), 1)
    star = '' if result.status == 'done' else '*'
    return Cell(ours, paper, delta, fmt(ours) + star, fmt(paper),
                '' if delta is None else fmt_delta(delta))


def build_table(manifest: Manifest, table: Table,
                results: Dict[str, RunResult]) -> List[RowResult]:
    rows = []
    for row in table.rows:
        cells = []
        for col, paper in zip(table.columns, row.paper):
            metric = manifest.metrics[col.metric]
            result = results[row.runs[col.run]] if row.runs else None
            cells.append(_cell(result, metric.key, metric.scale, paper))
        if row.reference:
            status = 'paper only'
            eff = manifest.reference_effective_epochs(row)
        else:
            statuses = [results[row.runs[c.run]].status for c in table.columns]
            status = ', '.join(dict.fromkeys(statuses))
            eff = manifest.row_effective_epochs(row)
        info = ['' if row.fields.get(k) is None else str(row.fields[k])
                for k in table.info]
        eff_text = '-' if eff in (None, '-') else f'{float(eff):g}'
        rows.append(RowResult(info, eff_text, status, cells))
    return rows


def header(table: Table) -> List[str]:
    cols = list(table.info)
    if table.eff_epochs:
        cols.append('eff. ep.')
    cols.append('status')
    for col in table.columns:
        cols += ([f'{col.name} ours', f'{col.name} paper', f'{col.name} Δ']
                 if table.has_paper else [col.name])
    return cols


def flat_rows(table: Table, rows: List[RowResult]) -> List[List[str]]:
    out = []
    for row in rows:
        line = list(row.info)
        if table.eff_epochs:
            line.append(row.eff_ep)
        line.append(row.status)
        for cell in row.cells:
            line += ([cell.ours_text, cell.paper_text, cell.delta_text]
                     if table.has_paper else [cell.ours_text])
        out.append(line)
    return out


def to_markdown(table: Table, rows: List[RowResult]) -> str:
    cols = header(table)
    lines = [f'### {table.paper}: {table.title}', '']
    if table.source or table.note:
        lines += [' '.join(x for x in (f'Source: {table.source}.'
                                       if table.source else '', table.note)
                           if x), '']
    lines += ['| ' + ' | '.join(cols) + ' |',
              '|' + '|'.join(' --- ' for _ in cols) + '|']
    lines += ['| ' + ' | '.join(line) + ' |'
              for line in flat_rows(table, rows)]
    lines += ['', LEGEND, '']
    if table.eff_epochs:
        lines += [EFF_EP_LEGEND, '']
    return '\n'.join(lines)


def write_csv(path: str, table: Table, rows: List[RowResult]) -> None:
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header(table))
    writer.writerows(flat_rows(table, rows))
    write_atomically(text.getvalue().encode(), path)


def generate(manifest: Manifest,
             work_root: str,
             out_dir: str,
             table_ids: Optional[List[str]] = None,
             metrics_file: str = 'metrics.json') -> Dict[str, List[RowResult]]:
    """Write ``<out_dir>/<table id>.{md,csv}`` and ``<out_dir>/tables.md``
    (all selected tables; each file atomically); returns the filled rows
    per table id."""
    os.makedirs(out_dir, exist_ok=True)
    results = run_results(manifest, work_root, metrics_file)
    tables = [manifest.table(t) for t in table_ids] if table_ids \
        else manifest.tables
    filled, parts = {}, []
    for table in tables:
        rows = build_table(manifest, table, results)
        filled[table.id] = rows
        text = to_markdown(table, rows)
        parts.append(text)
        write_atomically(text.encode(), osp.join(out_dir, f'{table.id}.md'))
        write_csv(osp.join(out_dir, f'{table.id}.csv'), table, rows)
    write_atomically('\n'.join(parts).encode(),
                     osp.join(out_dir, 'tables.md'))
    return filled
