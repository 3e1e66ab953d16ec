"""mmpos_harness.position_study (tools/paper_tables/position_study.py): the
two factors' images (the canvas keeps the object's pixel size, resizing
scales it), the shuffled-patch control, the authors' weight-decay split and
LayerScale, the turning pairs against the paper's frequency formula,
DINOv3 with and without its coordinate augmentation, the tables' paired
tests (as scipy and statsmodels compute them), and on a tiny budget the
study's runs, resume, calibration, table regenerated from a stored study
and plot; one study per result folder, and a study SIGKILLed while it
writes resumes to the same table."""
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from scipy.stats import ttest_rel
from statsmodels.stats.multitest import multipletests

from conftest import REPO
from mmpos_harness import position_study as study
from mmpos_harness import provenance
from mmpos_harness.mini_data.cls import _class_image

TINY = ['--iters', '2', '--train-size', '16', '--sizes', '24', '32',
        '--num-train', '12', '--num-val', '9']


def test_canvas_scale_one_draws_the_mini_cls_image():
    for seed in range(6):
        assert np.array_equal(
            study.render_image(np.random.default_rng(seed), 64, 1., seed % 3),
            _class_image(np.random.default_rng(seed), 64, seed % 3))


def _area_at(mask: np.ndarray, size: int) -> float:
    """Pixels the shape covers once its image is downsampled to ``size``
    (the study's ``downsample`` applied to the mask as an image)."""
    image = torch.from_numpy(mask.astype(np.uint8) * 255)[None, None]
    image = image.expand(1, 3, *mask.shape)
    return study.downsample(image, size)[0, 0].float().sum().item() / 255


def test_canvas_keeps_the_object_pixel_size_and_resize_scales_it():
    """As make_data builds them (rendered at 128 px per 64 px training
    side): a training image's shape and a 2x canvas' shape drawn with the
    same random numbers cover the same pixels; the same validation image
    resized to 128 px covers 4 times as many."""
    render, train, test = 128, 64, 128
    for seed in range(4):
        shape = study.draw_shape(np.random.default_rng(seed), render, 1., 0)
        canvas = study.draw_shape(np.random.default_rng(seed), render,
                                  test / train, 0)
        assert canvas.shape == (2 * render, 2 * render)
        at_train = _area_at(shape, train)
        assert 0.18**2 * math.pi * train**2 < at_train < 0.4**2 * math.pi * \
            train**2
        assert _area_at(canvas, test) == pytest.approx(at_train, rel=0.03)
        assert _area_at(shape, test) == pytest.approx(4 * at_train,
                                                      rel=0.03)
    # a canvas' textures keep their features' pixel size: twice the cells
    from mmpos_harness.mini_data.textures import _cells
    assert [_cells(c, 2.) for c in (3, 6, 11)] == [6, 12, 22]


def test_make_data_builds_both_factors(tmp_path):
    data = study.make_data(str(tmp_path), 6, 3, 16, [24, 32])
    assert data['train'][0].shape == (6, 3, 16, 16)
    assert data['val'][0].shape == (3, 3, 32, 32)  # rendered at the largest
    assert {s: d[0].shape for s, d in data['canvas'].items()} == {
        24: (3, 3, 24, 24), 32: (3, 3, 32, 32)}
    assert data['train'][1].tolist() == [0, 1, 2, 0, 1, 2]
    cached = study.make_data(str(tmp_path), 6, 3, 16, [24, 32])
    assert torch.equal(cached['canvas'][32][0], data['canvas'][32][0])


def test_shuffled_patches_permute_the_tokens():
    torch.manual_seed(0)
    images = torch.randn(2, 3, 32, 32)
    perm = study.permutations(2, 4)
    assert sorted(perm[0].tolist()) == list(range(16))
    assert not torch.equal(perm[0], torch.arange(16))
    shuffled = study.shuffle_patches(images, perm)
    model = study.Classifier(32, rope=None).eval()
    tokens, _ = model.backbone.patch_embed(images)
    moved, _ = model.backbone.patch_embed(shuffled)
    assert torch.equal(moved, tokens[torch.arange(2)[:, None], perm])
    # without any position the model cannot tell; with an APE it can
    with torch.no_grad():
        assert torch.allclose(model(shuffled), model(images), atol=1e-5)
        ape = study.Classifier(32, rope=None, use_ape=True).eval()
        ape.backbone.pos_embed.normal_()  # a table that matters
        assert not torch.allclose(ape(shuffled), ape(images), atol=1e-3)


def test_weight_decay_exempts_the_authors_parameters_and_layer_scale():
    model = study.Classifier(64, **study.schemes(8)['RoPE-Mixed+APE'])
    params = dict(model.named_parameters())
    decayed, exempt = study.decay_split(model)
    assert sorted(decayed + exempt) == sorted(params)
    # beyond 1-D parameters (norms, biases, LayerScale), exactly these
    assert sorted(n for n in exempt if params[n].ndim > 1) == sorted(
        ['backbone.pos_embed', 'backbone.cls_token'] +
        [f'backbone.rope.freqs.{i}' for i in range(4)])
    assert all(params[n].ndim > 1 for n in decayed)
    assert 'backbone.layers.0.attn.qkv.weight' in decayed
    assert 'head.weight' in decayed
    gammas = [n for n in exempt if 'gamma' in n]
    assert len(gammas) == 8 and all(
        torch.all(params[n] == study.LAYER_SCALE) for n in gammas)
    groups = study.make_optimizer(model, 1e-3).param_groups
    assert [g['weight_decay'] for g in groups] == [study.WEIGHT_DECAY, 0.]
    assert {id(p) for p in groups[0]['params']} == {
        id(params[n]) for n in decayed}


def _paper_count(theta: float, quarter: int, offset: float,
                 turn: float = 2 * math.pi) -> int:
    """Pairs per head with a turn: frequency ``theta ** (-t / (D/4))`` per
    patch (Heo et al., Eq. 13), pairs ``t`` and ``t + D/4`` alike."""
    return 2 * sum(theta**(-t / quarter) * offset >= turn
                   for t in range(quarter))


def test_turning_pairs_match_the_paper_formula():
    from mmpos.models.backbones import RoPEVisionTransformer
    paper = dict(embed_dims=128, num_layers=2, num_heads=2,
                 feedforward_channels=256)  # head dim 64, as ViT-B
    for rope, theta in (('axial', 100.), ('mixed', 10.)):
        backbone = RoPEVisionTransformer(arch=paper, img_size=224,
                                         patch_size=16, rope=dict(type=rope))
        turns = study.turning_pairs(backbone, 14)
        count = _paper_count(theta, 16, 13)
        assert turns['pairs'] == [count, count] and turns['of'] == 32
        assert turns['fastest'] == pytest.approx(13 / (2 * math.pi), 1e-4)
    assert _paper_count(100., 16, 13) == 6 and _paper_count(10., 16, 13) == 12
    # the study's 8 x 8 grid, head dim 32
    table = study.schemes(8)
    for name, theta in (('RoPE-Axial', 100.), ('RoPE-Mixed', 10.)):
        turns = study.turning_pairs(study.Classifier(
            64, **table[name]).backbone, 8)
        count = _paper_count(theta, 8, 7)
        assert count == 2 and turns['pairs'] == [count, count]
        assert turns['fastest'] == pytest.approx(7 / (2 * math.pi), 1e-4)
    # DINOv3: period 100 ** (t / (D/4)) over [-1, 1]: the largest offset
    # between patch centres is 2 * 7 / 8
    turns = study.turning_pairs(study.Classifier(
        64, **table['DINOv3']).backbone, 8)
    assert turns['pairs'] == [2, 2]
    assert turns['fastest'] == pytest.approx(1.75, 1e-4)
    for name in ('none', 'APE', 'LookHere'):
        assert study.turning_pairs(study.Classifier(
            64, **table[name]).backbone, 8) == {}


def test_dinov3_rows_differ_only_by_the_coordinate_augmentation():
    table = study.schemes(4)
    x = torch.randn(2, 3, 32, 32)
    outputs = {}
    for name in ('DINOv3', 'DINOv3-noaug'):
        torch.manual_seed(0)
        model = study.Classifier(32, **table[name]).train()
        with torch.no_grad():
            outputs[name] = [model(x) for _ in range(2)]
        model.eval()
        with torch.no_grad():
            outputs[name].append(model(x))
    aug, plain = outputs['DINOv3'], outputs['DINOv3-noaug']
    assert not torch.allclose(aug[0], aug[1])  # drawn anew per forward
    assert torch.equal(plain[0], plain[1])
    assert torch.allclose(aug[2], plain[2])  # same weights, eval: no draw


def _runs(values: dict) -> dict:
    """``{scheme: {seed: run}}`` with resize / canvas top-1 at 64 (train)
    and 128 px from ``{scheme: [(at 64, at 128) per seed]}``."""
    runs = {}
    for name, per_seed in values.items():
        for seed, (train, big) in enumerate(per_seed):
            cell = {'64': train, '128': big}
            runs.setdefault(name, {})[seed] = dict(
                resize=dict(cell), canvas=dict(cell),
                shuffled={'64': train - 10 - seed})
    runs['Near'][0]['resize_ntk'] = {'128': 48.}
    for seed in (1, 2):
        runs['Near'][seed]['resize_ntk'] = {'128': 47. + seed}
    return runs


def test_tables_test_each_cell_paired_over_seeds(tmp_path):
    ape = [(80, 70), (81, 72), (79, 69)]
    runs = _runs({'APE': ape, 'Far': [(82, 80), (84, 81), (81, 80)],
                  'Near': [(80.5, 71), (79, 70), (81, 70)]})
    table = study.analyse(study.factor_table(runs, 'resize', 64, [128]))
    rows = table['rows']
    assert table['columns'] == ['64', '128', 'change']
    assert set(rows) == {'APE', 'Far', 'Near', 'Near +NTK'}
    ape_big = [b for _, b in ape]
    ape_change = [b - t for t, b in ape]
    expected = {  # cell -> scipy's p
        ('Far', '64'): ttest_rel([82, 84, 81], [80, 81, 79]).pvalue,
        ('Far', '128'): ttest_rel([80, 81, 80], ape_big).pvalue,
        ('Far', 'change'): ttest_rel([-2, -3, -1], ape_change).pvalue,
        ('APE', 'change'): ttest_rel(ape_big, [80, 81, 79]).pvalue,
        ('Near +NTK', '128'): ttest_rel([48, 48, 49], ape_big).pvalue,
        ('Near +NTK', 'change'): ttest_rel(
            [48 - 80.5, 48 - 79, 49 - 81], ape_change).pvalue,
    }
    tests = {(r, c): cell['test'] for r, row in rows.items()
             for c, cell in row.items() if 'test' in cell}
    assert len(tests) == 9  # every cell but APE's sizes and NTK at 64
    for key, p in expected.items():
        assert tests[key]['pvalue'] == pytest.approx(p), key
    keys = sorted(tests)
    adjusted = multipletests([tests[k]['pvalue'] for k in keys],
                             method='fdr_bh')[1]
    assert [tests[k]['p_adj'] for k in keys] == pytest.approx(list(adjusted))
    assert rows['APE']['change']['mean'] == pytest.approx(-9.6667, 1e-4)
    assert rows['Near +NTK']['64']['mean'] is None
    assert tests[('Far', '128')]['verdict'] == 'higher'

    shuffled = study.analyse(study.shuffle_table(runs, 64))['rows']
    test = shuffled['Far']['shuffled']['test']  # shuffled: 10 + seed lower
    assert test['difference'] == pytest.approx(-11)
    assert test['pvalue'] == pytest.approx(ttest_rel(
        [72, 73, 69], [82, 84, 81]).pvalue)
    assert test['family_size'] == 3 and test['verdict'] == 'lower'
    md = '\n'.join(study.table_markdown(table))
    assert '| scheme | 64 px (train) | 128 px | 128 - 64 px |' in md
    assert "Benjamini-Hochberg over the table's 9 tests" in md


def test_a_run_depends_on_its_own_scheme_module_only():
    """An APE or RoPE-Mixed run does not go stale when LieRE's module
    changes; a LieRE run does, and a study of both depends on both."""
    modules = provenance.scheme_modules()
    matrix = modules['liere']
    ape, liere = study.code(['APE', 'RoPE-Mixed']), study.code(['LieRE'])
    assert matrix not in ape and matrix in liere
    assert 'mmpos_positions/linear.py' in ape
    assert 'mmpos/models/layers' in liere  # attention.py among it
    assert set(study.code(['APE', 'LieRE'])) == set(ape) | set(liere)
    for path in set(modules.values()) - {matrix}:
        assert path not in liere


def test_tiny_study_runs_resumes_retables_and_plots(tmp_path, capfd):
    argv = [str(tmp_path), '--schemes', 'none', 'APE', 'RoPE-Mixed',
            '--seeds', '0', '1', *TINY]
    study.main(argv)
    # quiet: no INFO line per parameter of mmengine's init_weights
    assert 'init_weights' not in ''.join(capfd.readouterr())
    summary = json.loads((tmp_path / 'position_study.json').read_text())
    resize, canvas = (summary['tables'][f]['rows'] for f in study.FACTORS)
    assert set(resize) == set(canvas) == {
        'none', 'APE', 'RoPE-Mixed', 'RoPE-Mixed +NTK', 'RoPE-Mixed +YARN'}
    assert len(canvas['RoPE-Mixed']['32']['values']) == 2
    assert resize['RoPE-Mixed +NTK']['16']['mean'] is None  # larger only
    assert resize['APE']['16'] == canvas['APE']['16']  # shared images
    assert set(summary['tables']['shuffled']['rows']) == {
        'none', 'APE', 'RoPE-Mixed'}
    assert summary['turns']['APE'] == {}
    assert summary['turns']['RoPE-Mixed']['of'] == 16
    run = json.loads((tmp_path / 'runs' / 'APE' / 'seed0.json').read_text())
    assert run['cpu_seconds'] > 0 and 'position_study' in run['command']
    assert run['machine'] and run['date']
    assert provenance.scheme_modules()['liere'] not in run['depends']
    assert summary['num_runs'] == 6
    md = (tmp_path / 'position_study.md').read_text()
    assert '32 px (canvas x2)' in md and 'shuffled (16 px)' in md
    assert (tmp_path / 'position_study.png').stat().st_size > 0
    path = tmp_path / 'runs' / 'APE' / 'seed0.json'
    before = path.stat().st_mtime_ns
    study.main(argv)  # resumes: nothing retrained
    assert path.stat().st_mtime_ns == before
    # the stored study regenerates its table from its values alone
    stored = tmp_path / 'position_study.json'
    (tmp_path / 'position_study.md').unlink()
    assert study.main(['--retable', str(stored)]) is None
    assert (tmp_path / 'position_study.md').read_text() == md
    assert json.loads(stored.read_text())['tables'] == summary['tables']


def test_calibration_keeps_each_run_and_tables_them_all(tmp_path):
    common = ['--calibrate', '--schemes', 'APE', '--train-size', '16',
              '--sizes', '24', '32', '--num-val', '9']
    study.main([str(tmp_path), *common, '--calibrate-iters', '1', '2',
                '--num-train', '12'])
    records = json.loads((tmp_path / 'calibration.json').read_text())
    assert [(r['scheme'], r['iters']) for r in records] == [('APE', 1),
                                                            ('APE', 2)]
    assert all(r['cpu_seconds'] > 0 and r['machine'] and r['date'] and
               '--calibrate' in r['command'] for r in records)
    kept = sorted((tmp_path / 'calibration').rglob('*.json'))
    stamps = [p.stat().st_mtime_ns for p in kept]
    # another image count joins the table; the kept runs are not rerun
    study.main([str(tmp_path), *common, '--calibrate-iters', '2',
                '--num-train', '15'])
    assert [p.stat().st_mtime_ns for p in kept] == stamps
    md = (tmp_path / 'calibration.md').read_text()
    assert md.count('| APE |') == 3
    assert '| 12 | 1 | 0.1 | 0.001 | APE |' in md
    assert '| 15 | 2 | 0.1 | 0.001 | APE |' in md
    assert 'resize 32 px (change)' in md and '3 runs' in md
    assert 'Frequency pairs' not in md  # APE rotates nothing


# Stops the study tool (a subprocess) at the rename that would land its
# result file ``target``: the file is written in full to its temporary name,
# ``ready`` is created, and the process waits there to be killed.
HOLD_AT_RENAME = """
import os, runpy, sys, time
tool, ready, target, *argv = sys.argv[1:]
rename = os.replace
def replace(src, dst):
    if dst.endswith(target):
        open(ready, 'w').close()
        time.sleep(600)
    rename(src, dst)
os.replace = replace
sys.argv = [tool, *argv]
runpy.run_path(tool, run_name='__main__')
"""


def test_second_study_refused_and_a_killed_one_resumes_to_the_same_table(
        tmp_path):
    """A study stopped as it writes its second run (seed by seed: APE
    seed 0, then RoPE-Mixed seed 0) holds its folder: a second study there
    is refused with one line naming it. SIGKILLed at that moment it leaves
    no partial result; the same command then retrains only that run and
    the later ones, and its tables are those of an uninterrupted study."""
    argv = ['--schemes', 'APE', 'RoPE-Mixed', '--seeds', '0', '1', *TINY]
    out, ready = tmp_path / 'out', tmp_path / 'ready'
    target = os.path.join('runs', 'RoPE-Mixed', 'seed0.json')
    proc = subprocess.Popen(
        [sys.executable, '-c', HOLD_AT_RENAME,
         'tools/paper_tables/position_study.py', str(ready), target,
         str(out), *argv], cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS='1'))
    try:
        deadline = time.time() + 120
        while not ready.exists():
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.05)
        with pytest.raises(SystemExit) as refused:
            study.main([str(out), *argv])
        message = str(refused.value)
        assert message.startswith('position_study.py: error: work dir ')
        assert f'in use by another run (pid {proc.pid} ' in message
        assert '\n' not in message
    finally:
        proc.kill()  # SIGKILL
        proc.wait()
    runs = out / 'runs'
    assert not (out / target).exists()  # not half there: not there at all
    # the killed write's temporary file: hidden, never read as a result
    assert [p.name.startswith('.seed0.json.')
            for p in (runs / 'RoPE-Mixed').iterdir()] == [True]
    assert not (out / 'position_study.md').exists()
    finished = {p: p.stat().st_mtime_ns for p in runs.glob('*/*.json')}
    assert [p.name for p in finished] == ['seed0.json']

    study.main([str(out), *argv])  # resumes: the killed lock is no lock
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    assert (out / target).is_file()
    study.main([str(tmp_path / 'whole'), *argv])
    tables = [json.loads((d / 'position_study.json').read_text())['tables']
              for d in (out, tmp_path / 'whole')]
    assert tables[0] == tables[1]


def test_the_resolution_designs_grid_turns_several_pairs():
    # 16 x 16 patches, head dim 32 (embed 64, 2 heads): more pairs turn
    # than on the stored study's 8 x 8 grid, as the paper's formula says
    arch = study.arch_of(64, 2)
    table = study.all_schemes(16)
    for name, theta in (('RoPE-Axial', 100.), ('RoPE-Mixed', 10.)):
        turns = study.turning_pairs(study.Classifier(
            128, arch=arch, **table[name]).backbone, 16)
        count = _paper_count(theta, 8, 15)
        assert turns['pairs'] == [count, count] and turns['of'] == 16
        assert count > _paper_count(theta, 8, 7)
    assert study.turning_pairs(study.Classifier(
        128, arch=arch, **table['PaPE']).backbone, 16) == {}


def test_pad_canvas_moves_the_training_tokens_onto_plain_grey():
    images = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    small = study.downsample(images, 16)
    padded = study.pad_canvas(images, 16, 32)
    assert padded.shape == (2, 3, 32, 32)
    assert torch.equal(padded[..., 8:24, 8:24], small)
    border = padded.clone()
    border[..., 8:24, 8:24] = study.PAD_VALUE
    assert (border == study.PAD_VALUE).all()


def test_large_sizes_evaluate_in_batches_within_the_byte_bound(monkeypatch):
    """PaPE's bias is one (n, heads, N, N) tensor per block: the batch
    shrinks with N^2 so that it stays within EVAL_BYTES, and the top-1
    does not depend on the batching."""
    torch.manual_seed(0)
    model = study.Classifier(16, 0.1, study.arch_of(16, 2),
                             rope=dict(type='pape', parabolas=2)).eval()
    for size in (16, 64, 512):
        tokens = (size // study.PATCH)**2 + 1
        n = study.eval_batch(model, size)
        assert 1 <= n <= study.EVAL_BATCH
        assert n == study.EVAL_BATCH or \
            n * 4 * 2 * tokens**2 <= study.EVAL_BYTES < \
            (n + 1) * 4 * 2 * tokens**2
    images = torch.randint(0, 256, (9, 3, 32, 32), dtype=torch.uint8)
    labels = torch.arange(9) % study.NUM_CLASSES
    whole = study.accuracy(model, images, labels, 32)
    # 4 * 2 heads * 17^2 tokens^2 bytes per image: 2 images per batch
    monkeypatch.setattr(study, 'EVAL_BYTES', 2 * 4 * 2 * 17**2)
    assert study.eval_batch(model, 32) == 2
    assert study.accuracy(model, images, labels, 32) == whole


def test_the_study_flushes_subnormals_while_it_runs(tmp_path, monkeypatch):
    """PaPE's far attention weights underflow into subnormals, whose
    gradients are slow on CPU: the study flushes them to 0 while it runs
    and leaves torch's default (kept) afterwards."""
    seen = []
    monkeypatch.setattr(study, 'run_study', lambda args: seen.append(
        (torch.tensor([1e-40]) * 1.0).item()))
    study.main([str(tmp_path)] + TINY)
    assert seen == [0.0]
    assert (torch.tensor([1e-40]) * 1.0).item() > 0


def test_random_resized_crop_draws_the_area_share_and_is_seeded():
    side = 32
    ramp = (torch.arange(side) * 8).expand(3, side, side)[None]
    images = ramp.repeat(64, 1, 1, 1).to(torch.uint8)
    crops = study.random_resized_crop(images, (0.25, 0.25),
                                      torch.Generator().manual_seed(0))
    again = study.random_resized_crop(images, (0.25, 0.25),
                                      torch.Generator().manual_seed(0))
    assert torch.equal(crops, again) and crops.dtype == torch.uint8
    # a quarter of the area at aspect 3/4-4/3: 14-18 columns of the ramp
    spans = (crops[:, 0].float().amax((1, 2)) -
             crops[:, 0].float().amin((1, 2))) / 8
    assert spans.min() >= 12 and spans.max() <= 18
    whole = study.random_resized_crop(images[:4], (1., 1.),
                                      torch.Generator().manual_seed(0))
    assert torch.equal(whole, images[:4])  # the whole image, resized 1:1


def test_the_design_options_run_a_tiny_study(tmp_path):
    argv = [str(tmp_path), '--schemes', 'APE', 'RoPE-Mixed', 'PaPE',
            '--seeds', '0', '1', '--rrc-scale', '0.08', '1', '--factors',
            'resize', 'pad', '--scalings', 'pi', 'yarn', '--embed-dims',
            '64', '--num-heads', '2', '--summary', 'exploratory', *TINY]
    study.main(argv)
    summary = json.loads((tmp_path / 'exploratory.json').read_text())
    assert list(summary['tables']) == ['resize', 'pad', 'shuffled']
    assert set(summary['tables']['pad']['rows']) == {
        'APE', 'RoPE-Mixed', 'RoPE-Mixed +PI', 'RoPE-Mixed +YARN', 'PaPE'}
    assert not (tmp_path / 'data' / '32px_canvas9_24of16px.pt').exists()
    md = (tmp_path / 'exploratory.md').read_text()
    assert '32 px (pad x2)' in md and 'Padded canvas' in md
    run = json.loads((tmp_path / 'runs' / 'PaPE' / 'seed0.json').read_text())
    assert set(run) >= {'resize', 'pad', 'shuffled'} and 'canvas' not in run
    assert run['rrc_scale'] == [0.08, 1.0] and run['embed_dims'] == 64
    # resuming with other settings is refused, naming the run file
    with pytest.raises(SystemExit, match=r"runs/APE/seed0.json: recorded "
                       r"rrc_scale=\[0.08, 1.0\], this command asks None"):
        study.main([a for a in argv if a not in ('--rrc-scale', '0.08',
                                                 '1')])
