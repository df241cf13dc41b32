package org.rdma4j.wire;

/** RoCEv2 constants (IBA Annex A17). */
public final class Roce {
    /** IANA UDP destination port of RoCEv2 (A17.4.2). */
    public static final int UDP_PORT = 4791;

    private Roce() {
    }
}
