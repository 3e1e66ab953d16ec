"""Rehearse paper configs at full size on CPU (mmpos_harness.rehearsal):
2 training iterations through tools/dist_train.sh with 2 gloo processes
and batch 1 per process on synthetic data of the real layout, a
validation step, a checkpoint save and a resume; the result (time per
iteration, peak resident memory, losses) goes with provenance to
results/rehearsals/<config name>.json. Configs with a stored result are
skipped (--redo repeats them), so a long list resumes where it stopped.

    python tools/misc/rehearse.py configs/droppos/droppos_vit-base-p16_8xb512-coslr-200e_in1k.py
    python tools/misc/rehearse.py --procs 1 CONFIG   # where 2 do not fit
"""
from mmpos.guardrails.cli import cli_main
from mmpos_harness import rehearsal


@cli_main('rehearse.py')
def main(argv=None):
    rehearsal.main(argv)


if __name__ == '__main__':
    main()
