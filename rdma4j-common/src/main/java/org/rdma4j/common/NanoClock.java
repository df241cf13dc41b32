// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

/**
 * A source of monotonic time in nanoseconds. Protocol timers read time only through this, so tests
 * drive them with a {@link ManualClock} instead of sleeping.
 */
public interface NanoClock {
    /** The system's monotonic clock. */
    NanoClock SYSTEM = System::nanoTime;

    /** {@return the current time in nanoseconds (arbitrary origin, monotonic)} */
    long nanoTime();

    /** {@return true if time only moves when someone advances it (tests)} */
    default boolean isManual() {
        return false;
    }
}
