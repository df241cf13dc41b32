// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.rdma4j.libc.Errors;
import org.rdma4j.libc.NativeIOException;
import org.rdma4j.verbs.Gid;
import org.rdma4j.wire.AtomicAckEth;
import org.rdma4j.wire.AtomicEth;
import org.rdma4j.wire.Bth;
import org.rdma4j.wire.Deth;
import org.rdma4j.wire.Icrc;
import org.rdma4j.wire.PseudoHeader;
import org.rdma4j.wire.Reth;
import org.rdma4j.wire.RocePacket;
import org.rdma4j.wire.RoceStatus;
import org.rdma4j.wire.net.DatagramBatch;
import org.rdma4j.wire.net.SockAddr;

/**
 * A RoCE link's transmit batch: packets built (headers, payload, ICRC) back to back into one native buffer and
 * grouped into runs that each leave as one UDP GSO datagram train, all runs with one {@code sendmmsg} when the
 * sender's {@link Burst} ends or the buffer fills. Not thread-safe: its {@link RoceLink} calls it under the
 * link's transmit lock, from whichever thread sends (a poster, an executor, the timer agent, a receive agent).
 */
final class GsoBatch {
    // Packets of a burst are built back to back in txBuf
    // and grouped in runs: a run is a train of packets to one destination, all the length of its first but
    // the last, which the kernel cuts from one buffer (UDP GSO, udp(7) UDP_SEGMENT). The runs leave with
    // one sendmmsg at the flush point (the end of the sender's Burst) or when the buffer is full.
    private static final int TX_BYTES = 1 << 20;
    private static final int TX_RUNS = 64;
    /** UDP GSO's limit: the IPv4 total length is 16 bits (ip_append_data); stay below 64 KiB for both families. */
    private static final int GSO_MAX_BYTES = 65_000;
    private final Arena arena = Arena.ofShared();
    private final MemorySegment txBuf = arena.allocate(TX_BYTES + RoceLink.SLOT_BYTES, 64);
    private final DatagramBatch txBatch = new DatagramBatch(arena, TX_RUNS, 1);
    private final long[] runOff = new long[TX_RUNS];
    private final int[] runSeg = new int[TX_RUNS];
    private final int[] runLen = new int[TX_RUNS];
    private final int[] runCount = new int[TX_RUNS];
    private final boolean[] runClosed = new boolean[TX_RUNS];
    private final Gid[] runGid = new Gid[TX_RUNS];
    private int txRuns;
    private long txEnd;
    private RoceEndpoint txEp;
    private final RocePacket txPkt = new RocePacket();
    private final Icrc txIcrc = new Icrc();
    private final PseudoHeader txIp = new PseudoHeader();
    private final Sgl txSgl = new Sgl(1);
    private final SockAddr txTo = new SockAddr();
    private final byte[] txGidBytes = new byte[16];
    private Gid txToGid;
    private final RoceLink link;
    private final SoftDevice device;
    private final int udpPort;

    GsoBatch(RoceLink link, SoftDevice device, int udpPort) {
        this.link = link;
        this.device = device;
        this.udpPort = udpPort;
    }

    /**
     * Encodes a packet into the batch, after the open run if the kernel will cut it there (one UDP GSO send),
     * else as a new run; flushes first when the batch is full or the packet goes from another socket or with
     * another traffic class.
     *
     * @param from the sending device (counts)
     * @param p    the packet
     * @param ep   the endpoint (socket) it leaves from: the one of its SGID
     */
    void add(SoftDevice from, Packet p, RoceEndpoint ep) {
        Gid sgid = p.sgid;
        if (txRuns > 0 && (ep != txEp || p.trafficClass != ep.trafficClass)) {
            flush(); // one sendmmsg per socket, and the traffic class is a socket option
        }
        if (txRuns == TX_RUNS || txEnd + RoceLink.SLOT_BYTES > TX_BYTES) {
            flush();
        }
        long at = txEnd;
        int len = txPkt.build(txBuf, at, p.opcode, p.payloadLen);
        Bth bth = txPkt.bth();
        // rxe init_req_packet / prepare_ack_packet: MigReq 0, default P_Key, TVer 0
        bth.solicited(p.solicited).destQp(p.destQpn).ackReq(p.ackReq).psn(p.psn).pkey(p.pkey);
        int m = txPkt.mask();
        if ((m & org.rdma4j.wire.RoceOpcode.M_RETH) != 0) {
            Reth r = txPkt.reth();
            r.va(p.va).rkey(p.rkey).dmaLength(p.dmaLen);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_ATMETH) != 0) {
            AtomicEth a = txPkt.atomicEth();
            a.va(p.va).rkey(p.rkey).swapAdd(p.swapAdd).compare(p.compare);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_IMMDT) != 0) {
            txPkt.immDt().imm(p.imm);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_AETH) != 0) {
            txPkt.aeth().syndrome(p.syndrome).msn(p.msn);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_ATMACK) != 0) {
            AtomicAckEth a = txPkt.atomicAckEth();
            a.origRemoteData(p.origValue);
        }
        if ((m & org.rdma4j.wire.RoceOpcode.M_DETH) != 0) {
            Deth d = txPkt.deth();
            d.qkey(p.qkey).srcQp(p.srcQpn);
        }
        if (p.payloadLen > 0) {
            txSgl.set(txBuf, txPkt.payloadOffset(), p.payloadLen);
            try {
                Sgl.transfer(p.payload, p.payloadOff, txSgl, 0, p.payloadLen);
            } catch (IllegalStateException | IndexOutOfBoundsException fault) {
                // The device may not read the source any more (an IOMMU mapping removed since the WQE
                // started): the packet is not sent, as a DMA read fault stops a NIC's transmit; RC
                // retransmits it, and the local fault repeats until the retry count runs out.
                from.count(SoftCounter.ROCE_TX_ERRORS);
                return;
            }
        }
        if (p.trafficClass != ep.trafficClass) {
            try {
                ep.socket.setTrafficClass(p.trafficClass); // a system call: only when the class changes
                ep.trafficClass = p.trafficClass;
            } catch (IOException e) {
                from.count(SoftCounter.ROCE_TX_ERRORS);
                return;
            }
        }
        // Join the open run (one UDP GSO send) if the kernel will cut it there: same socket and destination,
        // every segment the size of the first but the last, which may be shorter, at most 64 and < 64 KiB.
        int r = txRuns - 1;
        boolean join = r >= 0 && ep.gso && !runClosed[r] && p.dgid.equals(runGid[r]) && len <= runSeg[r]
                && runCount[r] < DatagramBatch.MAX_SEGMENTS && runLen[r] + len <= GSO_MAX_BYTES;
        int ipId;
        if (join) {
            // Linux numbers the segments of a GSO send from the ID the whole skb got (0: unconnected, DF;
            // ip_select_ident_segs) upwards (inet_gso_segment), and the ICRC covers each one's ID:
            // measured in docs/roce-udp.md and checked on every captured packet by SoftRoceGsoCaptureTest.
            ipId = runCount[r];
            runCount[r]++;
            runLen[r] += len;
            runClosed[r] = len < runSeg[r];
        } else {
            r = txRuns++;
            runOff[r] = at;
            runSeg[r] = len;
            runLen[r] = len;
            runCount[r] = 1;
            runClosed[r] = false;
            if (!p.dgid.equals(txToGid)) {
                RoceLink.setAddress(txTo, p.dgid, udpPort, txGidBytes);
                txToGid = p.dgid;
            }
            runGid[r] = p.dgid;
            txBatch.address(r).set(txTo);
            ipId = 0;
            if (r == 0) {
                txEp = ep;
            }
        }
        RoceLink.fill(txIp, sgid, p.dgid, ep.socket.localPort(), udpPort);
        if (!ep.ipv6) {
            txIp.ipId(ipId);
        }
        txPkt.seal(txIcrc, txIp);
        txEnd = at + len;
    }

    /**
     * Sends the packets queued since the last flush: one {@code sendmmsg} whose entries are runs of packets, each
     * run one UDP GSO datagram train; what the kernel refuses is tried again for a while, then counted lost.
     */
    void flush() {
        int n = txRuns;
        if (n == 0) {
            return;
        }
        RoceEndpoint ep = txEp;
        txRuns = 0;
        txEnd = 0;
        txEp = null;
        if (link.closed()) {
            return;
        }
        for (int i = 0; i < n; i++) {
            txBatch.setSlice(i, txBuf, runOff[i], runLen[i]);
            txBatch.setSegmentSize(i, runCount[i] > 1 ? runSeg[i] : 0);
        }
        int i = 0;
        long backoff = 0;
        long refusedSince = 0;
        while (i < n) {
            try {
                int sent = ep.socket.sendBatch(txBatch, i, n - i);
                for (int k = i; k < i + sent; k++) {
                    if (runCount[k] > 1) {
                        device.count(SoftCounter.ROCE_GSO_SENDS);
                    }
                }
                if (sent <= 0) {
                    // EAGAIN: the send buffer is full (a send timeout passed, or a non-blocking socket)
                    if ((refusedSince = refused(i, n, refusedSince, backoff = nextBackoff(backoff))) < 0) {
                        return;
                    }
                    continue;
                }
                i += sent;
                backoff = 0;
                refusedSince = 0;
            } catch (NativeIOException e) {
                if (e.errno() == Errors.ENOBUFS) {
                    // the device queue or the qdisc is full (reported when the socket asks for errors: IP_RECVERR)
                    if ((refusedSince = refused(i, n, refusedSince, backoff = nextBackoff(backoff))) < 0) {
                        return;
                    }
                    continue;
                }
                if (runCount[i] > 1 && (e.errno() == Errors.EINVAL || e.errno() == Errors.EIO)) {
                    // The kernel refused the GSO send (udp_send_skb: e.g. no checksum offload on the route):
                    // count it, stop asking on this socket, and send the run's packets one by one.
                    device.count(SoftCounter.ROCE_GSO_REFUSED);
                    ep.gso = false;
                    for (int k = i; k < n; k++) {
                        sendSeparately(ep, k); // the rest of this flush too: its trains were sealed for GSO
                    }
                    return;
                } else {
                    device.count(SoftCounter.ROCE_TX_ERRORS, runCount[i]); // lost; RC retransmits
                }
                i++;
            } catch (IOException e) {
                countLost(i, n);
                return;
            }
        }
    }

    /** Back-off after a refused send: 10 us, doubling to 1 ms. */
    private static long nextBackoff(long ns) {
        return ns == 0 ? 10_000 : Math.min(ns * 2, 1_000_000);
    }

    /** How long a flush keeps trying to send what the kernel refuses before it counts the rest lost. */
    private static final long REFUSED_BUDGET_NS = 20_000_000;

    /**
     * The kernel refused runs [from, to) for want of buffer space: counted, kept, and tried again after {@code
     * backoffNs} (under the link's transmit lock; the socket is full, so the other senders would wait anyway),
     * unless the refusals have lasted longer than {@link #REFUSED_BUDGET_NS}: then the runs are lost (counted;
     * RC retransmits).
     *
     * @return when the refusals began (to pass back), or -1 when the runs were given up
     */
    private long refused(int from, int to, long since, long backoffNs) {
        long now = System.nanoTime();
        device.count(SoftCounter.ROCE_TX_REFUSED, runCount[from]);
        if (since != 0 && now - since > REFUSED_BUDGET_NS || link.closed()) {
            countLost(from, to);
            return -1;
        }
        java.util.concurrent.locks.LockSupport.parkNanos(this, backoffNs);
        return since == 0 ? now : since;
    }

    private void countLost(int from, int to) {
        for (int k = from; k < to; k++) {
            device.count(SoftCounter.ROCE_TX_ERRORS, runCount[k]);
        }
    }

    /** Sends the packets of run {@code r} one datagram each, resealed for the ID 0 each one now carries. */
    private void sendSeparately(RoceEndpoint ep, int r) {
        long off = runOff[r];
        long end = off + runLen[r];
        SockAddr to = txBatch.address(r);
        RoceLink.fill(txIp, ep.gid, runGid[r], ep.socket.localPort(), udpPort);
        while (off < end) {
            int len = (int) Math.min(runSeg[r], end - off);
            if (!ep.ipv6 && off != runOff[r] && txPkt.wrap(txBuf, off, len) == RoceStatus.OK) {
                txPkt.seal(txIcrc, txIp); // ipId 0
            }
            try {
                if (ep.socket.send(txBuf.asSlice(off, len), to) < 0) {
                    device.count(SoftCounter.ROCE_TX_ERRORS);
                }
            } catch (IOException e) {
                device.count(SoftCounter.ROCE_TX_ERRORS);
            }
            off += len;
        }
    }

    /** Forgets what is queued and frees the buffer (the link's close; later flushes send nothing). */
    void free() {
        txRuns = 0;
        txEnd = 0;
        txEp = null;
        if (arena.scope().isAlive()) {
            arena.close();
        }
    }

    /** {@return whether {@link #free} has freed the buffer} */
    boolean freed() {
        return !arena.scope().isAlive();
    }
}
