// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;

/**
 * Ownership bookkeeping shared by every verbs object: children that must be closed first, users
 * (QPs on a CQ, CQs on a channel) that keep it busy, and a closed flag. Thread-safe.
 */
abstract class SoftResource {
    final Set<SoftResource> children = ConcurrentHashMap.newKeySet();
    final AtomicInteger users = new AtomicInteger();
    volatile boolean closed;

    abstract String describe();

    void checkNotClosed() {
        if (closed) {
            throw new VerbsException(Errno.EINVAL, describe() + " is closed");
        }
    }

    /** Throws EBUSY, naming what is still open, if anything depends on this object. */
    void checkIdle(String verb) {
        if (!children.isEmpty()) {
            StringBuilder sb = new StringBuilder();
            int shown = 0;
            for (SoftResource r : children) {
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
}
