// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/**
 * A control-path failure: carries the errno a Linux verbs call would have returned and a message
 * that says what was wrong and what to do.
 */
public class VerbsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The errno a Linux provider would return. */
    private final Errno errno;

    /**
     * Creates the exception.
     *
     * @param errno the errno a Linux provider would return
     * @param message what was wrong, with the offending values
     */
    public VerbsException(Errno errno, String message) {
        super(errno.name() + ": " + message);
        this.errno = errno;
    }

    /** {@return the errno} */
    public Errno errno() {
        return errno;
    }
}
