// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * Device attributes as ibv_query_device reports them.
 *
 * @param fwVer            firmware version string
 * @param nodeGuid         node GUID
 * @param sysImageGuid     system image GUID
 * @param maxMrSize        largest registrable region
 * @param pageSizeCap      supported page sizes
 * @param vendorId         IEEE vendor id
 * @param vendorPartId     vendor part id
 * @param hwVer            hardware version
 * @param maxQp            QPs
 * @param maxQpWr          work requests per queue
 * @param deviceCapFlags   ibv_device_cap_flags
 * @param maxSge           scatter/gather entries per request
 * @param maxCq            CQs
 * @param maxCqe           entries per CQ
 * @param maxMr            MRs
 * @param maxPd            PDs
 * @param maxQpRdAtom      outstanding RDMA READ/atomics per QP as responder
 * @param maxQpInitRdAtom  outstanding RDMA READ/atomics per QP as initiator
 * @param maxSrq           SRQs
 * @param maxSrqWr         work requests per SRQ
 * @param maxSrqSge        scatter entries per SRQ request
 * @param maxAh            address handles
 * @param maxInlineData    inline bytes per send request
 * @param atomicCap        "ATOMIC_HCA" or "ATOMIC_NONE"
 * @param physPortCnt      ports
 * @param localCaAckDelay  local CA ACK delay
 * @param maxSgeRd         scatter entries of an RDMA READ's local list (ibv_device_attr.max_sge_rd: iWARP
 *                         allows 1, siw.h SIW_MAX_SGE_RD; rxe 32, as its max_sge)
 */
public record DeviceAttributes(String fwVer, long nodeGuid, long sysImageGuid, long maxMrSize, long pageSizeCap,
                               int vendorId, int vendorPartId, int hwVer, int maxQp, int maxQpWr, long deviceCapFlags,
                               int maxSge, int maxCq, int maxCqe, int maxMr, int maxPd, int maxQpRdAtom,
                               int maxQpInitRdAtom, int maxSrq, int maxSrqWr, int maxSrqSge, int maxAh,
                               int maxInlineData, String atomicCap, int physPortCnt, int localCaAckDelay,
                               int maxSgeRd) {
    /**
     * Attributes of a device whose RDMA READs take as many scatter entries as any request ({@code maxSgeRd}
     * = {@code maxSge}, as rxe and the soft device).
     *
     * @param fwVer            firmware version string
     * @param nodeGuid         node GUID
     * @param sysImageGuid     system image GUID
     * @param maxMrSize        largest registrable region
     * @param pageSizeCap      supported page sizes
     * @param vendorId         IEEE vendor id
     * @param vendorPartId     vendor part id
     * @param hwVer            hardware version
     * @param maxQp            QPs
     * @param maxQpWr          work requests per queue
     * @param deviceCapFlags   ibv_device_cap_flags
     * @param maxSge           scatter/gather entries per request
     * @param maxCq            CQs
     * @param maxCqe           entries per CQ
     * @param maxMr            MRs
     * @param maxPd            PDs
     * @param maxQpRdAtom      outstanding RDMA READ/atomics per QP as responder
     * @param maxQpInitRdAtom  outstanding RDMA READ/atomics per QP as initiator
     * @param maxSrq           SRQs
     * @param maxSrqWr         work requests per SRQ
     * @param maxSrqSge        scatter entries per SRQ request
     * @param maxAh            address handles
     * @param maxInlineData    inline bytes per send request
     * @param atomicCap        "ATOMIC_HCA" or "ATOMIC_NONE"
     * @param physPortCnt      ports
     * @param localCaAckDelay  local CA ACK delay
     */
    public DeviceAttributes(String fwVer, long nodeGuid, long sysImageGuid, long maxMrSize, long pageSizeCap,
                            int vendorId, int vendorPartId, int hwVer, int maxQp, int maxQpWr, long deviceCapFlags,
                            int maxSge, int maxCq, int maxCqe, int maxMr, int maxPd, int maxQpRdAtom,
                            int maxQpInitRdAtom, int maxSrq, int maxSrqWr, int maxSrqSge, int maxAh,
                            int maxInlineData, String atomicCap, int physPortCnt, int localCaAckDelay) {
        this(fwVer, nodeGuid, sysImageGuid, maxMrSize, pageSizeCap, vendorId, vendorPartId, hwVer, maxQp, maxQpWr,
                deviceCapFlags, maxSge, maxCq, maxCqe, maxMr, maxPd, maxQpRdAtom, maxQpInitRdAtom, maxSrq, maxSrqWr,
                maxSrqSge, maxAh, maxInlineData, atomicCap, physPortCnt, localCaAckDelay, maxSge);
    }
}
