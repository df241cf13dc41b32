// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.common.ManualClock;
import org.rdma4j.dma.DmaMode;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.testkit.model.AbstractRandomOpsProperties;

/** The random-operation properties {@link AbstractRandomOpsProperties} on the soft device behind an IOMMU (whole messages). */
class SoftIommuRandomOpsPropertiesTest extends AbstractRandomOpsProperties {
    @Override
    protected Fabric createFabric(ManualClock clock) {
        return new SoftTestFabric(clock, false, DmaMode.IOMMU);
    }
}
