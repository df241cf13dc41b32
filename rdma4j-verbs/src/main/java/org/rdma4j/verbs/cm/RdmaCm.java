// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs.cm;

import java.io.IOException;
import java.net.DatagramSocket;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.ServiceLoader;

import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.CmProvider;

/**
 * A set of connection-manager providers: the entry point of the CM API. {@link #system()} holds every
 * {@link CmProvider} found with {@link ServiceLoader} (rdma4j-cm for the soft devices, a librdmacm
 * provider for kernel devices); {@link #of} makes a set for tests and for programs that want one
 * provider only. CM IDs of one {@code RdmaCm} see each other's ports; two sets are two hosts.
 *
 * <p>Address ownership decides the provider of a CM ID: the provider whose device owns the address it
 * binds to, or, when resolving without a source address, the one owning the address the host's
 * routing table picks for the destination (as rdma_cm's {@code cma_acquire_dev_by_src_ip}). A
 * destination the set owns itself is a loopback connection on that device.
 */
public final class RdmaCm {
    private static volatile RdmaCm system;

    private final List<CmProvider> providers;

    private RdmaCm(List<CmProvider> providers) {
        this.providers = List.copyOf(providers);
    }

    /** {@return the providers found with ServiceLoader, loaded on first use} */
    public static RdmaCm system() {
        RdmaCm s = system;
        if (s == null) {
            synchronized (RdmaCm.class) {
                s = system;
                if (s == null) {
                    List<CmProvider> found = new ArrayList<>();
                    for (CmProvider p : ServiceLoader.load(CmProvider.class)) {
                        found.add(p);
                    }
                    s = new RdmaCm(found);
                    system = s;
                }
            }
        }
        return s;
    }

    /**
     * A set of exactly these providers.
     *
     * @param providers the providers, in the order they are asked
     * @return the set
     */
    public static RdmaCm of(CmProvider... providers) {
        return of(List.of(providers));
    }

    /**
     * A set of exactly these providers.
     *
     * @param providers the providers, in the order they are asked
     * @return the set
     */
    public static RdmaCm of(List<CmProvider> providers) {
        for (CmProvider p : providers) {
            Objects.requireNonNull(p, "provider");
        }
        return new RdmaCm(providers);
    }

    /** {@return the providers} */
    public List<CmProvider> providers() {
        return providers;
    }

    /** {@return every local RDMA address of every provider ({@link CmProvider#addresses()})} */
    public List<CmAddress> addresses() {
        List<CmAddress> all = new ArrayList<>();
        for (CmProvider p : providers) {
            all.addAll(p.addresses());
        }
        return all;
    }

    /** {@return a new event channel on this set (rdma_create_event_channel)} */
    public CmEventChannel createEventChannel() {
        return new CmEventChannel(this);
    }

    // ------------------------------------------------------------------ address ownership (package-private)

    /** A provider and one of its addresses. */
    record Owner(CmProvider provider, CmAddress address) {
    }

    /** {@return the provider owning {@code address}, or null} */
    Owner owner(InetAddress address) {
        for (CmProvider p : providers) {
            for (CmAddress a : p.addresses()) {
                if (sameAddress(a.address(), address)) {
                    return new Owner(p, a);
                }
            }
        }
        return null;
    }

    /**
     * The provider and source address for reaching {@code destination}: a locally owned destination is a
     * loopback on its device; otherwise the source the host's routing table picks if a provider owns it,
     * or an address of a provider on the same interface as that source, or what a provider offers
     * ({@link CmProvider#sourceFor}).
     *
     * @return the owner, or null if no provider reaches the destination
     */
    Owner route(InetAddress destination) {
        Owner self = owner(destination);
        if (self != null) {
            return self;
        }
        InetAddress src = hostRouteSource(destination);
        if (src != null) {
            Owner o = owner(src);
            if (o != null) {
                return o;
            }
            NetworkInterface nif = interfaceOf(src);
            if (nif != null) {
                for (CmProvider p : providers) {
                    for (CmAddress a : p.addresses()) {
                        if (a.address().getClass() == src.getClass() && nif.equals(interfaceOf(a.address()))) {
                            return new Owner(p, a);
                        }
                    }
                }
            }
        }
        for (CmProvider p : providers) {
            CmAddress a = p.sourceFor(destination);
            if (a != null) {
                return new Owner(p, a);
            }
        }
        return null;
    }

    /** {@return a message listing the local RDMA addresses, for errors} */
    String describeAddresses() {
        List<CmAddress> all = addresses();
        if (all.isEmpty()) {
            return providers.isEmpty() ? "no CM provider is installed (add rdma4j-cm or an ibverbs provider)"
                    : "no RDMA device has an IP address (providers: " + providerNames() + ")";
        }
        return "local RDMA addresses: " + all;
    }

    private String providerNames() {
        List<String> n = new ArrayList<>();
        providers.forEach(p -> n.add(p.name()));
        return String.join(", ", n);
    }

    /**
     * The error for a source address no provider owns, as rdma_bind_addr gives it: EADDRNOTAVAIL if the
     * host has no such address ({@code rdma_translate_ip} finds no interface), ENODEV if it has one but no
     * RDMA device is on it ({@code cma_acquire_dev_by_src_ip}).
     */
    VerbsException notOwned(InetAddress a, String verb) {
        boolean hostHas = interfaceOf(a) != null;
        return new VerbsException(hostHas ? Errno.ENODEV : Errno.EADDRNOTAVAIL, verb + " " + a.getHostAddress()
                + (hostHas ? ": no RDMA device is on that interface" : ": not an address of this host or of an RDMA device")
                + "; " + describeAddresses() + " (bind one of these, or add a device: rdma4j link add ...)");
    }

    static boolean sameAddress(InetAddress a, InetAddress b) {
        if (a instanceof Inet6Address x && b instanceof Inet6Address y) {
            return java.util.Arrays.equals(x.getAddress(), y.getAddress());
        }
        return a.equals(b);
    }

    private static InetAddress hostRouteSource(InetAddress destination) {
        try (DatagramSocket s = new DatagramSocket()) {
            s.connect(new InetSocketAddress(destination, 9));
            InetAddress local = s.getLocalAddress();
            return local == null || local.isAnyLocalAddress() ? null : local;
        } catch (IOException | RuntimeException e) {
            return null; // no route: the providers may still know one
        }
    }

    private static NetworkInterface interfaceOf(InetAddress a) {
        try {
            return NetworkInterface.getByInetAddress(a);
        } catch (SocketException | RuntimeException e) {
            return null;
        }
    }
}
