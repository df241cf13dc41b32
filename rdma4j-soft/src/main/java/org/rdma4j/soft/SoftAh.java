// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.ProtectionDomain;

/** A UD address handle. */
final class SoftAh extends SoftResource implements AddressHandle {
    final SoftPd pd;
    final AhAttributes attrs;
    /** The device owning the destination GID when the AH was created, or null. */
    final SoftDevice peer;

    SoftAh(SoftPd pd, AhAttributes attrs) {
        this.pd = pd;
        this.attrs = attrs;
        this.peer = pd.device.fabric.deviceFor(attrs.dgid());
    }

    @Override
    String describe() {
        return "AH(" + attrs.dgid() + ")";
    }

    @Override
    public ProtectionDomain pd() {
        return pd;
    }

    @Override
    public AhAttributes attributes() {
        return attrs.copy();
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        pd.children.remove(this);
    }
}
