// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;

/** A completion channel: a queue of CQ events. Thread-safe. */
final class SoftChannel extends SoftResource implements CompletionChannel {
    final SoftContext ctx;
    private final LinkedBlockingQueue<SoftCq> events = new LinkedBlockingQueue<>();

    SoftChannel(SoftContext ctx) {
        this.ctx = ctx;
    }

    @Override
    String describe() {
        return "completion channel";
    }

    void push(SoftCq cq) {
        events.add(cq);
    }

    @Override
    public CompletionQueue getCqEvent(Duration timeout) {
        checkNotClosed();
        try {
            SoftCq cq = events.poll();
            if (cq == null && !timeout.isZero()) {
                ctx.device.waiterBlocking();
                cq = events.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
            }
            if (cq != null) {
                cq.unackedEvents.incrementAndGet();
            }
            return cq;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        checkIdle("ibv_destroy_comp_channel");
        closed = true;
        ctx.children.remove(this);
    }
}
