// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.net.ServerSocket;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Collectors;

import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Linger;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;

/**
 * ibv_rc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong (rdma-core libibverbs/examples): the same
 * options, the same TCP exchange ({@link PingPongExchange}), the same QP attributes, the same strict
 * ping-pong (each side posts its next SEND only after its previous SEND and one receive completed),
 * the same output lines and {@code -c} data check. Device-agnostic: the LID and GID come from the
 * port, so it runs against rdma-core's programs over a RoCE device. With {@code --loopback} the
 * server and the client run in this process, on two devices of one fabric.
 *
 * <p>This class is the front (options, the device, the exit status); {@code PingPongSide} is the program
 * itself, {@code PingPongLoopback} pairs two sides in this process.
 */
public final class PingPong {
    final PingPongOptions o;
    final PrintStream out;
    final PrintStream err;
    final StopSignal stop;
    /** Whether to show progress on {@code err} (a terminal). */
    final boolean progress;
    /** Counted down when the data phase starts (tests stop a run at a known point with it). */
    final CountDownLatch dataPhase = new CountDownLatch(1);
    /** Counted down when this side is done with its QPs: the data phase is over or failed. */
    final CountDownLatch dataDone = new CountDownLatch(1);
    /** The other side when both run in this process (--loopback): its end ends our linger. */
    volatile PingPong peer;
    /** How the last linger ended (tests read it), or null if the run did not linger. */
    volatile Linger lastLinger;

    /** A failure that ends the run; the message is rdma-core's line (with rdma4j's detail). */
    static final class RunException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RunException(String message) {
            super(message);
        }
    }

    /**
     * @param options  the command line
     * @param out      standard output
     * @param err      standard error
     * @param stop     Ctrl-C
     * @param progress whether to show progress on {@code err} (a terminal)
     */
    PingPong(PingPongOptions options, PrintStream out, PrintStream err, StopSignal stop, boolean progress) {
        this.o = options;
        this.out = out;
        this.err = err;
        this.stop = stop;
        this.progress = progress;
    }

    /**
     * The subcommand.
     *
     * @param cmd  rc_pingpong, ud_pingpong or srq_pingpong (an ibv_ prefix is allowed)
     * @param args its arguments
     * @param out  standard output
     * @param err  standard error
     * @param stop Ctrl-C
     * @return the exit status: 0, 1 on an error (as rdma-core), 130 when stopped
     */
    public static int main(String cmd, String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        PingPongOptions.Kind kind = PingPongOptions.Kind.of(cmd);
        if (kind == null) {
            throw new IllegalArgumentException("not a pingpong command: " + cmd);
        }
        PingPongOptions o;
        try {
            o = PingPongOptions.parse(kind, args);
        } catch (PingPongOptions.UsageException e) {
            err.println(kind.command() + ": " + e.getMessage());
            out.print(PingPongOptions.usage(kind));
            return 1;
        }
        if (o.help) {
            out.print(PingPongOptions.usage(kind));
            return 0;
        }
        if (o.unsupported != 0) {
            err.println(unsupportedText(o));
            return 1;
        }
        var console = System.console();
        boolean terminal = console != null && console.isTerminal() && out == System.out;
        stop.enter();
        try {
            return o.loopback ? PingPongLoopback.run(o, out, err, stop, terminal) : new PingPong(o, out, err, stop, terminal)
                    .run(null, null);
        } finally {
            out.flush();
            stop.exit();
        }
    }

    /**
     * Runs one side.
     *
     * @param device   the device, or null to resolve {@code -d} (first device when absent)
     * @param listener for a server in loopback: the socket already bound; null to bind {@code -p}
     * @return exit status
     */
    int run(Device device, ServerSocket listener) {
        try {
            if (o.unsupported != 0) {
                throw new RunException(unsupportedText(o));
            }
            Device dev = device != null ? device : resolve(o.ibDev);
            try (PingPongSide side = new PingPongSide(this, dev)) {
                return side.run(listener);
            }
        } catch (RunException e) {
            dataDone.countDown();
            out.flush();
            err.println(e.getMessage());
            return stop.stopped() ? 130 : 1;
        } catch (VerbsException e) {
            dataDone.countDown();
            out.flush();
            err.println(e.getMessage());
            return 1;
        } catch (RuntimeException e) {
            dataDone.countDown();
            // A provider failure the tool has no words for: still a message and an exit status, not a trace.
            out.flush();
            err.println(o.kind.command() + ": unexpected failure: " + e);
            return 1;
        } finally {
            if (listener != null && !listener.isClosed()) {
                // A server that failed before accepting: refuse the client at once instead of leaving it
                // connected to a backlog nobody reads.
                try {
                    listener.close();
                } catch (java.io.IOException e) {
                    // Only unblocks the client.
                }
            }
        }
    }

    /**
     * ibv_get_device_list + the name match of the pingpong programs.
     *
     * @param name the -d value, or null for the first device
     * @return the device
     */
    static Device resolve(String name) {
        List<Device> all = Verbs.devices();
        if (name == null) {
            if (all.isEmpty()) {
                throw new RunException("No IB devices found (no org.rdma4j.verbs.spi.VerbsProvider on the class path"
                        + " offers a device)");
            }
            return all.get(0);
        }
        for (Device d : all) {
            if (d.name().equals(name)) {
                return d;
            }
        }
        throw new RunException("IB device " + name + " not found (known devices: "
                + (all.isEmpty() ? "none" : all.stream().map(Device::name).collect(Collectors.joining(", "))) + ")");
    }

    private static String unsupportedText(PingPongOptions o) {
        String why = " (option -" + o.unsupported + "; the rdma4j verbs API offers no such capability)";
        return switch (o.unsupported) {
            case 'o', 'O' -> o.kind == PingPongOptions.Kind.SRQ
                    ? "The device isn't ODP capable or does not support RC send, receive and srq with ODP" + why
                    : "The device isn't ODP capable or does not support RC send and receive with ODP" + why;
            case 'P' -> "prefetch is valid only with on-demand memory region" + why;
            case 't' -> "The device isn't completion timestamp capable" + why;
            case 'j' -> "Device doesn't support dm allocation" + why;
            case 'U' -> "Couldn't allocate parent domain" + why;
            default -> "unsupported option -" + o.unsupported;
        };
    }

    /**
     * The two result lines, computed as rdma-core computes them: the elapsed time in whole
     * microseconds held in a C {@code float}, bytes = size × iters × 2, Mbit/s = bytes × 8 / usec, and
     * usec/iter divided in float.
     *
     * @param size   message size
     * @param iters  iterations
     * @param micros elapsed microseconds
     * @return {@code "%lld bytes in %.2f seconds = %.2f Mbit/sec\n%d iters in %.2f seconds = %.2f usec/iter\n"}
     */
    static String report(long size, long iters, long micros) {
        float usec = micros;
        long bytes = size * iters * 2;
        String secs = CFormat.fixed(usec / 1000000., 2);
        return bytes + " bytes in " + secs + " seconds = " + CFormat.fixed(bytes * 8. / usec, 2) + " Mbit/sec\n"
                + iters + " iters in " + secs + " seconds = " + CFormat.fixed(usec / (float) iters, 2) + " usec/iter\n";
    }
}
