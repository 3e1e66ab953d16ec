"""The mini distillation study: a DINOv2 teacher of width 96, a width-48
student distilled from it and the student pretrained alone for equal
compute, scored by the method ranking's frozen probes.

    python tools/paper_tables/distill_study.py [options] [--dry-run]

Its arms, equal compute, seeds and resumption are described in
:mod:`mmpos_harness.distill_study`; its design is
``designs/distill_mini.yaml``.
"""
import os

from mmpos_harness.distill_study import main

if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', str(os.cpu_count() or 1))
    main()
