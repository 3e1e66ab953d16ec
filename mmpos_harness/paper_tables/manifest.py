"""Paper-table manifest: which runs reproduce which cell of which paper table.

A manifest (YAML, e.g. ``tools/paper_tables/manifest.yaml``) has four keys::

    pending: [configs/droppos/...py, ...]   # named configs not written yet
    metrics:                                # how a column reads a work dir
      AP_bb: {key: coco/bbox_mAP, scale: 100, label: AP^bb}
    runs:                                   # one training (or test) each
      droppos_vit-b_200e:                   # pretraining: epochs + views
        config: configs/droppos/droppos_vit-base-p16_8xb64-200e_in1k.py
        epochs: 200
        views: [[1, 224]]                   # [count, crop size] per kind
      droppos_vit-b_200e_coco:              # downstream: init_from a run
        config: configs/transfer/mmdet/...py
        init_from: droppos_vit-b_200e
      vit-s_rope-mixed_res288:              # evaluation of another run
        config: ...; test_of: vit-s_rope-mixed; cfg_options: {k: v}
      vit-b_upernet_ms:                     # multi-scale + flip test
        config: ...; test_of: vit-b_upernet; tta: true   # test.py --tta
    tables:
      - id: droppos_t6
        paper: DropPos
        source: droppos.txt Table 6
        title: ...
        info: [method, venue]               # row fields shown before metrics
        eff_epochs: true                    # show the effective-epoch column
        columns:                            # one cell = (run of the row, metric)
          - {metric: AP_bb, run: coco}
        rows:
          - {method: DropPos, eff_ep: 200, runs: {coco: droppos_vit-b_200e_coco},
             paper: [42.1, ...]}            # one value (or null) per column
          - {method: MAE, eff_ep: 200, paper: [40.1, ...]}   # paper-only row

Every config path is relative to the repository root. A config that does not
exist must be listed in ``pending`` (:meth:`Manifest.check_configs` reports
both a missing unlisted config and a stale ``pending`` entry), so the manifest
says honestly what can be run today. A row without ``runs`` is a reference
row: the paper's number only, never reported as missing.

Effective epochs (:func:`effective_epochs`) follow iBOT's definition, which
the DropPos appendix ("Effective training epochs") and the ICPF footnote on
Table 1 both adopt: actual pretraining epochs times
``r = sum_i n_i * (s_i / 224) ** 2`` over the view kinds (``n_i`` crops of
side ``s_i``); masking does not change ``r`` (MAE/DropPos: one 224 view, r=1).
Both papers quote ``r`` rounded ("2 + (96/224)^2 x 10 ~ 4" for DINO,
"2 + (96/224)^2 x 8 ~ 3.5" for ICPF, whose 100 epochs become 350), so ``r`` is
rounded to the nearest 0.5 before multiplying; the exact ``r`` is kept too.
Reference rows show the paper's ``eff_ep``; without one, it is computed from
the row's ``epochs`` and ``views`` text (``2x224² + 10x96²``, CR2PQ's
tables).
"""
import os.path as osp
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

from mmpos.errors import BadInputError

BASE_CROP = 224
R_STEP = 0.5


class ManifestError(BadInputError):
    """A manifest entry is malformed; the message names the key."""


def effective_epochs(epochs: Optional[float],
                     views: Optional[Sequence[Sequence[float]]],
                     base: int = BASE_CROP,
                     step: Optional[float] = R_STEP) -> Tuple[
                         Optional[float], Optional[float]]:
    """``(r, epochs * r)`` after iBOT; ``r`` rounded to ``step`` (None: exact).

    >>> effective_epochs(100, [[2, 224], [8, 96]])   # ICPF footnote
    (3.5, 350.0)
    >>> effective_epochs(800, [[2, 224], [10, 96]])  # DINO ViT-S in iBOT
    (4.0, 3200.0)

    Returns ``(None, None)`` when ``epochs`` or ``views`` is unknown.
    """
    if epochs is None or not views:
        return None, None
    r = sum(float(n) * (float(s) / base)**2 for n, s in views)
    if step:
        r = round(r / step) * step
    return r, float(epochs) * r


def parse_views(text) -> Optional[List[List[int]]]:
    """``'2x224² + 10x96²'`` -> ``[[2, 224], [10, 96]]``; None if ``text``
    names no ``<count>x<size>`` view."""
    pairs = re.findall(r'(\d+)\s*[x×]\s*(\d+)', str(text or ''))
    return [[int(n), int(s)] for n, s in pairs] or None


@dataclass
class Metric:
    """How one metric is read: ``key`` in the validation record, times
    ``scale`` (COCO APs are fractions, the papers print percent)."""
    name: str
    key: str
    scale: float = 1.0
    label: str = ''


@dataclass
class Run:
    """One launch of ``tools/train.py`` (or ``tools/test.py`` with
    ``test_of``). ``init_from``: the run whose last checkpoint initialises
    this one's backbone (``init_mode='backbone'``) or, with
    ``init_mode='full'``, the whole model (``load_from``, e.g. a second
    training stage); ``epochs``/``views``: pretraining schedule for the
    effective-epoch accounting; ``tta``: a ``test_of`` run evaluated with
    the config's test-time augmentation (``tools/test.py --tta``)."""
    id: str
    config: str
    init_from: Optional[str] = None
    init_mode: str = 'backbone'
    test_of: Optional[str] = None
    epochs: Optional[float] = None
    views: Optional[list] = None
    cfg_options: Dict[str, object] = field(default_factory=dict)
    gpus: int = 8
    tta: bool = False
    note: str = ''


@dataclass
class Column:
    metric: str
    run: str
    name: str


@dataclass
class Row:
    fields: Dict[str, object]
    runs: Dict[str, str]
    paper: List[Optional[float]]

    @property
    def reference(self) -> bool:
        """Paper-only row (no run of ours)."""
        return not self.runs


@dataclass
class Table:
    id: str
    paper: str
    source: str
    title: str
    info: List[str]
    columns: List[Column]
    rows: List[Row]
    eff_epochs: bool = False
    note: str = ''

    @property
    def has_paper(self) -> bool:
        """False for tables without any paper number (e.g. the demo): they
        are written without the paper and delta columns."""
        return any(v is not None for row in self.rows for v in row.paper)


@dataclass
class Manifest:
    path: str
    root: str
    pending: List[str]
    metrics: Dict[str, Metric]
    runs: Dict[str, Run]
    tables: List[Table]

    def table(self, table_id: str) -> Table:
        for table in self.tables:
            if table.id == table_id:
                return table
        raise KeyError(f'no table {table_id!r} in {self.path}; have '
                       f'{[t.id for t in self.tables]}')

    def config_path(self, config: str) -> str:
        return config if osp.isabs(config) else osp.join(self.root, config)

    def config_exists(self, config: str) -> bool:
        return osp.isfile(self.config_path(config))

    def check_configs(self) -> List[str]:
        """Problems with the configs the runs name (empty list: all good).

        * a run's config is missing and not listed in ``pending``;
        * a ``pending`` config now exists (drop it from the list);
        * a ``pending`` entry that no run uses.
        """
        used = {run.config for run in self.runs.values()}
        problems = []
        for run in self.runs.values():
            if not self.config_exists(run.config) and \
                    run.config not in self.pending:
                problems.append(f'run {run.id!r}: config {run.config} does '
                                'not exist and is not listed in `pending`')
        for config in self.pending:
            if self.config_exists(config):
                problems.append(f'pending config {config} exists now; '
                                'remove it from `pending`')
            if config not in used:
                problems.append(f'pending config {config} is used by no run')
        return problems

    def root_run(self, run_id: str) -> Run:
        """Follow ``test_of`` / ``init_from`` to the run that started from
        scratch (the pretraining whose epochs count)."""
        run, seen = self.runs[run_id], set()
        while run.test_of or run.init_from:
            if run.id in seen:
                raise ManifestError(f'runs: cycle through {run.id!r}')
            seen.add(run.id)
            run = self.runs[run.test_of or run.init_from]
        return run

    def row_effective_epochs(self, row: Row) -> Optional[float]:
        """Effective pretraining epochs of the row's runs (None if unknown
        or a reference row); all runs of a row must agree."""
        values = {
            effective_epochs(root.epochs, root.views)[1]
            for root in (self.root_run(r) for r in row.runs.values())
        }
        if len(values) > 1:
            raise ManifestError(f'row {row.fields}: its runs have different '
                                f'effective epochs {sorted(values)}')
        return values.pop() if values else None

    def reference_effective_epochs(self, row: Row):
        """Effective epochs of a paper-only row: its ``eff_ep`` (a number or
        ``'-'``), else computed from its ``epochs`` and ``views`` fields;
        None when neither is given."""
        if row.fields.get('eff_ep') is not None:
            return row.fields['eff_ep']
        return effective_epochs(row.fields.get('epochs'),
                                parse_views(row.fields.get('views')))[1]

    def check_effective_epochs(self) -> List[str]:
        """Rows whose computed effective epochs differ from the paper's
        ``eff_ep`` (a check of the accounting and of the transcription)."""
        problems = []
        for table in self.tables:
            for row in table.rows:
                paper = row.fields.get('eff_ep')
                ours = self.row_effective_epochs(row)
                if row.runs and paper not in (None, '-') and \
                        ours is not None and float(paper) != ours:
                    problems.append(f'{table.id} {row.fields.get("method")}:'
                                    f' eff. ep. {ours:g} computed, paper '
                                    f'{paper}')
        return problems


def _need(entry: dict, key: str, where: str):
    if not isinstance(entry, dict) or key not in entry:
        raise ManifestError(f'{where}: missing key {key!r}')
    return entry[key]


def _parse_run(run_id: str, entry: dict) -> Run:
    where = f'runs.{run_id}'
    known = set(Run.__dataclass_fields__) - {'id'}
    unknown = set(entry) - known
    if unknown:
        raise ManifestError(f'{where}: unknown keys {sorted(unknown)}')
    _need(entry, 'config', where)
    if entry.get('init_mode', 'backbone') not in ('backbone', 'full'):
        raise ManifestError(f'{where}.init_mode: backbone or full, got '
                            f'{entry["init_mode"]!r}')
    if entry.get('tta') and not entry.get('test_of'):
        raise ManifestError(f'{where}.tta: only a test_of run is tested with '
                            'test-time augmentation')
    views = entry.get('views')
    if views is not None and not all(
            isinstance(v, (list, tuple)) and len(v) == 2 for v in views):
        raise ManifestError(f'{where}.views: expected [[count, size], ...], '
                            f'got {views!r}')
    return Run(id=run_id, **entry)


def _parse_table(entry: dict, index: int, metrics: dict,
                 runs: dict) -> Table:
    where = f'tables[{index}]'
    table_id = _need(entry, 'id', where)
    where = f'tables.{table_id}'
    columns = []
    for j, col in enumerate(_need(entry, 'columns', where)):
        metric = _need(col, 'metric', f'{where}.columns[{j}]')
        if metric not in metrics:
            raise ManifestError(f'{where}.columns[{j}].metric: unknown '
                                f'metric {metric!r}')
        columns.append(Column(metric=metric, run=col.get('run', 'main'),
                              name=col.get('name') or metrics[metric].label
                              or metric))
    info = list(entry.get('info', ['method']))
    rows = []
    for j, row in enumerate(_need(entry, 'rows', where)):
        rwhere = f'{where}.rows[{j}]'
        paper = list(_need(row, 'paper', rwhere))
        if len(paper) != len(columns):
            raise ManifestError(f'{rwhere}.paper: {len(paper)} values for '
                                f'{len(columns)} columns')
        row_runs = dict(row.get('runs') or {})
        for key, run_id in row_runs.items():
            if run_id not in runs:
                raise ManifestError(f'{rwhere}.runs.{key}: unknown run '
                                    f'{run_id!r}')
        if row_runs:
            for col in columns:
                if col.run not in row_runs:
                    raise ManifestError(f'{rwhere}.runs: no run for column '
                                        f'{col.name!r} (key {col.run!r})')
        fields = {k: v for k, v in row.items() if k not in ('paper', 'runs')}
        rows.append(Row(fields=fields, runs=row_runs, paper=paper))
    return Table(id=table_id, paper=_need(entry, 'paper', where),
                 source=entry.get('source', ''), title=entry.get('title', ''),
                 info=info, columns=columns, rows=rows,
                 eff_epochs=bool(entry.get('eff_epochs', False)),
                 note=entry.get('note', ''))


TOP_LEVEL_KEYS = ('pending', 'metrics', 'runs', 'tables')


def load_manifest(path: str, root: Optional[str] = None) -> Manifest:
    """Parse and check the structure of a manifest.

    ``root``: directory that config paths are relative to; default: the
    repository root, i.e. two levels above a manifest in ``tools/paper_tables``
    (the parent of the first ``tools`` directory), else the manifest's dir.
    Raises :class:`ManifestError` naming the offending key.
    """
    with open(path) as f:
        try:
            data = yaml.safe_load(f) or {}
        except yaml.YAMLError as err:
            raise ManifestError(f'{path}: not valid YAML: '
                                f'{" ".join(str(err).split())}') from None
    unknown = sorted(set(data) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise ManifestError(f'{path}: unknown top-level keys {unknown}; '
                            f'a manifest has {list(TOP_LEVEL_KEYS)}')
    if root is None:
        here = osp.dirname(osp.abspath(path))
        parts = here.split(osp.sep)
        root = (osp.sep.join(parts[:parts.index('tools')])
                if 'tools' in parts else here) or osp.sep
    metrics = {}
    for name, entry in (data.get('metrics') or {}).items():
        metrics[name] = Metric(name=name, key=_need(entry, 'key',
                                                    f'metrics.{name}'),
                               scale=float(entry.get('scale', 1.0)),
                               label=entry.get('label', name))
    runs = {
        run_id: _parse_run(run_id, entry)
        for run_id, entry in (data.get('runs') or {}).items()
    }
    for run in runs.values():
        for key in ('init_from', 'test_of'):
            ref = getattr(run, key)
            if ref is not None and ref not in runs:
                raise ManifestError(f'runs.{run.id}.{key}: unknown run '
                                    f'{ref!r}')
    tables = [
        _parse_table(entry, i, metrics, runs)
        for i, entry in enumerate(data.get('tables') or [])
    ]
    ids = [t.id for t in tables]
    if len(set(ids)) != len(ids):
        raise ManifestError(f'tables: duplicate ids in {ids}')
    manifest = Manifest(path=path, root=root,
                        pending=list(data.get('pending') or []),
                        metrics=metrics, runs=runs, tables=tables)
    for run_id in runs:
        manifest.root_run(run_id)  # raises on cycles
    return manifest
