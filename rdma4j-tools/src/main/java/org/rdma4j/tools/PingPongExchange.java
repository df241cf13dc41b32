// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The pingpong programs' out-of-band TCP exchange (rdma-core {@code pp_client_exch_dest} /
 * {@code pp_server_exch_dest}; roce-wire.md 5.1), byte for byte:
 * <ol>
 * <li>client → server: its addresses, 52 bytes each;</li>
 * <li>the server parses them and moves its QPs to RTR and RTS <em>before</em> answering;</li>
 * <li>server → client: its addresses;</li>
 * <li>client → server: {@code "done"} and a NUL (5 bytes); then both close.</li>
 * </ol>
 * rc and ud send one address each way, srq always {@link PingPongOptions#MAX_QP} (unused ones zero).
 * Reads here take exactly the bytes expected even when TCP delivers them in pieces, which rdma-core's
 * single read() of rc/ud assumes.
 */
final class PingPongExchange {
    /** Bound on connecting to the server. */
    static final int CONNECT_TIMEOUT_MS = 10_000;
    /** Bound on each read once connected: the peer answers as soon as its QPs are connected. */
    static final int READ_TIMEOUT_MS = 60_000;

    private PingPongExchange() {
    }

    /** A failed exchange; the message is rdma-core's line, with the cause appended. */
    static final class ExchangeException extends Exception {
        private static final long serialVersionUID = 1L;

        ExchangeException(String message) {
            super(message);
        }
    }

    /** The server's step 2: connect the local QPs to the client's addresses. */
    interface Connector {
        /**
         * @param remote the client's addresses
         * @throws PingPong.RunException with the reason, when a QP cannot be connected
         */
        void connect(PingPongDest[] remote);
    }

    /**
     * Binds the server's listening socket: the wildcard address (IPv4 and IPv6), SO_REUSEADDR,
     * backlog 1, as rdma-core's getaddrinfo(NULL, port, AI_PASSIVE) loop does.
     *
     * @param port the TCP port, 0 for an ephemeral one
     * @return the socket
     * @throws ExchangeException "Couldn't listen to port %d", with the reason
     */
    static ServerSocket listen(int port) throws ExchangeException {
        ServerSocket ss = null;
        try {
            ss = new ServerSocket();
            ss.setReuseAddress(true);
            ss.bind(new InetSocketAddress(port), 1);
            return ss;
        } catch (IOException e) {
            closeQuietly(ss);
            throw new ExchangeException("Couldn't listen to port " + port + " (" + e.getMessage() + ")");
        }
    }

    /**
     * The server side: accepts one client on {@code listener} (then closes it) and runs the exchange.
     *
     * @param listener  from {@link #listen}; closed here
     * @param mine      the local addresses to send (1, or MAX_QP for srq)
     * @param connector moves the local QPs to RTS once the client's addresses are known
     * @param stop      closes the listener on Ctrl-C
     * @return the client's addresses, as many as {@code mine}
     * @throws ExchangeException with rdma-core's wording
     */
    static PingPongDest[] serve(ServerSocket listener, PingPongDest[] mine, Connector connector, StopSignal stop)
            throws ExchangeException {
        Socket s;
        stop.register(listener);
        try {
            s = listener.accept();
        } catch (IOException e) {
            throw new ExchangeException(stop.stopped() ? "interrupted while waiting for a client"
                    : "accept() failed (" + e.getMessage() + ")");
        } finally {
            stop.unregister(listener);
            closeQuietly(listener);
        }
        try (s) {
            s.setSoTimeout(READ_TIMEOUT_MS);
            stop.register(s);
            InputStream in = s.getInputStream();
            OutputStream out = s.getOutputStream();
            PingPongDest[] remote = new PingPongDest[mine.length];
            for (int i = 0; i < mine.length; i++) {
                byte[] msg = readExactly(in, PingPongDest.MESSAGE_BYTES, "Couldn't read remote address"
                        + (mine.length > 1 ? " [" + i + "]" : ""));
                remote[i] = parse(msg);
            }
            connector.connect(remote);
            try {
                for (PingPongDest d : mine) {
                    out.write(d.encode());
                }
                out.flush();
            } catch (IOException e) {
                throw new ExchangeException("Couldn't send/recv local address (" + e.getMessage() + ")");
            }
            byte[] done = readExactly(in, PingPongDest.DONE.length, "Couldn't send/recv local address");
            if (!Arrays.equals(done, PingPongDest.DONE)) {
                throw new ExchangeException("Couldn't send/recv local address (expected \"done\\0\" from the client, got "
                        + hexBytes(done) + ")");
            }
            return remote;
        } catch (IOException e) {
            throw new ExchangeException("Couldn't send/recv local address (" + e.getMessage() + ")");
        } finally {
            stop.unregister(s);
        }
    }

    /**
     * The client side: connects to the server (every address the name resolves to, in turn) and runs
     * the exchange.
     *
     * @param host the server name
     * @param port the TCP port
     * @param mine the local addresses to send
     * @param stop closes the socket on Ctrl-C
     * @return the server's addresses, as many as {@code mine}
     * @throws ExchangeException "Couldn't connect to %s:%d" naming the addresses tried and why each
     *                           failed, or another rdma-core line
     */
    static PingPongDest[] client(String host, int port, PingPongDest[] mine, StopSignal stop)
            throws ExchangeException {
        InetAddress[] addrs;
        try {
            addrs = InetAddress.getAllByName(host);
        } catch (UnknownHostException e) {
            throw new ExchangeException("Name or service not known for " + host + ":" + port);
        }
        Socket s = null;
        List<String> tried = new ArrayList<>();
        for (InetAddress a : addrs) {
            Socket c = new Socket();
            try {
                stop.register(c);
                c.connect(new InetSocketAddress(a, port), CONNECT_TIMEOUT_MS);
                s = c;
                break;
            } catch (IOException e) {
                stop.unregister(c);
                closeQuietly(c);
                tried.add(socketText(a, port) + ": " + e.getMessage());
                if (stop.stopped()) {
                    break;
                }
            }
        }
        if (s == null) {
            throw new ExchangeException("Couldn't connect to " + host + ":" + port + " (tried " + String.join("; ", tried)
                    + ")");
        }
        return clientExchange(s, mine, stop);
    }

    private static PingPongDest[] clientExchange(Socket s, PingPongDest[] mine, StopSignal stop)
            throws ExchangeException {
        try (s) {
            s.setSoTimeout(READ_TIMEOUT_MS);
            OutputStream out = s.getOutputStream();
            InputStream in = s.getInputStream();
            try {
                for (PingPongDest d : mine) {
                    out.write(d.encode());
                }
                out.flush();
            } catch (IOException e) {
                throw new ExchangeException("Couldn't send local address (" + e.getMessage() + ")");
            }
            PingPongDest[] remote = new PingPongDest[mine.length];
            for (int i = 0; i < mine.length; i++) {
                remote[i] = parse(readExactly(in, PingPongDest.MESSAGE_BYTES, "Couldn't read/write remote address"
                        + (mine.length > 1 ? " [" + i + "]" : "")));
            }
            out.write(PingPongDest.DONE);
            out.flush();
            return remote;
        } catch (IOException e) {
            throw new ExchangeException("Couldn't read/write remote address (" + e.getMessage() + ")");
        } finally {
            stop.unregister(s);
        }
    }

    private static PingPongDest parse(byte[] msg) throws ExchangeException {
        try {
            return PingPongDest.decode(msg);
        } catch (IllegalArgumentException e) {
            throw new ExchangeException("Couldn't read remote address: " + e.getMessage());
        }
    }

    private static byte[] readExactly(InputStream in, int n, String what) throws ExchangeException {
        byte[] b = new byte[n];
        int got = 0;
        try {
            while (got < n) {
                int r = in.read(b, got, n - got);
                if (r < 0) {
                    break;
                }
                got += r;
            }
        } catch (IOException e) {
            throw new ExchangeException(got + "/" + n + ": " + what + " (" + e.getMessage() + ")");
        }
        if (got < n) {
            throw new ExchangeException(got + "/" + n + ": " + what + " (the peer closed the connection)");
        }
        return b;
    }

    private static String socketText(InetAddress a, int port) {
        String h = a.getHostAddress();
        return (h.indexOf(':') >= 0 ? "[" + h + "]" : h) + ":" + port;
    }

    private static String hexBytes(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(CFormat.hex(x & 0xFF, 2));
        }
        return sb.toString();
    }

    private static void closeQuietly(AutoCloseable c) {
        if (c == null) {
            return;
        }
        try {
            c.close();
        } catch (Exception e) {
            // Already failing; the first error is the one reported.
        }
    }
}
