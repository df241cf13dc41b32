// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;

/** A line-buffered stream that prefixes each line (loopback's [server]/[client] output). */
final class PrefixStream extends PrintStream {
    private final PrintStream target;
    private final String prefix;
    private final StringBuilder line = new StringBuilder();

    PrefixStream(PrintStream target, String prefix) {
        super(java.io.OutputStream.nullOutputStream(), true);
        this.target = target;
        this.prefix = prefix;
    }

    @Override
    public synchronized void write(int b) {
        if (b == '\n') {
            emit(true);
        } else if (b == '\r') {
            // A progress line: shown as it is, prefixed, without waiting for a newline.
            if (!line.isEmpty()) {
                emit(false);
            }
            target.print('\r');
            target.flush();
        } else {
            line.append((char) (b & 0xFF));
        }
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) {
        for (int i = 0; i < len; i++) {
            write(b[off + i]);
        }
    }

    @Override
    public synchronized void flush() {
        target.flush();
    }

    private void emit(boolean newline) {
        synchronized (target) {
            target.print(prefix + line + (newline ? "\n" : ""));
            target.flush();
        }
        line.setLength(0);
    }
}
