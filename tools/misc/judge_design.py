"""Judge a study's families on its runner's summary, as its design file
says (mmpos_harness.design.judge): a markdown table per family (the test,
the margin, the difference with its interval, the adjusted p, the
verdict; the power the design's effects had with the observed SD) on
stdout, and with ``--out`` in that file too. A position study is judged
from its directory (its ``runs/<scheme>/seed<k>.json``, the paired t over
the seeds both arms ran), with a line on the runs missing or left out.

    python tools/misc/judge_design.py designs/probes.yaml \
        work_dirs/method_ranking_confirm/summary.json
    python tools/misc/judge_design.py designs/resolution_study.yaml \
        work_dirs/resolution_study
    python tools/misc/judge_design.py designs/demo_confirm.yaml \
        results/demo_confirm/summary.json --out judged.md
"""
import argparse
import os.path as osp

from mmpos.errors import BadInputError
from mmpos.guardrails.cli import cli_main
from mmpos_harness import design


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('design', help='a design file, designs/<study>.yaml')
    parser.add_argument('summary', help="the runner's summary.json (a "
                        "comparison summary) or a position study's "
                        'directory (its runs/)')
    parser.add_argument('--out', help='also write the tables to this '
                        'markdown file (never into docs/)')
    return parser.parse_args(argv)


@cli_main('judge_design.py')
def main(argv=None):
    args = parse_args(argv)
    if args.out and osp.abspath(args.out).startswith(
            osp.join(design.ROOT, 'docs') + osp.sep):
        raise BadInputError(f'--out {args.out}: the pages under docs/ are '
                            'generated from stored results, not written '
                            'here')
    if args.out and osp.exists(args.out):
        raise BadInputError(f'--out {args.out} exists; give a new file')
    found = design.load(args.design)
    summary = design.read_summary(args.summary)
    coverage = design.study_coverage(found, summary) + '\n\n' \
        if design.STUDY in summary else ''
    text = (f'Judged: `{args.design}` on `{args.summary}`\n\n' + coverage +
            design.judgement_markdown(found, design.judge(
                found, summary, args.summary)))
    print(text, end='')
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)


if __name__ == '__main__':
    main()
