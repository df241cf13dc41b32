// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.System.Logger.Level;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.QpState;

/**
 * The engine's error policy, in one place for every thread that does engine work (the timer agent, the
 * RoCE receive agents, application threads posting or busy-polling): an exception or error thrown by one
 * unit of work (one received packet, one QP's due timers, one post's protocol work) is caught there
 * (Agrona's AgentRunner does the same for its agents), and then
 * <ul>
 * <li>it is logged on {@code System.Logger "org.rdma4j.soft"} at WARNING, with its stack, rate-limited
 *     (the first one, then at most one a second with the number left out meanwhile);</li>
 * <li>it is counted: {@link SoftCounter#ENGINE_ERRORS} of the device;</li>
 * <li>the QP whose work it was goes to ERR: its outstanding send and receive WRs complete with
 *     WR_FLUSH_ERR (so every waiter sees a completion) and QP_FATAL is raised on its context (IBA
 *     11.6.3.1: a local catastrophic error; rxe never has one);</li>
 * <li>the thread carries on with the next unit, so every other QP keeps working.</li>
 * </ul>
 * An engine that replaces the threads (agents under a runner) keeps this class as its error handler.
 */
final class EngineErrors {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.soft");
    private static final long LOG_INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);
    private static final AtomicLong lastLogNs = new AtomicLong(System.nanoTime() - LOG_INTERVAL_NS);
    private static final AtomicLong suppressed = new AtomicLong();

    private EngineErrors() {
    }

    /**
     * One unit of work for a QP failed. Called by the QP's owner (its executor).
     *
     * @param qp   the QP whose work it was
     * @param work what was being done ("receive of ...", "timers", "post")
     * @param t    what was thrown
     */
    static void qpWorkFailed(SoftQp qp, String work, Throwable t) {
        qp.device.count(SoftCounter.ENGINE_ERRORS);
        log(work + " of " + qp.describe() + " on " + qp.device.name() + " failed; the QP goes to ERR and its"
                + " work requests are flushed", t);
        if (qp.closed || qp.state == QpState.ERR) {
            return;
        }
        try {
            qp.moveToError();
            qp.pd.ctx.raise(new AsyncEvent(AsyncEventType.QP_FATAL, qp, null, null, 0));
        } catch (Throwable again) {
            log("moving " + qp.describe() + " to ERR after a failure failed too", again);
        }
    }

    /**
     * A packet failed on its way through a device's receive dispatcher: the QP it is for takes the failure,
     * else it is only counted and logged. The QP, if given, is owned by the calling thread.
     *
     * @param device the receiving device
     * @param qp     the QP the packet was dispatched to, or null if it did not get that far
     * @param p      the packet
     * @param t      what was thrown
     */
    static void receiveFailed(SoftDevice device, SoftQp qp, Packet p, Throwable t) {
        if (qp != null) {
            qpWorkFailed(qp, "receive of " + p, t);
        } else {
            device.count(SoftCounter.ENGINE_ERRORS);
            log("receive of " + p + " on " + device.name() + " failed; the packet is dropped", t);
        }
    }

    /**
     * An agent's loop failed outside any QP's work; the agent carries on. Any thread.
     *
     * @param device the device whose agent it is, or null for a fabric-wide one
     * @param fabric the fabric (its devices count the failure when {@code device} is null)
     * @param agent  the agent's name
     * @param t      what was thrown
     */
    static void agentFailed(SoftDevice device, SoftFabric fabric, String agent, Throwable t) {
        try {
            if (device != null) {
                device.countOutsideEngine(SoftCounter.ENGINE_ERRORS);
            } else {
                for (SoftDevice d : fabric.deviceList()) {
                    d.countOutsideEngine(SoftCounter.ENGINE_ERRORS);
                }
            }
        } finally {
            log(agent + " failed outside any QP's work; it carries on", t);
        }
    }

    /**
     * A device access found memory it may not touch (a closed arena, a confined segment): the access faults
     * and the request fails with an error completion (the caller's job); here it is reported to the DMA
     * checker, if the device has one, and logged without a stack (rate-limited), since the cause is the
     * application's memory, not the engine.
     *
     * @param port the device's DMA space when its accesses are checked, else null
     * @param what the access and what was wrong
     */
    static void unreachableMemory(org.rdma4j.dma.DmaSpace port, String what) {
        if (port != null && port.checker() != null) {
            port.checker().unreachableMemory(what);
        }
        log(what + "; the work request fails. Registered and DMA-mapped memory must stay alive until it is"
                + " deregistered or unmapped, and come from an arena every thread may use (Arena.ofShared(),"
                + " ofAuto() or global())", null);
    }

    private static void log(String what, Throwable t) {
        long now = System.nanoTime();
        long last = lastLogNs.get();
        if (now - last < LOG_INTERVAL_NS || !lastLogNs.compareAndSet(last, now)) {
            suppressed.incrementAndGet();
            return;
        }
        long left = suppressed.getAndSet(0);
        String msg = "rdma4j-soft: " + what + (left > 0 ? " (" + left + " more such message(s) in the last second"
                + " not logged; SoftCounter.ENGINE_ERRORS counts the engine's failures)" : "");
        if (t != null) {
            LOG.log(Level.WARNING, msg, t);
        } else {
            LOG.log(Level.WARNING, msg);
        }
    }
}
