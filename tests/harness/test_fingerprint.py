"""Behavioural fingerprints (``mmpos_harness.fingerprint``): a probe sees a
change of what the code computes and not a change of how it is written;
a refactor of the position and attention files leaves every stored result
current, and a behaviour change marks exactly the results that ran it."""
import json
import subprocess
import sys

import pytest
import torch

from mmpos_harness import fingerprint, provenance

REPO = provenance.ROOT


def _changed(before: dict, after: dict) -> list:
    return [k for k in before if not fingerprint.same(before[k], after[k])]


def test_a_scheme_probe_sees_a_changed_frequency_and_not_a_rewrite(
        monkeypatch):
    from mmpos.models.layers.positions import linear
    # the cached probe (run_probe) is taken before the patches below, which
    # must not reach the cache other tests of this process read
    files = fingerprint.run_probe('scheme:mixed')[1]
    before = fingerprint.scheme_probe('mixed')
    assert fingerprint.scheme_probe('mixed') == before  # deterministic

    original = linear.MixedRoPE.forward

    def rewritten(self, *args, **kwargs):  # the same computation, rewritten
        return original(self, *args, **kwargs)

    monkeypatch.setattr(linear.MixedRoPE, 'forward', rewritten)
    assert not _changed(before, fingerprint.scheme_probe('mixed'))
    init = linear.MixedRoPE.__init__

    def slower(self, *args, **kwargs):  # one frequency 1 % lower
        init(self, *args, **kwargs)
        with torch.no_grad():
            next(p for p in self.parameters())[..., 0].mul_(0.99)

    monkeypatch.setattr(linear.MixedRoPE, '__init__', slower)
    assert _changed(before, fingerprint.scheme_probe('mixed'))
    # another scheme's probe does not run that code
    assert 'mmpos_positions/linear.py' in files
    assert 'mmpos_positions/lookhere.py' not in files


def test_a_config_probe_trains_the_config_and_sees_its_loss_weight(
        monkeypatch):
    config = 'configs/droppos/droppos_vit-tiny_mini.py'
    values, files = fingerprint.run_probe(f'config:{config}')
    values = dict(values)
    assert values['step0.loss'] > 0 and values['step1.loss'] > 0
    assert 'mmpos/models/selfsup/droppos/droppos_head.py' in files
    from mmpos.models.selfsup.droppos import droppos_head
    loss = droppos_head.DropPosHead.loss

    def doubled(self, *args, **kwargs):
        return {k: 2 * v for k, v in loss(self, *args, **kwargs).items()}

    monkeypatch.setattr(droppos_head.DropPosHead, 'loss', doubled)
    assert 'step0.loss' in _changed(values,
                                    fingerprint.config_probe(config))


def test_probes_for_follow_the_depends():
    names = fingerprint.probes_for(['mmpos/models', 'benchmarks/_timing.py',
                                    'mmpos_stats'])
    assert {'timing', 'stats', 'scheme:mixed'} <= set(names)
    assert not any(n.startswith('config:') for n in names)
    configs = fingerprint.probes_for(
        provenance.config_sources('configs/demo/droppos_vit-tiny-rope-mixed_mini.py'))
    assert 'config:configs/demo/droppos_vit-tiny-rope-mixed_mini.py' in configs
    assert not any('_base_' in n for n in configs)
    with pytest.raises(KeyError, match='no probe named'):
        fingerprint.run_probe('nonsense')


def test_a_digest_reads_the_files_moved_since_under_their_old_names():
    """A probe's text output (a digest) that cites a module moved since the
    fingerprint's commit is the stored one when, with the moved file's
    path and module name written as before, its text is; any other change
    of the text is not."""
    renames = {'pkg/stats.py': 'newstats/__init__.py'}
    stored = fingerprint._digest(['p 0.02 (pkg/stats.py)', 'pkg.stats.welch'])
    moved = fingerprint._digest(['p 0.02 (newstats/__init__.py)',
                                 'newstats.welch'])
    other = fingerprint._digest(['p 0.03 (newstats/__init__.py)',
                                 'newstats.welch'])
    assert not fingerprint.same(stored, moved)
    assert fingerprint.same(stored, moved, renames)
    assert not fingerprint.same(stored, other, renames)
    assert fingerprint.same(1.0, 1.0 + 1e-9, renames)


def test_a_near_zero_sum_is_compared_at_the_norm_of_its_entries():
    """A LayerNorm's outputs sum to about 0: another CPU's rounding (here
    relative noise of 1e-7, fp32's order) moves that sum by far more than
    RTOL of itself, but not by RTOL of the entries' norm; a change of
    behaviour (every output shifted by 1e-3) is still seen."""
    import math
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.layer_norm(torch.randn(64, 384, generator=g),
                                       (384,))
    other_cpu = x * (1 + 1e-7 * torch.randn(x.shape, generator=g))
    stored = fingerprint._summary([x], 'out')
    now = fingerprint._summary([other_cpu], 'out')
    assert not math.isclose(stored['out.sum'], now['out.sum'],
                            rel_tol=fingerprint.RTOL,
                            abs_tol=fingerprint.ATOL)  # the bare rule
    assert all(fingerprint.same(stored[k], now[k], scale=fingerprint.
                                value_scale(stored, k)) for k in stored)
    shifted = fingerprint._summary([x + 1e-3], 'out')
    assert not fingerprint.same(stored['out.sum'], shifted['out.sum'],
                                scale=fingerprint.value_scale(stored,
                                                              'out.sum'))
    assert fingerprint.value_scale(stored, 'out.sq') == 0.


def test_a_fingerprint_of_another_cpu_is_not_compared_here(monkeypatch):
    """Another CPU model or torch: the record's probes are not run (their
    numbers are that machine's), its text still judges it, and its mark
    stays as stored."""
    assert fingerprint.numeric_machine(
        'Intel(R) Xeon(R) Processor, 2 CPUs, torch 2.14.1+cu130') == \
        'Intel(R) Xeon(R) Processor, torch 2.14.1+cu130'
    _, record = next((p, r) for p, r in fingerprint.stored_records()
                     if 'fingerprint' in r and not r.get('dirty'))
    theirs = fingerprint.load(record['fingerprint'])['machine']
    monkeypatch.setattr(provenance, 'machine',
                        lambda: 'Another CPU, 2 CPUs, torch 9.9')
    monkeypatch.setattr(fingerprint, 'changed_probes',
                        lambda _: pytest.fail('probes compared elsewhere'))
    monkeypatch.setattr(provenance, 'changed_since', lambda _: [])
    got = fingerprint.status(record)
    assert got['state'] == 'unknown' and got['elsewhere']
    assert fingerprint.numeric_machine(theirs) in got['reasons'][0]
    monkeypatch.setattr(provenance, 'changed_since',
                        lambda _: ['abc1234 a change'])
    stale = fingerprint.status(record)
    assert stale['state'] == 'stale' and stale['elsewhere']  # by its text
    status = {'results/a': dict(state='unknown', elsewhere=True,
                                commit='c1', reasons=['elsewhere']),
              'results/b': dict(state='stale', commit='c2', reasons=['r']),
              'results/c': dict(state='unknown', elsewhere=True,
                                commit='c3', reasons=['elsewhere']),
              'results/d': dict(state='stale', elsewhere=True, commit='c4',
                                reasons=['commit abc']),
              'results/e': dict(state='stale', elsewhere=True, commit='c5',
                                reasons=['commit def'])}
    stored = {'results/a': dict(commit='c0', reasons=['probe p']),
              'results/d': dict(commit='c4', reasons=['probe q',
                                                      'commit abc'])}
    assert fingerprint.stale_marks(status, stored) == {
        'results/a': stored['results/a'],
        'results/b': dict(commit='c2', reasons=['r']),
        'results/d': stored['results/d'],
        'results/e': dict(commit='c5', reasons=['commit def'])}


def test_results_that_ran_the_statistics_before_they_moved_stay_current():
    """``mmpos/evaluation/stats.py`` moved to ``mmpos_stats/__init__.py``
    (its tables now cite that file): a stored result measured before that
    still calls for the stats probe, the probe gives its stored outputs
    with the file read under its old name, and the file stays judged by
    the probe, not by its text."""
    marks = fingerprint.read_marks()
    found = [(path, record) for path, record in fingerprint.stored_records()
             if fingerprint.result_of(path) not in marks
             and 'stats' in fingerprint.load(record['fingerprint'])['probes']
             and 'mmpos/evaluation/stats.py' in provenance.renames_since(
                 fingerprint.load(record['fingerprint'])['commit'])]
    if not found:
        pytest.skip('no current result measured the statistics before '
                    'they moved')
    path, record = found[0]
    stored = fingerprint.load(record['fingerprint'])
    assert 'stats' in fingerprint.record_probes(record)
    values = dict(fingerprint.run_probe('stats')[0])
    assert values['describe'] != stored['probes']['stats']['values'][
        'describe']  # the paragraph under a table cites the new path
    assert not fingerprint.changed_probes(
        dict(stored, probes={'stats': stored['probes']['stats']}))
    assert 'mmpos/evaluation/stats.py' not in fingerprint.text_judged(
        record, stored)


def test_a_rehearsal_is_judged_by_what_it_changes_and_writes(monkeypatch):
    """A stored rehearsal's harness is reached by its rehearsal probe (not
    judged by text), and the probe sees a change of what a rehearsal runs
    (one more iteration) or writes (a synthetic image)."""
    from mmpos.datasets import synthetic
    from mmpos_harness import rehearsal
    path, record = next((p, r) for p, r in fingerprint.stored_records()
                        if p.startswith('results/rehearsals/cr2pq'))
    stored = fingerprint.load(record['fingerprint'])
    name = 'rehearsal:' + record['depends'][0]
    assert name in stored['probes']
    assert 'mmpos_harness/rehearsal.py' not in fingerprint.text_judged(
        record, stored)
    config = record['depends'][0]
    before = fingerprint.rehearsal_probe(config)
    monkeypatch.setattr(rehearsal, 'ITERS', rehearsal.ITERS + 1)
    longer = fingerprint.rehearsal_probe(config)
    # an epoch-based config: one epoch either way, twice the samples
    assert _changed(before, longer) == ['changes', 'files']
    monkeypatch.undo()
    write = synthetic.write_image
    monkeypatch.setattr(synthetic, 'write_image', lambda path, size, seed:
                        write(path, size, seed + 1))
    assert _changed(before, fingerprint.rehearsal_probe(config)) == ['files']


def test_a_record_fingerprinted_after_its_files_moved_stays_judged_by_them():
    """refingerprint gives a record the probes of its depends where they
    live now (record_probes); a file it ran under its old path is judged
    by the probe that reaches its new one, not by text."""
    path, record = next(
        (p, r) for p, r in fingerprint.stored_records()
        if p == 'benchmarks/results/cpu_checkpointing.json')
    assert 'mmpos/evaluation/stats.py' in record['depends']
    stored = fingerprint.load(record['fingerprint'])
    assert set(stored['probes']) == set(fingerprint.record_probes(record))
    assert 'stats' in stored['probes']
    assert 'mmpos_stats/__init__.py' in stored['probes']['stats']['files']
    assert 'mmpos/evaluation/stats.py' not in fingerprint.text_judged(
        record, stored)


def test_text_judged_files_are_those_no_probe_reaches():
    path, record = next((p, r) for p, r in fingerprint.stored_records()
                        if 'method_ranking.py' in r['command'])
    stored = fingerprint.load(record['fingerprint'])
    text = fingerprint.text_judged(record, stored)
    for frozen in ('mmpos/models/layers/attention.py',
                   'mmpos/models/layers/positions/base.py',
                   'mmpos/models/layers/positions/linear.py',
                   'mmpos/models/backbones/rope_vit.py'):
        assert frozen not in text, frozen
    assert 'tools/train.py' in text  # no probe runs the command line
    # judged by the probes: every library __init__ (imported by each probe),
    # model files (the probes build every model the result built), and
    # nothing added after the record's commit
    assert not [f for f in text if f.startswith(('mmpos/models/',
                                                  'mmpos_positions/'))]
    assert not [f for f in text if f.endswith('__init__.py')
                and f.startswith('mmpos')]
    added = provenance._git('diff', '--name-only', '--diff-filter=A',
                            record['commit'], 'HEAD', '--',
                            *record['depends']).split()
    assert added and not set(added) & set(text)
    assert 'mmpos/engine/hooks/online_probe.py' in text  # runs, not probed


def test_the_training_loop_is_judged_only_where_it_ran():
    """A benchmark of attention ran no Runner: a change to a hook does not
    touch it (its depends list mmpos/engine because ``import mmpos``
    registers the hooks). A result that trained configs keeps judged by
    text the hooks its configs list and those code outside the engine
    imports (it may call them without a config); a hook module neither
    names is judged by the probes' outputs."""
    def engine_text(match):
        path, record = next((p, r) for p, r in fingerprint.stored_records()
                            if match(p, r))
        stored = fingerprint.load(record['fingerprint'])
        files = provenance._git('ls-tree', '-r', '--name-only',
                                record['commit'], '--', *record['depends'])
        assert fingerprint.HOOKS + 'dense_probes.py' in files
        return [f for f in fingerprint.text_judged(record, stored)
                if f.startswith(fingerprint.ENGINE)], stored
    text, stored = engine_text(lambda p, r: p.endswith('cpu_rope_fast.json'))
    assert not any(n.startswith('config:') for n in stored['probes'])
    assert text == []
    text, stored = engine_text(
        lambda p, r: 'method_ranking.py' in r['command'])
    listed = set().union(*(fingerprint._config_hooks(n[len('config:'):])
                           for n in stored['probes'] if n.startswith('config:')))
    assert 'HealthMonitorHook' in listed
    for hook in ('health_monitor.py', 'online_probe.py', 'dense_probes.py',
                 'rng_state.py'):
        path = fingerprint.HOOKS + hook
        named = bool(fingerprint._hook_types(path) & listed)
        imported = path in fingerprint._imported_hook_files()
        assert (path in text) == (named or imported), hook
    # guardrails' preemption hook and a benchmark's online probe are
    # imported outside the engine; the dense probes only through configs
    imported = fingerprint._imported_hook_files()
    assert {fingerprint.HOOKS + 'preemption.py',
            fingerprint.HOOKS + 'online_probe.py'} <= imported
    assert fingerprint.HOOKS + 'dense_probes.py' not in imported
    assert fingerprint._hook_types(fingerprint.HOOKS + 'dense_probes.py') >= {
        'OnlineDepthProbeHook', 'OnlineRetrievalProbeHook'}
    assert fingerprint._imports_engine(['benchmarks/online_probe_overhead.py'])
    assert not fingerprint._imports_engine(['benchmarks/rope_fast.py'])


def test_json_is_rewritten_in_its_own_layout():
    data = {'b': [1, 2], 'a': 'é'}
    for indent in (1, 2):
        text = json.dumps(data, indent=indent, ensure_ascii=False)
        assert fingerprint._dump_like(text, data) == text
    assert fingerprint._dump_like(json.dumps(data, indent=2) + '\n', data) \
        == json.dumps(data, indent=2) + '\n'


def test_marks_name_the_commit():
    marks = {'results/demo': dict(commit='abcdef0123456789',
                                             reasons=['probe x'])}
    assert 'measured at abcdef0123' in fingerprint.mark(
        'results/demo', marks)
    assert fingerprint.mark('results/other', marks) == ''
    assert fingerprint.result_of(
        'results/demo/results.json') == 'results/demo'
    assert fingerprint.result_of('benchmarks/results/cpu_quick.json') == \
        'benchmarks/results/cpu_quick.json'


CHECK = '''
import json, sys
from mmpos_harness import fingerprint
out = {}
for path, record in fingerprint.stored_records():
    state = fingerprint.status(record)['state']
    out[path] = 'stale' if 'stale' in (out.get(path), state) else state
with open(sys.argv[1], 'w') as f:
    json.dump(out, f)
'''


@pytest.mark.slow
def test_refactor_keeps_results_current_and_a_behaviour_change_marks_its_own(
        tmp_path):
    """In a clone of HEAD, one commit rewrites the position and attention
    files without changing what they compute (comments, a renamed local)
    and changes LieRE's default initial range: exactly the records whose
    fingerprint probes LieRE go stale (beside those stale already), among
    the records fingerprinted on this CPU and torch (the others are
    judged where they were fingerprinted: here unknown, or stale by
    text)."""
    here = fingerprint.numeric_machine(provenance.machine())
    judged = {path for path, record in fingerprint.stored_records()
              if fingerprint.numeric_machine(fingerprint.load(
                  record['fingerprint']).get('machine', '')) == here}
    if not judged:
        pytest.skip(f'no result was fingerprinted on {here}: probes are '
                    'compared on the machine that computed them')
    clone = tmp_path / 'clone'
    subprocess.run(['git', 'clone', '-q', '--shared', REPO, str(clone)],
                   check=True)
    positions = clone / 'mmpos_positions'
    for path in (positions / 'base.py', positions / 'linear.py',
                 clone / 'mmpos/models/layers/attention.py'):
        path.write_text('# rewritten without a change of behaviour\n'
                        + path.read_text())
    matrix = positions / 'matrix.py'
    text = matrix.read_text()
    assert 'init_range=2 * math.pi, position_scale=1.' in text
    matrix.write_text(text.replace('init_range=2 * math.pi, position_scale=1.',
                                   'init_range=math.pi, position_scale=1.'))
    git = ['git', '-C', str(clone), '-c', 'user.name=t', '-c',
           'user.email=t@t']
    subprocess.run([*git, 'commit', '-qam', 'refactor, LieRE init'],
                   check=True)
    out = tmp_path / 'states.json'
    proc = subprocess.run([sys.executable, '-c', CHECK, str(out)], cwd=clone,
                          capture_output=True, text=True, timeout=900,
                          env={**__import__('os').environ,
                               'PYTHONPATH': str(clone),
                               'OMP_NUM_THREADS': '1'})
    assert proc.returncode == 0, proc.stderr[-3000:]
    states = json.loads(out.read_text())
    expected, marks = {}, fingerprint.read_marks()  # stale already
    for path, record in fingerprint.stored_records():
        if path not in judged:
            continue
        liere = 'scheme:liere' in fingerprint.load(
            record['fingerprint'])['probes'] or fingerprint.result_of(
                path) in marks
        if liere or expected.get(path) != 'stale':
            expected[path] = 'stale' if liere else 'current'
    assert {p: s for p, s in states.items() if p in judged} == expected
    assert {s for p, s in states.items() if p not in judged} <= {
        'unknown', 'stale'}
    stale = {p for p, s in states.items() if s == 'stale' and p in judged}
    reuse = 'benchmarks/results/cpu_position_schemes_reuse_r01.json'
    assert reuse in stale or reuse not in judged
    # the LieRE change marks no ranking or demo record (beside those the
    # status lists stale already)
    assert not any('method_ranking' in p or '/demo/' in p for p in stale
                   if fingerprint.result_of(p) not in marks)
