#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turns a bench/run-jmh JSON result into the docs/benchmarks.md table: each benchmark against its
same-run baseline, as a ratio, with the target and whether it was met.

    python3 bench/summarize.py bench/results/jmh-<stamp>.json
"""
import json
import sys

P = 'org.rdma4j.benchmarks.'


def load(path):
    res = {}
    for r in json.load(open(path)):
        name = r['benchmark'].removeprefix(P)
        key = (name, r['mode'], r.get('params', {}).get('size'))
        pm = r['primaryMetric']
        res[key] = {'score': pm['score'], 'err': pm['scoreError'],
                    'p50': pm.get('scorePercentiles', {}).get('50.0')}
    return res


def main(path):
    r = load(path)
    rows = []

    def get(name, mode, size=None):
        return r.get((name, mode, size))

    for size in ('65536', '1048576'):
        w, c = get('WriteBench.write', 'avgt', size), get('WriteBench.copy', 'avgt', size)
        if w and c:
            n = int(size)
            gw, gc = n / w['score'], n / c['score']  # bytes per ns = GB/s
            ratio = gw / gc
            rows.append((f'RC WRITE {n // 1024} KiB (signaled, polled)', f'MemorySegment.copy {n // 1024} KiB',
                         f'{gw:.1f} GB/s ({w["score"]:.0f} ± {w["err"]:.0f} ns/op)',
                         f'{gc:.1f} GB/s ({c["score"]:.0f} ± {c["err"]:.0f} ns/op)',
                         f'{ratio:.2f}', '>= 0.9 x copy', 'met' if ratio >= 0.9 else 'MISSED'))
    s, v = get('SendLatencyBench.send', 'sample'), get('SendLatencyBench.volatilePingPong', 'sample')
    sa, va = get('SendLatencyBench.send', 'avgt'), get('SendLatencyBench.volatilePingPong', 'avgt')
    if s and v:
        rows.append(('RC SEND 8 B one-way, busy poll (median of 100-round-trip samples)',
                     'volatile ping-pong', f'{s["p50"]:.0f} ns (mean {sa["score"]:.0f} ± {sa["err"]:.0f})' if sa else f'{s["p50"]:.0f} ns',
                     f'{v["p50"]:.0f} ns (mean {va["score"]:.0f} ± {va["err"]:.0f})' if va else f'{v["p50"]:.0f} ns',
                     f'{s["p50"] / v["p50"]:.1f} x floor', '<= 250 ns', 'met' if s['p50'] <= 250 else 'MISSED'))
    o = get('SendLatencyBench.sendOneThread', 'sample')
    if o:
        oa = get('SendLatencyBench.sendOneThread', 'avgt')
        rows.append(('(diagnostic) same ping-pong, both ends on one thread', 'volatile ping-pong',
                     f'{o["p50"]:.0f} ns (mean {oa["score"]:.0f})' if oa else f'{o["p50"]:.0f} ns', '', '', '-', '-'))
    m, c8 = get('MsgRateBench.write8', 'thrpt'), get('MsgRateBench.copy8', 'thrpt')
    if m and c8:
        rows.append(('8 B INLINE WRITE message rate (32/postSend, 1 in 64 signaled)', 'MemorySegment.copy 8 B',
                     f'{m["score"] / 1e6:.1f} ± {m["err"] / 1e6:.1f} M msg/s',
                     f'{c8["score"] / 1e6:.0f} M copies/s', f'{m["score"] / c8["score"]:.3f}', '>= 20 M msg/s',
                     'met' if m['score'] >= 20e6 else 'MISSED'))
    print('| Benchmark | Baseline (same run) | Measured | Baseline measured | Ratio | Target | Result |')
    print('|---|---|---|---|---|---|---|')
    for row in rows:
        print('| ' + ' | '.join(row) + ' |')


if __name__ == '__main__':
    main(sys.argv[1])
