// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.LifecycleContext;
import net.jqwik.api.lifecycle.SkipExecutionHook;

import org.opentest4j.TestAbortedException;
import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractRandomOpsProperties;

/** The random-operation properties on a libibverbs device (skipped without one). */
@AddLifecycleHook(IbvRandomOpsPropertiesTest.RequireDevice.class)
class IbvRandomOpsPropertiesTest extends AbstractRandomOpsProperties {
    /** Skips the properties (rather than rejecting every try) when there is no device to run them on. */
    static final class RequireDevice implements SkipExecutionHook {
        @Override
        public SkipResult shouldBeSkipped(LifecycleContext context) {
            try {
                IbvTestFabric.assumeIb("iWARP QPs are connected through rdma_cm");
                return SkipResult.doNotSkip();
            } catch (TestAbortedException e) {
                return SkipResult.skip(e.getMessage());
            }
        }
    }

    @Override
    protected Fabric createFabric(ManualClock clock) {
        return IbvTestFabric.create(clock);
    }
}
