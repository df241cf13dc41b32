// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.cm;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;
import org.rdma4j.verbs.spi.CmProvider;
import org.rdma4j.verbs.spi.GsiAccess;

/**
 * The ServiceLoader CM provider of rdma4j-cm: one process-wide {@link UserCm} over every device found with
 * {@link Verbs#devices()} that gives its QP1 to a user-space CM ({@link GsiAccess}: the soft devices,
 * in-process and RoCE), on the system clock with receive agents, created on first use.
 */
public final class UserCmProvider implements CmProvider {
    private static volatile UserCm shared;

    /** Public no-argument constructor for ServiceLoader. */
    public UserCmProvider() {
    }

    /** {@return the process-wide CM, started on first use} */
    public static UserCm shared() {
        UserCm s = shared;
        if (s == null) {
            synchronized (UserCmProvider.class) {
                s = shared;
                if (s == null) {
                    List<Device> ds = new ArrayList<>();
                    for (Device d : Verbs.devices()) {
                        if (d instanceof GsiAccess) {
                            ds.add(d);
                        }
                    }
                    s = UserCm.builder().devices(ds).build();
                    shared = s;
                }
            }
        }
        return s;
    }

    @Override
    public String name() {
        return "rdma4j-cm";
    }

    @Override
    public List<CmAddress> addresses() {
        return shared().addresses();
    }

    @Override
    public CmAddress sourceFor(InetAddress destination) {
        return shared().sourceFor(destination);
    }

    @Override
    public CmIdSpi createId(CmEventSink sink, PortSpace portSpace, QpType qpType) {
        return shared().createId(sink, portSpace, qpType);
    }
}
