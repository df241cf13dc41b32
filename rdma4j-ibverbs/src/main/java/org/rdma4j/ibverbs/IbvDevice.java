// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;

/**
 * A libibverbs device ({@code struct ibv_device}). {@link #open()} gives an {@link IbvContext}.
 */
public final class IbvDevice implements Device {
    /** ibv_transport_type: IBV_TRANSPORT_IB. */
    static final int TRANSPORT_IB = 0;
    /** ibv_transport_type: IBV_TRANSPORT_IWARP. */
    static final int TRANSPORT_IWARP = 1;

    private static final long NAME = IbvLayouts.offset(IbvLayouts.DEVICE, "name");
    private static final long DEV_NAME = IbvLayouts.offset(IbvLayouts.DEVICE, "dev_name");
    private static final long NODE_TYPE = IbvLayouts.offset(IbvLayouts.DEVICE, "node_type");
    private static final long TRANSPORT_TYPE = IbvLayouts.offset(IbvLayouts.DEVICE, "transport_type");

    final MemorySegment ptr;
    private final String name;
    private final String uverbs;
    private final long guid;
    private final int nodeType;
    private final int transportType;
    /** max_inline_data found by probing, -1 until known. */
    volatile int maxInline = -1;
    /** max_sge_rd, read by the first context that needs it ({@link IbvContext#maxSgeRd}); -1 before. */
    volatile int maxSgeRd = -1;

    private IbvDevice(MemorySegment ptr, String name, String uverbs, long guid, int nodeType, int transportType) {
        this.ptr = ptr;
        this.name = name;
        this.uverbs = uverbs;
        this.guid = guid;
        this.nodeType = nodeType;
        this.transportType = transportType;
    }

    /**
     * Reads a device, checking the layout this provider assumes against libibverbs' own accessor.
     *
     * @param ptr an element of ibv_get_device_list's array
     * @return the device
     * @throws IllegalStateException when {@code ibv_device.name} does not hold what ibv_get_device_name says
     */
    static IbvDevice of(MemorySegment ptr) {
        String byCall;
        long guidBe;
        try {
            byCall = ((MemorySegment) Ibv.GET_DEVICE_NAME.invokeExact(Ibv.newCallState(java.lang.foreign.Arena.ofAuto()),
                    ptr)).reinterpret(64).getString(0);
            guidBe = (long) Ibv.GET_DEVICE_GUID.invokeExact(Ibv.newCallState(java.lang.foreign.Arena.ofAuto()), ptr);
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
        String byLayout = ptr.getString(NAME);
        if (!byCall.equals(byLayout)) {
            throw new IllegalStateException("libibverbs' struct ibv_device differs from the layout this provider "
                    + "was written for: the name at offset " + NAME + " reads '" + byLayout
                    + "', ibv_get_device_name says '" + byCall + "'; device " + byCall + " is not offered");
        }
        return new IbvDevice(ptr, byCall, ptr.getString(DEV_NAME), Long.reverseBytes(guidBe),
                ptr.get(java.lang.foreign.ValueLayout.JAVA_INT, NODE_TYPE),
                ptr.get(java.lang.foreign.ValueLayout.JAVA_INT, TRANSPORT_TYPE));
    }

    /**
     * A device over a struct this provider did not get from libibverbs, for tests of the ABI checks.
     *
     * @param ptr the struct
     * @param name its name
     * @return the device
     */
    static IbvDevice forTest(MemorySegment ptr, String name) {
        return new IbvDevice(ptr, name, "uverbs9", 0, 1, TRANSPORT_IB);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public long guid() {
        return guid;
    }

    @Override
    public String providerName() {
        return "ibverbs";
    }

    @Override
    public org.rdma4j.verbs.TransportType transportType() {
        return isIwarp() ? org.rdma4j.verbs.TransportType.IWARP : org.rdma4j.verbs.TransportType.IB;
    }

    /** {@return the uverbs character device name, e.g. {@code uverbs0} (/dev/infiniband/uverbs0)} */
    public String uverbsName() {
        return uverbs;
    }

    /** {@return true for an iWARP device (siw, Chelsio, irdma in iWARP mode): connected only through rdma_cm} */
    public boolean isIwarp() {
        return transportType == TRANSPORT_IWARP;
    }

    /** {@return ibv_node_type (1 CA, 4 RNIC, ...)} */
    public int nodeType() {
        return nodeType;
    }

    @Override
    public Context open() {
        return IbvContext.open(this);
    }

    @Override
    public String toString() {
        return name + " (ibverbs, " + (isIwarp() ? "iWARP" : "IB/RoCE") + ")";
    }
}
