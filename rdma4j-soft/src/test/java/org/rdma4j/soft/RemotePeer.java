// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The child JVM that owns device B of {@link SoftRemoteTestFabric}, and the one connection to it. One
 * peer serves every remote test of a test JVM (start-up costs about a second; state is reset between
 * tests by closing each test's fabric in it). It is started with this JVM's {@code java} binary and class
 * path, waited for at most {@link #START_TIMEOUT_MS}, and ended by its PID at JVM exit (it also ends by
 * itself when this JVM or the socket goes away). If it dies, the next fabric starts a new one.
 *
 * <p>Calls are serialised: one request and its response at a time ({@link #call}), from any thread. A
 * response may be preceded by callbacks of the child's object that runs the call
 * ({@link RemoteProtocol#CALLBACK}), answered by the {@link Callback} registered for that object
 * ({@link #onCallback}) on the calling thread.
 *
 * <p>Every call is bounded by {@link #CALL_TIMEOUT_MS} (a peer of its own, {@link #startPrivate}, may have
 * another bound): a child that does not answer in time gets a thread
 * dump request (SIGQUIT, printed on its stderr) and is ended by its PID, so the call fails instead of
 * hanging the test. The child's stderr is copied to this JVM's {@code System.err} line by line (under
 * Surefire: into the running test's output), and the last lines of it go into the message of a call
 * that fails because the child died or hung.
 */
final class RemotePeer {
    /** Bound on the child's start-up (JVM start and connect back). */
    static final long START_TIMEOUT_MS = 30_000;
    /** Size of the shared memory that holds every buffer of a remote test (sparse: touched pages only). */
    static final long SHM_SIZE = 256L << 20;
    /** Bound on one call (its callbacks included): every op of the protocol answers in milliseconds. */
    static final long CALL_TIMEOUT_MS = 60_000;
    /** Bound on waiting for the rest of a dead child's stderr before a failure message is made. */
    private static final long STDERR_DRAIN_MS = 5_000;
    /** How many of the child's last stderr lines a failure message carries. */
    private static final int STDERR_TAIL = 200; // a thread dump of the child (about 120 lines) fits
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "rdma4j-remote-peer-watchdog");
        t.setDaemon(true);
        return t;
    });

    private static RemotePeer shared;

    private final Process process;
    private final SocketChannel channel;
    private final DataInputStream in;
    private final DataOutputStream out;
    private final ReentrantLock lock = new ReentrantLock();
    private final SharedMemory shm;
    private final Map<Integer, Callback> callbacks = new ConcurrentHashMap<>();
    private final ThreadLocal<Boolean> inCallback = ThreadLocal.withInitial(() -> false);
    private final Deque<String> stderrTail;
    private final Thread stderrCopier;
    private final long callTimeoutMs;
    private volatile boolean broken;
    private volatile String hung;

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

    /** What answers the callbacks of one object of the child. */
    @FunctionalInterface
    interface Callback {
        /**
         * Reads a callback's arguments (all of them, before acting), then acts.
         *
         * @param kind what the callback is (the object's own numbering)
         * @param in   the arguments
         * @return writes the results; run after the arguments are read, its exception is the answer
         * @throws IOException when the stream fails
         */
        Args handle(int kind, DataInputStream in) throws IOException;
    }

    /** @return the running peer, started if there is none or the last one died */
    static synchronized RemotePeer shared() {
        if (shared == null || shared.broken || !shared.process.isAlive()) {
            if (shared != null) {
                shared.destroy();
            }
            shared = start(CALL_TIMEOUT_MS);
        }
        return shared;
    }

    private RemotePeer(Process process, SocketChannel channel, Path shmFile, StderrCopy stderr, long callTimeoutMs)
            throws IOException {
        this.process = process;
        this.stderrTail = stderr.tail();
        this.stderrCopier = stderr.thread();
        this.callTimeoutMs = callTimeoutMs;
        this.channel = channel;
        this.in = new DataInputStream(new BufferedInputStream(Channels.newInputStream(channel), 1 << 16));
        this.out = new DataOutputStream(new BufferedOutputStream(Channels.newOutputStream(channel), 1 << 16));
        this.shm = negotiateSharedMemory(shmFile);
    }

    /**
     * A peer of the caller's own, not the shared one (a test of the harness that breaks it); end it with
     * {@link #end()}.
     *
     * @param callTimeoutMs its bound on one call
     * @return the running peer
     */
    static RemotePeer startPrivate(long callTimeoutMs) {
        return start(callTimeoutMs);
    }

    /** Ends the child by its PID and frees the connection and the shared memory. */
    void end() {
        destroy();
    }

    private static RemotePeer start(long callTimeoutMs) {
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
            // DisplayVMOutputToStderr: the VM's own output (a SIGQUIT thread dump) goes where we read
            List<String> cmd = new ArrayList<>(List.of(java, "-Xss2m", "-Xmx256m", "-XX:+UseSerialGC",
                    "-XX:+DisplayVMOutputToStderr",
                    "--enable-native-access=ALL-UNNAMED"));
            for (String key : System.getProperties().stringPropertyNames()) {
                if (key.startsWith("rdma4j.")) {
                    cmd.add("-D" + key + "=" + System.getProperty(key));
                }
            }
            cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), RemotePeerMain.class.getName(),
                    sock.toString(), Long.toString(pid)));
            // Not this JVM's stdout: under surefire that is the fork's channel to Maven. The child prints
            // nothing there (it sends System.out to stderr); its diagnostics are copied to our System.err.
            p = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.PIPE).start();
            StderrCopy tail = copyStderr(p);
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
            RemotePeer peer = new RemotePeer(p, ch, shmFile, tail, callTimeoutMs);
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

    /** The copy of a child's stderr: its last lines, and the thread that copies (it ends at the stream's end). */
    private record StderrCopy(Deque<String> tail, Thread thread) {
    }

    /** Copies the child's stderr to System.err as it comes, keeping its last lines for failure messages. */
    private static StderrCopy copyStderr(Process p) {
        Deque<String> tail = new ArrayDeque<>();
        long pid = p.pid();
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getErrorStream(),
                    StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    synchronized (tail) {
                        tail.addLast(line);
                        if (tail.size() > STDERR_TAIL) {
                            tail.removeFirst();
                        }
                    }
                    System.err.println("[remote peer " + pid + "] " + line);
                }
            } catch (IOException e) {
                System.err.println("[remote peer " + pid + "] stderr lost: " + e);
            }
        }, "rdma4j-remote-peer-stderr-" + pid);
        t.setDaemon(true);
        t.start();
        return new StderrCopy(tail, t);
    }

    /**
     * @return the child's last stderr lines, for a failure message; when the child is dead (or ends within
     *         the bound), after the copy has read its stderr to the end
     */
    String stderrTail() {
        try {
            if (process.waitFor(STDERR_DRAIN_MS, TimeUnit.MILLISECONDS)) {
                stderrCopier.join(STDERR_DRAIN_MS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        synchronized (stderrTail) {
            return stderrTail.isEmpty() ? "(nothing on its stderr)" : String.join("\n  ", stderrTail);
        }
    }

    /**
     * Registers what answers the callbacks of one of the child's objects (replacing any before).
     *
     * @param target   the object's handle in the child
     * @param callback the answer, or null to remove it
     */
    void onCallback(int target, Callback callback) {
        if (callback == null) {
            callbacks.remove(target);
        } else {
            callbacks.put(target, callback);
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
        if (inCallback.get()) {
            throw new IllegalStateException("remote op " + op + " from inside a callback of the remote peer: the"
                    + " child is waiting for the callback's answer and cannot serve it");
        }
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
            ScheduledFuture<?> watch = WATCHDOG.schedule(() -> hang(op), callTimeoutMs, TimeUnit.MILLISECONDS);
            try {
                request.writeTo(out);
                out.flush();
                byte status = in.readByte();
                while (status == RemoteProtocol.CALLBACK) {
                    answerCallback();
                    status = in.readByte();
                }
                RemoteProtocol.readStatus(status, in);
                T t = result.read(in);
                done = true;
                return t;
            } catch (IOException e) {
                // Out of step or dead: end it (by its PID) before reading the rest of its stderr.
                ProcessHandle.of(process.pid()).ifPresent(ProcessHandle::destroyForcibly);
                String why = hung != null ? hung : "call " + op + " failed: " + e;
                throw new IllegalStateException("remote peer (pid " + process.pid() + ", alive="
                        + process.isAlive() + ") " + why + "; its last stderr lines:\n  " + stderrTail(), e);
            } catch (RuntimeException e) {
                // An error response was read completely: the stream is still in step.
                done = true;
                throw e;
            } finally {
                watch.cancel(false);
                if (!done) {
                    broken = true;
                    // Out of step or dead: end it now, by its PID, rather than at JVM exit.
                    ProcessHandle.of(process.pid()).ifPresent(ProcessHandle::destroyForcibly);
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** Reads one callback, runs its handler and writes the answer (OK and results, or the error). */
    private void answerCallback() throws IOException {
        int target = in.readInt();
        int kind = in.readInt();
        Callback cb = callbacks.get(target);
        if (cb == null) {
            // Its arguments cannot be skipped without knowing them: the stream is lost.
            throw new IOException("callback " + kind + " of remote object " + target + ", which nothing here answers");
        }
        Args reply;
        inCallback.set(true);
        try {
            try {
                reply = cb.handle(kind, in);
            } catch (RuntimeException e) {
                // Failed while reading its arguments: where the next frame starts is unknown.
                throw new IOException("reading callback " + kind + " of remote object " + target + ": " + e, e);
            }
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            try {
                reply.write(new DataOutputStream(b));
            } catch (RuntimeException e) {
                RemoteProtocol.writeError(out, e);
                out.flush();
                return;
            }
            out.writeByte(RemoteProtocol.OK);
            b.writeTo(out);
            out.flush();
        } finally {
            inCallback.set(false);
        }
    }

    /** The watchdog's end of a call that did not come back: a thread dump on the child's stderr, then its end. */
    private void hang(int op) {
        hung = "did not answer call " + op + " within " + callTimeoutMs + " ms (ended by the test JVM)";
        long pid = process.pid();
        System.err.println("[remote peer " + pid + "] " + hung + "; asking for a thread dump first");
        try {
            Process dump = new ProcessBuilder("kill", "-QUIT", Long.toString(pid)).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            dump.waitFor(5, TimeUnit.SECONDS);
        } catch (IOException e) {
            System.err.println("[remote peer " + pid + "] no thread dump: " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        // SIGTERM after SIGQUIT: the child's signal dispatcher prints the dump before it handles the end.
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroy);
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
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
