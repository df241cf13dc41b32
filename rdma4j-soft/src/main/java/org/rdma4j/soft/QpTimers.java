// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

/**
 * The timers of a {@link SoftQp} (rxe's retransmit and RNR timers, the pacer's resumption, the loss probe):
 * arming them, what runs when they expire, and the earliest deadline the {@link TimerService} waits for. The
 * deadlines are the QP's volatile fields: the owner writes them, the timer service's thread reads them and,
 * when one passed, has the owner run them (SoftQp.timerDue, or {@link #runTimersNow} on a manual clock).
 */
final class QpTimers {
    private QpTimers() {
    }

    /**
     * Arms the retransmit timer if it is not (rxe's completer and requester arm it while a request is
     * outstanding). Owner only.
     *
     * @param qp the QP
     */
    static void armRetransmit(SoftQp qp) {
        if (qp.retransDeadline == 0) {
            long t = Aeth.retransmitTimeoutNs(qp.timeout);
            if (t > 0) {
                qp.retransDeadline = qp.fabric.clock.nanoTime() + t;
                qp.progressSinceArm = false;
                qp.fabric.timers.watch(qp);
            }
        }
    }

    /**
     * Arms the RNR timer: the requester retries after {@code delayNs}. Owner only.
     *
     * @param qp the QP
     * @param delayNs the RNR NAK's delay
     */
    static void armRnr(SoftQp qp, long delayNs) {
        qp.rnrDeadline = qp.fabric.clock.nanoTime() + Math.max(1, delayNs);
        qp.fabric.timers.watch(qp);
    }

    /**
     * Arms the loss probe's check at {@code deadlineNs}. Owner only.
     *
     * @param qp the QP
     * @param deadlineNs when
     */
    static void armProbe(SoftQp qp, long deadlineNs) {
        qp.probeDeadline = deadlineNs == 0 ? 1 : deadlineNs;
        qp.fabric.timers.watch(qp);
    }

    /**
     * {@return whether one of the QP's deadlines is set} Any thread.
     *
     * @param qp the QP
     */
    static boolean hasArmedTimer(SoftQp qp) {
        return qp.retransDeadline != 0 || qp.rnrDeadline != 0 || qp.paceDeadline != 0 || qp.probeDeadline != 0;
    }

    /**
     * {@return the QP's earliest deadline, Long.MAX_VALUE if none} Any thread (the timer service's): the
     * deadlines are volatile.
     *
     * @param qp the QP
     */
    static long nextDeadline(SoftQp qp) {
        long d = Long.MAX_VALUE;
        if (qp.retransDeadline != 0) {
            d = qp.retransDeadline;
        }
        if (qp.rnrDeadline != 0 && qp.rnrDeadline - d < 0) {
            d = qp.rnrDeadline;
        }
        if (qp.paceDeadline != 0 && qp.paceDeadline - d < 0) {
            d = qp.paceDeadline;
        }
        if (qp.probeDeadline != 0 && qp.probeDeadline - d < 0) {
            d = qp.probeDeadline;
        }
        return d;
    }

    /**
     * Runs the timers whose deadline passed: the paused burst, the RNR retry, the loss probe, the retransmit
     * timeout. Owner only.
     *
     * @param qp the QP
     * @param nowNs the clock's time
     */
    static void onTimers(SoftQp qp, long nowNs) {
        if (qp.paceDeadline != 0 && nowNs - qp.paceDeadline >= 0) {
            qp.paceDeadline = 0;
            qp.exec.markPending(); // the paused burst goes on in the next duty cycle (this owner's)
        }
        if (qp.rnrDeadline != 0 && nowNs - qp.rnrDeadline >= 0) {
            qp.rnrDeadline = 0;
            // rxe rnr_nak_timer: retry from the oldest unacknowledged PSN.
            qp.completer.goBackN();
            qp.requester.run();
        }
        if (qp.probeDeadline != 0 && nowNs - qp.probeDeadline >= 0) {
            qp.probeDeadline = 0;
            if (qp.completer.probeCheck(nowNs)) {
                qp.requester.run();
            }
        }
        if (qp.retransDeadline != 0 && nowNs - qp.retransDeadline >= 0) {
            qp.retransDeadline = 0;
            if (qp.completer.outstanding() == SendQueue.NONE) {
                return;
            }
            if (qp.progressSinceArm || qp.rnrDeadline != 0) {
                // Responses arrived since the timer was armed: push it down the road (rxe re-arms on progress).
                armRetransmit(qp);
                return;
            }
            qp.completer.timeout();
        }
    }

    /**
     * Runs the QP's due timers now, on this thread (the manual clock's advance). The caller owns no executor:
     * this takes the QP's.
     *
     * @param qp the QP
     * @param nowNs the clock's time
     */
    static void runTimersNow(SoftQp qp, long nowNs) {
        Burst b = Burst.enter();
        qp.exec.acquire();
        try {
            onTimers(qp, nowNs);
        } catch (Throwable t) {
            EngineErrors.qpWorkFailed(qp, "timers", t);
        } finally {
            qp.exec.release();
            b.exit();
        }
    }
}
