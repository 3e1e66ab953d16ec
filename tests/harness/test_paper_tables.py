"""The paper-table manifest and table generator on fabricated work dirs, and
checks of the real manifest (configs present or pending, effective epochs,
the papers' own deltas and cross-references re-derived from the transcribed
numbers)."""
import csv
import importlib.util
import json
import os
import subprocess

import pytest
import yaml

from conftest import REPO
from mmpos.analysis.logs import training_records
from mmpos_harness.paper_tables.manifest import (ManifestError,
                                                 effective_epochs,
                                                 load_manifest, parse_views)
from mmpos_harness.paper_tables.tables import (EFF_EP_LEGEND, build_table,
                                               generate, run_results)
from mmpos_harness.results import DONE_MARKER, last_checkpoint, read_run

TRAIN = {'lr': 1e-3, 'loss': 1.0, 'iter': 10, 'step': 10}


def write_scalars(work_dir, stamp, records):
    path = work_dir / stamp / 'vis_data'
    path.mkdir(parents=True)
    with open(path / 'scalars.json', 'w') as f:
        f.write('\n'.join(json.dumps(r) for r in records) + '\n')


def coco(bbox, segm=None):
    rec = {'coco/bbox_mAP': bbox, 'coco/bbox_mAP_50': 0.9, 'step': 12}
    if segm is not None:
        rec['coco/segm_mAP'] = segm
    return rec


@pytest.fixture
def fabricated(tmp_path):
    """A repo-like root with configs, a manifest and six work dirs."""
    root = tmp_path / 'repo'
    (root / 'configs').mkdir(parents=True)
    for name in ('pre', 'det', 'seg'):
        (root / 'configs' / f'{name}.py').write_text('# fake\n')
    manifest = {
        'pending': ['configs/not_written.py'],
        'metrics': {
            'AP_bb': {'key': 'coco/bbox_mAP', 'scale': 100, 'label': 'AP^bb'},
            'AP_mk': {'key': 'coco/segm_mAP', 'scale': 100, 'label': 'AP^mk'},
            'mIoU': {'key': 'mIoU'},
        },
        'runs': {
            'pre': {'config': 'configs/pre.py', 'epochs': 100,
                    'views': [[2, 224], [8, 96]]},
            'det_done': {'config': 'configs/det.py', 'init_from': 'pre'},
            'seg_metrics': {'config': 'configs/seg.py', 'init_from': 'pre'},
            'det_unfinished': {'config': 'configs/det.py',
                               'init_from': 'pre'},
            'seg_missing': {'config': 'configs/seg.py', 'init_from': 'pre'},
            'det_running': {'config': 'configs/det.py', 'init_from': 'pre'},
            'seg_pending': {'config': 'configs/not_written.py',
                            'init_from': 'pre'},
            'det_nokey': {'config': 'configs/det.py', 'init_from': 'pre'},
        },
        'tables': [{
            'id': 't1', 'paper': 'Fake', 'title': 'fabricated',
            'source': 'none', 'info': ['method'], 'eff_epochs': True,
            'columns': [{'metric': 'AP_bb', 'run': 'det'},
                        {'metric': 'AP_mk', 'run': 'det'},
                        {'metric': 'mIoU', 'run': 'seg'}],
            'rows': [
                {'method': 'Ref', 'eff_ep': 1600, 'paper': [40.0, 35.0, 45.0]},
                {'method': 'A', 'eff_ep': 350,
                 'runs': {'det': 'det_done', 'seg': 'seg_metrics'},
                 'paper': [42.1, 37.9, 40.7]},
                {'method': 'B',
                 'runs': {'det': 'det_unfinished', 'seg': 'seg_missing'},
                 'paper': [42.0, 37.0, 40.0]},
                {'method': 'C',
                 'runs': {'det': 'det_running', 'seg': 'seg_pending'},
                 'paper': [1.0, 2.0, 3.0]},
                {'method': 'D',
                 'runs': {'det': 'det_nokey', 'seg': 'seg_metrics'},
                 'paper': [50.0, 30.0, None]},
            ]
        }]
    }
    tools = root / 'tools' / 'paper_tables'
    tools.mkdir(parents=True)
    (tools / 'm.yaml').write_text(yaml.safe_dump(manifest, sort_keys=False))

    work = tmp_path / 'work'
    # det_done: a first start with an early evaluation, then a resumed start
    # whose last evaluation is the final one.
    done = work / 'det_done'
    write_scalars(done, '20240101_000000', [TRAIN, coco(0.10, 0.10), TRAIN])
    write_scalars(done, '20240102_000000',
                  [TRAIN, coco(0.30, 0.30), TRAIN, coco(0.4216, 0.3752)])
    (done / DONE_MARKER).write_text('')
    (done / 'iter_12.pth').write_text('')
    (done / 'last_checkpoint').write_text('/elsewhere/det_done/iter_12.pth')
    seg = work / 'seg_metrics'
    write_scalars(seg, '20240101_000000', [TRAIN, {'mIoU': 10.0, 'step': 1}])
    (seg / 'metrics.json').write_text(json.dumps({'mIoU': 41.23,
                                                  'aAcc': 80.0}))
    write_scalars(work / 'det_unfinished', '20240101_000000',
                  [TRAIN, coco(0.3, 0.2), TRAIN])
    with open(work / 'det_unfinished' / '20240101_000000' / 'vis_data' /
              'scalars.json', 'a') as f:
        f.write('{"lr": 0.1, "loss"')  # killed mid-write
    write_scalars(work / 'det_running', '20240101_000000', [TRAIN, TRAIN])
    write_scalars(work / 'det_nokey', '20240101_000000', [TRAIN, coco(0.5)])
    (work / 'det_nokey' / DONE_MARKER).write_text('')
    return root, tools / 'm.yaml', work


def test_read_run_and_checkpoint(fabricated):
    _, _, work = fabricated
    done = read_run(str(work / 'det_done'))
    assert done.status == 'done'
    assert done.metrics['coco/bbox_mAP'] == 0.4216  # last of the last start
    assert done.source.endswith('20240102_000000/vis_data/scalars.json')
    assert read_run(str(work / 'seg_metrics')).metrics['mIoU'] == 41.23
    unfinished = read_run(str(work / 'det_unfinished'))
    assert (unfinished.status, unfinished.metrics['coco/bbox_mAP']) == (
        'unfinished', 0.3)
    assert read_run(str(work / 'det_running')).metrics == {}
    assert read_run(str(work / 'nothing')).status == 'missing'
    assert len(training_records(str(work / 'det_done'))) == 4
    # the pointer names a moved location; the local file is found
    assert last_checkpoint(str(work / 'det_done')) == str(
        work / 'det_done' / 'iter_12.pth')


def test_every_cell(fabricated, tmp_path):
    root, manifest_path, work = fabricated
    manifest = load_manifest(str(manifest_path))
    assert manifest.root == str(root)
    filled = generate(manifest, str(work), str(tmp_path / 'out'))
    rows = filled['t1']
    cells = [[(c.ours_text, c.paper_text, c.delta_text) for c in r.cells]
             for r in rows]
    assert [r.info for r in rows] == [['Ref'], ['A'], ['B'], ['C'], ['D']]
    assert [r.eff_ep for r in rows] == ['1600', '350', '350', '350', '350']
    assert [r.status for r in rows] == [
        'paper only', 'done', 'unfinished, missing', 'unfinished, pending',
        'done'
    ]
    assert cells[0] == [('', '40.0', ''), ('', '35.0', ''), ('', '45.0', '')]
    # 42.16 -> 42.2 (+0.1); 37.52 -> 37.5 (-0.4); 41.23 -> 41.2 (+0.5)
    assert cells[1] == [('42.2', '42.1', '+0.1'), ('37.5', '37.9', '-0.4'),
                        ('41.2', '40.7', '+0.5')]
    assert cells[2] == [('30.0*', '42.0', '-12.0'), ('20.0*', '37.0', '-17.0'),
                        ('missing', '40.0', '')]
    assert cells[3] == [('running', '1.0', ''), ('running', '2.0', ''),
                        ('pending', '3.0', '')]
    assert cells[4] == [('50.0', '50.0', '+0.0'), ('no key', '30.0', ''),
                        ('41.2', '-', '')]
    assert rows[1].cells[0].ours == pytest.approx(42.16)
    assert rows[1].cells[0].delta == pytest.approx(0.1)

    with open(tmp_path / 'out' / 't1.csv') as f:
        table = list(csv.reader(f))
    assert table[0][:6] == ['method', 'eff. ep.', 'status', 'AP^bb ours',
                            'AP^bb paper', 'AP^bb Δ']
    assert table[0][-3:] == ['mIoU ours', 'mIoU paper', 'mIoU Δ']
    assert table[2] == ['A', '350', 'done', '42.2', '42.1', '+0.1', '37.5',
                        '37.9', '-0.4', '41.2', '40.7', '+0.5']
    assert table[3][3:] == ['30.0*', '42.0', '-12.0', '20.0*', '37.0',
                            '-17.0', 'missing', '40.0', '']
    markdown = (tmp_path / 'out' / 't1.md').read_text()
    assert ('| A | 350 | done | 42.2 | 42.1 | +0.1 | 37.5 | 37.9 | -0.4 | '
            '41.2 | 40.7 | +0.5 |') in markdown
    assert markdown in (tmp_path / 'out' / 'tables.md').read_text()


def gen_tables(capsys, *args):
    """``tools/paper_tables/gen_tables.py ARGS`` in this process (importing
    mmpos in a subprocess costs ~15 s): ``(exit code, stdout, stderr)``."""
    spec = importlib.util.spec_from_file_location(
        'gen_tables', REPO / 'tools/paper_tables/gen_tables.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    try:
        tool.main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    if isinstance(code, str):  # sys.exit('message')
        code, err = 1, err + code
    return code, out, err


def test_cli(fabricated, tmp_path, capsys):
    _, manifest_path, work = fabricated
    out = tmp_path / 'cli'
    code, stdout, stderr = gen_tables(
        capsys, manifest_path, '--work-root', work, '--out-dir', out,
        '--print', '--check')
    assert code == 0, stderr
    assert '| B | 350 | unfinished, missing | 30.0* |' in stdout
    assert sorted(os.listdir(out)) == ['t1.csv', 't1.md', 'tables.md']
    # a config that disappears without being listed as pending fails --check
    os.remove(manifest_path.parents[2] / 'configs' / 'seg.py')
    code, _, stderr = gen_tables(capsys, manifest_path, '--work-root', work,
                                 '--out-dir', out, '--check')
    assert code == 1
    assert "run 'seg_metrics': config configs/seg.py does not exist" in \
        stderr
    code, _, stderr = gen_tables(capsys, manifest_path, '--work-root', work,
                                 '--tables', 'nope')
    assert code == 1 and "no table 'nope'" in stderr


def test_check_configs(fabricated):
    root, manifest_path, _ = fabricated
    manifest = load_manifest(str(manifest_path))
    assert manifest.check_configs() == []
    (root / 'configs' / 'not_written.py').write_text('')
    manifest.pending.append('configs/unused.py')
    assert manifest.check_configs() == [
        'pending config configs/not_written.py exists now; remove it from '
        '`pending`',
        'pending config configs/unused.py is used by no run',
    ]


@pytest.mark.parametrize('edit, message', [
    (lambda m: m['tables'][0]['rows'][0].update(paper=[1.0]),
     'tables.t1.rows[0].paper: 1 values for 3 columns'),
    (lambda m: m['tables'][0]['columns'][0].update(metric='nope'),
     "tables.t1.columns[0].metric: unknown metric 'nope'"),
    (lambda m: m['tables'][0]['rows'][1]['runs'].update(det='nope'),
     "tables.t1.rows[1].runs.det: unknown run 'nope'"),
    (lambda m: m['tables'][0]['rows'][1]['runs'].pop('seg'),
     "tables.t1.rows[1].runs: no run for column 'mIoU' (key 'seg')"),
    (lambda m: m['runs']['pre'].update(init_from='det_done'),
     'runs: cycle through'),
    (lambda m: m['runs']['pre'].update(views=[224]),
     'runs.pre.views: expected [[count, size], ...]'),
    (lambda m: m['runs']['pre'].pop('config'),
     "runs.pre: missing key 'config'"),
])
def test_bad_manifest(fabricated, edit, message):
    _, manifest_path, _ = fabricated
    data = yaml.safe_load(manifest_path.read_text())
    edit(data)
    manifest_path.write_text(yaml.safe_dump(data))
    with pytest.raises(ManifestError, match=message.replace('[', r'\[')
                       .replace(']', r'\]').replace('(', r'\(')
                       .replace(')', r'\)')):
        load_manifest(str(manifest_path))


def test_effective_epochs():
    # ICPF footnote: 2 + (96/224)^2 * 8 ~ 3.5, 100 epochs -> 350
    assert effective_epochs(100, [[2, 224], [8, 96]]) == (3.5, 350.0)
    r, _ = effective_epochs(100, [[2, 224], [8, 96]], step=None)
    assert r == pytest.approx(2 + 8 * (96 / 224)**2)
    # DropPos appendix: DINO 2 x 224 + 10 x 96 -> r ~ 4
    assert effective_epochs(800, [[2, 224], [10, 96]]) == (4.0, 3200.0)
    # one 224 view (MAE, DropPos): r = 1; MoCo v3 two views: 300 -> 600
    assert effective_epochs(200, [[1, 224]]) == (1.0, 200.0)
    assert effective_epochs(300, [[2, 224]]) == (2.0, 600.0)
    assert effective_epochs(None, [[1, 224]]) == (None, None)


def test_reference_row_effective_epochs(fabricated, tmp_path):
    """Paper rows without ``eff_ep`` get it from their epochs and views
    (CR2PQ's tables); the tables explain the accounting."""
    assert parse_views('2x224² + 10x96²') == [[2, 224], [10, 96]]
    assert parse_views('2x224²') == [[2, 224]] and parse_views('-') is None
    _, manifest_path, work = fabricated
    data = yaml.safe_load(manifest_path.read_text())
    data['tables'][0]['info'] = ['method', 'epochs', 'views']
    data['tables'][0]['rows'][1:1] = [
        # DINO in CR2PQ Table 1: 800 x (2 + (96/224)^2 x 10 = 3.84 ~ 4)
        {'method': 'DINO', 'epochs': 800, 'views': '2x224² + 10x96²',
         'paper': [46.8, 40.6, None]},
        {'method': 'PQCL', 'epochs': 300, 'views': '2x224²',
         'paper': [47.7, 41.1, None]},
        {'method': 'no views', 'epochs': 300, 'paper': [1.0, 1.0, 1.0]},
    ]
    manifest_path.write_text(yaml.safe_dump(data, allow_unicode=True))
    manifest = load_manifest(str(manifest_path))
    rows = generate(manifest, str(work), str(tmp_path / 'out'))['t1']
    assert [r.eff_ep for r in rows] == ['1600', '3200', '600', '-', '350',
                                        '350', '350', '350']
    markdown = (tmp_path / 'out' / 't1.md').read_text()
    assert '| DINO | 800 | 2x224² + 10x96² | 3200 | paper only |' in markdown
    assert EFF_EP_LEGEND in markdown


def test_unknown_top_level_key_is_refused(fabricated, capsys):
    """A key the manifest does not read (e.g. ``readmes``) is an
    error naming it, not silently ignored."""
    _, manifest_path, work = fabricated
    data = yaml.safe_load(manifest_path.read_text())
    data['readmes'] = {'Fake': ['configs/README.md']}
    manifest_path.write_text(yaml.safe_dump(data))
    with pytest.raises(ManifestError, match=r"unknown top-level keys "
                       r"\['readmes'\]"):
        load_manifest(str(manifest_path))
    code, _, stderr = gen_tables(capsys, manifest_path, '--work-root', work)
    assert code == 1 and "unknown top-level keys ['readmes']" in stderr


def test_seed_table(tmp_path, capsys):
    """tools/demo.py's / method_ranking.py's closing table (gen_tables.py
    --seeds): mean and sample std over seeds; the first metric's
    difference to random init by scipy's paired t over the seeds (the
    demo's inits share them), Holm over the table as statsmodels adjusts;
    the ranking with its ties, compute and a missing run; the same table
    again from the stored summary.json."""
    from scipy.stats import ttest_rel
    from statsmodels.stats.multitest import multipletests

    import mmpos_stats as stats
    from mmpos_harness.comparison import runs, seeds
    root = tmp_path / 'run'
    runs.write_plan(str(root), 'DropPos-pretrained vs random init',
                    ['DropPos', 'MAE', runs.RANDOM_INIT], [0, 1, 2])
    maps = {'DropPos': [0.30, 0.33, 0.34], 'MAE': [0.10, 0.20],
            runs.RANDOM_INIT: [0.10, 0.12, 0.14]}
    mious = {'DropPos': [20.0, 30.0, 40.0], 'MAE': [50.0, 52.0, 54.0],
             runs.RANDOM_INIT: [21.0, 22.0, 23.0]}
    for init in maps:
        for seed, value in enumerate(maps[init]):
            work = tmp_path.joinpath(
                seeds.transfer_dir(str(root), 'detection', init, seed))
            write_scalars(work, '20240101_000000', [
                {'coco/bbox_mAP': value, 'coco/segm_mAP': value / 2,
                 'coco/bbox_mAP_50': 2 * value, 'step': 200}])
            open(os.path.join(work, DONE_MARKER), 'w').close()
            seeds.write_json(os.path.join(work, seeds.COMPUTE),
                             dict(minutes=1.5))
        for seed, value in enumerate(mious[init]):
            work = seeds.transfer_dir(str(root), 'segmentation', init, seed)
            os.makedirs(work)
            with open(os.path.join(work, 'metrics.json'), 'w') as f:
                json.dump({'mIoU': value, 'aAcc': value + 10}, f)
    code, stdout, _ = gen_tables(capsys, '--seeds', root, '--print')
    assert code == 0
    summary = json.loads((root / 'tables' / 'summary.json').read_text())
    det = summary['tasks']['detection']['inits']
    seg = summary['tasks']['segmentation']['inits']
    assert det['DropPos']['coco/bbox_mAP']['mean'] == pytest.approx(32.333,
                                                                    1e-4)
    assert det['DropPos']['coco/bbox_mAP']['std'] == pytest.approx(2.0817,
                                                                   1e-4)
    # MAE's third detection run is missing: paired over seeds 0 and 1
    assert det['MAE']['coco/bbox_mAP']['groups'] == [[10.0, 20.0, None]]
    cells = [det['DropPos']['coco/bbox_mAP'], seg['DropPos']['mIoU'],
             det['MAE']['coco/bbox_mAP'], seg['MAE']['mIoU']]
    ref = [ttest_rel([30.0, 33.0, 34.0], [10.0, 12.0, 14.0]),
           ttest_rel(mious['DropPos'], mious[runs.RANDOM_INIT]),
           ttest_rel([10.0, 20.0], [10.0, 12.0]),
           ttest_rel(mious['MAE'], mious[runs.RANDOM_INIT])]
    assert [c['test']['pvalue'] for c in cells] == pytest.approx(
        [r.pvalue for r in ref])
    assert [c['test']['p_adj'] for c in cells] == pytest.approx(list(
        multipletests([r.pvalue for r in ref], method='holm')[1]))
    assert [c['test']['verdict'] for c in cells] == [
        'higher', 'no verdict', 'no verdict', 'higher']
    assert 'aAcc' in seg['DropPos'] and 'test' not in seg['DropPos']['aAcc']
    assert summary['compute']['DropPos']['transfer_minutes'] == 4.5
    assert '**DropPos-pretrained vs random init**' in stdout
    # ranks (AP^bb, mIoU): DropPos 1 + 2, MAE 2 + 1: tied at 1.5, in the
    # plan's order; random init 3
    assert seeds.ranking(summary) == ['DropPos', 'MAE', runs.RANDOM_INIT]
    assert [summary['ranks'][i]['rank'] for i in seeds.ranking(summary)] \
        == [1.5, 1.5, 3.0]
    cell = stats.format_cell(stats.Comparison.from_dict(cells[0]['test']))
    assert cell.startswith('+20.3 [') and ', p_adj ' in cell
    assert ('| DropPos | 32.3 ± 2.1 | 16.2 ± 1.0 | 64.7 ± 4.2 | '
            f'{cell} | 30.0 ± 10.0 | 40.0 ± 10.0 | ') in stdout
    assert '| - | - | 4.5 |' in stdout  # no pretraining, tokens
    assert (f'- DropPos: above random init on mini-objects (AP^bb {cell}); '
            'no verdict against random init on mini-stuff') in stdout
    assert '- MAE: above random init on mini-stuff (mIoU +30.0 [' in stdout
    assert '| MAE | 15.0 ± 7.1 (n=2) |' in stdout
    assert "paired t over the transfer seeds" in stdout
    assert "adjusted by Holm over the table's 4 tests" in stdout
    assert (root / 'tables' / 'seeds.csv').is_file()
    # the stored summary.json regenerates the same table, nothing re-run
    again = tmp_path / 'again'
    code, _, _ = gen_tables(capsys, '--seeds',
                            root / 'tables' / 'summary.json', '--out-dir',
                            again)
    assert code == 0
    for name in ('seeds.md', 'seeds.csv', 'summary.json'):
        assert (again / name).read_bytes() == \
            (root / 'tables' / name).read_bytes()


# ------------------------------------------------------- the real manifest
@pytest.fixture(scope='module')
def real():
    return load_manifest(str(REPO / 'tools/paper_tables/manifest.yaml'))


def paper(manifest, table_id, **fields):
    rows = [r for r in manifest.table(table_id).rows
            if all(str(r.fields.get(k)) == str(v) for k, v in fields.items())]
    assert len(rows) == 1, (table_id, fields)
    return rows[0].paper


def test_real_manifest_configs_honest(real):
    """Every config a run names exists or is listed as pending, and no
    pending entry exists already (the list says what is still missing)."""
    assert real.check_configs() == []
    existing = {r.config for r in real.runs.values()
                if real.config_exists(r.config)}
    assert 'configs/icpf/icpf_vit-base-p16_8xb64-100e_in1k.py' in existing


def test_real_manifest_effective_epochs(real):
    assert real.check_effective_epochs() == []
    t1a = real.table('icpf_t1a')
    ours = [r for r in t1a.rows if r.runs]
    assert [real.row_effective_epochs(r) for r in ours] == [350.0, 350.0]
    t6 = real.table('droppos_t6')
    assert [real.row_effective_epochs(r) for r in t6.rows if r.runs] == [
        200.0, 800.0
    ]


def test_real_manifest_paper_deltas(real):
    """The papers print gains in parentheses (RoPE-ViT Tables 1-4, QB-Heat
    Table 5) and quote differences in the text; recompute them from the
    transcribed numbers."""
    rope = {
        ('rope_vit_t1', 'ViT-B'): [1.4, 1.8, 1.3, 1.7],
        ('rope_vit_t1', 'ViT-L'): [1.1, 1.8, 1.4, 1.7],
        ('rope_vit_t2', 'Swin-T'): [0.3, 0.5, 0.4, 0.3],
        ('rope_vit_t2', 'Swin-S'): [0.1, 0.3, 0.5, 0.6],
        ('rope_vit_t2', 'Swin-B'): [0.2, 0.3, 0.5, 0.3],
        ('rope_vit_t4', 'Swin-S'): [0.2, 0.9, 1.0, 0.7],
        ('rope_vit_t4', 'Swin-B'): [0.5, 0.5, -1.5, -0.1],
    }
    for (table, backbone), gains in rope.items():
        values = paper(real, table, backbone=backbone)
        assert [round(v - values[0], 1) for v in values[1:]] == gains
    t3 = {('ViT-B', '-'): [1.3, 1.9, 1.8, 2.3], ('ViT-B', '✓'):
          [1.5, 2.3, 2.1, 2.5], ('ViT-L', '-'): [1.0, 0.7, 0.8, 1.2],
          ('ViT-L', '✓'): [1.0, 0.7, 0.8, 1.0]}
    for (backbone, ms), gains in t3.items():
        values = paper(real, 'rope_vit_t3', backbone=backbone, multi_scale=ms)
        assert [round(v - values[0], 1) for v in values[1:]] == gains
    # QB-Heat Table 5: AP gains over "sup" (moco2 x, moco2 v, QB x, QB v)
    qb = {('MF-Dec-522', 'MF-3.7G'): [-15.0, -8.8, 3.0, 5.0],
          ('MF-Dec-522', 'MF-1.0G'): [-8.0, 0.7, 4.3, 5.7],
          ('MF-Dec-522', 'MF-285M'): [-3.4, 4.7, 4.5, 6.4],
          ('MF-Dec-211', 'MF-3.7G'): [-21.9, -15.0, 2.6, 6.9],
          ('MF-Dec-211', 'MF-1.0G'): [-14.3, -0.6, 4.5, 8.1],
          ('MF-Dec-211', 'MF-285M'): [-5.7, 4.9, 5.2, 8.0]}
    for (head, backbone), gains in qb.items():
        rows = [r.paper[0] for r in real.table('qbheat_t5').rows
                if r.fields['head'] == head and r.fields['backbone'] ==
                backbone]
        assert [round(v - rows[0], 1) for v in rows[1:]] == gains
    # QB-Heat Table 14 (RetinaNet): AP gains over "sup" (moco2, QB x, QB v)
    t14 = {'MF-3.7G': [-4.6, 2.6, 4.7], 'MF-1.0G': [-4.3, 2.1, 4.1],
           'MF-285M': [-2.8, 0.5, 3.0]}
    for backbone, gains in t14.items():
        rows = [r.paper[0] for r in real.table('qbheat_t14').rows
                if r.fields['backbone'] == backbone]
        assert [round(v - rows[0], 1) for v in rows[1:]] == gains
    # QB-Heat Table 2: (a) corner + center is (b) 8 models, and Table 4's
    # MF-3.7G fine-tuning number
    t2 = {r.fields['setting']: r.paper for r in real.table('qbheat_t2').rows}
    assert t2['corner + center'] == t2['8']
    assert t2['8'][2] == paper(real, 'qbheat_t4', method='QB-Heat')[2]
    # QB-Heat: Table 4's QB-Heat row is Table 6's QB-Heat rows
    assert paper(real, 'qbheat_t4', method='QB-Heat') == [
        paper(real, 'qbheat_t6', encoder=e)[0]
        for e in ('MF-285M', 'MF-1.0G', 'MF-3.7G')
    ]
    # CR2PQ text: Mask R-CNN +1.9 / +0.6 (200 ep) and +3.4 / +2.1 (300 ep)
    # over PQCL; Cascade 300 ep +1.1 / +0.8 over iBOT 800.
    for epochs, gains in ((200, [1.9, 0.6]), (300, [3.4, 2.1])):
        ours = paper(real, 'cr2pq_t1', method='CR2PQ', epochs=epochs,
                     framework='Mask R-CNN')
        pqcl = paper(real, 'cr2pq_t1', method='PQCL', epochs=epochs,
                     framework='Mask R-CNN')
        assert [round(ours[i] - pqcl[i], 1) for i in (0, 3)] == gains
    ours = paper(real, 'cr2pq_t1', method='CR2PQ', epochs=300,
                 framework='Cascade R-CNN')
    ibot = paper(real, 'cr2pq_t1', method='iBOT', epochs=800)
    assert [round(ours[i] - ibot[i], 1) for i in (0, 3)] == [1.1, 0.8]
    # CR2PQ Table 6: drops in mAP^bb from continuous 2D RoPE; its first
    # row is Table 3's ViT-S fine-tuning and Table 1's Cascade 300 epochs
    t6 = [r.paper for r in real.table('cr2pq_t6').rows]
    assert [round(r[1] - t6[0][1], 1) for r in t6[1:]] == [-2.3, -2.7, -3.6,
                                                           -4.6]
    assert t6[0] == [paper(real, 'cr2pq_t3', method='CR2PQ')[0], ours[0]]
    # DropPos text: 200 ep +2.0 AP^b / +1.5 AP^m / +0.2 mIoU over MAE;
    # ICPF text: +0.9 AP^Box / +0.8 AP^Mask over LOCA.
    drop = real.table('droppos_t6').rows
    assert [round(drop[1].paper[i] - drop[0].paper[i], 1)
            for i in (0, 3, 6)] == [2.0, 1.5, 0.2]
    ours = paper(real, 'icpf_t1a', method='Ours (ICPF)')
    loca = paper(real, 'icpf_t1a', method='LOCA')
    assert [round(ours[i] - loca[i], 1) for i in (0, 1)] == [0.9, 0.8]


def test_real_manifest_empty_work_root(real, tmp_path):
    """Nothing run yet: every run cell is 'missing' or 'pending', and the
    paper column is filled."""
    filled = generate(real, str(tmp_path / 'none'), str(tmp_path / 'out'))
    assert len(filled) == len(real.tables) == 20
    for table in real.tables:
        for row, result in zip(table.rows, filled[table.id]):
            for cell, value in zip(result.cells, row.paper):
                expected = {'', 'missing', 'pending'}
                assert cell.ours_text in expected
                assert cell.paper_text == ('-' if value is None else
                                           f'{value:.1f}')
    row = filled['icpf_t1a'][-1]
    runs = [real.runs[r] for r in real.table('icpf_t1a').rows[-1].runs.values()]
    status = ', '.join(dict.fromkeys(
        'missing' if real.config_exists(r.config) else 'pending'
        for r in runs))
    assert (row.info, row.eff_ep, row.status) == (['Ours (ICPF)'], '350',
                                                  status)


def test_run_plan_resumable(fabricated, tmp_path):
    """Finished runs are skipped, a run with a checkpoint resumes, a pending
    config blocks its run, downstream runs get the upstream checkpoint."""
    from mmpos_harness.paper_tables.commands import plan, shell_line
    _, manifest_path, work = fabricated
    manifest = load_manifest(str(manifest_path))
    manifest.runs['seg_eval'] = type(manifest.runs['pre'])(
        id='seg_eval', config='configs/seg.py', test_of='det_done',
        cfg_options={'model.backbone.use_ape': True})
    (work / 'pre').mkdir()
    (work / 'pre' / 'epoch_3.pth').write_text('')
    (work / 'pre' / 'last_checkpoint').write_text(
        str(work / 'pre' / 'epoch_3.pth'))
    steps = plan(manifest, ['det_done', 'seg_missing', 'seg_pending',
                            'seg_eval'], str(work), python='py')
    assert [(s.run.id, s.action) for s in steps] == [
        ('pre', 'resume'), ('det_done', 'done'), ('seg_missing', 'start'),
        ('seg_pending', 'blocked'), ('seg_eval', 'start')]
    root = manifest.root
    assert steps[0].command == ['py', 'tools/train.py', f'{root}/configs/pre.py',
                                '--work-dir', f'{work}/pre', '--resume']
    assert steps[2].command[-3:] == [
        'model.backbone.init_cfg.type=Pretrained',
        f'model.backbone.init_cfg.checkpoint={work}/pre/epoch_3.pth',
        'model.backbone.init_cfg.prefix=backbone.']
    assert steps[3].reason == 'config configs/not_written.py is pending'
    assert steps[4].command == [
        'py', 'tools/test.py', f'{root}/configs/seg.py',
        f'{work}/det_done/iter_12.pth', '--work-dir', f'{work}/seg_eval',
        '--out', f'{work}/seg_eval/metrics.json', '--cfg-options',
        'model.backbone.use_ape=True']
    assert shell_line(steps[0], str(work)).endswith(
        f'--resume && touch {work}/pre/{DONE_MARKER}')
    # an upstream run without checkpoint yet is read when the line runs
    os.remove(work / 'pre' / 'last_checkpoint')
    steps = plan(manifest, ['seg_missing'], str(work), launcher='slurm')
    line = shell_line(steps[1], str(work))
    assert line.startswith('GPUS=8 bash tools/slurm_train.sh PARTITION '
                           'seg_missing ')
    assert f' "model.backbone.init_cfg.checkpoint=$(cat {work}/pre/' \
        'last_checkpoint)" ' in line
    # the shell expands it once the upstream run has written the pointer
    (work / 'pre' / 'last_checkpoint').write_text('/ckpt/epoch_3.pth')
    echo = subprocess.run('printf "%s\\n" ' + line.split(' ', 6)[6].split(
        ' && ')[0], shell=True, capture_output=True, text=True).stdout
    assert 'model.backbone.init_cfg.checkpoint=/ckpt/epoch_3.pth' in echo
