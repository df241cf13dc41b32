// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import java.time.Duration;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.rdma4j.verbs.AsyncEvent;
import org.rdma4j.verbs.AsyncEventType;
import org.rdma4j.verbs.CompletionChannel;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Dma;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Gid;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.VerbsException;

/** An open {@link SoftDevice}. Thread-safe. */
final class SoftContext extends SoftResource implements Context {
    final SoftDevice device;
    private final LinkedBlockingQueue<AsyncEvent> events = new LinkedBlockingQueue<>();
    private final Dma dma;

    SoftContext(SoftDevice device) {
        this.device = device;
        this.dma = device.dma.dmaFor(this);
    }

    @Override
    public Dma dma() {
        return dma;
    }

    @Override
    String describe() {
        return "context of " + device.name();
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public DeviceAttributes queryDevice() {
        checkNotClosed();
        return device.attributes();
    }

    @Override
    public PortAttributes queryPort(int port) {
        checkNotClosed();
        device.checkPort(port);
        return device.portAttributes();
    }

    @Override
    public java.util.Map<String, Long> queryPortCounters(int port) {
        checkNotClosed();
        device.checkPort(port);
        return device.counters();
    }

    @Override
    public Gid queryGid(int port, int index) {
        checkNotClosed();
        device.checkPort(port);
        if (index < 0 || index >= device.gidTableLength()) {
            throw new VerbsException(Errno.EINVAL, "GID index " + index + " (device " + device.name()
                    + " has " + device.gidTableLength() + " GID(s): 0=" + device.gid(0) + ")");
        }
        return device.gid(index);
    }

    @Override
    public ProtectionDomain allocPd() {
        checkNotClosed();
        SoftPd pd = new SoftPd(this);
        children.add(pd);
        return pd;
    }

    @Override
    public CompletionChannel createCompChannel() {
        checkNotClosed();
        SoftChannel ch = new SoftChannel(this);
        children.add(ch);
        return ch;
    }

    @Override
    public CompletionQueue createCq(int cqe, CompletionChannel channel, int compVector) {
        checkNotClosed();
        if (cqe < 1 || cqe > SoftDevice.MAX_CQE) {
            throw new VerbsException(Errno.EINVAL, "cqe=" + cqe + " (expected 1.." + SoftDevice.MAX_CQE + ")");
        }
        SoftChannel ch = null;
        if (channel != null) {
            if (!(channel instanceof SoftChannel sc) || sc.ctx != this) {
                throw new VerbsException(Errno.EINVAL, "completion channel belongs to another context");
            }
            sc.checkNotClosed();
            ch = sc;
        }
        SoftCq cq = new SoftCq(this, cqe, ch);
        if (ch != null) {
            ch.users.incrementAndGet();
        }
        children.add(cq);
        return cq;
    }

    void raise(AsyncEvent e) {
        events.add(e);
    }

    /** Put in the event queue by {@link #close}: wakes every waiter, which then throws. */
    private static final AsyncEvent CLOSED = new AsyncEvent(AsyncEventType.DEVICE_FATAL, null, null, null, 0);

    @Override
    public AsyncEvent getAsyncEvent(Duration timeout) {
        if (closed) {
            throw new VerbsException(Errno.EINVAL, describe() + " is closed");
        }
        AsyncEvent e;
        try {
            e = timeout.isZero() ? events.poll() : events.poll(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException ie) {
            Thread.currentThread().interrupt();
            return null;
        }
        if (e == CLOSED) {
            events.add(CLOSED); // for the next waiter
            throw new VerbsException(Errno.EINVAL, describe() + " was closed while this thread waited in"
                    + " getAsyncEvent");
        }
        return e;
    }

    @Override
    public void ackAsyncEvent(AsyncEvent event) {
        // Events hold no resources here; acknowledging is accepted for API compatibility.
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        checkIdle("ibv_close_device");
        closed = true;
        events.add(CLOSED);
        device.dma.ownerClosed(this, describe());
        device.contextClosed(this);
    }
}
