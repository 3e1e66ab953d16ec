"""The dense-probe table's harness (``mmpos_harness.dense_probes``): what
its stored result depends on, and that a finished run is stored as the
page includes it (``tests/test_results.py`` checks the stored files)."""
import json

from mmpos_harness import dense_probes, provenance


def test_depends_names_the_code_and_every_config_it_measured():
    found = dense_probes.depends()
    assert dense_probes.SUITE in found
    assert {dense_probes.PRETRAIN, *dense_probes.MINI_PROBES.values()} <= \
        set(found)
    # the configs' bases too (the demo recipe's DropPos mini base), and
    # only paths that exist
    assert 'configs/droppos/droppos_vit-tiny_mini.py' in found
    provenance.record('check', found)  # raises on a path that is missing


def test_publish_stores_results_and_the_page_table(tmp_path):
    run = tmp_path / 'run'
    (run / 'suite').mkdir(parents=True)
    table = '| init | x |\n| --- | --- |\n| DropPos | 1.000 ± 0.000 |\n'
    (run / 'suite' / 'result.md').write_text(
        '# Dense probes of C\n\nseeds [0]; 1.0 min\n\n' + table)
    record = provenance.record('python tools/paper_tables/dense_probes.py',
                               dense_probes.depends())
    (run / 'results.json').write_text(json.dumps(dict(
        seeds=[0], results={}, minutes=1.0, provenance=record)))
    out = tmp_path / 'stored'
    page = dense_probes.publish(str(run), str(out))
    assert (out / 'suite.md').read_text() == table
    assert (out / 'result.md').read_text() == page
    assert page.startswith(table)
    assert f'at commit {record["commit"][:10]}' in page
    assert json.loads((out / 'results.json').read_text())['provenance'] == \
        record
