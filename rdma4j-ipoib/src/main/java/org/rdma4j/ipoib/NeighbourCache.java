// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.util.function.Consumer;

import org.rdma4j.common.NanoClock;

/**
 * The IPv4 neighbour table of an IPoIB interface: IPv4 address to 20-byte hardware address and the
 * address handle that reaches it, with aging on an injectable clock, shaped like the kernel's neighbour
 * table: an entry confirmed by an ARP packet is reachable for the reachable time; then, if packets were
 * sent to it meanwhile, it is probed with unicast ARP requests while staying in use, and forgotten if
 * nothing was sent to it or the probes go unanswered. An unanswered resolution is repeated a few times,
 * then the entry fails and its queued packets are dropped.
 *
 * <p>An open-addressing table keyed by the address, so a lookup on the send path allocates nothing.
 * Not thread-safe: the interface calls it under its lock.
 *
 * @param <A> the address handle type (the verbs AH; tests use anything)
 */
public final class NeighbourCache<A> {
    /** Resolution state of an entry. */
    public enum State {
        /** An ARP request is out; packets wait in the entry's queue. */
        INCOMPLETE,
        /** The hardware address is known and was confirmed within the reachable time. */
        REACHABLE,
        /**
         * The reachable time ran out while the entry was in use: it is still used, and unicast ARP requests
         * to the known address ask the neighbour to confirm (the kernel's STALE/PROBE states, so traffic
         * does not stop for a new broadcast resolution every reachable period).
         */
        PROBE
    }

    /**
     * One neighbour.
     *
     * @param <A> the address handle type
     */
    public static final class Entry<A> {
        final int ip;
        State state = State.INCOMPLETE;
        HardwareAddress hw;
        A ah;
        long confirmedNs;
        long requestNs;
        int requests;
        /** Set by {@link NeighbourCache#used} on the send path, cleared by aging. */
        boolean used;
        final int[] pending;
        int pendingCount;

        Entry(int ip, int maxPending) {
            this.ip = ip;
            this.pending = new int[maxPending];
        }

        /** {@return the IPv4 address} */
        public int ip() {
            return ip;
        }

        /** {@return the state} */
        public State state() {
            return state;
        }

        /** {@return the hardware address, or null while incomplete} */
        public HardwareAddress hardware() {
            return hw;
        }

        /** {@return the address handle, or null while incomplete} */
        public A ah() {
            return ah;
        }

        /** {@return how many packets wait for resolution} */
        public int pendingCount() {
            return pendingCount;
        }

        /** {@return how many ARP requests were sent for this resolution} */
        public int requests() {
            return requests;
        }
    }

    /**
     * What aging found; called from {@link #age}.
     *
     * @param <A> the hardware address type
     */
    public interface Listener<A> {
        /**
         * An incomplete entry needs another ARP request (to the broadcast group).
         *
         * @param e the entry (its request count already raised)
         */
        void retry(Entry<A> e);

        /**
         * An entry in use needs confirming: send a unicast ARP request to its known hardware address.
         *
         * @param e the entry (state {@link State#PROBE}, request count already raised)
         */
        void probe(Entry<A> e);

        /**
         * An entry was removed: a reachable one not confirmed in time, or an incomplete one whose requests
         * all went unanswered (its pending packets are still listed for the caller to release).
         *
         * @param e the removed entry
         */
        void removed(Entry<A> e);
    }

    private final NanoClock clock;
    private final long reachableNs;
    private final long retransNs;
    private final int maxRequests;
    private final int maxPending;
    private final int capacity;
    private final int[] keys;
    @SuppressWarnings("unchecked")
    private final Entry<A>[] values;
    private final int mask;
    private int size;

    /**
     * Creates an empty cache.
     *
     * @param clock time source
     * @param reachableNs how long a confirmed entry stays usable
     * @param retransNs interval between ARP requests of one resolution
     * @param maxRequests requests before a resolution fails
     * @param maxPending packets queued per unresolved neighbour (more are dropped)
     * @param capacity most neighbours held
     */
    @SuppressWarnings("unchecked")
    public NeighbourCache(NanoClock clock, long reachableNs, long retransNs, int maxRequests, int maxPending, int capacity) {
        if (capacity < 1 || maxPending < 0 || maxRequests < 1 || reachableNs <= 0 || retransNs <= 0) {
            throw new IllegalArgumentException("bad neighbour cache parameters");
        }
        this.clock = clock;
        this.reachableNs = reachableNs;
        this.retransNs = retransNs;
        this.maxRequests = maxRequests;
        this.maxPending = maxPending;
        this.capacity = capacity;
        int slots = Integer.highestOneBit(capacity * 2 - 1) << 1;
        this.keys = new int[slots];
        this.values = (Entry<A>[]) new Entry<?>[slots];
        this.mask = slots - 1;
    }

    /** {@return the number of entries} */
    public int size() {
        return size;
    }

    /**
     * {@return its entry, or null}
     *
     * @param ip an IPv4 address (not 0)
     */
    public Entry<A> get(int ip) {
        for (int i = slot(ip); values[i] != null; i = (i + 1) & mask) {
            if (keys[i] == ip) {
                return values[i];
            }
        }
        return null;
    }

    /**
     * Starts resolving an address: creates an incomplete entry whose first request counts as sent now.
     *
     * @param ip the address
     * @return the new entry, or null when the table is full
     */
    public Entry<A> startResolving(int ip) {
        if (get(ip) != null) {
            throw new IllegalStateException("already present");
        }
        if (size >= capacity) {
            return null;
        }
        Entry<A> e = insert(ip);
        e.requests = 1;
        e.requestNs = clock.nanoTime();
        return e;
    }

    /**
     * Records a hardware address learned from an ARP packet, creating the entry if needed.
     *
     * @param ip the sender's address
     * @param hw its hardware address
     * @return the entry, or null when the table is full; the caller checks {@link Entry#ah()} against the
     *     new address and installs one with {@link #install}
     */
    public Entry<A> confirm(int ip, HardwareAddress hw) {
        Entry<A> e = get(ip);
        if (e == null) {
            if (size >= capacity) {
                return null;
            }
            e = insert(ip);
        }
        e.confirmedNs = clock.nanoTime();
        if (e.ah != null && hw.equals(e.hw)) {
            e.state = State.REACHABLE; // a probed entry is confirmed; its handle stays
            e.requests = 0;
            return e;
        }
        e.hw = hw;
        return e;
    }

    /**
     * Notes that a packet was sent to the entry (the send path calls it; no clock read).
     *
     * @param e the entry
     */
    public void used(Entry<A> e) {
        e.used = true;
    }

    /**
     * Makes an entry reachable with an address handle for its (new) hardware address.
     *
     * @param e  the entry
     * @param ah the handle
     * @return the handle it replaces, or null
     */
    public A install(Entry<A> e, A ah) {
        A old = e.ah;
        e.ah = ah;
        e.state = State.REACHABLE;
        e.requests = 0;
        return old;
    }

    /**
     * Queues a packet (by the caller's buffer index) on an unresolved entry.
     *
     * @param e      the entry
     * @param buffer the buffer index
     * @return false when the entry's queue is full (the packet is to be dropped)
     */
    public boolean enqueue(Entry<A> e, int buffer) {
        if (e.pendingCount >= maxPending) {
            return false;
        }
        e.pending[e.pendingCount++] = buffer;
        return true;
    }

    /**
     * Takes the queued packets of an entry, in arrival order.
     *
     * @param e    the entry
     * @param each receives each buffer index
     */
    public void drain(Entry<A> e, java.util.function.IntConsumer each) {
        int n = e.pendingCount;
        e.pendingCount = 0;
        for (int i = 0; i < n; i++) {
            each.accept(e.pending[i]);
        }
    }

    /**
     * Ages the table at the clock's current time: removes reachable entries not confirmed within the
     * reachable time, repeats requests of incomplete ones every retransmit interval, and removes those whose
     * requests all went unanswered.
     *
     * @param listener told what to do
     */
    public void age(Listener<A> listener) {
        long now = clock.nanoTime();
        for (int i = 0; i < values.length; i++) {
            Entry<A> e = values[i];
            if (e == null) {
                continue;
            }
            if (e.state == State.REACHABLE) {
                if (now - e.confirmedNs >= reachableNs) {
                    if (e.used) {
                        e.used = false;
                        e.state = State.PROBE;
                        e.requests = 1;
                        e.requestNs = now;
                        listener.probe(e);
                    } else {
                        remove(i);
                        listener.removed(e);
                        i--; // backward shift moved another entry into slot i
                    }
                }
            } else if (now - e.requestNs >= retransNs) {
                if (e.requests >= maxRequests) {
                    remove(i);
                    listener.removed(e);
                    i--;
                } else {
                    e.requests++;
                    e.requestNs = now;
                    if (e.state == State.PROBE) {
                        listener.probe(e);
                    } else {
                        listener.retry(e);
                    }
                }
            }
        }
    }

    /**
     * Visits every entry (for printing).
     *
     * @param each the visitor
     */
    public void forEach(Consumer<Entry<A>> each) {
        for (Entry<A> e : values) {
            if (e != null) {
                each.accept(e);
            }
        }
    }

    private Entry<A> insert(int ip) {
        if (ip == 0) {
            throw new IllegalArgumentException("0.0.0.0 is not a neighbour");
        }
        int i = slot(ip);
        while (values[i] != null) {
            i = (i + 1) & mask;
        }
        Entry<A> e = new Entry<>(ip, maxPending);
        keys[i] = ip;
        values[i] = e;
        size++;
        return e;
    }

    /** Linear-probing delete with backward shift, so lookups need no tombstones. */
    private void remove(int i) {
        values[i] = null;
        size--;
        int j = i;
        while (true) {
            j = (j + 1) & mask;
            Entry<A> e = values[j];
            if (e == null) {
                return;
            }
            int home = slot(keys[j]);
            // move e back to i if i lies cyclically in [home, j)
            boolean movable = j > i ? (home <= i || home > j) : (home <= i && home > j);
            if (movable) {
                keys[i] = keys[j];
                values[i] = e;
                values[j] = null;
                i = j;
            }
        }
    }

    private int slot(int ip) {
        int h = ip * 0x9E37_79B9;
        return (h ^ (h >>> 16)) & mask;
    }
}
