#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turns a bench/run-jmh JSON result of DmaSendBench into the docs/dma.md table: ns/op (± 99.9 % error)
of every variant at every size, for the whole send path and for the mapping work alone, with the
difference to (a) the direct address, measured in the same run.

    python3 bench/dma_table.py bench/results/jmh-<stamp>.json
"""
import json
import sys

VARIANTS = [
    ('a_direct', '(a) virtual address in the SGE (`void *data`)'),
    ('b_branch', '(b) `Dma` on a virtual device: final-field branch (Linux today)'),
    ('c_mono', '(c) `DmaOps` interface call, 1 class'),
    ('d_bi', '(d) `DmaOps` interface call, 2 classes'),
    ('e_mega', '(e) `DmaOps` interface call, 3 classes'),
    ('f_iommu', '(f) IOMMU device (page-table map + translation)'),
    ('g_bounce', '(g) bounce device, swiotlb=force (copy at map)'),
]
SIZES = ['64', '1500', '65536']


def main(path):
    res = {}
    for r in json.load(open(path)):
        name = r['benchmark'].rsplit('.', 1)[1]
        size = r.get('params', {}).get('size')
        pm = r['primaryMetric']
        alloc = r.get('secondaryMetrics', {}).get('gc.alloc.rate.norm', {}).get('score')
        res[(name, size)] = (pm['score'], pm['scoreError'], alloc)
    for suffix, title in (('Map', 'mapping work only (map, check, build the WR, unmap; no post)'),
                          ('', 'whole send path (map, build WR, post RC SEND, poll, unmap, repost the receive)')):
        print(f'\n{title}, ns/op; in brackets the difference to (a) of the same size\n')
        print('| variant | ' + ' | '.join(f'{int(s) // 1024} KiB' if int(s) >= 1024 and int(s) % 1024 == 0 else f'{s} B'
                                           for s in SIZES) + ' |')
        print('|---|' + '---|' * len(SIZES))
        for v, label in VARIANTS:
            cells = []
            for s in SIZES:
                got = res.get((v + suffix, s))
                base = res.get(('a_direct' + suffix, s))
                if not got:
                    cells.append('–')
                    continue
                cell = f'{got[0]:.1f} ± {got[1]:.1f}'
                if base and v != 'a_direct':
                    cell += f' ({got[0] - base[0]:+.1f})'
                if got[2] is not None and got[2] > 0.5:
                    cell += f', {got[2]:.0f} B/op'
                cells.append(cell)
            print(f'| {label} | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
    main(sys.argv[1])
