// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.rdma4j.libc.Libc;

/**
 * Loads {@code libibverbs.so.1} once and checks its ABI against what this provider was written for, before
 * any of its functions is called. The check is by symbol version: libibverbs exports two ABIs under one
 * name (the {@code IBVERBS_1.0} functions take the pre-2006 struct layouts, {@code IBVERBS_1.1} the current
 * ones; rdma-core {@code libibverbs.map.in}, {@code Documentation/versioning.md}: a version node never
 * changes once released). Every function is bound with {@code dlvsym} to the node whose layouts
 * {@link IbvLayouts} describes, so a library whose default moved to a new node still gives us the ABI we
 * speak, and a library that lacks one refuses to load, naming the symbol and the node.
 */
final class IbvLibrary {
    /**
     * The soname (the unversioned {@code libibverbs.so} exists only with the -dev package); the system
     * property {@code rdma4j.ibverbs.library} names another one or a path (a library built elsewhere, or the
     * benchmarks' no-op stand-in).
     */
    static final String SONAME = "libibverbs.so.1";

    /** The functions this provider calls, with the version node it was written for. */
    static final Map<String, String> REQUIRED = new LinkedHashMap<>();
    /** Functions used only when present (newer rdma-core), with their node. */
    static final Map<String, String> OPTIONAL = new LinkedHashMap<>();

    static {
        for (String f : List.of("ibv_get_device_list", "ibv_free_device_list", "ibv_get_device_name",
                "ibv_get_device_guid", "ibv_open_device", "ibv_close_device", "ibv_get_async_event",
                "ibv_ack_async_event", "ibv_query_device", "ibv_query_port", "ibv_query_gid", "ibv_query_pkey",
                "ibv_alloc_pd", "ibv_dealloc_pd", "ibv_reg_mr", "ibv_dereg_mr", "ibv_create_cq", "ibv_resize_cq",
                "ibv_destroy_cq", "ibv_get_cq_event", "ibv_ack_cq_events", "ibv_create_srq", "ibv_modify_srq",
                "ibv_query_srq", "ibv_destroy_srq", "ibv_create_qp", "ibv_query_qp", "ibv_modify_qp",
                "ibv_destroy_qp", "ibv_create_ah", "ibv_destroy_ah", "ibv_attach_mcast", "ibv_detach_mcast",
                "ibv_fork_init")) {
            REQUIRED.put(f, "IBVERBS_1.1");
        }
        // the completion channel functions never got a 1.1 node: 1.0 is their only (and current) ABI
        REQUIRED.put("ibv_create_comp_channel", "IBVERBS_1.0");
        REQUIRED.put("ibv_destroy_comp_channel", "IBVERBS_1.0");
        OPTIONAL.put("_ibv_query_gid_ex", "IBVERBS_1.11");
        OPTIONAL.put("ibv_is_fork_initialized", "IBVERBS_1.13");
    }

    /** The result of loading: either bound symbols or why not. */
    record Loaded(Map<String, MemorySegment> symbols, String failure) {
        boolean ok() {
            return failure == null;
        }
    }

    private static volatile Loaded loaded;

    private IbvLibrary() {
    }

    /** {@return the library, loading and checking it on first use} */
    static Loaded get() {
        Loaded l = loaded;
        if (l == null) {
            synchronized (IbvLibrary.class) {
                l = loaded;
                if (l == null) {
                    l = load(System.getProperty("rdma4j.ibverbs.library", SONAME));
                    loaded = l;
                }
            }
        }
        return l;
    }

    /**
     * Opens a library and binds every required symbol at its version.
     *
     * @param soname the library to open
     * @return the symbols, or the failure naming what is missing and what to do
     */
    static Loaded load(String soname) {
        MemorySegment h = Libc.dlopen(soname, Libc.RTLD_NOW | Libc.RTLD_LOCAL);
        if (h.equals(MemorySegment.NULL)) {
            String why = Libc.dlerror();
            return new Loaded(null, soname + " cannot be loaded (" + why + "): install rdma-core's user-space "
                    + "verbs library and providers (Debian/Ubuntu: apt-get install libibverbs1 ibverbs-providers; "
                    + "RHEL/Fedora: dnf install libibverbs)");
        }
        Map<String, MemorySegment> syms = new LinkedHashMap<>();
        List<String> missing = new ArrayList<>();
        for (Map.Entry<String, String> e : REQUIRED.entrySet()) {
            MemorySegment s = Libc.dlvsym(h, e.getKey(), e.getValue());
            if (s.equals(MemorySegment.NULL)) {
                MemorySegment any = Libc.dlsym(h, e.getKey());
                missing.add(e.getKey() + "@" + e.getValue()
                        + (any.equals(MemorySegment.NULL) ? " (no such function)" : " (only another version)"));
            } else {
                syms.put(e.getKey(), s);
            }
        }
        if (!missing.isEmpty()) {
            return new Loaded(null, soname + " does not have the ABI this provider was written for (rdma-core "
                    + "libibverbs with the IBVERBS_1.1 layouts, as in rdma-core 17 and later): missing "
                    + String.join(", ", missing));
        }
        for (Map.Entry<String, String> e : OPTIONAL.entrySet()) {
            MemorySegment s = Libc.dlvsym(h, e.getKey(), e.getValue());
            if (!s.equals(MemorySegment.NULL)) {
                syms.put(e.getKey(), s);
            }
        }
        return new Loaded(Map.copyOf(syms), null);
    }

    /**
     * {@return its address at the checked version}
     *
     * @param name a required or optional function
     */
    static Optional<MemorySegment> find(String name) {
        Loaded l = get();
        if (!l.ok()) {
            throw new IllegalStateException(l.failure());
        }
        return Optional.ofNullable(l.symbols().get(name));
    }
}
