// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.lang.System.Logger.Level;

/**
 * The protocol states a QP's roles pass through: one call per state entered, as rxe's {@code pr_debug} line
 * per state in the loops of {@code rxe_resp.c} and {@code rxe_comp.c} ("qp#%d state = %s").
 *
 * <p>Off by default: a QP's {@link SoftQp#trace} is null and each state costs one field check on the QP's
 * own thread. {@code -Drdma4j.soft.trace=true} gives every QP created afterwards {@link #LOG}, which logs on
 * {@code System.Logger "org.rdma4j.soft.trace"} at TRACE; tests set a QP's trace to record the states.
 * Called by the QP's owner (its executor), so an implementation sees one QP's states in order.
 */
@FunctionalInterface
interface StateTrace {
    /**
     * A role of {@code qp} entered {@code state}.
     *
     * @param qp    the QP
     * @param role  {@code "resp"} (the responder) or {@code "comp"} (the completer)
     * @param state the state entered, named after rxe's
     * @param psn   the PSN of the packet being handled, or -1 if none
     */
    void enter(SoftQp qp, String role, Enum<?> state, int psn);

    /** Logs each state at TRACE on {@code System.Logger "org.rdma4j.soft.trace"}. */
    StateTrace LOG = new StateTrace() {
        private final System.Logger log = System.getLogger("org.rdma4j.soft.trace");

        @Override
        public void enter(SoftQp qp, String role, Enum<?> state, int psn) {
            if (log.isLoggable(Level.TRACE)) {
                log.log(Level.TRACE, qp.device.name() + " qp#" + qp.qpNum() + " " + role + " state = " + state
                        + (psn < 0 ? "" : " psn " + psn));
            }
        }
    };

    /** The trace a new QP starts with: {@link #LOG} under {@code -Drdma4j.soft.trace=true}, else none. */
    StateTrace DEFAULT = Boolean.getBoolean("rdma4j.soft.trace") ? LOG : null;
}
