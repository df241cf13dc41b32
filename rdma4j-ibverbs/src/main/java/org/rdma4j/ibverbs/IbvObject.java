// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.libc.UseCount;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

/**
 * What every object of this provider shares: the native handle it wraps, the use count that keeps the
 * handle alive while a call is inside it, the children that must be closed first and the users (QPs on a
 * CQ, CQs on a channel) that keep it busy.
 *
 * <p>libibverbs frees an object's memory when it is destroyed and trusts the caller never to pass the
 * pointer again; {@code ibv_close_device} does not even check for children. So this provider refuses,
 * before any downcall, every call on a closed object ({@link #enter}), and a close while children or users
 * remain (EBUSY, as {@code ibv_dealloc_pd.3} describes and the kernel enforces for most objects).
 * Thread-safe.
 */
abstract class IbvObject {
    /** How long a close waits for calls in progress on the object. */
    static final long CLOSE_WAIT_NS = 10_000_000_000L;

    /** The native object. */
    final MemorySegment ptr;
    final UseCount uses = new UseCount();
    final Set<IbvObject> children = ConcurrentHashMap.newKeySet();
    final AtomicInteger users = new AtomicInteger();

    IbvObject(MemorySegment ptr) {
        this.ptr = ptr;
    }

    /** {@return what the object is, for messages, e.g. "QP 0x11 on rxe0"} */
    abstract String describe();

    /** {@return true once closing has begun} */
    final boolean isClosed() {
        return uses.isClosed();
    }

    /**
     * Starts a control-path call: refuses it on a closed object.
     *
     * @param verb the verb, for the message
     */
    final void enter(String verb) {
        if (!uses.tryEnter()) {
            throw new VerbsException(Errno.EINVAL, verb + ": " + describe() + " is closed (destroyed)");
        }
    }

    /** Ends a call started with {@link #enter}. */
    final void exit() {
        uses.exit();
    }

    /**
     * Throws EBUSY naming what is still open, if anything depends on this object.
     *
     * @param verb the destroying verb
     */
    final void checkIdle(String verb) {
        if (!children.isEmpty()) {
            StringBuilder sb = new StringBuilder();
            int shown = 0;
            for (IbvObject r : children) {
                if (shown++ == 5) {
                    sb.append(", ...");
                    break;
                }
                sb.append(sb.isEmpty() ? "" : ", ").append(r.describe());
            }
            throw new VerbsException(Errno.EBUSY, verb + " " + describe() + ": " + children.size()
                    + " object(s) still open: " + sb + " (close them first)");
        }
        int u = users.get();
        if (u > 0) {
            throw new VerbsException(Errno.EBUSY, verb + " " + describe() + ": still used by " + u
                    + " other object(s) (destroy those first)");
        }
    }

    /**
     * The first half of a destroy: refuses it while children or users remain, then refuses new calls and
     * waits for those in progress.
     *
     * @param verb the destroying verb
     * @return false if the object was closed already (close is idempotent)
     */
    final boolean beginDestroy(String verb) {
        if (isClosed()) {
            return false;
        }
        checkIdle(verb);
        if (!uses.beginClose()) {
            return false;
        }
        wakeWaiters();
        if (!uses.awaitIdle(CLOSE_WAIT_NS)) {
            uses.reopen();
            throw new VerbsException(Errno.EBUSY, verb + " " + describe() + ": a call on it has not returned for "
                    + CLOSE_WAIT_NS / 1_000_000_000L + " s");
        }
        return true;
    }

    /**
     * Called once new calls are refused, before waiting for the calls in progress: an object whose callers
     * may wait in it (a channel's getCqEvent, a context's getAsyncEvent) makes them return here.
     */
    void wakeWaiters() {
    }

    /**
     * Undoes {@link #beginDestroy} when the native destroy failed and the object stays usable.
     */
    final void destroyFailed() {
        uses.reopen();
    }
}
