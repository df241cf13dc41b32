package org.rdma4j.soft;

import org.rdma4j.verbs.Gid;

/**
 * One IB transport packet as the engine sees it: the BTH and extension-header fields (IBA 9.2–9.3)
 * plus a payload that refers to memory. A link either hands it to the peer device as is (in-process)
 * or encodes it on the wire (RoCEv2). Reused: valid only for the duration of a delivery call.
 */
final class Packet {
    // Routing (GRH / IP)
    /** The destination device when the sender has resolved it already (in-process fast path), else null. */
    SoftDevice route;
    Gid sgid;
    Gid dgid;
    int hopLimit;
    int trafficClass;
    // BTH
    int opcode;
    boolean solicited;
    int pkey = 0xFFFF;
    int destQpn;
    boolean ackReq;
    int psn;
    // RETH / AtomicETH
    long va;
    int rkey;
    int dmaLen;
    long swapAdd;
    long compare;
    // ImmDt
    int imm;
    // AETH
    int syndrome;
    int msn;
    // AtomicAckETH
    long origValue;
    // DETH
    int qkey;
    int srcQpn;
    // Payload: payloadLen bytes starting at payloadOff of payload
    Sgl payload;
    long payloadOff;
    int payloadLen;

    int mask() {
        return Opcodes.mask(opcode);
    }

    boolean is(int m) {
        return (Opcodes.mask(opcode) & m) != 0;
    }

    Packet clearPayload() {
        payload = null;
        payloadOff = 0;
        payloadLen = 0;
        return this;
    }

    @Override
    public String toString() {
        return Opcodes.name(opcode) + " qpn=0x" + Integer.toHexString(destQpn) + " psn=0x" + Integer.toHexString(psn)
                + (ackReq ? " A" : "") + " len=" + payloadLen;
    }
}
