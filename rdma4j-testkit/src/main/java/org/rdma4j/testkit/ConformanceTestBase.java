// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.EnumSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.function.Executable;
import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.RecvWorkRequest;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.WcStatus;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * Common fixture of every conformance suite. Before each test it creates a {@link ManualClock}, the
 * device's {@link Fabric} and one context on each of device 0 ({@link #ctxA}) and device 1
 * ({@link #ctxB}), each from {@link Fabric#openContext}, plus a shared {@link Arena} for buffers. Tests
 * create verbs objects through {@link #track}; after the test they are closed in reverse order of
 * creation, then the contexts are closed. That is the leak check: {@code Context.close()} fails with EBUSY while anything the
 * test forgot is still open, and the test fails with it.
 *
 * <p>Waiting is bounded and never sleeps: {@link #pollUntil} spins with {@link Thread#onSpinWait()}
 * against a wall-clock deadline, and timer-driven behaviour is reached by advancing the manual clock
 * in bounded loops ({@link #advanceUntil}).
 *
 * <p>Subclass per device and implement {@link #createFabric}.
 */
public abstract class ConformanceTestBase {
    /** Constructor for subclasses. */
    protected ConformanceTestBase() {
    }

    /** How long to wait for a completion that must come. */
    protected static final Duration POLL_TIMEOUT = Duration.ofSeconds(5);
    /** Upper bound on spin iterations of one wait, whatever the wall clock says. */
    protected static final long MAX_SPIN_ITERATIONS = 2_000_000_000L;

    /** The clock that drives the fabric's protocol timers. */
    protected ManualClock clock;
    /** The fabric under test. */
    protected Fabric fabric;
    /** A context on device 0. */
    protected Context ctxA;
    /** A context on device 1. */
    protected Context ctxB;
    /** Native memory for the test's buffers ({@link Fabric#bufferArena()}); closed after every MR is deregistered. */
    protected Arena arena;

    private final Deque<AutoCloseable> tracked = new ArrayDeque<>();
    private final Set<AutoCloseable> trackedSet = Collections.newSetFromMap(new IdentityHashMap<>());
    private Players players;

    /**
     * {@return a fresh fabric with at least two devices}
     *
     * @param clock the clock every timer of the fabric's devices must use
     */
    protected abstract Fabric createFabric(ManualClock clock);

    /**
     * How long to look for something that must not happen ({@link #assertNoCompletion}). Devices with
     * real network hops may need more.
     *
     * @return the window
     */
    protected Duration quietWindow() {
        return Duration.ofMillis(50);
    }

    /**
     * How long to poll after each clock step in {@link #advanceUntil} before the next step.
     *
     * @return the window
     */
    protected Duration settleWindow() {
        return Duration.ofMillis(5);
    }

    @BeforeEach
    final void setUpConformanceFixture(org.junit.jupiter.api.TestInfo test) {
        clock = new ManualClock();
        fabric = createFabric(clock);
        assertTrue(fabric.deviceCount() >= 2, "a conformance fabric needs at least 2 devices, has "
                + fabric.deviceCount());
        arena = fabric.bufferArena();
        ctxA = fabric.openContext(0);
        ctxB = fabric.openContext(1);
        players = new Players(this);
        NotOnIwarp rule = test.getTestMethod().map(m -> m.getAnnotation(NotOnIwarp.class)).orElse(null);
        if (rule != null) {
            org.junit.jupiter.api.Assumptions.assumeFalse(iwarp(), () -> "iWARP: " + rule.value());
        }
    }

    /** Skips the test on a device without atomics ({@code atomic_cap} ATOMIC_NONE: siw). */
    protected void assumeAtomics() {
        String cap = ctxA.queryDevice().atomicCap();
        org.junit.jupiter.api.Assumptions.assumeFalse("ATOMIC_NONE".equals(cap),
                () -> fabric.device(0).name() + " has no atomics (atomic_cap " + cap + ")");
    }

    @AfterEach
    final void tearDownConformanceFixture() {
        List<Throwable> failures = new ArrayList<>();
        for (Context ctx : new Context[] {ctxA, ctxB}) {
            if (ctx != null) {
                run(failures, () -> drainAsyncEvents(ctx));
            }
        }
        while (!tracked.isEmpty()) {
            AutoCloseable c = tracked.pop();
            trackedSet.remove(c);
            run(failures, c::close);
        }
        // The leak check: a context refuses to close (EBUSY) while anything it owns is still open.
        if (ctxB != null) {
            run(failures, ctxB::close);
        }
        if (ctxA != null) {
            run(failures, ctxA::close);
        }
        if (arena != null) {
            run(failures, arena::close);
        }
        if (fabric != null) {
            run(failures, fabric::close);
        }
        if (!failures.isEmpty()) {
            AssertionError e = new AssertionError("teardown/leak check failed: " + failures.size()
                    + " close(s) failed, first: " + failures.getFirst());
            failures.forEach(e::addSuppressed);
            throw e;
        }
    }

    private static void run(List<Throwable> failures, Executable action) {
        try {
            action.execute();
        } catch (Throwable t) {
            failures.add(t);
        }
    }

    private static void drainAsyncEvents(Context ctx) {
        for (int i = 0; i < 10_000; i++) {
            AsyncEvent ev = ctx.getAsyncEvent(Duration.ZERO);
            if (ev == null) {
                return;
            }
            ctx.ackAsyncEvent(ev);
        }
    }

    // ------------------------------------------------------------------ resources

    /**
     * Whether device 0 is an iWARP device (siw, irdma in iWARP mode): RC QPs only, connected through
     * rdma_cm, no address handles, no P_Keys. What the suites leave out there is what the device's
     * transport says it lacks.
     *
     * @return true for iWARP
     */
    protected boolean iwarp() {
        return fabric.device(0).transportType() == org.rdma4j.verbs.TransportType.IWARP;
    }

    /** {@return the pair builders} */
    protected Players players() {
        return players;
    }

    /**
     * Registers a resource to be closed after the test, in reverse order of registration.
     *
     * @param resource a verbs object
     * @param <T>      its type
     * @return {@code resource}
     */
    protected <T extends AutoCloseable> T track(T resource) {
        if (trackedSet.add(resource)) {
            tracked.push(resource);
        }
        return resource;
    }

    /**
     * Closes a tracked resource now and forgets it (for tests that destroy things mid-test).
     *
     * @param resource a tracked resource
     * @throws Exception whatever close throws; the resource stays tracked then
     */
    protected void release(AutoCloseable resource) throws Exception {
        resource.close();
        untrack(resource);
    }

    /**
     * Stops tracking a resource.
     *
     * @param resource a tracked resource the test has closed itself
     */
    protected void untrack(AutoCloseable resource) {
        if (trackedSet.remove(resource)) {
            tracked.removeIf(r -> r == resource);
        }
    }

    /**
     * {@return zeroed native memory, 64-byte aligned, alive until the end of the test}
     *
     * @param bytes size
     */
    protected MemorySegment alloc(long bytes) {
        return arena.allocate(bytes, 64);
    }

    /**
     * {@return a tracked MR}
     *
     * @param pd      the PD
     * @param segment native memory
     * @param access  access flags
     */
    protected MemoryRegion reg(ProtectionDomain pd, MemorySegment segment, AccessFlag... access) {
        return track(pd.regMr(segment, AccessFlag.of(access)));
    }

    /**
     * {@return a tracked MR over fresh memory with every access flag}
     *
     * @param pd    the PD
     * @param bytes size
     */
    protected MemoryRegion regAll(ProtectionDomain pd, long bytes) {
        return track(pd.regMr(alloc(bytes), EnumSet.allOf(AccessFlag.class)));
    }

    // ------------------------------------------------------------------ data

    /**
     * {@return a recognisable byte pattern}
     *
     * @param length bytes
     * @param seed   distinguishes patterns
     */
    protected static byte[] pattern(int length, int seed) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (seed * 31 + i * 7 + (i >>> 8));
        }
        return b;
    }

    /**
     * Copies bytes into memory.
     *
     * @param seg memory
     * @param offset where
     * @param data what
     */
    protected static void write(MemorySegment seg, long offset, byte[] data) {
        MemorySegment.copy(data, 0, seg, ValueLayout.JAVA_BYTE, offset, data.length);
    }

    /**
     * {@return a copy}
     *
     * @param seg memory
     * @param offset where
     * @param length how much
     */
    protected static byte[] read(MemorySegment seg, long offset, int length) {
        byte[] b = new byte[length];
        MemorySegment.copy(seg, ValueLayout.JAVA_BYTE, offset, b, 0, length);
        return b;
    }

    /**
     * Asserts that memory holds the expected bytes.
     *
     * @param expected bytes
     * @param seg memory
     * @param offset where
     * @param what description
     */
    protected static void assertBytes(byte[] expected, MemorySegment seg, long offset, String what) {
        assertArrayEquals(expected, read(seg, offset, expected.length), what);
    }

    // ------------------------------------------------------------------ posting

    /**
     * {@return a one-SGE receive request}
     *
     * @param wrId   id
     * @param mr     receive buffer's MR
     * @param offset offset in the MR
     * @param length bytes
     */
    protected static RecvWorkRequest recvWr(long wrId, MemoryRegion mr, long offset, int length) {
        return new RecvWorkRequest().wrId(wrId).singleSge(mr.address() + offset, length, mr.lkey());
    }

    /**
     * Posts a receive and asserts it was accepted.
     *
     * @param qp QP
     * @param wr request
     */
    protected static void postRecv(QueuePair qp, RecvWorkRequest wr) {
        assertTrue(qp.postRecv(wr), () -> "postRecv(" + wr + ") refused: " + wr.postError());
    }

    /**
     * Posts a one-SGE receive.
     *
     * @param qp QP
     * @param wrId id
     * @param mr MR
     * @param offset offset
     * @param length bytes
     */
    protected static void postRecv(QueuePair qp, long wrId, MemoryRegion mr, long offset, int length) {
        postRecv(qp, recvWr(wrId, mr, offset, length));
    }

    /**
     * Posts a one-SGE receive to an SRQ.
     *
     * @param srq SRQ
     * @param wrId id
     * @param mr MR
     * @param offset offset
     * @param length bytes
     */
    protected static void postSrqRecv(SharedReceiveQueue srq, long wrId, MemoryRegion mr, long offset, int length) {
        RecvWorkRequest wr = recvWr(wrId, mr, offset, length);
        assertTrue(srq.postRecv(wr), () -> "srq postRecv(" + wr + ") refused: " + wr.postError());
    }

    /**
     * {@return a SIGNALED one-SGE send request}
     *
     * @param wrId   id
     * @param opcode operation
     * @param mr     local MR
     * @param offset offset in it
     * @param length bytes
     */
    protected static SendWorkRequest sendWr(long wrId, WrOpcode opcode, MemoryRegion mr, long offset, int length) {
        return new SendWorkRequest().wrId(wrId).opcode(opcode).sendFlags(SendFlags.SIGNALED)
                .singleSge(mr.address() + offset, length, mr.lkey());
    }

    /**
     * {@return a SIGNALED RDMA request}
     *
     * @param wrId   id
     * @param opcode RDMA_WRITE(_WITH_IMM) or RDMA_READ
     * @param local  local MR
     * @param remote remote MR
     * @param length bytes, from offset 0 of both
     */
    protected static SendWorkRequest rdmaWr(long wrId, WrOpcode opcode, MemoryRegion local, MemoryRegion remote,
                                            int length) {
        return sendWr(wrId, opcode, local, 0, length).remoteAddr(remote.address()).rkey(remote.rkey());
    }

    /**
     * Posts a send and asserts it was accepted.
     *
     * @param qp QP
     * @param wr request
     */
    protected static void postSend(QueuePair qp, SendWorkRequest wr) {
        assertTrue(qp.postSend(wr), () -> "postSend(" + wr + ") refused: " + wr.postError());
    }

    /**
     * Posts a send that must be refused at post time.
     *
     * @param qp       QP
     * @param wr       request
     * @param expected the errno
     */
    protected static void assertPostSendRefused(QueuePair qp, SendWorkRequest wr, Errno expected) {
        boolean posted = qp.postSend(wr);
        assertTrue(!posted, () -> "postSend(" + wr + ") was accepted; expected refusal with " + expected);
        assertEquals(expected, wr.postError(), "postError of " + wr);
    }

    // ------------------------------------------------------------------ completions

    /**
     * Spins until {@code count} completions are polled, failing after {@link #POLL_TIMEOUT}.
     *
     * @param cq    the CQ
     * @param count how many
     * @return copies of the completions, in poll order
     */
    protected List<WorkCompletion> pollUntil(CompletionQueue cq, int count) {
        return pollUntil(cq, count, POLL_TIMEOUT);
    }

    /**
     * Spins (never sleeps) until {@code count} completions are polled.
     *
     * @param cq      the CQ
     * @param count   how many
     * @param timeout wall-clock deadline
     * @return copies of the completions, in poll order
     */
    protected List<WorkCompletion> pollUntil(CompletionQueue cq, int count, Duration timeout) {
        List<WorkCompletion> got = new ArrayList<>(count);
        pollInto(cq, got, count, timeout);
        if (got.size() < count) {
            fail("expected " + count + " completion(s) within " + timeout.toMillis() + " ms, got " + got.size()
                    + ": " + got);
        }
        return got;
    }

    /**
     * Polls into {@code got} until it holds {@code count} completions or the deadline passes.
     *
     * @param cq      the CQ
     * @param got     where completions go (copies)
     * @param count   target size of {@code got}
     * @param timeout wall-clock bound
     */
    protected static void pollInto(CompletionQueue cq, List<WorkCompletion> got, int count, Duration timeout) {
        WorkCompletion[] wcs = new WorkCompletion[16];
        for (int i = 0; i < wcs.length; i++) {
            wcs[i] = new WorkCompletion();
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        for (long spins = 0; got.size() < count && spins < MAX_SPIN_ITERATIONS; spins++) {
            int n = cq.poll(wcs, Math.min(wcs.length, count - got.size()));
            for (int i = 0; i < n; i++) {
                got.add(new WorkCompletion().copyFrom(wcs[i]));
            }
            if (n == 0) {
                if (System.nanoTime() - deadline >= 0) {
                    return;
                }
                Thread.onSpinWait();
            }
        }
    }

    /**
     * {@return the next completion, waiting up to {@link #POLL_TIMEOUT}}
     *
     * @param cq the CQ
     */
    protected WorkCompletion pollOne(CompletionQueue cq) {
        return pollUntil(cq, 1).getFirst();
    }

    /**
     * Polls for {@link #quietWindow()} and asserts that nothing arrived.
     *
     * @param cq the CQ
     */
    protected void assertNoCompletion(CompletionQueue cq) {
        List<WorkCompletion> got = new ArrayList<>();
        pollInto(cq, got, 1, quietWindow());
        if (!got.isEmpty()) {
            fail("expected no completion, got " + got.getFirst());
        }
    }

    /**
     * Asserts one completion's status and id (the fields valid on error, ibv_poll_cq.3).
     *
     * @param wc     completion
     * @param status expected status
     * @param wrId   expected wr_id
     */
    protected static void assertWc(WorkCompletion wc, WcStatus status, long wrId) {
        assertEquals(status, wc.status(), () -> "status of " + wc);
        assertEquals(wrId, wc.wrId(), () -> "wr_id of " + wc);
    }

    /**
     * The result of {@link #advanceUntil}.
     *
     * @param completions what was polled
     * @param steps       how many clock steps it took
     */
    protected record Advanced(List<WorkCompletion> completions, int steps) {
    }

    /**
     * Alternates polling (for {@link #settleWindow()}) and advancing the clock by {@code stepNs}
     * until {@code count} completions arrived. Polls once before the first step.
     *
     * @param cq       the CQ
     * @param count    completions wanted
     * @param stepNs   clock step
     * @param maxSteps bound on steps
     * @return the completions and the number of steps taken
     */
    protected Advanced advanceUntil(CompletionQueue cq, int count, long stepNs, int maxSteps) {
        List<WorkCompletion> got = new ArrayList<>();
        if (fabric.realTimeTimers()) {
            // the device's timers run on the wall clock: wait in real time, and count the steps of
            // stepNs that passed (rounded up) from the first poll to the last completion
            long t0 = System.nanoTime();
            long bound = Math.max((long) maxSteps * stepNs, POLL_TIMEOUT.toNanos());
            pollInto(cq, got, count, Duration.ofNanos(bound));
            long elapsed = System.nanoTime() - t0;
            if (got.size() < count) {
                fail("expected " + count + " completion(s) within " + bound / 1_000_000 + " ms, got " + got.size()
                        + ": " + got);
            }
            return new Advanced(got, (int) Math.min(Integer.MAX_VALUE, (elapsed + stepNs - 1) / stepNs));
        }
        pollInto(cq, got, count, settleWindow());
        int steps = 0;
        while (got.size() < count && steps < maxSteps) {
            clock.advance(stepNs);
            steps++;
            pollInto(cq, got, count, settleWindow());
        }
        if (got.size() < count) {
            fail("expected " + count + " completion(s) within " + maxSteps + " clock steps of " + stepNs
                    + " ns, got " + got.size() + ": " + got);
        }
        return new Advanced(got, steps);
    }

    /**
     * Advances the clock {@code steps} times by {@code stepNs}, asserting after each step that
     * {@code cq} stays empty.
     *
     * @param cq     the CQ
     * @param stepNs clock step
     * @param steps  how many
     */
    protected void advanceQuietly(CompletionQueue cq, long stepNs, int steps) {
        if (fabric.realTimeTimers()) {
            // real timers: let that much time pass (at least the quiet window) with nothing completing
            List<WorkCompletion> got = new ArrayList<>();
            long wait = Math.max((long) steps * stepNs, quietWindow().toNanos());
            pollInto(cq, got, 1, Duration.ofNanos(wait));
            if (!got.isEmpty()) {
                fail("expected no completion for " + wait / 1_000_000 + " ms, got " + got.getFirst());
            }
            return;
        }
        for (int i = 0; i < steps; i++) {
            clock.advance(stepNs);
            List<WorkCompletion> got = new ArrayList<>();
            pollInto(cq, got, 1, settleWindow());
            if (!got.isEmpty()) {
                fail("expected no completion while advancing, got " + got.getFirst() + " after step " + (i + 1));
            }
        }
    }

    // ------------------------------------------------------------------ async events

    /**
     * Waits for an async event of one type, acknowledging it and every other event taken meanwhile.
     *
     * @param ctx  the context
     * @param type the type wanted
     * @return the event (already acknowledged)
     */
    protected static AsyncEvent awaitAsyncEvent(Context ctx, AsyncEventType type) {
        List<AsyncEvent> others = new ArrayList<>();
        long deadline = System.nanoTime() + POLL_TIMEOUT.toNanos();
        while (System.nanoTime() - deadline < 0) {
            AsyncEvent ev = ctx.getAsyncEvent(Duration.ofMillis(10));
            if (ev != null) {
                ctx.ackAsyncEvent(ev);
                if (ev.type() == type) {
                    return ev;
                }
                others.add(ev);
            }
        }
        return fail("no " + type + " async event within " + POLL_TIMEOUT.toMillis() + " ms; other events: " + others);
    }

    /**
     * Takes every pending async event for {@link #quietWindow()} and asserts none has the type.
     *
     * @param ctx  the context
     * @param type the type that must not be there
     */
    protected void assertNoAsyncEvent(Context ctx, AsyncEventType type) {
        long deadline = System.nanoTime() + quietWindow().toNanos();
        while (System.nanoTime() - deadline < 0) {
            AsyncEvent ev = ctx.getAsyncEvent(Duration.ofMillis(5));
            if (ev != null) {
                ctx.ackAsyncEvent(ev);
                if (ev.type() == type) {
                    fail("unexpected async event " + ev);
                }
            }
        }
    }

    // ------------------------------------------------------------------ control-path errors

    /**
     * Asserts that a control-path call throws {@link VerbsException} with the errno.
     *
     * @param expected errno
     * @param call     the call
     * @return the exception
     */
    protected static VerbsException assertVerbsError(Errno expected, Executable call) {
        VerbsException e = assertThrows(VerbsException.class, call);
        assertEquals(expected, e.errno(), () -> "errno of: " + e.getMessage());
        return e;
    }
}
