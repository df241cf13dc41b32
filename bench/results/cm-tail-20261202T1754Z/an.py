# SPDX-License-Identifier: Apache-2.0
# Trace analysis: per measured cycle, the 20 segments of a connect + disconnect across both processes (Tr marks, trace-marks.patch)
import sys, bisect, statistics as st
def load(f, side):
    ev=[]
    for line in open(f):
        t,w,d,th=line.split()
        ev.append((int(t),side,w,int(d),th))
    return ev
pre=sys.argv[1]
ev=sorted(load(pre+'.c','C')+load(pre+'.s','S'))
times=[e[0] for e in ev]
def find(start, side, what, detail=None, th=None, before=None):
    i=bisect.bisect_left(times,start)
    while i<len(ev):
        e=ev[i]
        if before and e[0]>before: return None
        if e[1]==side and e[2]==what and (detail is None or e[3]==detail) and (th is None or th in e[4]):
            return e
        i+=1
    return None
def findany(start, side, whats, before):
    i=bisect.bisect_left(times,start)
    while i<len(ev):
        e=ev[i]
        if e[0]>before: return None
        if e[1]==side and e[2] in whats: return e
        i+=1
    return None
cycles=[]
for e in ev:
    if e[1]=='C' and e[2]=='c_connect' and e[3] < 30000:  # measured i>=0 (i&0xffff small)
        cycles.append(e)
# measured cycles are those with index 0..N-1 after the warm-ups (warm ones have i negative -> large &0xffff)
segnames=['A>REQtx','REQtx>Sdg','Sdg>REQrx','REQrx>CRq','CRq>CRtake','CRtake>REPtx','REPtx>Cdg','Cdg>REPrx','REPrx>ESTq','ESTq>ESTtake',
 'ESTtake>DREQtx','DREQtx>Sdg','Sdg>DREQrx','DREQrx>DISq','DISq>DIStake','DIStake>DREPtx','DREPtx>Cdg','Cdg>DREPrx','DREPrx>DISq','DISq>DIStake']
rows=[]
kinds=[]
for c in cycles:
    t=c[0]
    end=find(t,'C','c_disced',c[3])
    if not end: continue
    T=end[0]
    pts=[t]
    k=[]
    def step(side,what,detail=None,th=None):
        e=find(pts[-1],side,what,detail,th,T+1)
        if e is None: raise KeyError(what)
        pts.append(e[0]); return e
    try:
        reqtx=step('C','mad_tx',0x10)
        d=findany(reqtx[0],'S',('dg_agent','dg_poll'),T); pts.append(d[0]); k.append(d[2]+':'+d[4])
        rx=step('S','mad_rx',0x10)
        # was the CM agent woken (agent_wake between dg and rx)?
        w=find(d[0],'S','agent_wake',None,None,rx[0]); k.append('wake' if w else 'polling')
        step('S','ev_q',4); step('S','ev_take',4); step('S','mad_tx',0x13)
        d=findany(pts[-1],'C',('dg_agent','dg_poll'),T); pts.append(d[0]); k.append(d[2]+':'+d[4])
        rx=step('C','mad_rx',0x13)
        w=find(d[0],'C','agent_wake',None,None,rx[0]); k.append('wake' if w else 'polling')
        step('C','ev_q',9); step('C','ev_take',9)
        step('C','mad_tx',0x15)
        d=findany(pts[-1],'S',('dg_agent','dg_poll'),T); pts.append(d[0]); k.append(d[2]+':'+d[4])
        rx=step('S','mad_rx',0x15)
        w=find(d[0],'S','agent_wake',None,None,rx[0]); k.append('wake' if w else 'polling')
        step('S','ev_q',10); step('S','ev_take',10); step('S','mad_tx',0x16)
        d=findany(pts[-1],'C',('dg_agent','dg_poll'),T); pts.append(d[0]); k.append(d[2]+':'+d[4])
        rx=step('C','mad_rx',0x16)
        w=find(d[0],'C','agent_wake',None,None,rx[0]); k.append('wake' if w else 'polling')
        step('C','ev_q',10); step('C','ev_take',10)
    except (KeyError,TypeError) as ex:
        continue
    segs=[(pts[i+1]-pts[i])/1000 for i in range(len(pts)-1)]
    rows.append((( pts[-1]-pts[0])/1000, segs, k))
print("cycles", len(rows))
rows.sort(key=lambda r:r[0])
n=len(rows)
tot=[r[0] for r in rows]
print("total p50 %.0f p90 %.0f p99 %.0f"%(tot[n//2], tot[int(n*.9)], tot[int(n*.99)]))
fast=rows[:n//2]; slow=rows[int(n*.9):]
print("%-16s %8s %8s %8s %8s"%("segment","med all","mean<p50","mean>p90","share of (slow-fast)"))
diff=sum(r[0] for r in slow)/len(slow)-sum(r[0] for r in fast)/len(fast)
for j,name in enumerate(segnames):
    a=[r[1][j] for r in rows]; f=[r[1][j] for r in fast]; s=[r[1][j] for r in slow]
    mf=sum(f)/len(f); ms=sum(s)/len(s)
    print("%-16s %8.0f %8.0f %8.0f %6.0f%%"%(name, st.median(a), mf, ms, 100*(ms-mf)/diff))
from collections import Counter
for j in range(8):
    print("kind", j, "fast", Counter(r[2][j] for r in fast).most_common(3), "slow", Counter(r[2][j] for r in slow).most_common(3))
# distribution of the big segments in slow cycles
for j in (2, 7, 12, 17):
    s=sorted(r[1][j] for r in slow)
    print(segnames[j], "slow-cycle values p10/p50/p90:", s[len(s)//10], s[len(s)//2], s[int(len(s)*.9)])
