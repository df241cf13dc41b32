// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The child JVM that owns device B of {@link SoftRemoteTestFabric}, and the one connection to it. One
 * peer serves every remote test of a test JVM (start-up costs about a second; state is reset between
 * tests by closing each test's fabric in it). It is started with this JVM's {@code java} binary and class
 * path, waited for at most {@link #START_TIMEOUT_MS}, and ended by its PID at JVM exit (it also ends by
 * itself when this JVM or the socket goes away). If it dies, the next fabric starts a new one.
 *
 * <p>Calls are serialised: one request and its response at a time ({@link #call}), from any thread.
 */
final class RemotePeer {
    /** Bound on the child's start-up (JVM start and connect back). */
    static final long START_TIMEOUT_MS = 30_000;
    /** Size of the shared memory that holds every buffer of a remote test (sparse: touched pages only). */
    static final long SHM_SIZE = 256L << 20;

    private static RemotePeer shared;

    private final Process process;
    private final SocketChannel channel;
    private final DataInputStream in;
    private final DataOutputStream out;
    private final ReentrantLock lock = new ReentrantLock();
    private final SharedMemory shm;
    private volatile boolean broken;

    /** What a call writes after its op and handle. */
    @FunctionalInterface
    interface Args {
        void write(DataOutputStream o) throws IOException;
    }

    /** What a call reads after the OK status. @param <T> the result */
    @FunctionalInterface
    interface Result<T> {
        T read(DataInputStream in) throws IOException;
    }

    /** @return the running peer, started if there is none or the last one died */
    static synchronized RemotePeer shared() {
        if (shared == null || shared.broken || !shared.process.isAlive()) {
            if (shared != null) {
                shared.destroy();
            }
            shared = start();
        }
        return shared;
    }

    private RemotePeer(Process process, SocketChannel channel, Path shmFile) throws IOException {
        this.process = process;
        this.channel = channel;
        this.in = new DataInputStream(new BufferedInputStream(Channels.newInputStream(channel), 1 << 16));
        this.out = new DataOutputStream(new BufferedOutputStream(Channels.newOutputStream(channel), 1 << 16));
        this.shm = negotiateSharedMemory(shmFile);
    }

    private static RemotePeer start() {
        long pid = ProcessHandle.current().pid();
        Path dir;
        try {
            dir = Files.createTempDirectory("rdma4j-remote-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Path sock = dir.resolve("peer.sock");
        Path shmFile = Path.of("/dev/shm", "rdma4j-remote-" + pid + "-" + System.nanoTime());
        Process p = null;
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(sock));
            server.configureBlocking(false);
            String java = ProcessHandle.current().info().command()
                    .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
            List<String> cmd = new ArrayList<>(List.of(java, "-Xss2m", "-Xmx256m", "-XX:+UseSerialGC",
                    "--enable-native-access=ALL-UNNAMED"));
            for (String key : System.getProperties().stringPropertyNames()) {
                if (key.startsWith("rdma4j.")) {
                    cmd.add("-D" + key + "=" + System.getProperty(key));
                }
            }
            cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), RemotePeerMain.class.getName(),
                    sock.toString(), Long.toString(pid)));
            // Not this JVM's stdout: under surefire that is the fork's channel to Maven. The child prints
            // nothing there (it sends System.out to stderr); its diagnostics go to our stderr.
            p = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(START_TIMEOUT_MS);
            SocketChannel ch = null;
            while (ch == null) {
                ch = server.accept();
                if (ch == null) {
                    if (!p.isAlive()) {
                        throw new IllegalStateException("the remote peer exited with " + p.exitValue()
                                + " before connecting: " + cmd);
                    }
                    if (System.nanoTime() - deadline > 0) {
                        throw new IllegalStateException("the remote peer did not connect within "
                                + START_TIMEOUT_MS + " ms: " + cmd);
                    }
                    // Waiting for another process to start: no event to wait on, so poll with the
                    // process's exit as the other way out (bounded by the deadline above).
                    p.waitFor(10, TimeUnit.MILLISECONDS);
                }
            }
            ch.configureBlocking(true);
            SharedMemory.createFile(shmFile, SHM_SIZE);
            RemotePeer peer = new RemotePeer(p, ch, shmFile);
            long childPid = p.pid();
            Runtime.getRuntime().addShutdownHook(new Thread(
                    () -> ProcessHandle.of(childPid).ifPresent(ProcessHandle::destroy), "rdma4j-remote-peer-reaper"));
            return peer;
        } catch (IOException | InterruptedException | RuntimeException e) {
            if (p != null) {
                long childPid = p.pid();
                ProcessHandle.of(childPid).ifPresent(ProcessHandle::destroyForcibly);
            }
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            throw new IllegalStateException("cannot start the remote peer: " + e.getMessage(), e);
        } finally {
            try {
                Files.deleteIfExists(sock);
                Files.deleteIfExists(dir);
                // Both mappings hold the pages; the name is no longer needed.
                Files.deleteIfExists(shmFile);
            } catch (IOException ignored) {
                // temporary files only
            }
        }
    }

    /** Maps the file here and in the child at one address: the child's choice wins if ours is taken there. */
    private SharedMemory negotiateSharedMemory(Path file) {
        for (int attempt = 0; attempt < 16; attempt++) {
            SharedMemory mine = SharedMemory.mapAt(file, SHM_SIZE, SharedMemory.randomAddress());
            if (mine == null) {
                continue;
            }
            long theirs = call(RemoteProtocol.SHM_MAP, 0, o -> {
                o.writeUTF(file.toString());
                o.writeLong(SHM_SIZE);
                o.writeLong(mine.base());
            }, DataInputStream::readLong);
            if (theirs == mine.base()) {
                return mine;
            }
            mine.close();
            SharedMemory same = SharedMemory.mapAt(file, SHM_SIZE, theirs);
            if (same != null) {
                return same;
            }
            call(RemoteProtocol.SHM_UNMAP, 0, o -> { }, r -> null);
        }
        throw new IllegalStateException("could not map shared memory at one address in both processes");
    }

    /** @return the memory mapped at the same address here and in the child */
    SharedMemory shm() {
        return shm;
    }

    /** @return the child's PID */
    long pid() {
        return process.pid();
    }

    /**
     * One request and its response.
     *
     * @param op     a {@link RemoteProtocol} op
     * @param handle the child's object, 0 for the peer
     * @param args   writes the arguments
     * @param result reads the results
     * @param <T>    result type
     * @return the result
     */
    <T> T call(int op, int handle, Args args, Result<T> result) {
        // The request is built first: an argument that cannot be encoded fails here, with nothing sent.
        ByteArrayOutputStream request = new ByteArrayOutputStream(64);
        try {
            DataOutputStream o = new DataOutputStream(request);
            o.writeInt(op);
            o.writeInt(handle);
            args.write(o);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        lock.lock();
        try {
            if (broken) {
                throw new IllegalStateException("the connection to the remote peer (pid " + process.pid()
                        + ") broke in an earlier call");
            }
            boolean done = false;
            try {
                request.writeTo(out);
                out.flush();
                RemoteProtocol.readStatus(in);
                T t = result.read(in);
                done = true;
                return t;
            } catch (IOException e) {
                throw new IllegalStateException("remote peer (pid " + process.pid() + ", alive="
                        + process.isAlive() + ") call " + op + " failed: " + e, e);
            } catch (RuntimeException e) {
                // An error response was read completely: the stream is still in step.
                done = true;
                throw e;
            } finally {
                if (!done) {
                    broken = true;
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** A call without results. @param op op @param handle object @param args arguments */
    void run(int op, int handle, Args args) {
        call(op, handle, args, r -> null);
    }

    private void destroy() {
        try {
            channel.close();
        } catch (IOException ignored) {
            // closing
        }
        ProcessHandle.of(process.pid()).ifPresent(ProcessHandle::destroy);
        shm.close();
    }
}
