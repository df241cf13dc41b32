// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import java.lang.foreign.Arena;

import org.rdma4j.common.ManualClock;
import org.rdma4j.verbs.Device;

/**
 * A test network of at least two devices that behave as two hosts on one network. Every protocol
 * timer of its devices (retransmit, RNR NAK) is driven by {@link #clock()}: tests move time with
 * {@code clock().advance(ns)} and never sleep.
 */
public interface Fabric extends AutoCloseable {
    /**
     * {@return the device}
     *
     * @param index 0-based device index, below {@link #deviceCount()}
     */
    Device device(int index);

    /** {@return how many devices the fabric has (at least 2)} */
    int deviceCount();

    /**
     * Whether the two "hosts" are one device reaching itself (a kernel device such as rxe, which loops
     * packets for its own GID back, rxe_loopback): then both indexes name the same device, with the same
     * GUID and GIDs, and only what needs two distinct hosts is left out.
     *
     * @return true for a one-device loopback fabric; false (the default) for distinct devices
     */
    default boolean loopback() {
        return false;
    }

    /**
     * Whether the devices' protocol timers (retransmit, RNR) run on the wall clock rather than on
     * {@link #clock()}: a kernel device's timers are the kernel's. Then advancing the clock does nothing,
     * {@link ConformanceTestBase#advanceUntil} waits in real time instead, and what needs frozen time is
     * left out.
     *
     * @return true when timers are real; false (the default) when {@link #clock()} drives them
     */
    default boolean realTimeTimers() {
        return false;
    }

    /**
     * Makes the fabric's hosts members of a multicast group at the IP level, which on RoCEv2 is rdma_cm's
     * half of a join ({@code rdma_join_multicast}: cma_iboe_join_multicast sends the IGMP/MLD join, while
     * {@code ibv_attach_mcast} only attaches a QP and filters the MAC). A kernel device then receives the
     * group's packets, its own ones looped back by the IP stack included; without it rxe never sees them.
     * The default does nothing: a soft device delivers to attached QPs by itself.
     *
     * @param group a multicast GID
     * @return what ends the membership (closed after the test)
     */
    default AutoCloseable joinIpMulticast(org.rdma4j.verbs.Gid group) {
        return () -> { };
    }

    /** {@return the clock that drives all protocol timers of the fabric's devices} */
    ManualClock clock();

    /**
     * The connection manager through which this fabric's RC QPs must be connected, or null (the default)
     * when the players move both QPs through INIT, RTR and RTS themselves. iWARP devices (siw) have no
     * user-driven connection: the kernel's iw_cm moves the QPs to RTS with the TCP stream it sets up
     * (siw_qp.c siw_qp_nextstate_from_idle refuses RTS without the CM's socket), so the players connect
     * them with rdma_connect/rdma_accept at {@link #cmAddress()}.
     *
     * @return the CM, or null
     */
    default org.rdma4j.verbs.cm.RdmaCm cm() {
        return null;
    }

    /**
     * Opens the context a test side uses on device {@code index}: by default {@code device(index).open()}.
     * A fabric whose side-1 QPs must be made by a CM ID ({@link #cm()}: on iWARP, librdmacm's
     * {@code rdma_accept} needs the passive ID's own QP, made on the CM's context for the device) returns
     * that context for index 1, so the PDs, CQs and SRQs the test makes there are usable by the CM's QPs.
     * Such a shared context is not closed by {@code close()}, which still refuses (EBUSY) while anything
     * the test made on it is open: the suites' leak check keeps working.
     *
     * @param index 0-based device index
     * @return a context on that device
     */
    default org.rdma4j.verbs.Context openContext(int index) {
        return device(index).open();
    }

    /**
     * The IP address both sides of a loopback iWARP fabric use with {@link #cm()}.
     *
     * @return the address, or null
     */
    default java.net.InetAddress cmAddress() {
        return null;
    }

    /**
     * Changes the logical state of a port, as pulling a cable or {@code ip link set down} would.
     * Optional: fabrics that cannot do this throw {@link UnsupportedOperationException}.
     *
     * @param deviceIndex device index
     * @param port        1-based port number
     * @param active      true for ACTIVE, false for DOWN
     */
    default void setPortState(int deviceIndex, int port, boolean active) {
        throw new UnsupportedOperationException("this fabric cannot change port states");
    }

    /**
     * A new arena for the test's buffers (the memory tests register and read and write directly). A
     * fabric whose devices live in other processes returns one that allocates from memory those processes
     * share, at the same virtual address in each; the default is {@link Arena#ofShared()}. Closed by
     * the test after every region over it is deregistered, before the fabric is closed.
     *
     * @return a fresh arena whose segments are native, zeroed and alive until it is closed
     */
    default Arena bufferArena() {
        return Arena.ofShared();
    }

    /** Tears the fabric down; its devices are gone afterwards. */
    @Override
    void close();
}
