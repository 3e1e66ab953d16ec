"""dense_probe_suite.py: runs pair seeds with checkpoints as documented and
the table reports mean ± std over seeds and the difference to the first
run, tested as scipy's paired t over the seeds and adjusted by Holm over
the table as statsmodels does."""
import inspect

import pytest
from scipy.stats import ttest_rel
from statsmodels.stats.multitest import multipletests

from mmpos.evaluation.dense_suite import HEADLINE
from mmpos.errors import BadInputError
from conftest import REPO, load_tool


def test_runs_and_table(tmp_path):
    suite = load_tool('dense_probe_suite')
    ckpts = []
    for i in range(3):
        ckpts.append(tmp_path / f's{i}.pth')
        ckpts[-1].write_bytes(b'')
    runs = suite.parse_runs(
        ['random=none', 'pre=' + ','.join(map(str, ckpts))], [0, 1, 2])
    assert runs == [('random', [(0, None), (1, None), (2, None)]),
                    ('pre', [(s, str(c)) for s, c in zip((0, 1, 2), ckpts)])]
    with pytest.raises(BadInputError, match='one per seed'):
        suite.parse_runs([f'pre={ckpts[0]},{ckpts[1]}'], [0, 1, 2])
    gain = {'random': [0.0] * 3, 'pre': [1.0] * 3, 'noisy': [0.3, 1.1, 2.0]}
    results = {label: {str(s): {k: s + gain[label][s] for k in HEADLINE}
                       for s in (0, 1, 2)} for label in gain}
    text = suite.table(results, [0, 1, 2])
    lines = text.splitlines()
    assert lines[2].startswith('| random | 1.000 ± 1.000')
    # the same gain on every seed: zero variance, no verdict
    assert lines[5] == '| pre − random | ' + ' | '.join(
        ['+1.000, no verdict (zero variance of the paired '
         'differences)'] * len(HEADLINE)) + ' |'
    # a family of the 6 tests that have a p value
    ref = ttest_rel([0.3, 2.1, 4.0], [0.0, 1.0, 2.0])
    p_adj = multipletests([ref.pvalue] * len(HEADLINE), method='holm')[1]
    low, high = ref.confidence_interval(0.95)
    assert lines[6] == '| noisy − random | ' + ' | '.join(
        [f'+1.133 [{low:.3f}, {high:.3f}], p_adj {p_adj[0]:.2f}'] *
        len(HEADLINE)) + ' |'
    assert "adjusted by Holm over the table's 6 tests" in text


def test_baselines_are_rows_and_decide_what_is_informative():
    """The image-free and raw-pixel rows are shown, not differenced; a
    probe is informative when the best run from a checkpoint beats the
    image-free value on its deciding metric (a one-sample t over the seeds,
    as scipy's, Holm over the probes), lower RMSE counting as better."""
    from scipy.stats import ttest_1samp

    from mmpos.evaluation.dense_suite import informative
    suite = load_tool('dense_probe_suite')
    base = {k: 0.5 for k in HEADLINE}
    base['depth/rmse'] = 1.0
    runs = {suite.IMAGE_FREE: [base] * 3,
            suite.RAW_PIXELS: [dict(base, **{'depth/rmse': 1.1})] * 3,
            'random': [dict(base, **{'correspondence/pck@0.1': v})
                       for v in (0.4, 0.5, 0.6)],
            'pre': [dict(base, **{'depth/rmse': r,
                                  'correspondence/pck@0.1': 0.5 + d})
                    for r, d in ((0.5, 0.01), (0.6, -0.02), (0.55, 0.0))]}
    results = {label: {str(s): rows[s] for s in (0, 1, 2)}
               for label, rows in runs.items()}
    rows = [line.split(' | ')[0] for line in
            suite.table(results, [0, 1, 2]).splitlines()[2:6]]
    assert rows == [f'| {suite.IMAGE_FREE}', f'| {suite.RAW_PIXELS}',
                    '| random', '| pre']
    assert '| pre − random |' in suite.table(results, [0, 1, 2])
    assert f'− {suite.IMAGE_FREE}' not in suite.table(results, [0, 1, 2])

    found = informative({'pre': runs['pre']}, base)
    p = [ttest_1samp([0.5, 0.6, 0.55], 1.0).pvalue,
         ttest_1samp([0.51, 0.48, 0.5], 0.5).pvalue]
    assert [found[k][2].pvalue for k in ('depth', 'correspondence')] == \
        pytest.approx(p)
    assert [found[k][2].p_adj for k in ('depth', 'correspondence')] == \
        pytest.approx(list(multipletests(p, method='holm')[1]))
    assert [found[k][0] for k in ('depth', 'correspondence', 'retrieval')] \
        == [True, False, False]  # retrieval: zero variance, no verdict
    text = suite.informative_lines(results, [0, 1, 2], ['pre'])
    assert text[1].startswith('- depth: informative: pre beats the '
                              'image-free baseline (depth/rmse, pre − '
                              'image-free -0.450 [')
    assert text[1].endswith(', lower is better).')
    assert text[2].startswith('- correspondence: NOT INFORMATIVE')


def test_every_probe_is_one_registry_entry_the_suite_reads():
    """A dense probe is registered once (``dense_suite.PROBES``): its mini
    config exists, its data is a mini dataset the generator writes, its
    headline and deciding metrics name keys its run reports, and the
    suite's views (MINI_PROBES, HEADLINE) are read from the entries."""
    from mmpos.evaluation import dense_suite
    make = load_tool('make_mini_data', 'misc')
    for name, probe in dense_suite.PROBES.items():
        assert (REPO / probe.config).is_file(), probe.config
        assert probe.data in make.CHOICES, probe.data
        assert probe.deciding in probe.headline
        assert dense_suite.MINI_PROBES[name] == probe.config
        assert callable(probe.run) and callable(probe.image_free)
        # the tool passes progress=True exactly to the runs that take it
        assert probe.progress == ('progress' in inspect.signature(
            probe.run).parameters), name
    assert HEADLINE == tuple(f'{n}/{k}' for n, p in dense_suite.PROBES.items()
                             for k in p.headline)
    with pytest.raises(ValueError, match="unknown probe 'nope'"):
        dense_suite.image_free_run('nope', None)


def test_suite_on_naflex_maps_end_to_end(dense_mini, tmp_path):
    """--max-tokens reaches every probe (the raw pixels' included) on the
    mini data: results.json records it and every probe's metrics;
    run_dense_probes refuses it for a probe without NaFlex, in one line."""
    import dataclasses
    import json

    from mmpos_harness.mini_data import make_mini_scenes

    from mmpos.evaluation import dense_suite
    make_mini_scenes(str(dense_mini / 'scenes'), num_train=3, num_val=2,
                     img_size=32)
    small = dict(depth='depth_probe = dict(size=32, iters=5)',
                 correspondence='correspondence_probe = dict(size=32)',
                 retrieval='retrieval_probe = dict(size=32, '
                 'augment_epochs=1)')
    probes = []
    for name, line in small.items():
        path = tmp_path / f'{name}.py'
        path.write_text(f"_base_ = ['{REPO / dense_suite.MINI_PROBES[name]}']"
                        f'\n{line}\n')
        probes.append(f'{name}={path}')
    config = str(REPO / 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py')
    load_tool('dense_probe_suite').main([
        config, '--runs', 'random=none', '--seeds', '0', '--data-root',
        str(dense_mini), '--probes', *probes, '--max-tokens', '4',
        '--work-dir', str(tmp_path / 'suite')])
    stored = json.loads((tmp_path / 'suite/results.json').read_text())
    assert stored['max_tokens'] == 4
    for label in ('raw pixels', 'random'):
        assert set(HEADLINE) <= set(stored['results'][label]['0'])
    assert 'max_tokens 4' in (tmp_path / 'suite/result.md').read_text()
    square = dataclasses.replace(dense_suite.PROBES['depth'], naflex=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(dense_suite.PROBES, 'depth', square)
        with pytest.raises(BadInputError, match='--max-tokens: the depth '
                           'probe does not run on NaFlex maps'):
            dense_suite.run_dense_probes(config, None, dict(
                depth=dense_suite.MINI_PROBES['depth']), max_tokens=4)
