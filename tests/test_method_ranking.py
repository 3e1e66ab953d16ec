"""The method ranking (mmpos_harness.method_ranking, the CLI
tools/paper_tables/method_ranking.py) and the runner it shares with the demo
(mmpos_harness.comparison.runs): resumption (finished runs skipped, an
interrupted one restarted from scratch), the options each transfer run gets,
and the plan the seed table reads. The commands are recorded, not run (a
real run is the tool itself, ~30 minutes)."""
import json
import os

from mmpos_harness import method_ranking
from mmpos_harness.comparison import runs, seeds
from mmpos_harness.results import DONE_MARKER


def test_resumes_and_passes_seed_and_backbone(tmp_path, monkeypatch):
    data = tmp_path / 'data'
    for name in ('objects', 'stuff', 'unlabeled', 'cls'):
        (data / name).mkdir(parents=True)
    root = tmp_path / 'bench'
    done = tmp_path.joinpath(seeds.transfer_dir(str(root), 'detection',
                                                'DropPos', 0))
    done.mkdir(parents=True)
    (done / DONE_MARKER).touch()
    broken = tmp_path.joinpath(seeds.transfer_dir(str(root), 'segmentation',
                                                  'DropPos', 0))
    broken.mkdir(parents=True)
    (broken / 'half_written.log').touch()
    commands = []

    def record(cmd, **kwargs):
        commands.append(cmd)
        if 'tools/train.py' in cmd:
            work_dir = cmd[cmd.index('--work-dir') + 1]
            assert not os.path.exists(os.path.join(work_dir,
                                                   'half_written.log'))
            os.makedirs(work_dir, exist_ok=True)
            ckpt = os.path.join(work_dir, 'iter_1.pth')
            open(ckpt, 'w').close()
            with open(os.path.join(work_dir, 'last_checkpoint'), 'w') as f:
                f.write(ckpt)

    monkeypatch.setattr(runs, 'run', record)
    methods = ['--methods', 'droppos', 'mae']
    method_ranking.main(['--work-dir', str(root), '--data-root', str(data),
                         *methods, '--seeds', '0', '1', '--iters', '3',
                         '--jobs', '1'])
    trains = [c for c in commands if 'tools/train.py' in c]
    work_dirs = [c[c.index('--work-dir') + 1] for c in trains]
    # one job: the pretrainings (each its own config) first, then 2 tasks x
    # 3 inits x 2 seeds, minus the finished one
    inits = ['DropPos', 'MAE']
    pretrainings = [seeds.pretrain_dir(str(root), i) for i in inits]
    assert work_dirs[:2] == pretrainings
    assert [trains[0][2], trains[1][2]] == [
        method_ranking.METHODS[m][1] for m in ('droppos', 'mae')]
    # DropPos keeps its config's schedule; MAE's is stretched to its
    # equal-compute iterations
    assert not [a for a in trains[0] if 'max_iters' in a]
    mae_iters = method_ranking.METHODS['mae'][2]
    assert f'train_cfg.max_iters={mae_iters}' in trains[1]
    assert f'param_scheduler.1.end={mae_iters}' in trains[1]
    assert str(done) not in work_dirs and str(broken) in work_dirs
    assert len(trains) == 2 + 2 * 2 * 3 - 1
    transfers = [(c, d) for c, d in zip(trains, work_dirs)
                 if d not in pretrainings]
    for cmd, work_dir in transfers:
        seed = int(work_dir[-1])
        assert f'randomness.seed={seed}' in cmd
        assert 'train_cfg.max_iters=3' in cmd
        # the backbone of the init the run is filed under, none for random
        backbones = [os.path.join(p, 'backbone.pth') for i, p in
                     zip(inits, pretrainings)
                     if seeds.slug(i) == os.path.basename(
                         os.path.dirname(work_dir))]
        assert [a for a in cmd if 'init_cfg.checkpoint' in a] == [
            f'model.backbone.init_cfg.checkpoint={b}' for b in backbones]
        assert os.path.isfile(os.path.join(work_dir, DONE_MARKER))
        assert 'minutes' in json.load(
            open(os.path.join(work_dir, seeds.COMPUTE)))
    plan = seeds.load_plan(str(root))
    assert plan['inits'] == [*inits, runs.RANDOM_INIT]
    assert plan['seeds'] == [0, 1] and 'reduced' in plan['title']
    assert commands[-1][1:4] == ['tools/paper_tables/gen_tables.py', '--seeds',
                                 str(root)]
    # run again: everything is finished, only the table is regenerated
    commands.clear()
    method_ranking.main(['--work-dir', str(root), '--data-root', str(data),
                         *methods, '--seeds', '0', '1', '--iters', '3',
                         '--jobs', '1'])
    assert [c[1] for c in commands] == ['tools/paper_tables/gen_tables.py']
