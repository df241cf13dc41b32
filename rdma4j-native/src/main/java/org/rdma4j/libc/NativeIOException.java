// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

import java.io.IOException;

/** An {@link IOException} from a failed libc call, carrying the {@code errno} it reported. */
public final class NativeIOException extends IOException {
    private static final long serialVersionUID = 1L;

    /** The errno value (Linux numbering), e.g. 98 for EADDRINUSE. */
    private final int errno;

    /**
     * Creates the exception.
     *
     * @param message what failed, with the errno name and text
     * @param errno the errno value
     */
    public NativeIOException(String message, int errno) {
        super(message);
        this.errno = errno;
    }

    /** {@return the errno value the call reported (Linux numbering)} */
    public int errno() {
        return errno;
    }
}
