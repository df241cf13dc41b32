// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a conformance test of an InfiniBand transport rule that iWARP does not have (RNR NAKs, transport
 * retries, immediate data, responder errors reported in the requester's completion, QP states read back):
 * on an iWARP fabric ({@link ConformanceTestBase#iwarp()}) the test is skipped with {@link #value()}, the
 * reason and its evidence.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.METHOD)
public @interface NotOnIwarp {
    /**
     * Why the rule does not exist on iWARP.
     *
     * @return the reason, with the Linux source or VM observation that shows it
     */
    String value();
}
