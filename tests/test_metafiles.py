"""OpenMMLab model-zoo metafiles (``configs/<method>/metafile.yml``, imported
by ``model-index.yml``): structure, configs that exist, every top-level
method config listed (mini configs excepted), and every Result backed by the
paper number the paper-table manifest gives for a run of that config."""
import copy
import re

import pytest
import yaml

from conftest import REPO
from mmpos_harness.paper_tables.manifest import load_manifest

# not pretraining methods with model-zoo entries: shared bases, transfer
# protocols, CPU demos and comparisons, frozen-evaluation protocols and the
# mini configs of the position-scheme zoo, and what has mini configs only
# and no paper numbers in the manifest yet (distillation, NaFlex batches)
NOT_METHODS = {'_base_', 'transfer', 'demo', 'method_ranking', 'dense_probes',
               'position_schemes', 'distill', 'naflex'}
# CPU-sized configs for tests and demos are not model-zoo entries
MINI = re.compile(r'(^|[_-])mini([_.-]|$)')
# metafile metric name -> manifest metric
METRICS = {
    'box AP': 'AP_bb', 'mask AP': 'AP_mk', 'mIoU': 'mIoU',
    'mIoU (multi-scale)': 'mIoU', 'aAcc': 'aAcc', 'mAcc': 'mAcc',
    'Top 1 Accuracy': 'top1', 'Top 5 Accuracy': 'top5'
}
METHODS = sorted(p.name for p in (REPO / 'configs').iterdir()
                 if p.is_dir() and p.name not in NOT_METHODS)


def load(method):
    with open(REPO / 'configs' / method / 'metafile.yml') as f:
        return yaml.safe_load(f)


@pytest.fixture(scope='module')
def manifest():
    return load_manifest(str(REPO / 'tools/paper_tables/manifest.yaml'))


def test_model_index_imports_every_metafile():
    with open(REPO / 'model-index.yml') as f:
        index = yaml.safe_load(f)
    assert METHODS == ['cr2pq', 'dinov2', 'droppos', 'icpf', 'qbheat',
                       'rope_vit']
    assert index['Import'] == [f'configs/{m}/metafile.yml' for m in METHODS]
    names = [m['Name'] for method in METHODS for m in load(method)['Models']]
    assert len(names) == len(set(names)), 'model names must be unique'


@pytest.mark.parametrize('method', METHODS)
def test_metafile_structure(method):
    meta = load(method)
    collections = {c['Name']: c for c in meta['Collections']}
    models = {m['Name']: m for m in meta['Models']}
    for name, model in models.items():
        assert set(model) <= {'Name', 'In Collection', 'Config', 'Metadata',
                              'Results', 'Weights'}, name
        assert model.get('Weights') is None, f'{name}: no weights released'
        assert (REPO / model['Config']).is_file(), \
            f'{name}: {model["Config"]} does not exist'
        coll = collections[model['In Collection']]
        meta_data = {**coll['Metadata'], **model['Metadata']}
        assert meta_data['Training Data'] and meta_data['Architecture'], name
        schedule = model['Metadata'].get('Epochs',
                                         model['Metadata'].get('Iterations'))
        assert isinstance(schedule, int) and schedule > 0, name
        # the epoch count a method config's name states is the Epochs
        stated = re.search(r'-(\d+)e_', model['Config'])
        if model['Config'].startswith(f'configs/{method}/') and stated:
            assert model['Metadata']['Epochs'] == int(stated.group(1)), name
        parent = model['Metadata'].get('Pretrained From')
        if parent is not None:
            assert parent in models and models[parent]['Config'].startswith(
                f'configs/{method}/'), f'{name}: Pretrained From {parent}'
        for result in model['Results'] or []:
            assert set(result) == {'Task', 'Dataset', 'Metrics'}, name
            assert result['Metrics'] and all(
                isinstance(v, float) for v in result['Metrics'].values())


@pytest.mark.parametrize('method', METHODS)
def test_every_method_config_listed(method):
    """Top-level configs of configs/<method>/ are the model zoo; mini
    configs (names with a ``mini`` part) are for tests and the demo."""
    folder = REPO / 'configs' / method
    configs = {f'configs/{method}/{p.name}' for p in folder.glob('*.py')
               if not MINI.search(p.name)}
    listed = {m['Config'] for m in load(method)['Models']
              if m['Config'].count('/') == 2 and
              m['Config'].startswith(f'configs/{method}/')}
    assert configs - listed == set(), 'configs missing from the metafile'
    assert listed == configs


def run_chain(manifest, run_id):
    """Configs of a run and of the runs it starts from (test_of /
    init_from), nearest first."""
    configs, run = [], manifest.runs[run_id]
    while True:
        configs.append(run.config)
        parent = run.test_of or run.init_from
        if parent is None:
            return configs
        run = manifest.runs[parent]


def result_problems(meta, manifest):
    """Results that no manifest run of the model's config (and of its
    ``Pretrained From`` config) gives as the paper's number."""
    models = {m['Name']: m for m in meta['Models']}
    problems = []
    for name, model in models.items():
        if not model['Results']:
            continue
        parent = model['Metadata'].get('Pretrained From')
        parent_cfg = models[parent]['Config'] if parent else None
        backed = set()
        for table in manifest.tables:
            for row in table.rows:
                for col, value in zip(table.columns, row.paper):
                    if not row.runs or value is None:
                        continue
                    chain = run_chain(manifest, row.runs[col.run])
                    if model['Config'] in chain and (parent_cfg is None or
                                                     parent_cfg in chain):
                        backed.add((col.metric, value))
        if not backed:
            problems.append(f'{name}: no manifest run of {model["Config"]}')
        for result in model['Results']:
            for metric, value in result['Metrics'].items():
                if (METRICS[metric], value) not in backed:
                    problems.append(f'{name}: {metric} {value} is no paper '
                                    'number of its runs in the manifest')
    return problems


@pytest.mark.parametrize('method', METHODS)
def test_results_are_the_manifests_paper_numbers(method, manifest):
    meta = load(method)
    assert result_problems(meta, manifest) == []
    assert any(m['Results'] for m in meta['Models']), method


def test_result_check_catches_a_wrong_number(manifest):
    meta = copy.deepcopy(load('cr2pq'))
    model = next(m for m in meta['Models']
                 if m['Name'].startswith('cascade') and '200e' in m['Name'])
    assert model['Results'][0]['Metrics'] == {'box AP': 50.3}
    model['Results'][0]['Metrics']['box AP'] = 50.5  # CR2PQ 300 epochs
    assert result_problems(meta, manifest) == [
        f'{model["Name"]}: box AP 50.5 is no paper number of its runs in '
        'the manifest'
    ]
    model['Metadata']['Pretrained From'] = \
        'cr2pq_vit-base-p16_32xb64-100e_in1k'
    assert result_problems(meta, manifest)[0] == (
        f'{model["Name"]}: no manifest run of {model["Config"]}')
