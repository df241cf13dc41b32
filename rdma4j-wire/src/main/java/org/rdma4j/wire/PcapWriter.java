// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire;

import java.io.Closeable;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Writes RoCEv2 packets to a classic libpcap file (LINKTYPE_ETHERNET, microsecond timestamps) that
 * Wireshark/tshark decode as "RRoCE": each record is an Ethernet II header, an IPv4 or IPv6 header built
 * from a {@link PseudoHeader} the way rxe builds it (prepare_ipv4_hdr / prepare_ipv6_hdr), a UDP header with
 * checksum 0 on IPv4 as rxe's prepare_udp_hdr (a computed one on IPv6), and the UDP payload as given (BTH through ICRC). For captures of the soft
 * device and for tests. Not thread-safe.
 */
public final class PcapWriter implements Closeable {
    /** pcap magic for microsecond timestamps, written in the file's (little-endian) byte order. */
    public static final int MAGIC = 0xA1B2C3D4;
    /** Link type of Ethernet II frames. */
    public static final int LINKTYPE_ETHERNET = 1;
    /** Largest frame recorded. */
    public static final int SNAPLEN = 65535;
    private static final int ETH_LEN = 14;

    private final WritableByteChannel out;
    private final ByteBuffer record = ByteBuffer.allocate(16 + ETH_LEN + Ipv6Header.LENGTH + UdpHeader.LENGTH)
            .order(ByteOrder.LITTLE_ENDIAN);
    private final MemorySegment headers = MemorySegment.ofBuffer(record);
    private final Ipv4Header ip4 = new Ipv4Header();
    private final Ipv6Header ip6 = new Ipv6Header();
    private final UdpHeader udp = new UdpHeader();
    private final byte[] srcMac;
    private final byte[] dstMac;
    private int ttl = 64;
    private int trafficClass;
    private boolean ipv4UdpChecksum;

    /**
     * Starts a pcap file of Ethernet frames.
     *
     * @param out where the file goes; the global header is written at once
     * @param srcMac Ethernet source address (6 bytes)
     * @param dstMac Ethernet destination address (6 bytes)
     * @throws IOException from the channel
     */
    public PcapWriter(WritableByteChannel out, byte[] srcMac, byte[] dstMac) throws IOException {
        if (srcMac.length != 6 || dstMac.length != 6) {
            throw new IllegalArgumentException("MAC addresses have 6 bytes");
        }
        this.out = out;
        this.srcMac = srcMac.clone();
        this.dstMac = dstMac.clone();
        ByteBuffer g = ByteBuffer.allocate(24).order(ByteOrder.LITTLE_ENDIAN);
        g.putInt(MAGIC).putShort((short) 2).putShort((short) 4).putInt(0).putInt(0).putInt(SNAPLEN)
                .putInt(LINKTYPE_ETHERNET).flip();
        writeFully(g);
    }

    /**
     * Creates (or truncates) a file with locally administered MACs 02:00:00:00:00:01 -&gt; 02:00:00:00:00:02.
     *
     * @param file the pcap file
     * @return a writer
     * @throws IOException if the file cannot be written
     */
    public static PcapWriter create(Path file) throws IOException {
        FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING);
        return new PcapWriter(ch, new byte[] {2, 0, 0, 0, 0, 1}, new byte[] {2, 0, 0, 0, 0, 2});
    }

    /**
     * Sets the IPv4 TTL / IPv6 hop limit of the following records (default 64).
     *
     * @param v IPv4 TTL / IPv6 hop limit of the following records (default 64)
     * @return this
     */
    public PcapWriter ttl(int v) {
        ttl = v & 0xFF;
        return this;
    }

    /**
     * Sets the IPv4 TOS / IPv6 traffic class of the following records (default 0).
     *
     * @param v IPv4 TOS / IPv6 traffic class of the following records (default 0)
     * @return this
     */
    public PcapWriter trafficClass(int v) {
        trafficClass = v & 0xFF;
        return this;
    }

    /**
     * Sets whether IPv4 frames carry a computed UDP checksum (default false: 0, as rxe sends; IPv6 frames always carry one, as the kernel's UDP stack sends them).
     *
     * @param v whether IPv4 frames carry a computed UDP checksum (default false: 0, as rxe sends; IPv6 frames
     *          always carry one, as the kernel's UDP stack sends them)
     * @return this
     */
    public PcapWriter ipv4UdpChecksum(boolean v) {
        ipv4UdpChecksum = v;
        return this;
    }

    /**
     * Appends one frame (allocates a copy of the payload: a capture tool, not a data path).
     *
     * @param timeNanos capture time, nanoseconds since the epoch (microseconds are kept)
     * @param ip        addresses, ports and IPv4 ID/flags of the frame
     * @param seg       memory holding the UDP payload
     * @param off       offset of the BTH
     * @param len       UDP payload length
     * @throws IOException from the channel
     */
    public void write(long timeNanos, PseudoHeader ip, MemorySegment seg, long off, int len) throws IOException {
        int ipLen = ip.ipHeaderLength();
        int udpLen = UdpHeader.LENGTH + len;
        int frame = ETH_LEN + ipLen + udpLen;
        if (udpLen > 0xFFFF) {
            throw new IllegalArgumentException("UDP payload too long: " + len);
        }
        record.clear();
        long micros = Math.floorDiv(timeNanos, 1000L);
        record.putInt((int) Math.floorDiv(micros, 1_000_000L)).putInt((int) Math.floorMod(micros, 1_000_000L))
                .putInt(Math.min(frame, SNAPLEN)).putInt(frame);
        record.put(dstMac).put(srcMac).order(ByteOrder.BIG_ENDIAN).putShort((short) (ip.isIpv6() ? 0x86DD : 0x0800))
                .order(ByteOrder.LITTLE_ENDIAN);
        long ipOff = 16 + ETH_LEN;
        if (ip.isIpv6()) {
            ip6.wrap(headers, ipOff).init(udpLen, trafficClass, ttl, Gids.of(ip.ipv6SourceHi(), ip.ipv6SourceLo()),
                    Gids.of(ip.ipv6DestinationHi(), ip.ipv6DestinationLo()));
        } else {
            ip4.wrap(headers, ipOff).init(udpLen, ip.ipId(), ttl, ip.ipv4Source(), ip.ipv4Destination());
            ip4.tos(trafficClass).flagsFragment(ip.flagsFragment()).updateChecksum();
        }
        udp.wrap(headers, ipOff + ipLen).sourcePort(ip.sourcePort()).destinationPort(ip.destinationPort()).length(udpLen)
                .checksum(0);
        if (ip.isIpv6() || ipv4UdpChecksum) {
            udp.checksum(udp.computeChecksum(ip, seg, off)); // IPv6 forbids 0 (RFC 8200 8.1)
        }
        record.position((int) (ipOff + ipLen + UdpHeader.LENGTH)).flip();
        writeFully(record);
        ByteBuffer body = ByteBuffer.wrap(seg.asSlice(off, len).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
        writeFully(body);
    }

    private void writeFully(ByteBuffer b) throws IOException {
        for (int spins = 0; b.hasRemaining(); spins++) {
            if (out.write(b) == 0 && spins > 1000) {
                throw new IOException("channel accepts no bytes");
            }
        }
    }

    @Override
    public void close() throws IOException {
        out.close();
    }
}
