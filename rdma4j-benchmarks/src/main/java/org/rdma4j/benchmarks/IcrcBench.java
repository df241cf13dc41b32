// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.rdma4j.wire.Icrc;
import org.rdma4j.wire.PseudoHeader;
import org.rdma4j.wire.Roce;
import org.rdma4j.wire.RoceOpcode;
import org.rdma4j.wire.RocePacket;
import org.rdma4j.wire.RoceParser;
import org.rdma4j.wire.RoceStatus;

/**
 * The RoCEv2 ICRC and parser per packet, on an RC SEND_ONLY of {@code size} payload bytes in native memory
 * (as a UDP socket buffer). Baseline {@link #crc32}: a bare {@link CRC32} over the same number of bytes of a
 * heap array, i.e. the intrinsic's throughput; ratio = crc32 ns/op / X ns/op (1.0 = the ICRC adds nothing).
 * {@link #solveId} receives with a random IPv4 ID it has to solve for (cached basis per length),
 * {@link #parseSolve} is the whole receive check (structure + solved ICRC). Run with {@code -prof gc} to see
 * that none allocates.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class IcrcBench {
    @Param({"64", "1024", "4096"})
    public int size;

    private Arena arena;
    private MemorySegment pkt;
    private int len;
    private byte[] heap;
    private final CRC32 crc = new CRC32();
    private final Icrc icrc = new Icrc();
    private final RoceParser parser = new RoceParser(RoceParser.IcrcCheck.SOLVE_IPV4_ID);
    private final RocePacket packet = new RocePacket();
    private final PseudoHeader sender = new PseudoHeader();
    private final PseudoHeader receiver = new PseudoHeader();

    @Setup
    public void setup() {
        arena = Arena.ofShared();
        pkt = arena.allocate(size + 64, 64);
        sender.ipv4(0xC0A8010A, 0xC0A80114).ipId(0x1234).ports(Roce.sourcePort(0x11), Roce.UDP_PORT);
        receiver.ipv4(0xC0A8010A, 0xC0A80114).ports(Roce.sourcePort(0x11), Roce.UDP_PORT); // ID unknown: 0
        len = packet.build(pkt, 0, RoceOpcode.RC | RoceOpcode.SEND_ONLY, size);
        packet.bth().destQp(0x12).psn(7).ackReq(true);
        for (int i = 0; i < size; i++) {
            pkt.set(java.lang.foreign.ValueLayout.JAVA_BYTE, packet.payloadOffset() + i, (byte) i);
        }
        packet.seal(icrc, sender);
        heap = new byte[len + 8 + 28];
        // checked before timing: the receive path must accept the packet and find the sender's ID
        if (parser.parse(packet, pkt, 0, len, receiver) != RoceStatus.OK || parser.lastIpv4Id() != 0x1234) {
            throw new IllegalStateException("benchmark packet does not verify");
        }
    }

    @TearDown
    public void tearDown() {
        arena.close();
    }

    /** Baseline: java.util.zip.CRC32 over as many bytes as the ICRC covers (8 + 28 + len - 4). */
    @Benchmark
    public long crc32() {
        crc.reset();
        crc.update(heap, 0, heap.length - 4);
        return crc.getValue();
    }

    /** The ICRC a sender computes. */
    @Benchmark
    public int compute() {
        return icrc.compute(sender, pkt, 0, len);
    }

    /** The receiver's ICRC check with an IPv4 ID it must solve for. */
    @Benchmark
    public int solveId() {
        return icrc.solveIpv4Id(receiver, pkt, 0, len);
    }

    /** The whole receive check: structure, then the ICRC with the ID solved. */
    @Benchmark
    public RoceStatus parseSolve() {
        return parser.parse(packet, pkt, 0, len, receiver);
    }
}
