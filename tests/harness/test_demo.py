"""tools/demo.py's flow (commands recorded, not run: the real demo is the
tool itself, ~13 minutes) and the runner it shares with the method ranking
(mmpos_harness.comparison.runs): parallel runs, CPU accounting, stale data."""
import importlib.util
import json
import os
import re
import sys

import pytest

from conftest import REPO, load_tool
from mmpos.guardrails.launch import work_dir_lock
from mmpos_harness import demo_table
from mmpos_harness.comparison import runs, seeds
from mmpos_harness.mini_data import MARKER, requested


def load_demo():
    spec = importlib.util.spec_from_file_location('demo',
                                                  REPO / 'tools/demo.py')
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    return demo


def test_parallel_flow(tmp_path, monkeypatch, capsys):
    """--jobs 2: every run single-threaded with its output in its work dir;
    one DropPos pretraining run and one random-init draw per pretraining
    seed, each transferred with every seed, a pretrained transfer started
    only once its own backbone is extracted; results.json holds the
    verdicts from Welch's t on the per-pretraining-run means, the CPU
    minutes of the runs and the provenance of the tree that ran."""
    data = tmp_path / 'data'
    for name in ('objects', 'stuff', 'unlabeled', 'cls'):
        (data / name).mkdir(parents=True)
    commands = []

    def record(cmd, log=None, threads=None):
        commands.append((cmd, log, threads))
        if 'tools/train.py' in cmd:
            work_dir = cmd[cmd.index('--work-dir') + 1]
            os.makedirs(work_dir, exist_ok=True)
            ckpt = os.path.join(work_dir, 'iter_1.pth')
            open(ckpt, 'w').close()
            with open(os.path.join(work_dir, 'last_checkpoint'), 'w') as f:
                f.write(ckpt)
            # the pretraining run's draw moves both inits alike; DropPos
            # gains 10 points on every run
            noise = int(re.search(r'pseed(\d)', work_dir).group(1))
            gain = 10.0 if 'DropPos' in work_dir else 0.0
            with open(os.path.join(work_dir, 'metrics.json'), 'w') as f:
                json.dump({'coco/bbox_mAP': (gain + noise) / 100,
                           'coco/segm_mAP': 0.0, 'coco/bbox_mAP_50': 0.0,
                           'mIoU': 30.0 + gain + noise, 'aAcc': 50.0}, f)
        return 6.0  # CPU seconds

    monkeypatch.setattr(runs, 'run', record)
    demo = load_demo()
    demo.main(['--data-root', str(data), '--work-dir', str(tmp_path / 'w'),
               '--pretrain-seeds', '0', '1', '--seeds', '0', '--iters', '2',
               '--jobs', '2'])
    trains = [(c, log, t) for c, log, t in commands if 'tools/train.py' in c]
    assert len(trains) == 2 + 2 * 2 * 2
    for cmd, log, threads in trains:
        work_dir = cmd[cmd.index('--work-dir') + 1]
        assert threads == 1 and log == os.path.join(work_dir, 'console.log')
    names = [c[1] for c, _, _ in commands]
    (root, ) = [str(p) for p in (tmp_path / 'w').iterdir()]
    for p in (0, 1):
        backbone = os.path.join(seeds.pretrain_dir(root, 'DropPos', p),
                                'backbone.pth')
        extracted = next(i for i, (c, _, _) in enumerate(commands)
                         if backbone in c)
        for i, (cmd, _, _) in enumerate(commands):
            if cmd[1] != 'tools/train.py':
                continue
            pretrained = f'model.backbone.init_cfg.checkpoint={backbone}' \
                in cmd
            assert pretrained == (f'/DropPos/pseed{p}/seed' in ' '.join(cmd))
            if pretrained:
                assert i > extracted
        # random init: a backbone drawn with the pretraining seed
        drawn = os.path.join(seeds.pretrain_dir(root, 'random init', p),
                             'backbone.pth')
        assert os.path.isfile(drawn) and any(
            f'model.backbone.init_cfg.checkpoint={drawn}' in c
            for c, _, _ in trains)
    results = json.loads(open(os.path.join(root, 'results.json')).read())
    # 2 pretraining + 8 transfer runs of 6 CPU seconds each, and the
    # random draws' own (small) CPU time
    assert results['runs_cpu_minutes'] >= 10 * 0.1
    assert results['jobs'] == 2
    assert results['verdicts']['DropPos'].startswith(
        'DropPos: above random init on mini-objects (AP^bb +10.0 [')
    assert set(results['pretraining']) == {'pseed0', 'pseed1'}
    record_ = results['provenance']
    assert record_['command'].startswith('python tools/demo.py --data-root')
    assert len(record_['commit']) == 40
    assert 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py' in \
        record_['depends']
    assert json.load(open(os.path.join(
        seeds.transfer_dir(root, 'segmentation', 'DropPos', 0, 1),
        seeds.COMPUTE)))['cpu_minutes'] == 0.1
    assert names[-3:] == ['tools/analysis_tools/droppos_positions.py',
                          'tools/infer.py', 'tools/infer.py']
    assert 'CPU minutes' in capsys.readouterr().out

    # publishing: the README's table between its markers, regenerated from
    # the stored files; the user's text around it stays
    readme = tmp_path / 'README.md'
    readme.write_text(f'intro\n{demo_table.BEGIN}\nold\n{demo_table.END}\n'
                      'outro\n')
    stored = tmp_path / 'stored'
    block = demo_table.publish(root, root, str(stored), str(readme))
    text = readme.read_text()
    assert text == (f'intro\n{demo_table.BEGIN}\n{block}{demo_table.END}\n'
                    'outro\n')
    assert block == demo_table.readme_block(str(stored), marks={})
    assert block.startswith(seeds.render(seeds.load(root)))
    assert f'at commit {record_["commit"][:10]}' in block
    # the same run as its own thread-count check: every cell equal
    assert 'DropPos mini-objects AP^bb 10.0 (single-threaded: 10.0)' in block
    readme.write_text('no markers\n')
    with pytest.raises(ValueError, match='needs one'):
        demo_table.publish(root, None, str(stored), str(readme))

    # the confirmation on fresh seeds: its own folder and the demo page's
    # block, naming the design it tests and its own result files
    page = tmp_path / 'demo.md'
    page.write_text(f'a\n{demo_table.CONFIRM_BEGIN}\n'
                    f'{demo_table.CONFIRM_END}\nb\n')
    confirmed = tmp_path / 'confirmed'
    block = demo_table.publish_confirmation(root, str(confirmed), str(page))
    assert page.read_text() == (f'a\n{demo_table.CONFIRM_BEGIN}\n{block}'
                                f'{demo_table.CONFIRM_END}\nb\n')
    assert block == demo_table.confirm_block(str(confirmed), marks={})
    assert demo_table.DESIGN in block and \
        f'result files in `{demo_table.CONFIRM}/`' in block
    assert seeds.render(seeds.load(root)) in block
    assert not (confirmed / demo_table.THREADS).exists()


def test_second_demo_on_a_work_dir_is_refused(tmp_path, monkeypatch):
    """While a demo holds its --work-dir (its lock), another demo pointed
    there stops with one line naming the holder, before any step runs."""
    commands = []
    monkeypatch.setattr(runs, 'run', lambda *a, **k: commands.append(a))
    work_dir = tmp_path / 'w'
    with work_dir_lock(str(work_dir)):
        with pytest.raises(SystemExit) as refused:
            load_demo().main(['--work-dir', str(work_dir), '--data-root',
                              str(tmp_path / 'data')])
    message = str(refused.value)
    assert message.startswith(f'demo.py: error: work dir {work_dir} is in '
                              f'use by another run (pid {os.getpid()} ')
    assert '\n' not in message
    assert commands == [] and not (tmp_path / 'data').exists()


def test_run_counts_cpu_and_logs(tmp_path):
    """runs.run: the child's CPU seconds, its output in ``log``, its
    OMP_NUM_THREADS, and one line naming the log when it fails."""
    log = tmp_path / 'console.log'
    burn = ('import os, time\nt = time.process_time()\n'
            'while time.process_time() - t < 0.3: pass\n'
            'print("threads", os.environ["OMP_NUM_THREADS"])')
    cpu = runs.run([sys.executable, '-c', burn], log=str(log), threads=3)
    assert cpu >= 0.3
    assert log.read_text().strip() == 'threads 3'
    with pytest.raises(SystemExit, match=f'in {log}'):
        runs.run([sys.executable, '-c', 'raise SystemExit(3)'],
                 log=str(log))


def test_data_commands_parse_and_force(monkeypatch, tmp_path):
    """The demo asks the generator for its sizes with ``--force`` (rewritten
    when written with other sizes, never shrunk): every command parses with
    the tool's own parser; data written with the demo's sizes is kept
    without running the generator."""
    commands = []
    monkeypatch.setattr(runs, 'run', lambda cmd: commands.append(cmd))
    runs.ensure_data(str(tmp_path))
    runs.ensure_probe_data(str(tmp_path), ['depth', 'knn'], seed=3)
    tool = load_tool('make_mini_data', 'misc')
    parsed = [tool.parse_args(cmd[2:])[1] for cmd in commands]
    assert all(args.force for args in parsed)
    unlabeled = next(a for a in parsed if a.which == ['unlabeled'])
    assert (unlabeled.num_unlabeled, unlabeled.img_size) == (
        runs.DATA['num_unlabeled'], runs.DATA['img_size'])
    assert {'objects', 'stuff', 'cls', runs.PROBES['depth']['data']} <= {
        name for args in parsed for name in args.which}
    assert all(args.seed == 3 for args in parsed
               if runs.PROBES['depth']['data'] in args.which)
    (tmp_path / 'cls').mkdir()
    (tmp_path / 'cls' / MARKER).write_text(json.dumps(
        requested('cls')))
    commands.clear()
    runs.ensure_data(str(tmp_path))
    assert all('cls' not in tool.parse_args(cmd[2:])[1].which
               for cmd in commands)


def test_knn_probe_reads_its_own_thousand_queries(monkeypatch, tmp_path):
    """The kNN probe reads ``knn/cls`` (issue 55: at least 1,000 queries):
    1,200 queries and a bank of the tasks' 256 labelled images at their
    64 px, the classes balanced, so its image-free row (the bank's majority
    class) scores a third; the online probe's ``cls`` is another folder,
    and a ``knn/cls`` written with fewer queries is rewritten."""
    import torch

    from mmpos.apis.features import load_config
    from mmpos.evaluation.frozen import dataset_items
    from mmpos.evaluation.knn import class_prior_accuracy
    tool = load_tool('make_mini_data', 'misc')
    commands = []

    def make(cmd, **kwargs):
        commands.append(cmd)
        tool.main(cmd[2:])
    monkeypatch.setattr(runs, 'run', make)
    (tmp_path / 'knn').mkdir()
    tool.main([str(tmp_path / 'knn'), '--which', 'cls', '--num-val', '30',
               '--num-train', '9', '--img-size', '64'])
    runs.ensure_probe_data(str(tmp_path), ['knn'])
    root = tmp_path / runs.PROBES['knn']['data']
    assert root.parent.name == 'knn' and len(commands) == 1
    cfg = load_config(runs.KNN_DATA)
    (_, bank, classes), (_, queries, _) = (dataset_items(dict(
        cfg[f'{split}_dataloader'].dataset, data_root=str(root)))
        for split in ('train', 'val'))
    assert len(queries) == runs.KNN_SIZES['num_val'] == 1200
    assert len(bank) == runs.KNN_SIZES['num_train'] == runs.DATA['num_train']
    assert torch.bincount(queries).tolist() == [400] * len(classes) == [
        400] * 3
    assert class_prior_accuracy(bank, queries, 3)['top1'] == \
        pytest.approx(100 / 3, abs=1e-4)
    assert json.loads((root / MARKER).read_text())['img_size'] == \
        runs.DATA['img_size']
    runs.ensure_probe_data(str(tmp_path), ['knn'])  # written: kept
    assert len(commands) == 1
    # the probe's command reads it
    commands.clear()

    def record(cmd, **kwargs):
        commands.append(cmd)
        os.makedirs(cmd[cmd.index('--work-dir') + 1])
    monkeypatch.setattr(runs, 'run', record)
    runs.probe(str(tmp_path / 'work'), 'knn', 'DropPos', 0, str(tmp_path),
               'backbone.pth', 0)
    cmd, = commands
    assert cmd[cmd.index('--data-root') + 1] == str(root)
