// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** Logical port states (ibv_port_state), with the numbers ibv_devinfo prints. */
public enum PortState {
    /** No state change. */
    NOP,
    /** Link down. */
    DOWN,
    /** Initialising. */
    INIT,
    /** Armed. */
    ARMED,
    /** Active: traffic flows. */
    ACTIVE,
    /** Active, deferred. */
    ACTIVE_DEFER;

    /** {@return the text ibv_port_state_str returns, e.g. PORT_ACTIVE} */
    public String portStateString() {
        return "PORT_" + name();
    }
}
