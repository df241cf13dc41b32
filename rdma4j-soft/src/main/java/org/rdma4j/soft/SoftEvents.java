// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.System.Logger;
import java.lang.System.Logger.Level;

import org.rdma4j.common.RateLimitedLogger;
import org.rdma4j.common.RdmaEvents;
import org.rdma4j.verbs.QpState;

/**
 * What the soft device tells an observer: a JFR event ({@link RdmaEvents}) and a log line on logger
 * {@code org.rdma4j.soft} for each QP state change, retransmission, RNR NAK and dropped packet. Protocol
 * traces log at DEBUG; drops log through a rate limit (10 per 5 s, as {@code pr_warn_ratelimited}), at
 * WARNING when they point at a broken or hostile peer (bad ICRC, malformed, wrong source address, Q_Key
 * violation) and at DEBUG when they are part of normal operation (a packet for a QP that is gone or not
 * in a receiving state, a UC/UD message without a receive WQE, a group no QP joined). The call sites are
 * listed in docs/observability.md.
 */
final class SoftEvents {
    static final Logger LOG = System.getLogger("org.rdma4j.soft");
    private static final RateLimitedLogger DROP_WARNINGS = new RateLimitedLogger(LOG);
    private static final RateLimitedLogger DROP_TRACES = new RateLimitedLogger(LOG);

    private SoftEvents() {
    }

    static void qpState(SoftQp qp, QpState from, QpState to, String cause) {
        RdmaEvents.qpStateChange(qp.device.name(), qp.qpn, qp.type(), from, to, cause);
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, qp.device.name() + " QP 0x" + Integer.toHexString(qp.qpn) + " (" + qp.type() + ") "
                    + from + " -> " + to + " (" + cause + ")");
        }
    }

    static void retransmit(SoftQp qp, int psn, String cause, int retriesLeft) {
        RdmaEvents.retransmit(qp.device.name(), qp.qpn, psn, cause, retriesLeft);
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, qp.device.name() + " QP 0x" + Integer.toHexString(qp.qpn) + " retransmits from PSN 0x"
                    + Integer.toHexString(psn) + " (" + cause + "), retry_cnt left " + retriesLeft);
        }
    }

    static void rnrNak(SoftQp qp, int psn, long waitNs, int retriesLeft) {
        RdmaEvents.rnrNak(qp.device.name(), qp.qpn, psn, waitNs, retriesLeft);
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, qp.device.name() + " QP 0x" + Integer.toHexString(qp.qpn) + " RNR NAK at PSN 0x"
                    + Integer.toHexString(psn) + ": waits " + waitNs / 1000 + " us, rnr_retry left " + retriesLeft);
        }
    }

    /** Called for every count of a counter that {@link SoftCounter#isDrop()}. */
    static void drop(SoftDevice device, SoftCounter c) {
        RdmaEvents.packetDrop(device.name(), c.rxeName());
        boolean warn = c.suspicious();
        (warn ? DROP_WARNINGS : DROP_TRACES).log(warn ? Level.WARNING : Level.DEBUG,
                () -> "rdma4j: " + device.name() + " dropped a packet: " + c.rxeName() + " (" + device.counter(c) + " so far)");
    }
}
