// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.util.Map;

import org.rdma4j.common.ManualClock;
import org.rdma4j.soft.RemoteCmFactory;
import org.rdma4j.soft.SoftDevice;
import org.rdma4j.verbs.spi.CmProvider;

/**
 * Host B's CM of {@link SoftRemoteCmFabric}, made by the remote peer (the child JVM) by this class's name: a
 * driven {@link UserCm} on the child's RoCE device and the child fabric's clock, as {@link SoftCmFabric}
 * makes each host's CM in one JVM.
 */
@SuppressWarnings("exports") // public for the child JVM, which makes it by name; the types are test class path ones
public final class UserCmRemoteFactory implements RemoteCmFactory {
    /** For the remote peer, which makes it by reflection. */
    public UserCmRemoteFactory() {
    }

    @Override
    public Hosted open(SoftDevice device, ManualClock clock, long seed) {
        UserCm cm = UserCm.builder().device(device).clock(clock).driven(true).seed(seed).build();
        return new Hosted() {
            @Override
            public CmProvider provider() {
                return cm;
            }

            @Override
            public boolean progress() {
                return cm.progress();
            }

            @Override
            public Map<String, Long> counters() {
                return cm.counters();
            }

            @Override
            public void close() {
                cm.close();
            }
        };
    }
}
