// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import jdk.net.ExtendedSocketOptions;

/**
 * perftest's out-of-band exchange over TCP ("Data ex. method : Ethernet"), byte for byte as
 * shared/reference/roce-wire.md §5.2 describes it: fixed-size messages with no framing, where in every
 * exchange ({@code ctx_xchg_data}, {@code ctx_hand_shake}) the client writes then reads and the server
 * reads then writes.
 */
public final class PerftestWire {
    /**
     * The version this side sends. perftest 6.28 and later also exchange a binary
     * {@code perftest_parameters_negotiate} with a raw host-endian {@code struct ibv_device_attr} when
     * the <em>peer</em> is at least 6.28 (roce-wire.md §5.2 step 5); advertising 6.27 makes a real
     * perftest skip it, and rdma4j never sends it either (each side checks the remote version).
     */
    public static final String WIRE_VERSION = "6.27";
    /** check_version_compatibility: older peers are refused. */
    public static final double MIN_PEER_VERSION = 5.70;
    /** char version[MAX_VERSION]. */
    public static final int VERSION_BYTES = 16;
    /** KEY_MSG_SIZE: the keys message without a GID, NUL included. */
    public static final int KEY_MSG_SIZE = 59;
    /** KEY_MSG_SIZE_GID: the keys message with a GID, NUL included. */
    public static final int KEY_MSG_SIZE_GID = 108;
    /** DEF_PAGE_SIZE: perftest's cycle_buffer, exchanged by check_sys_data. */
    public static final int CYCLE_BUFFER = 4096;
    /** DEF_CACHE_LINE_SIZE, exchanged by check_sys_data. */
    public static final int CACHE_LINE_SIZE = 64;

    private PerftestWire() {
    }

    /** A malformed or unexpected message from the peer, or a peer perftest refuses. */
    public static final class WireException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        WireException(String message) {
            super(message);
        }
    }

    // ---------------------------------------------------------------- encodings

    /**
     * {@return {@code char version[16]}, NUL-padded}
     *
     * @param version e.g. {@code "6.27"}
     */
    public static byte[] encodeVersion(String version) {
        byte[] b = new byte[VERSION_BYTES];
        byte[] v = version.getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(v, 0, b, 0, Math.min(v.length, VERSION_BYTES - 1));
        return b;
    }

    /**
     * {@return the text up to the first NUL}
     *
     * @param b 16 bytes from the peer
     */
    public static String decodeVersion(byte[] b) {
        int n = 0;
        while (n < b.length && b[n] != 0) {
            n++;
        }
        return new String(b, 0, n, StandardCharsets.US_ASCII);
    }

    /**
     * perftest compares versions with {@code atof}: the leading decimal number, 0 when there is none.
     *
     * @param version the peer's version text
     * @return its numeric value
     */
    public static double versionNumber(String version) {
        int i = 0;
        while (i < version.length() && (Character.isDigit(version.charAt(i)) || version.charAt(i) == '.')) {
            i++;
        }
        String num = version.substring(0, i);
        int second = num.indexOf('.', num.indexOf('.') + 1);
        if (second > 0) {
            num = num.substring(0, second);
        }
        try {
            return num.isEmpty() || num.equals(".") ? 0 : Double.parseDouble(num);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /**
     * check_mtu's message for a peer at 5.31 or later: the MTU enum as ASCII in 2 bytes ({@code "3\0"}).
     *
     * @param mtuEnum 1 (256) … 5 (4096)
     * @return two bytes
     */
    public static byte[] encodeMtu(int mtuEnum) {
        return new byte[] {(byte) ('0' + mtuEnum), 0};
    }

    /**
     * {@return its MTU enum, or 0 when it is not a valid one (perftest then keeps its own)}
     *
     * @param b the peer's two bytes
     */
    public static int decodeMtu(byte[] b) {
        int v = 0;
        for (int i = 0; i < b.length && b[i] >= '0' && b[i] <= '9'; i++) {
            v = v * 10 + (b[i] - '0');
        }
        return v >= 1 && v <= 5 ? v : 0;
    }

    /**
     * The keys message (ethernet_write_keys): {@code KEY_PRINT_FMT} (59 bytes) without a GID,
     * {@code KEY_PRINT_FMT_GID} (108 bytes) with one; NUL-terminated. The SRQ number is 0 (no XRC/DC).
     *
     * @param d       the QP to describe
     * @param withGid the sender's gid_index is not -1
     * @return the message
     */
    public static byte[] encodeKeys(PerftestFormat.Dest d, boolean withGid) {
        StringBuilder sb = new StringBuilder(KEY_MSG_SIZE_GID);
        sb.append(CFormat.hex(d.lid() & 0xFFFF, 4)).append(':').append(CFormat.hex(d.outReads() & 0xFFFF, 4))
                .append(':').append(CFormat.hex(d.qpn() & 0xFFFFFFL, 6)).append(':')
                .append(CFormat.hex(d.psn() & 0xFFFFFFL, 6)).append(':')
                .append(CFormat.hex(d.rkey() & 0xFFFFFFFFL, 8)).append(':').append(CFormat.hex(d.vaddr(), 16));
        if (withGid) {
            sb.append(':');
            for (byte g : d.gid()) {
                sb.append(CFormat.hex(g & 0xFF, 2)).append(':');
            }
            sb.append(CFormat.hex(0, 8)).append(':');
        } else {
            sb.append(':').append(CFormat.hex(0, 8));
        }
        byte[] text = sb.toString().getBytes(StandardCharsets.US_ASCII);
        byte[] msg = new byte[withGid ? KEY_MSG_SIZE_GID : KEY_MSG_SIZE];
        if (text.length != msg.length - 1) {
            throw new IllegalStateException("keys message is " + text.length + " chars");
        }
        System.arraycopy(text, 0, msg, 0, text.length);
        return msg;
    }

    /**
     * ethernet_read_keys: the fields in order, each hexadecimal and ':'-separated.
     *
     * @param msg     the message as received
     * @param withGid this side's gid_index is not -1 (perftest picks the format from its own setting)
     * @return the peer's QP
     * @throws WireException when the text does not parse
     */
    public static PerftestFormat.Dest decodeKeys(byte[] msg, boolean withGid) {
        int len = 0;
        while (len < msg.length && msg[len] != 0) {
            len++;
        }
        String text = new String(msg, 0, len, StandardCharsets.US_ASCII);
        String[] f = text.split(":", -1);
        int need = withGid ? 23 : 7;
        if (f.length < need) {
            throw new WireException("Couldn't parse line <" + text + "> (" + f.length + " fields; expected " + need
                    + (withGid ? ", with a GID: does the peer use a GID index too? (-x)" : "") + ")");
        }
        try {
            int lid = Integer.parseInt(f[0], 16);
            int outReads = Integer.parseInt(f[1], 16);
            int qpn = Integer.parseInt(f[2], 16);
            int psn = Integer.parseInt(f[3], 16);
            int rkey = (int) Long.parseLong(f[4], 16);
            long vaddr = Long.parseUnsignedLong(f[5], 16);
            byte[] gid = new byte[16];
            if (withGid) {
                for (int i = 0; i < 16; i++) {
                    gid[i] = (byte) Integer.parseInt(f[6 + i], 16);
                }
            }
            return new PerftestFormat.Dest(lid, qpn, psn, rkey, vaddr, gid, outReads);
        } catch (NumberFormatException e) {
            throw new WireException("Couldn't parse line <" + text + ">: " + e.getMessage());
        }
    }

    /**
     * {@return its 8 bytes in network order (hton_long)}
     *
     * @param v a 64-bit value
     */
    public static byte[] u64(long v) {
        return ByteBuffer.allocate(8).putLong(v).array();
    }

    /**
     * {@return its 8 bytes byte-swapped to big-endian (perftest's bswap_double on a little-endian host)}
     *
     * @param v a double
     */
    public static byte[] f64(double v) {
        return ByteBuffer.allocate(8).putDouble(v).array();
    }

    /**
     * {@return its 4 bytes in network order (hton_int)}
     *
     * @param v a 32-bit value
     */
    public static byte[] u32(int v) {
        return ByteBuffer.allocate(4).putInt(v).array();
    }

    // ---------------------------------------------------------------- the connection

    /** A read on the connection ended because Ctrl-C was pressed and the peer stayed silent. */
    static final class StoppedException extends IOException {
        private static final long serialVersionUID = 1L;

        StoppedException() {
            super("stopped (Ctrl-C) while waiting for the peer");
        }
    }

    /**
     * How the exchange's messages travel: a TCP stream ({@link #accept}, {@link #connect}: "Data ex. method :
     * Ethernet") or the SENDs of an RC QP that rdma_cm connected ({@code -R}: "Data ex. method : rdma_cm",
     * {@link PerftestCm}). Every read ends: with the peer's bytes, with an error when the peer closed the
     * connection, after the timeout if one is set, or when a {@link StopSignal} was raised and the peer stays
     * silent for {@link Channel#STOP_GRACE_NS}.
     */
    interface Transport extends Closeable {
        /**
         * @param b one message (TCP: bytes on the stream; rdma_cm: one SEND of exactly these bytes)
         * @throws IOException on a closed connection
         */
        void write(byte[] b) throws IOException;

        /**
         * @param r filled with the peer's next {@code r.length} bytes (rdma_cm: the next message's first bytes)
         * @throws IOException on a closed or silent connection
         */
        void readFully(byte[] r) throws IOException;

        /**
         * @return whether bytes from the peer wait to be read (does not block)
         * @throws IOException when this side is closed
         */
        boolean hasBytes() throws IOException;

        /**
         * @return 1 when bytes from the peer wait, -1 when it closed the connection, 0 when neither
         * @throws IOException when this side is closed
         */
        int peerState() throws IOException;

        /** @param ms how long a read waits for the peer from now on (0: no limit) */
        void timeoutMs(int ms);

        /** @param s ends reads once raised and the peer stays silent (null: none) */
        void stopOn(StopSignal s);

        /** @return whether the keys message is perftest's binary {@code struct pingpong_dest} (rdma_cm) */
        boolean binaryKeys();
    }

    /**
     * The exchange with the peer, in the client or server role, over a {@link Transport}: the same messages
     * in the same order on both ("ctx_xchg_data": the client writes then reads, the server reads then
     * writes); only the keys message differs (text over TCP, {@code struct pingpong_dest} over rdma_cm).
     */
    public static final class Channel implements Closeable {
        /**
         * After Ctrl-C a hand-shake still completes if the peer answers within this time (in --loopback the
         * other role stops too, and both print what they measured); a peer that stays silent no longer holds
         * the process.
         */
        static final long STOP_GRACE_NS = TimeUnit.SECONDS.toNanos(2);

        private final Transport t;
        private final boolean client;
        private String peerVersion = WIRE_VERSION;

        Channel(Transport t, boolean client) {
            this.t = t;
            this.client = client;
        }

        /**
         * ethernet_server_connect: bind the port with SO_REUSEADDR, accept one client, stop listening.
         *
         * @param port      the TCP port (0: any; see {@code onBound})
         * @param timeoutMs how long to wait for the client and for each later message (0: forever)
         * @param onBound   told the bound port before accepting (may be null)
         * @return the connection
         * @throws IOException when the port cannot be bound or nobody connects in time
         */
        public static Channel accept(int port, int timeoutMs, java.util.function.IntConsumer onBound)
                throws IOException {
            return accept(port, timeoutMs, onBound, null);
        }

        /**
         * {@link #accept(int, int, java.util.function.IntConsumer)} that Ctrl-C interrupts.
         *
         * @param port      the TCP port (0: any; see {@code onBound})
         * @param timeoutMs how long to wait for the client and for each later message (0: forever)
         * @param onBound   told the bound port before accepting (may be null)
         * @param stop      closes the listening socket when raised (may be null)
         * @return the connection
         * @throws IOException when the port cannot be bound, nobody connects in time, or a stop closed it
         */
        static Channel accept(int port, int timeoutMs, java.util.function.IntConsumer onBound, StopSignal stop)
                throws IOException {
            return new Channel(TcpTransport.accept(port, timeoutMs, onBound, stop), false);
        }

        /**
         * ethernet_client_connect: try each address of the host in turn.
         *
         * @param host      the server's name or address
         * @param port      its port
         * @param timeoutMs connect and read timeout (0: none)
         * @return the connection
         * @throws IOException naming every address tried when none accepts
         */
        public static Channel connect(String host, int port, int timeoutMs) throws IOException {
            return new Channel(TcpTransport.connect(host, port, timeoutMs), true);
        }

        /** @param ms how long a read waits for the peer from now on (0: no limit) */
        void timeoutMs(int ms) {
            t.timeoutMs(ms);
        }

        /** @param s ends reads once raised and the peer stays silent (null: none) */
        void stopOn(StopSignal s) {
            t.stopOn(s);
        }

        /**
         * {@return whether bytes from the peer wait to be read (does not block)}
         *
         * @throws IOException when this side is closed
         */
        boolean hasBytes() throws IOException {
            return t.hasBytes();
        }

        /**
         * Looks, for at most a millisecond, whether the peer sent something or closed the connection;
         * consumes nothing.
         *
         * @return 1 when bytes from the peer wait to be read, -1 when it closed the connection (or it was
         *         reset), 0 when neither
         * @throws IOException when this side is closed
         */
        int peerState() throws IOException {
            return t.peerState();
        }

        /** {@return true on the client side} */
        public boolean isClient() {
            return client;
        }

        /** {@return the peer's version text, once {@link #exchangeVersions} ran} */
        public String peerVersion() {
            return peerVersion;
        }

        /**
         * ctx_xchg_data: the client writes then reads, the server reads then writes, {@code mine.length}
         * bytes each way.
         *
         * @param mine this side's bytes
         * @return the peer's bytes
         * @throws IOException on a closed or silent connection
         */
        public byte[] exchange(byte[] mine) throws IOException {
            byte[] r = new byte[mine.length];
            if (client) {
                t.write(mine);
                t.readFully(r);
            } else {
                t.readFully(r);
                t.write(mine);
            }
            return r;
        }

        /**
         * exchange_versions and check_version_compatibility.
         *
         * @return the peer's version
         * @throws IOException on a connection failure
         * @throws WireException when the peer is older than 5.70
         */
        public String exchangeVersions() throws IOException {
            peerVersion = decodeVersion(exchange(encodeVersion(WIRE_VERSION)));
            if (versionNumber(peerVersion) < MIN_PEER_VERSION) {
                throw new WireException("Current implementation is not compatible with versions older than 5.70"
                        + " (the peer sent version '" + peerVersion + "'"
                        + (peerVersion.isEmpty() ? ": is it a perftest tool?" : "") + ")");
            }
            return peerVersion;
        }

        /**
         * check_sys_data: cycle_buffer then cache_line_size, 4 bytes each in network order; each side
         * takes the larger.
         *
         * @return {cycle buffer, cache line size}
         * @throws IOException on a connection failure
         */
        public int[] exchangeSysData() throws IOException {
            int cycle = ByteBuffer.wrap(exchange(u32(CYCLE_BUFFER))).getInt();
            int line = ByteBuffer.wrap(exchange(u32(CACHE_LINE_SIZE))).getInt();
            return new int[] {Math.max(cycle, CYCLE_BUFFER), Math.max(line, CACHE_LINE_SIZE)};
        }

        /**
         * check_mtu: the MTU enum as 2 ASCII bytes; both sides take the smaller valid value.
         *
         * @param mtuEnum this side's MTU enum
         * @return the MTU enum both use
         * @throws IOException on a connection failure
         */
        public int exchangeMtu(int mtuEnum) throws IOException {
            int peer = decodeMtu(exchange(encodeMtu(mtuEnum)));
            return peer != 0 && peer < mtuEnum ? peer : mtuEnum;
        }

        /**
         * ctx_hand_shake: the keys message each way (text over TCP; over rdma_cm perftest's binary
         * {@code struct pingpong_dest}, {@link #encodeDest}).
         *
         * @param mine    this side's QP
         * @param withGid gid_index is not -1
         * @return the peer's QP
         * @throws IOException on a connection failure
         */
        public PerftestFormat.Dest handShake(PerftestFormat.Dest mine, boolean withGid) throws IOException {
            if (t.binaryKeys()) {
                return decodeDest(exchange(encodeDest(mine, withGid)));
            }
            return decodeKeys(exchange(encodeKeys(mine, withGid)), withGid);
        }

        /**
         * xchg_bw_reports: size, iters, bw_peak, bw_avg, msgRate_avg, each its own exchange, in network
         * order (iters is 8 bytes since 5.33).
         *
         * @param mine this side's report
         * @return the peer's
         * @throws IOException on a connection failure
         */
        public PerftestFormat.Report exchangeReports(PerftestFormat.Report mine) throws IOException {
            long size = ByteBuffer.wrap(exchange(u64(mine.size()))).getLong();
            long iters;
            if (versionNumber(peerVersion) >= 5.33) {
                iters = ByteBuffer.wrap(exchange(u64(mine.iters()))).getLong();
            } else {
                iters = ByteBuffer.wrap(exchange(u32((int) mine.iters()))).getInt() & 0xFFFFFFFFL;
            }
            double peak = ByteBuffer.wrap(exchange(f64(mine.bwPeak()))).getDouble();
            double avg = ByteBuffer.wrap(exchange(f64(mine.bwAvg()))).getDouble();
            double rate = ByteBuffer.wrap(exchange(f64(mine.msgRateMpps()))).getDouble();
            return new PerftestFormat.Report(size, iters, peak, avg, rate);
        }

        @Override
        public void close() throws IOException {
            t.close();
        }

        @Override
        public String toString() {
            return (client ? "client " : "server ") + t + ", peer version " + peerVersion;
        }
    }

    // ---------------------------------------------------------------- struct pingpong_dest (rdma_cm)

    /** sizeof(struct pingpong_dest) on x86-64: the keys message over rdma_cm (perftest_resources.h). */
    public static final int DEST_SIZE = 56;

    /**
     * rdma_write_keys: {@code struct pingpong_dest} as perftest sends it when built with endian.h (HAVE_ENDIAN,
     * which glibc has): lid, out_reads, qpn, psn, rkey in network order at 0, 4, 8, 12, 16; 4 bytes of padding;
     * vaddr in network order at 24; the GID at 32; srqn and gid_index in network order at 48 and 52.
     *
     * @param d       the QP
     * @param withGid gid_index is not -1 (the index field says so: 0, else -1)
     * @return 56 bytes
     */
    public static byte[] encodeDest(PerftestFormat.Dest d, boolean withGid) {
        ByteBuffer b = ByteBuffer.allocate(DEST_SIZE);
        b.putInt(d.lid()).putInt(d.outReads()).putInt(d.qpn()).putInt(d.psn()).putInt(d.rkey()).putInt(0)
                .putLong(d.vaddr()).put(d.gid().length == 16 ? d.gid() : new byte[16]).putInt(0).putInt(withGid ? 0 : -1);
        return b.array();
    }

    /**
     * rdma_read_keys: the fields {@link #encodeDest} writes (perftest reads neither srqn nor gid_index back).
     *
     * @param b the message (at least 48 bytes)
     * @return the peer's QP
     * @throws WireException for a message shorter than the fields
     */
    public static PerftestFormat.Dest decodeDest(byte[] b) {
        if (b.length < 48) {
            throw new WireException("the keys message has " + b.length + " bytes; struct pingpong_dest has " + DEST_SIZE);
        }
        ByteBuffer bb = ByteBuffer.wrap(b);
        int lid = bb.getInt(0);
        int outReads = bb.getInt(4);
        int qpn = bb.getInt(8);
        int psn = bb.getInt(12);
        int rkey = bb.getInt(16);
        long vaddr = bb.getLong(24);
        byte[] gid = java.util.Arrays.copyOfRange(b, 32, 48);
        return new PerftestFormat.Dest(lid, qpn, psn, rkey, vaddr, gid, outReads);
    }

    // ---------------------------------------------------------------- TCP

    /** The exchange over TCP ("Data ex. method : Ethernet"), with keepalive so a vanished peer host is noticed. */
    private static final class TcpTransport implements Transport {
        /** Reads wait in slices of this length, so that they notice a stop. */
        static final int SLICE_MS = 100;
        /** TCP keepalive on the connection: idle time before the first probe, seconds. */
        static final int KEEPALIVE_IDLE_S = 10;
        private static final int KEEPALIVE_INTERVAL_S = 5;
        private static final int KEEPALIVE_PROBES = 3;

        private final Socket socket;
        private final InputStream in;
        private final OutputStream out;
        /** How long a read waits for the peer (0: no limit). */
        private int timeoutMs;
        /** Ends reads after Ctrl-C, or null. */
        private StopSignal stop;
        /** A byte {@link #peerState()} read ahead, or -1. */
        private int peeked = -1;

        private TcpTransport(Socket socket, int timeoutMs) throws IOException {
            this.socket = socket;
            this.timeoutMs = timeoutMs;
            socket.setTcpNoDelay(true);
            socket.setSoTimeout(SLICE_MS);
            keepAlive(socket);
            this.in = socket.getInputStream();
            this.out = socket.getOutputStream();
        }

        /** A peer host that vanished (no FIN, no RST) is found by keepalive probes rather than never. */
        private static void keepAlive(Socket s) throws IOException {
            s.setKeepAlive(true);
            try {
                s.setOption(ExtendedSocketOptions.TCP_KEEPIDLE, KEEPALIVE_IDLE_S);
                s.setOption(ExtendedSocketOptions.TCP_KEEPINTERVAL, KEEPALIVE_INTERVAL_S);
                s.setOption(ExtendedSocketOptions.TCP_KEEPCOUNT, KEEPALIVE_PROBES);
            } catch (UnsupportedOperationException e) {
                // the platform's defaults (hours) apply
            }
        }

        static TcpTransport accept(int port, int timeoutMs, java.util.function.IntConsumer onBound, StopSignal stop)
                throws IOException {
            try (ServerSocket ss = new ServerSocket()) {
                if (stop != null) {
                    stop.register(ss);
                }
                try {
                    return acceptOn(ss, port, timeoutMs, onBound);
                } finally {
                    if (stop != null) {
                        stop.unregister(ss);
                    }
                }
            }
        }

        private static TcpTransport acceptOn(ServerSocket ss, int port, int timeoutMs,
                                             java.util.function.IntConsumer onBound) throws IOException {
            ss.setReuseAddress(true);
            try {
                ss.bind(new InetSocketAddress(port), 1);
            } catch (IOException e) {
                throw new IOException("Couldn't listen to port " + port + ": " + e.getMessage(), e);
            }
            if (onBound != null) {
                onBound.accept(ss.getLocalPort());
            }
            ss.setSoTimeout(timeoutMs);
            Socket s;
            try {
                s = ss.accept();
            } catch (SocketTimeoutException e) {
                throw new IOException("No client connected to port " + ss.getLocalPort() + " within "
                        + timeoutMs / 1000 + " s", e);
            }
            return new TcpTransport(s, timeoutMs);
        }

        static TcpTransport connect(String host, int port, int timeoutMs) throws IOException {
            InetAddress[] addrs;
            try {
                addrs = InetAddress.getAllByName(host);
            } catch (UnknownHostException e) {
                throw new IOException("Couldn't resolve " + host + " (" + e.getMessage() + ")", e);
            }
            List<String> tried = new ArrayList<>();
            for (InetAddress a : addrs) {
                Socket s = new Socket();
                try {
                    s.connect(new InetSocketAddress(a, port), timeoutMs);
                    return new TcpTransport(s, timeoutMs);
                } catch (IOException e) {
                    s.close();
                    tried.add(a.getHostAddress() + ":" + port + " (" + e.getMessage() + ")");
                }
            }
            throw new IOException("Couldn't connect to " + host + ":" + port + "; tried " + String.join(", ", tried)
                    + ". Is the server (the same command without a host name) running there?");
        }

        @Override
        public void timeoutMs(int ms) {
            this.timeoutMs = ms;
        }

        @Override
        public void stopOn(StopSignal s) {
            this.stop = s;
        }

        @Override
        public boolean binaryKeys() {
            return false;
        }

        @Override
        public boolean hasBytes() throws IOException {
            return peeked >= 0 || in.available() > 0;
        }

        @Override
        public int peerState() throws IOException {
            if (peeked >= 0 || in.available() > 0) {
                return 1;
            }
            socket.setSoTimeout(1);
            try {
                int b = in.read();
                if (b < 0) {
                    return -1;
                }
                peeked = b;
                return 1;
            } catch (SocketTimeoutException e) {
                return 0;
            } catch (SocketException e) {
                if (socket.isClosed()) {
                    throw e;
                }
                return -1; // connection reset: the peer is gone
            } finally {
                if (!socket.isClosed()) {
                    socket.setSoTimeout(SLICE_MS);
                }
            }
        }

        @Override
        public void write(byte[] b) throws IOException {
            out.write(b);
            out.flush();
        }

        @Override
        public void readFully(byte[] r) throws IOException {
            long start = System.nanoTime();
            long stopSeen = 0;
            int off = 0;
            if (peeked >= 0 && r.length > 0) {
                r[off++] = (byte) peeked;
                peeked = -1;
            }
            while (off < r.length) {
                int n;
                try {
                    n = in.read(r, off, r.length - off);
                } catch (SocketTimeoutException e) {
                    long now = System.nanoTime();
                    if (stop != null && stop.stopped()) {
                        if (stopSeen == 0) {
                            stopSeen = now;
                        } else if (now - stopSeen > Channel.STOP_GRACE_NS) {
                            throw new StoppedException();
                        }
                    }
                    if (timeoutMs > 0 && now - start > TimeUnit.MILLISECONDS.toNanos(timeoutMs)) {
                        throw new IOException("the peer sent nothing for " + timeoutMs / 1000 + " s", e);
                    }
                    continue;
                } catch (SocketException e) {
                    if (socket.isClosed()) {
                        throw e;
                    }
                    throw new IOException("the peer closed the connection (" + e.getMessage() + ")", e);
                }
                if (n < 0) {
                    throw new IOException("the peer closed the connection");
                }
                off += n;
            }
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }

        @Override
        public String toString() {
            return socket.getLocalSocketAddress() + " <-> " + socket.getRemoteSocketAddress();
        }
    }
}
