// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Verbs;

/**
 * The engine of the eight perftest tools: one program for the bandwidth ({@code run_iter_bw},
 * {@code run_iter_bw_server}) and latency ({@code run_iter_lat}, {@code run_iter_lat_write},
 * {@code run_iter_lat_send}) tests of SEND, RDMA WRITE, RDMA READ and atomics, with perftest's TCP
 * exchange between a server (no host argument) and a client (the server's host name), or both in this
 * process with {@code --loopback}. The order of the exchanges and of the printed lines follows each
 * perftest tool's {@code main} (write_bw.c, send_bw.c, read_lat.c, ...); shared/reference/roce-wire.md
 * §5.2 and §5.3 describe the bytes and the output.
 *
 * <p>This class is the front: help, version, and pairing the two sides of {@code --loopback}. Each side is a
 * {@code PerftestSide}; {@code PerftestSetup} connects it, {@code PerftestBw} and {@code PerftestLat} run the
 * tests, {@code PerftestResults} writes what follows the table.
 */
public final class Perftest {
    private final PerftestOptions o;
    private final PrintStream out;
    private final PrintStream err;
    /** Ctrl-C: a stopped run reports what it measured and returns 130. */
    private final StopSignal stop;
    private int timeoutMs;

    /**
     * A test that only its own {@link StopSignal} stops (none the caller can reach: it runs to its end).
     *
     * @param options the parsed command line
     * @param out     where the report goes
     * @param err     where errors go
     */
    public Perftest(PerftestOptions options, PrintStream out, PrintStream err) {
        this(options, out, err, new StopSignal());
    }

    /**
     * Creates a {@code Perftest}.
     *
     * @param options the parsed command line
     * @param out     where the report goes
     * @param err     where errors go
     * @param stop    stops the run (the launcher passes {@link StopSignal#PROCESS}, which SIGINT raises)
     */
    public Perftest(PerftestOptions options, PrintStream out, PrintStream err, StopSignal stop) {
        this.o = options;
        this.out = out;
        this.err = err;
        this.stop = stop;
    }

    /**
     * Sets how long to wait for the peer (accept, and every message), for tests; 0 waits forever, as
     * perftest does.
     *
     * @param ms milliseconds
     * @return this
     */
    public Perftest timeoutMs(int ms) {
        this.timeoutMs = ms;
        return this;
    }

    /** A failure that ends the run with a message for the user. */
    static final class RunException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RunException(String message) {
            super(message);
        }
    }

    /** The run was stopped by Ctrl-C after printing what it measured. */
    static final class Stopped extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Stopped() {
            super("stopped", null, false, false);
        }
    }

    /**
     * Runs the test.
     *
     * @return the process exit status (0 on success, 130 when stopped by Ctrl-C)
     */
    public int run() {
        stop.enter();
        try {
            if (o.help) {
                out.print(o.usage());
                return 0;
            }
            if (o.version) {
                out.println("Version: " + PerftestFormat.PERFTEST_VERSION);
                return 0;
            }
            if (o.loopback) {
                return runLoopback();
            }
            PerftestSide r = side(o.serverName != null, o.ibDev, out, true);
            return r.runGuarded(null);
        } finally {
            stop.exit();
        }
    }

    /**
     * Server and client in this process: the server side in a thread (its output discarded), the client
     * side here, connected by perftest's exchange over a loopback TCP socket, so the bytes and the order
     * are the same as between two machines.
     */
    private int runLoopback() {
        List<Device> devices = Verbs.devices();
        if (devices.isEmpty()) {
            err.println(" No IB devices found (no org.rdma4j.verbs.spi.VerbsProvider on the class path offers a device)");
            return 1;
        }
        String clientDev = o.ibDev != null ? o.ibDev : devices.get(0).name();
        String serverDev = o.serverIbDev != null ? o.serverIbDev
                : devices.stream().map(Device::name).filter(n -> !n.equals(clientDev)).findFirst().orElse(clientDev);
        CompletableFuture<Integer> port = new CompletableFuture<>();
        PrintStream sink = new PrintStream(OutputStream.nullOutputStream());
        PerftestSide server = side(false, serverDev, sink, false);
        server.boundPort = port;
        server.port = 0; // any free port: two loopback runs at once must not collide on 18515
        server.acceptTimeoutMs = 60_000;
        String[] serverError = new String[1];
        Thread t = Thread.ofPlatform().name("perftest-server").daemon().start(() -> {
            int rc = server.runGuarded(port);
            if (rc != 0) {
                serverError[0] = server.failure;
            }
            port.complete(-1);
        });
        int p;
        try {
            p = port.get(60, TimeUnit.SECONDS);
        } catch (Exception e) {
            err.println(" server side did not start: " + e);
            return 1;
        }
        if (p < 0) {
            err.println(" server side (" + serverDev + "): " + serverError[0]);
            return 1;
        }
        PerftestSide client = side(true, clientDev, out, true);
        client.peer = server;
        server.peer = client;
        // -R: the client connects rdma_cm to the address the server's device listens on
        client.host = o.rdmaCm ? server.cmBind.getAddress().getHostAddress() : "127.0.0.1";
        client.port = p;
        int rc = client.runGuarded(null);
        if (rc != 0 && !client.connected) {
            // The client failed before it connected (e.g. a bad option for its device): release the server.
            try (var s = new java.net.Socket("127.0.0.1", p)) {
                s.getOutputStream().flush();
            } catch (IOException e) {
                // the server is gone already
            }
        }
        try {
            if (rc != 130) {
                t.join(rc == 0 ? 30_000 : 2_000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (rc == 0 && serverError[0] != null) {
            err.println(" server side (" + serverDev + "): " + serverError[0]);
            return 1;
        }
        return rc;
    }

    private PerftestSide side(boolean client, String devName, PrintStream text, boolean reportErrors) {
        return new PerftestSide(o, err, stop, timeoutMs, client, devName, text, reportErrors);
    }
}
