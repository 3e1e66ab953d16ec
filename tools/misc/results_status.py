"""List the stored results as current, stale or unknown, with the commit
each was measured at, judged by behaviour (mmpos_harness.fingerprint): a
result is stale when a probe of the code it ran gives other outputs now, or
a file no probe reaches changed since its commit.

    python tools/misc/results_status.py            # every result
    python tools/misc/results_status.py --stale    # only the others
    python tools/misc/results_status.py --write    # and results/status.json,
                                                   # which the pages mark
    python tools/misc/results_status.py --refingerprint  # after the probes
                                                   # changed (see --help)

Exit status 1 when results/status.json differs from what it finds (the
pages would show a stale number without its mark).
"""
import argparse
import json
import os.path as osp
import sys

from mmpos.guardrails.cli import cli_main
from mmpos_harness import fingerprint


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--stale', action='store_true',
                        help='list only the results that are not current')
    parser.add_argument('--refingerprint', action='store_true',
                        help='first give every record without a '
                        'fingerprint whose depends are unchanged since its '
                        'commit one computed now (after the probes changed, '
                        'in a commit of their own)')
    parser.add_argument('--write', action='store_true',
                        help=f'write {fingerprint.STATUS} (the pages\' '
                        'marks) from what it finds')
    return parser.parse_args(argv)


def table(status: dict, only_stale: bool) -> str:
    lines = ['| result | state | measured at | why |', '|---|---|---|---|']
    for result, entry in sorted(status.items()):
        if only_stale and entry['state'] == 'current':
            continue
        why = '; '.join(entry['reasons'][:3]) + (
            f' (+{len(entry["reasons"]) - 3} more)'
            if len(entry['reasons']) > 3 else '')
        lines.append(f'| {result} | {entry["state"]} | '
                     f'{entry["commit"][:10]} | {why} |')
    return '\n'.join(lines)


@cli_main('results_status.py')
def main(argv=None):
    args = parse_args(argv)
    if args.refingerprint:
        for path in fingerprint.refingerprint():
            print(f'fingerprinted {path}')
    status = fingerprint.results_status()
    print(table(status, args.stale))
    counts = {s: sum(e['state'] == s for e in status.values())
              for s in ('current', 'stale', 'unknown')}
    print(', '.join(f'{n} {s}' for s, n in counts.items()))
    marks = fingerprint.stale_marks(status, fingerprint.read_marks())
    path = osp.join(fingerprint.ROOT, fingerprint.STATUS)
    if args.write:
        with open(path, 'w') as f:
            json.dump(marks, f, indent=1, sort_keys=True)
            f.write('\n')
        print(f'wrote {fingerprint.STATUS}')
    elif marks != fingerprint.read_marks():
        print(f'{fingerprint.STATUS} differs from this status: the pages '
              'would show a stale result without its mark; run with --write')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
