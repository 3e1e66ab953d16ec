"""The docs site builds with warnings as errors, renders the measured tables
from their result files, and every repository path the Markdown files
mention exists (``docs/_ext/repo_paths.py``)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'docs' / '_ext'))

import mmpos_docs  # noqa: E402
import repo_paths  # noqa: E402

MARKDOWN_OUTSIDE_SITE = ['README.md', 'CONTRIBUTING.md', 'benchmarks/README.md'] + \
    sorted(str(p.relative_to(REPO)) for p in REPO.glob('configs/**/README.md'))


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp('html')
    proc = subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-b', 'html',
         '-q', '-d', str(out / '.doctrees'), str(REPO / 'docs'), str(out)],
        capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_site_builds_and_has_every_page(site):
    sources = sorted(p.relative_to(REPO / 'docs').with_suffix('.html')
                     for p in (REPO / 'docs').rglob('*.md')
                     if '_build' not in p.parts and '_generated' not in p.parts)
    missing = [str(p) for p in sources if not (site / p).is_file()]
    assert not missing


def test_benchmark_tables_are_rendered_from_the_result_files(site):
    html = (site / 'notes' / 'benchmarks.html').read_text()
    for path in sorted((REPO / 'benchmarks' / 'results').glob('*.json')):
        data = json.loads(path.read_text())
        assert path.name in html
        if 'settings' in data and 'rows' in data:
            row = next(r for r in data['rows'] if 'time_ratio' in r)
            # each row carries the run's date (its provenance record's,
            # or a legacy file's own) and the ratio from the file
            settings = data['settings']
            assert settings.get('provenance', settings)['date'][:10] in html
            assert f"{row['time_ratio']:.3f}" in html


def test_rehearsal_table_is_rendered_from_the_result_files(site):
    html = (site / 'user_guides' / 'distributed.html').read_text()
    stored = sorted((REPO / 'results' / 'rehearsals').glob('*.json'))
    assert f'{len(stored)} stored rehearsals' in html
    for path in stored:
        data = json.loads(path.read_text())
        assert Path(data['config']).name in html
        assert f"{data['peak_rss_mib']:,.0f} MiB" in html


MACHINE = 'AMD EPYC 7B13, 2 CPUs, torch 2.14.1'


def _run(command, rows, machine=MACHINE):
    return dict(settings=dict(device='cpu', torch='2.14.1', provenance=dict(
        command=command, machine=machine)), rows=[
        dict(benchmark='b', ours=ours, baseline='base', time_ratio=ratio,
             time_ratio_low=ratio / 2, time_ratio_high=ratio * 2,
             target=target) for ours, ratio, target in rows])


def test_between_runs_takes_the_runs_of_one_command_as_replicates():
    """Runs of one command (whatever their ``--name``) are replicates: the
    interval is scipy's one-sample t over the runs' log ratios, bounded
    targets are tested against the log bound and adjusted together by
    Holm (statsmodels); a command stored once and a row missing from a run
    are left out."""
    import numpy as np
    from scipy import stats as scipy_stats
    from statsmodels.stats.multitest import multipletests
    cmd = 'python benchmarks/run.py --only position_schemes --iters 30'
    fast, slow, free = [1.20, 1.25, 1.22], [1.61, 1.66, 1.58], [1.3, 1.6, 1.1]
    results = {
        f'r{i}.json': _run(f'{cmd} --name r{i}', [
            ('fast', fast[i], '<= 1.5'), ('slow', slow[i], 'time < 1.5'),
            ('free', free[i], '~1.0')] + ([('once', 1., None)] if i else []))
        for i in range(3)}
    results['other.json'] = _run('python benchmarks/run.py --only sdpa',
                                 [('x', 1., '<= 2')])
    # the same command on another CPU: not a replicate of these runs
    results['elsewhere.json'] = _run(f'{cmd} --name e', [
        ('fast', 1.0, '<= 1.5')], machine='Intel Xeon, 8 CPUs, torch 2.14.1')
    rows = {r['ours']: r for r in mmpos_docs.between_runs(results)}
    assert set(rows) == {'fast', 'slow', 'free'}
    assert rows['fast']['command'] == cmd
    assert rows['fast']['files'] == ['r0.json', 'r1.json', 'r2.json']
    p = []
    for name, values in (('fast', fast), ('slow', slow), ('free', free)):
        logs = np.log(values)
        ci = scipy_stats.ttest_1samp(logs, 0.).confidence_interval()
        assert rows[name]['ratios'] == pytest.approx(values)
        assert rows[name]['time_ratio'] == pytest.approx(
            np.exp(logs.mean()))
        assert (rows[name]['time_ratio_low'],
                rows[name]['time_ratio_high']) == pytest.approx(
            (np.exp(ci.low), np.exp(ci.high)))
        if name != 'free':
            p.append(scipy_stats.ttest_1samp(logs, np.log(1.5)).pvalue)
    holm = multipletests(p, method='holm')[1]
    assert [rows['fast']['target_test']['p_adj'],
            rows['slow']['target_test']['p_adj']] == pytest.approx(list(holm))
    assert (rows['fast']['target_verdict'],
            rows['slow']['target_verdict']) == ('met', 'missed')
    assert 'target_verdict' not in rows['free']
    # a verdict is scoped to what measured it
    assert rows['fast']['scope'] == 'AMD EPYC 7B13, torch 2.14.1'
    assert mmpos_docs._target(rows['fast'], rows['fast']['scope']) == (
        '<= 1.5: met on AMD EPYC 7B13, torch 2.14.1 '
        f"(p {rows['fast']['target_test']['p_adj']:.2g})")
    assert mmpos_docs.scope(dict(device='NVIDIA H100', torch='2.14.1')) == \
        'NVIDIA H100, torch 2.14.1'


def test_method_pages_carry_the_papers_tables(site):
    html = (site / 'methods' / 'cr2pq.html').read_text()
    # a paper-only row of CR2PQ Table 1 (MoCo-v2, AP^bb 38.9) and its title
    assert 'COCO detection and instance segmentation, 1x schedule' in html
    assert re.search(r'MoCo-v2.*?38\.9', html, re.S)


def test_path_checker_finds_missing_and_accepts_existing():
    index = repo_paths.RepoIndex(str(REPO))
    text = '\n'.join([
        'Train with `configs/droppos/droppos_vit-tiny_mini.py`.',
        'Old name: `configs/droppos/droppos_vit-tiny_mini_old.py`.',
        '```bash',
        'python tools/train_old.py configs/{droppos,nosuch}/metafile.yml',
        '```',
        'Module `mmpos.models.selfsup.droppos.DropPos`, `mmpos.nosuch.x`.',
        'Names `mmpos.checkpoint.compare`, `mmpos.checkpoint.no_such_fn`,',
        '`mmpos.checkpoint.read.read_checkpoint`, `mmpos.checkpoint.read.nosuch`.',
        'Bare name `droppos_vit-tiny_mini.py`, `nosuch_config.py`.',
        'Placeholder `configs/transfer/mmdet/<config>.py`, `{size}` ok.',
        # a fence shown inline opens no code block: the next line is text
        '   ```` ```{include} x.md ```` .',
        'Then `tools/nosuch_after.py` is still checked.',
    ])
    found = sorted(p for _, p, _ in repo_paths.check_text(text, index))
    assert found == ['configs/droppos/droppos_vit-tiny_mini_old.py',
                     'configs/nosuch/metafile.yml',
                     'mmpos.checkpoint.no_such_fn',
                     'mmpos.checkpoint.read.nosuch', 'mmpos.nosuch.x',
                     'nosuch_config.py', 'tools/nosuch_after.py',
                     'tools/train_old.py']


def test_planned_paths_may_be_missing_until_they_exist():
    index = repo_paths.RepoIndex(str(REPO))
    for path in repo_paths.PLANNED:
        problems = repo_paths.check_text(f'`{path}`', index)
        if index.exists(path):
            assert problems, f'{path} exists: the checker must say so'
        else:
            assert not problems


def test_markdown_outside_the_site_mentions_existing_paths_only():
    files = [f for f in MARKDOWN_OUTSIDE_SITE if (REPO / f).is_file()]
    assert 'README.md' in files and len(files) >= 8
    assert repo_paths.check_files(str(REPO), files) == {}


@pytest.mark.parametrize('path', MARKDOWN_OUTSIDE_SITE)
def test_relative_links_resolve(path):
    if not (REPO / path).is_file():
        pytest.skip(f'{path} does not exist')
    text = (REPO / path).read_text()
    broken = []
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'[a-z]+:', target) or target.startswith('#'):
            continue
        file = (REPO / path).parent / target.split('#')[0]
        if not file.exists():
            broken.append(target)
    assert not broken


def test_sizes():
    assert (REPO / 'README.md').stat().st_size <= 10 * 1024
    for path in REPO.glob('configs/*/README.md'):
        assert path.stat().st_size <= 5 * 1024, path


def _documented_commands():
    """``(file, tool, options)`` of every ``python tools/...`` /
    ``python benchmarks/...`` / ``bash tools/...`` command in the Markdown
    files (code blocks and code spans; continuation lines joined)."""
    files = sorted((REPO / 'docs').rglob('*.md')) + \
        [REPO / f for f in MARKDOWN_OUTSIDE_SITE if (REPO / f).is_file()]
    pattern = re.compile(
        r'(?:python|bash)\s+((?:tools|benchmarks)/[\w/.-]+\.(?:py|sh))([^`\n]*)')
    for path in files:
        if '_build' in path.parts or '_generated' in path.parts:
            continue
        text = path.read_text().replace('\\\n', ' ')
        for tool, rest in pattern.findall(text):
            options = {o.split('=')[0] for o in
                       re.findall(r'(?<![\w-])--[a-z][\w-]*(?:=\S*)?', rest)}
            yield path.relative_to(REPO), tool, options


def test_documented_tool_options_exist():
    """A command in the docs names a tool that exists and only options that
    its argument parser (the tool, or the mmpos / mmpos_harness helper it
    uses) defines."""
    library = '\n'.join(p.read_text()
                        for package in ('mmpos', 'mmpos_harness')
                        for p in (REPO / package).rglob('*.py'))
    commands = list(_documented_commands())
    assert len(commands) > 30
    problems = []
    for page, tool, options in commands:
        if not (REPO / tool).is_file():
            problems.append(f'{page}: {tool} does not exist')
            continue
        # the tool and the helpers beside it (benchmarks/_timing.py)
        source = '\n'.join(p.read_text() for p in
                            (REPO / tool).parent.glob('*.py'))
        source += (REPO / tool).read_text()
        if tool.endswith('.sh'):  # launchers pass options to train / test
            source += (REPO / 'tools/train.py').read_text() + \
                (REPO / 'tools/test.py').read_text()
        source += library
        for option in sorted(options):
            if f"'{option}'" not in source and f'"{option}"' not in source:
                problems.append(f'{page}: {tool} has no option {option}')
    assert not problems, '\n'.join(problems)


def test_faq_has_an_entry_per_failures_row():
    """The FAQ is generated from the failures page: one entry per row of
    its bad-input and fault tables, answer and place included."""
    page = (REPO / 'docs/advanced/failures.md').read_text()
    faq = mmpos_docs.faq_markdown(page)
    rows = [line for line in page.splitlines()
            if line.startswith('| ') and not line.startswith(
                ('| bad input |', '| fault |', '| --- |'))]
    assert faq.count('\n## ') + faq.startswith('## ') == len(rows) >= 20
    assert '## A full disk or quota during a save' in faq
    assert faq.count('**What you see:**') == faq.count('**Where:**') == \
        len(rows)


def test_path_checker_accepts_files_the_page_writes():
    """A file a page's own commands write (`cat > my.py`) is not a missing
    repository path; the same name only mentioned still is."""
    index = repo_paths.RepoIndex(str(REPO))
    page = '```bash\ncat > my_config.py <<EOF\nEOF\npython tools/train.py my_config.py\n```\n'
    assert repo_paths.check_text(page, index) == []
    assert repo_paths.check_text('`my_config.py`', index) == [
        (1, 'my_config.py', 'no such file or folder in the repository')]
