"""dense_probe_suite.py: runs pair seeds with checkpoints as documented and
the table reports mean ± std over seeds and the difference to the first
run."""
import pytest

from mmpos.evaluation.dense_suite import HEADLINE
from mmpos.utils.errors import BadInputError
from conftest import load_tool


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
    results = {label: {str(s): {k: float(s + (label == 'pre'))
                                for k in HEADLINE} for s in (0, 1, 2)}
               for label in ('random', 'pre')}
    text = suite.table(results, [0, 1, 2])
    assert text.splitlines()[2].startswith('| random | 1.000 ± 1.000')
    assert text.splitlines()[-1] == '| pre − random | ' + ' | '.join(
        ['+1.000'] * len(HEADLINE)) + ' |'
