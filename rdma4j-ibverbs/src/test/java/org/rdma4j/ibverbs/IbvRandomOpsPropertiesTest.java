// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.util.List;

import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.LifecycleContext;
import net.jqwik.api.lifecycle.PropagationMode;
import net.jqwik.api.lifecycle.SkipExecutionHook;

import org.opentest4j.TestAbortedException;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractRandomOpsProperties;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.WrOpcode;

/**
 * The random-operation properties on a libibverbs device (skipped without one). On iWARP (siw) the pairs are
 * RC, connected through the kernel's CM (the testkit's CmConnector), and the operations are those RDMAP
 * has: no immediate data (RFC 5040; siw refuses SEND_WITH_IMM and RDMA_WRITE_WITH_IMM at post) and no
 * atomics (siw_query_device reports ATOMIC_NONE).
 */
@AddLifecycleHook(value = IbvRandomOpsPropertiesTest.RequireDevice.class, propagateTo = PropagationMode.ALL_DESCENDANTS)
class IbvRandomOpsPropertiesTest extends AbstractRandomOpsProperties {
    /**
     * Skips the properties (rather than rejecting every try) when there is no device to run them on, and on
     * iWARP the remote-access-error properties: an iWARP responder does not acknowledge WRITEs, so a bad R_Key
     * is a TERMINATE that moves both QPs to ERR, not a REM_ACCESS_ERR completion of that request, and siw
     * reports no QP state to await (siw_query_qp fills no qp_state; seen in the VM).
     */
    static final class RequireDevice implements SkipExecutionHook {
        @Override
        public SkipResult shouldBeSkipped(LifecycleContext context) {
            try {
                IbvDevice d = IbvTestFabric.device();
                boolean errors = context.optionalElement().map(e -> e.toString().contains("remoteAccessError"))
                        .orElse(false);
                if (d.isIwarp() && errors) {
                    return SkipResult.skip(d.name() + " is an iWARP device: a remote access error is a TERMINATE"
                            + " of both QPs, not a REM_ACCESS_ERR completion, and siw reports no QP state");
                }
                return SkipResult.doNotSkip();
            } catch (TestAbortedException e) {
                return SkipResult.skip(e.getMessage());
            }
        }
    }

    private static boolean iwarp() {
        return IbvTestFabric.device().isIwarp();
    }

    @Override
    protected List<QpType> qpTypes() {
        return iwarp() ? List.of(QpType.RC) : super.qpTypes();
    }

    @Override
    protected boolean offers(WrOpcode opcode) {
        return !iwarp() || !(opcode.hasImm() || opcode.isAtomic());
    }

    /**
     * siw completes an RDMA READ when its response arrives, but a WRITE or SEND posted behind it as soon as
     * TCP has it (siw_qp_tx.c siw_qp_sq_process completes WRITE/SEND at transmit, the READ waits in the ORQ
     * for siw_qp_rx.c's READ RESPONSE): send completions out of post order, seen in the VM on siw0.
     */
    @Override
    protected boolean sendCompletionsInPostOrder() {
        return !iwarp();
    }

    @Override
    protected Fabric createFabric(ManualClock clock) {
        return IbvTestFabric.create(clock);
    }
}
