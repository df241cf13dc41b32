// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

/**
 * Fork safety, set up once before the first registration (ibv_fork_init.3: it must precede every
 * {@code ibv_reg_mr}, and then makes each registration {@code madvise(MADV_DONTFORK)} so that a child does
 * not get copy-on-write copies of pages a device may still write). Skipped when the kernel reports that it
 * copies pinned pages at fork itself ({@code ibv_is_fork_initialized} = IBV_FORK_UNNEEDED, rdma-core
 * memory.c), and when {@code -Drdma4j.ibverbs.forkInit=false} (a process that never forks saves a system call
 * per registration). The JDK starts processes with posix_spawn, whose child shares the address space until
 * exec, but a JVM may still host native code that forks.
 */
final class IbvFork {
    private static final System.Logger LOG = System.getLogger("org.rdma4j.ibverbs");
    private static final int IBV_FORK_DISABLED = 0;
    private static final int IBV_FORK_UNNEEDED = 2;

    private IbvFork() {
    }

    static synchronized void init() {
        if (!Boolean.parseBoolean(System.getProperty("rdma4j.ibverbs.forkInit", "true"))) {
            return;
        }
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment st = Ibv.newCallState(a);
            int status = IBV_FORK_DISABLED;
            if (Ibv.IS_FORK_INITIALIZED != null) {
                status = (int) Ibv.IS_FORK_INITIALIZED.invokeExact(st);
            }
            if (status == IBV_FORK_UNNEEDED || status != IBV_FORK_DISABLED) {
                return;
            }
            int rc = (int) Ibv.FORK_INIT.invokeExact(st);
            if (rc != 0) {
                LOG.log(System.Logger.Level.WARNING, "ibv_fork_init failed ({0}): registered memory is not "
                        + "protected against fork()", org.rdma4j.libc.Errors.describe(Ibv.err(rc, st)));
            }
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }
}
