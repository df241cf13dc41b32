// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractRandomOpsProperties;

/** The random-operation properties {@link AbstractRandomOpsProperties} between two RoCEv2 devices over UDP on loopback. */
class SoftRoceRandomOpsPropertiesTest extends AbstractRandomOpsProperties {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftRoceTestFabric(clock);
    }
}
