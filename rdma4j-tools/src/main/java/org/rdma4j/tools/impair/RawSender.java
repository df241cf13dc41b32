// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools.impair;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import org.rdma4j.libc.Libc;
import org.rdma4j.libc.NativeFd;

/**
 * Sends a copy of a whole IP packet, headers as they are, through raw sockets ({@code IPPROTO_RAW},
 * which implies header inclusion for IPv4 and IPv6), with a netfilter mark ({@code SO_MARK}) so that
 * the impairer knows the copy when the NFQUEUE rule queues it again. The kernel keeps the IPv4
 * Identification of a DF packet as it is (an ID of 0 stays 0: {@code raw_send_hdrinc} calls
 * {@code ip_select_ident}, which leaves DF packets at 0), so a RoCEv2 copy still matches its ICRC.
 * Needs CAP_NET_RAW and CAP_NET_ADMIN (the mark). One thread at a time.
 */
public final class RawSender implements AutoCloseable {
    private static final int SO_MARK = 36;
    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED;
    private static final ValueLayout.OfInt BE32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final Arena arena = Arena.ofShared();
    private final MemorySegment st = Libc.newCallState(arena);
    private final MemorySegment addr = arena.allocate(Libc.SOCKADDR_SIZE, 8);
    private final int mark;
    private NativeFd v4;
    private NativeFd v6;

    /**
     * A sender whose copies carry a netfilter mark.
     *
     * @param mark the netfilter mark of every copy (not 0)
     */
    public RawSender(int mark) {
        if (mark == 0) {
            throw new IllegalArgumentException("mark 0 cannot be told from an unmarked packet");
        }
        this.mark = mark;
    }

    /**
     * Sends the packet again.
     *
     * @param packet an IPv4 or IPv6 packet
     * @throws IOException if the socket cannot be opened or the send fails
     */
    public void send(MemorySegment packet) throws IOException {
        int version = (packet.get(ValueLayout.JAVA_BYTE, 0) >> 4) & 0xF;
        addr.fill((byte) 0);
        NativeFd fd;
        int alen;
        if (version == 4) {
            fd = v4 != null ? v4 : (v4 = open(Libc.AF_INET));
            addr.set(U16, 0, (short) Libc.AF_INET);
            addr.set(BE32, 4, packet.get(BE32, 16));
            alen = 16;
        } else if (version == 6) {
            fd = v6 != null ? v6 : (v6 = open(Libc.AF_INET6));
            addr.set(U16, 0, (short) Libc.AF_INET6);
            MemorySegment.copy(packet, 24, addr, 8, 16);
            alen = 28;
        } else {
            throw new IOException("not an IP packet (version " + version + ")");
        }
        fd.enter();
        try {
            if (Libc.sendto(st, fd.fd(), packet, packet.byteSize(), 0, addr, alen) != packet.byteSize()) {
                throw Libc.error("sendto(raw)", st, "a duplicate");
            }
        } finally {
            fd.exit();
        }
    }

    private NativeFd open(int family) throws IOException {
        int fd = Libc.socket(st, family, Libc.SOCK_RAW | Libc.SOCK_CLOEXEC, Libc.IPPROTO_RAW);
        if (fd < 0) {
            throw Libc.error("socket(SOCK_RAW, IPPROTO_RAW)", st, "needs CAP_NET_RAW");
        }
        NativeFd n = new NativeFd(fd);
        MemorySegment v = arena.allocate(4, 4);
        v.set(ValueLayout.JAVA_INT, 0, mark);
        if (Libc.setsockopt(st, fd, Libc.SOL_SOCKET, SO_MARK, v, 4) != 0) {
            IOException e = Libc.error("setsockopt(SO_MARK)", st, "needs CAP_NET_ADMIN");
            n.close();
            throw e;
        }
        return n;
    }

    @Override
    public void close() {
        boolean ok = true;
        if (v4 != null) {
            ok &= v4.close();
        }
        if (v6 != null) {
            ok &= v6.close();
        }
        if (ok) {
            arena.close();
        }
    }
}
