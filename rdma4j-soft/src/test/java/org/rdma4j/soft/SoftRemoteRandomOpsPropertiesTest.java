// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractRandomOpsProperties;

/** The random-operation properties {@link AbstractRandomOpsProperties} with device B in another JVM, over RoCEv2 on loopback. */
class SoftRemoteRandomOpsPropertiesTest extends AbstractRandomOpsProperties {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRemoteTestFabric(clock);
    }
}
