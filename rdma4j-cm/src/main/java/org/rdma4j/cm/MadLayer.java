// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.util.HashMap;
import java.util.Map;

/**
 * The MAD layer ({@code drivers/infiniband/core/mad.c}) over the ports' QP1s: validates every received
 * MAD and routes it to the agent registered for its class and class version, matches responses to
 * outstanding requests by TID, and retransmits sends that expect an answer, identically and with the
 * same TID, after their timeout on the CM's clock, until they are cancelled or run out of retries.
 * Every MAD it does not deliver is counted by reason. CM lock held for everything.
 */
final class MadLayer {
    /** A registered client of one management class ({@code struct ib_mad_agent}). */
    interface Agent {
        /**
         * A MAD of the agent's class arrived (a request, or a response that matched no send of a
         * response-expecting kind: those go to {@link #response}).
         *
         * @param r the MAD
         */
        void receive(MadRecv r);

        /**
         * A response matched an outstanding send by TID; the send is complete.
         *
         * @param send the request
         * @param r    the response
         */
        default void response(Send send, MadRecv r) {
        }

        /**
         * An outstanding send ran out of retries ({@code IB_WC_RESP_TIMEOUT_ERR}).
         *
         * @param send the send
         */
        void timedOut(Send send);
    }

    /** An outstanding send ({@code struct ib_mad_send_buf} with its retry state). */
    static final class Send {
        final byte[] mad;
        final CmAv av;
        final Agent agent;
        /** What the sender wants back with the timeout (its ID, say). */
        final Object context;
        long timeoutMs;
        int retriesLeft;
        CmTimers.Timer timer;
        boolean done;

        Send(byte[] mad, CmAv av, Agent agent, Object context, long timeoutMs, int retries) {
            this.mad = mad;
            this.av = av;
            this.agent = agent;
            this.context = context;
            this.timeoutMs = timeoutMs;
            this.retriesLeft = retries;
        }

        /** {@return the TID} */
        long tid() {
            return Mad.tid(mad);
        }

        /** {@return whether it still retransmits} */
        boolean active() {
            return !done;
        }
    }

    private record Key(int mgmtClass, int classVersion) {
    }

    private record Registration(Agent agent, int methodMask) {
    }

    private final UserCm cm;
    private final Map<Key, Registration> agents = new HashMap<>();
    /** Sends that expect a response with the R bit, by TID. */
    private final Map<Long, Send> awaitingResponse = new HashMap<>();

    MadLayer(UserCm cm) {
        this.cm = cm;
    }

    /**
     * Registers an agent ({@code ib_register_mad_agent}).
     *
     * @param mgmtClass    the management class
     * @param classVersion its version
     * @param methods      the request methods the agent takes (bit n for method n)
     * @param agent        the agent
     */
    void register(int mgmtClass, int classVersion, int methods, Agent agent) {
        agents.put(new Key(mgmtClass, classVersion), new Registration(agent, methods));
    }

    /** Validates and routes a received MAD ({@code ib_mad_recv_done}, {@code validate_mad}, {@code find_mad_agent}). */
    void receive(MadRecv r) {
        byte[] m = r.mad();
        if (Mad.baseVersion(m) != Mad.BASE_VERSION) {
            cm.count(CmCounter.DROP_BAD_BASE_VERSION);
            return;
        }
        int method = Mad.method(m);
        Registration reg = agents.get(new Key(Mad.mgmtClass(m), Mad.classVersion(m)));
        if ((method & Mad.METHOD_RESP) != 0) {
            Send s = awaitingResponse.get(Mad.tid(m));
            if (s == null || s.done || Mad.mgmtClass(s.mad) != Mad.mgmtClass(m)) {
                cm.count(CmCounter.DROP_UNMATCHED_RESPONSE);
                return;
            }
            finish(s);
            s.agent.response(s, r);
            return;
        }
        if (reg == null) {
            cm.count(CmCounter.DROP_NO_AGENT);
            return;
        }
        // validate_mad: the CM takes Send only (ClassPortInfo aside, which the CM does not answer)
        if (method >= 32 || (reg.methodMask() & (1 << method)) == 0) {
            cm.count(CmCounter.DROP_BAD_METHOD);
            return;
        }
        reg.agent().receive(r);
    }

    /**
     * Sends a MAD that expects no answer (a reply such as REJ, RTU, DREP, MRA: sent once).
     *
     * @param mad the MAD (copied on send)
     * @param av  where to
     */
    void sendOnce(byte[] mad, CmAv av) {
        av.port().send(mad, av);
    }

    /**
     * Sends a MAD and retransmits it after {@code timeoutMs}, up to {@code retries} times
     * ({@code ib_post_send_mad} with {@code timeout_ms} and {@code retries}); a response with the R bit and
     * the same TID completes it.
     *
     * @param mad       the MAD (kept: every retransmission sends these bytes)
     * @param av        where to
     * @param agent     who is told of a response or of the final timeout
     * @param context   the sender's context
     * @param timeoutMs time to wait for an answer before retransmitting
     * @param retries   retransmissions before giving up
     * @return the send, for {@link #cancel} and {@link #modify}
     */
    Send send(byte[] mad, CmAv av, Agent agent, Object context, long timeoutMs, int retries) {
        Send s = new Send(mad, av, agent, context, timeoutMs, retries);
        if ((Mad.method(mad) & Mad.METHOD_RESP) == 0 && Mad.method(mad) != Mad.METHOD_SEND) {
            awaitingResponse.put(s.tid(), s);
        }
        av.port().send(mad, av);
        arm(s);
        return s;
    }

    private void arm(Send s) {
        s.timer = cm.timers.schedule(s.timeoutMs * 1_000_000L, () -> expire(s));
    }

    private void expire(Send s) {
        if (s.done) {
            return;
        }
        if (s.retriesLeft <= 0) {
            finish(s);
            cm.count(CmCounter.MAD_TIMEOUTS);
            s.agent.timedOut(s);
            return;
        }
        s.retriesLeft--;
        cm.count(CmCounter.MAD_RETRANSMISSIONS);
        s.av.port().send(s.mad, s.av);
        arm(s);
    }

    /** Stops retransmitting ({@code ib_cancel_mad}); a no-op for a finished or null send. */
    void cancel(Send s) {
        if (s != null && !s.done) {
            finish(s);
        }
    }

    /**
     * Gives an outstanding send a new timeout from now ({@code ib_modify_mad}, for a received MRA).
     *
     * @return false if the send is no longer outstanding
     */
    boolean modify(Send s, long timeoutMs) {
        if (s == null || s.done) {
            return false;
        }
        if (s.timer != null) {
            s.timer.cancel();
        }
        s.timeoutMs = timeoutMs;
        arm(s);
        return true;
    }

    private void finish(Send s) {
        s.done = true;
        if (s.timer != null) {
            s.timer.cancel();
        }
        awaitingResponse.remove(s.tid(), s);
    }
}
