// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.wire.net;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Test-only: waits until a named Java thread sits in a given system call, read from
 * /proc/self/task/TID/syscall (Linux), so a test can close a socket under a blocked receiver
 * without sleeping. HotSpot names the native thread after the Java thread (first 15 characters).
 */
final class BlockedInKernel {
    /** x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
    static final int POLL = 7;
    static final int RECVFROM = 45;
    static final int RECVMMSG = 299;

    private BlockedInKernel() {
    }

    /**
     * @return true once the thread is in {@code syscall}; on other architectures, true once the
     *     thread exists (the test then covers whichever order the threads happen to run in)
     */
    static boolean await(String threadName, int syscall) throws IOException {
        boolean x86 = "amd64".equals(System.getProperty("os.arch"));
        String comm = threadName.length() > 15 ? threadName.substring(0, 15) : threadName;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() < deadline) {
            try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
                for (Path task : tasks) {
                    try {
                        if (!Files.readString(task.resolve("comm")).strip().equals(comm)) {
                            continue;
                        }
                        if (!x86) {
                            return true;
                        }
                        String sc = Files.readString(task.resolve("syscall")).strip();
                        if (sc.startsWith(syscall + " ")) {
                            return true;
                        }
                    } catch (IOException gone) {
                        // the task ended between listing and reading
                    }
                }
            }
            Thread.onSpinWait();
        }
        return false;
    }
}
