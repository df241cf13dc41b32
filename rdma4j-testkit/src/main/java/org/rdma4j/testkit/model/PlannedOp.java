// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import org.rdma4j.verbs.WrOpcode;

/**
 * One operation with every value resolved against the run (MTU, inline limit, SGE limit, addresses):
 * what is posted and what the model applies. Mutable only while the run plans it.
 */
final class PlannedOp {
    final int index;
    final ModelSide from;
    final ModelSide to;
    final WrOpcode opcode;
    final int length;
    /** Local gather/scatter list as {region offset, length}, in list (message) order. */
    final int[][] local;
    final boolean inline;
    final boolean badLkey;
    final int imm;
    final boolean endBatch;
    final long wrId;
    boolean signaled;
    /** Region offset of the remote address in the peer's region (good operations). */
    int remoteOffset;
    long remoteAddr;
    int rkey;
    long compareAdd;
    long swap;
    boolean compareHits;
    /** Why this operation must fail at the responder, or null for a good one. */
    String bad;

    PlannedOp(int index, ModelSide from, ModelSide to, WrOpcode opcode, int length, int[][] local, boolean inline,
              boolean badLkey, boolean signaled, int imm, boolean endBatch) {
        this.index = index;
        this.from = from;
        this.to = to;
        this.opcode = opcode;
        this.length = length;
        this.local = local;
        this.inline = inline;
        this.badLkey = badLkey;
        this.signaled = signaled;
        this.imm = imm;
        this.endBatch = endBatch;
        this.wrId = 0x0A00_0000_0000L + index;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        sb.append('#').append(index).append(' ').append(from.name).append("->").append(to.name).append(' ')
                .append(opcode).append(" len=").append(length).append(" local=").append(ModelSide.describe(local));
        if (opcode == WrOpcode.RDMA_WRITE || opcode == WrOpcode.RDMA_WRITE_WITH_IMM || opcode.isReadOrAtomic()) {
            if (bad == null) {
                sb.append(" remote=").append(ModelSide.region(remoteOffset));
            } else {
                sb.append(" remote_addr=0x").append(Long.toHexString(remoteAddr)).append(" rkey=0x")
                        .append(Integer.toHexString(rkey));
            }
        }
        if (opcode == WrOpcode.ATOMIC_CMP_AND_SWP) {
            sb.append(" compare=0x").append(Long.toHexString(compareAdd)).append(compareHits ? " (hits)" : "")
                    .append(" swap=0x").append(Long.toHexString(swap));
        } else if (opcode == WrOpcode.ATOMIC_FETCH_AND_ADD) {
            sb.append(" add=0x").append(Long.toHexString(compareAdd));
        }
        if (opcode.hasImm()) {
            sb.append(" imm=0x").append(Integer.toHexString(imm));
        }
        if (inline) {
            sb.append(badLkey ? " INLINE(garbage lkey)" : " INLINE");
        }
        sb.append(signaled ? " signaled" : " unsignaled");
        if (bad != null) {
            sb.append(" BAD:").append(bad);
        }
        sb.append(" wr_id=0x").append(Long.toHexString(wrId));
        return sb.toString();
    }
}
