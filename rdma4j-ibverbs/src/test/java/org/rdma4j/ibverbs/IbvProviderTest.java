// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ServiceLoader;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Errno;
import org.rdma4j.verbs.Verbs;
import org.rdma4j.verbs.VerbsException;
import org.rdma4j.verbs.spi.VerbsProvider;

/**
 * What the provider does where there is nothing to drive: no library, a library of another ABI, no kernel
 * RDMA stack (this CI machine), and contexts that are not what it was written for. None of it may fail the
 * JVM; each says what is wrong and what to do.
 */
class IbvProviderTest {
    private static boolean kernelHasRdma() {
        return Files.exists(Path.of("/sys/class/infiniband_verbs/abi_version"));
    }

    @Test
    void isFoundByServiceLoader() {
        boolean found = false;
        for (VerbsProvider p : ServiceLoader.load(VerbsProvider.class)) {
            found |= p instanceof IbvProvider && p.name().equals("ibverbs");
        }
        assertTrue(found, "META-INF/services names IbvProvider");
    }

    @Test
    void withoutAKernelRdmaStackItOffersNoDeviceAndSaysWhy() {
        Assumptions.assumeFalse(kernelHasRdma(), "this host has a kernel RDMA stack");
        IbvLibrary.Loaded lib = IbvLibrary.get();
        Assumptions.assumeTrue(lib.ok() || !CProbe.required(), () -> "libibverbs must be installed in CI: " + lib.failure());
        IbvProvider p = new IbvProvider();
        assertTrue(p.devices().isEmpty());
        if (lib.ok()) {
            assertTrue(p.status().startsWith("the kernel has no RDMA stack (ibv_get_device_list: ENOSYS"), p.status());
            assertTrue(p.status().contains("modprobe rdma_rxe"), p.status());
        }
        VerbsException e = assertThrows(VerbsException.class, () -> Verbs.device("rxe0"));
        assertEquals(Errno.ENOENT, e.errno());
        assertTrue(e.getMessage().contains("ibverbs: " + p.status()), e.getMessage());
    }

    @Test
    void noLibraryIsAClearRefusal() {
        IbvLibrary.Loaded l = IbvLibrary.load("libibverbs-rdma4j-absent.so.1");
        assertFalse(l.ok());
        assertTrue(l.failure().startsWith("libibverbs-rdma4j-absent.so.1 cannot be loaded ("), l.failure());
        assertTrue(l.failure().contains("apt-get install libibverbs1 ibverbs-providers"), l.failure());
    }

    @Test
    void aLibraryWithoutTheAbiIsRefusedNamingWhatIsMissing() {
        IbvLibrary.Loaded l = IbvLibrary.load("libc.so.6");
        assertFalse(l.ok());
        assertTrue(l.failure().contains("missing ibv_get_device_list@IBVERBS_1.1 (no such function)"), l.failure());
        assertTrue(l.failure().contains("ibv_create_comp_channel@IBVERBS_1.0"), l.failure());
    }

    @Test
    void theInstalledLibraryHasTheAbi() {
        Assumptions.assumeTrue(Files.exists(Path.of("/usr/lib/x86_64-linux-gnu/libibverbs.so.1")) || CProbe.required(),
                "libibverbs1 is not installed");
        IbvLibrary.Loaded l = IbvLibrary.get();
        assertNull(l.failure());
        assertTrue(l.symbols().keySet().containsAll(IbvLibrary.REQUIRED.keySet()));
    }

    @Test
    void contextsThatAreNotWhatTheProviderReadsAreRefused() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment dev = a.allocate(IbvLayouts.DEVICE.byteSize(), 8);
            IbvDevice d = IbvDevice.forTest(dev, "fake0");
            long ctxSize = IbvLayouts.CONTEXT.byteSize();
            MemorySegment block = a.allocate(IbvLayouts.VCTX_SZ_DISTANCE + ctxSize, 8);
            MemorySegment ctx = block.asSlice(IbvLayouts.VCTX_SZ_DISTANCE, ctxSize);
            long devOff = IbvLayouts.offset(IbvLayouts.CONTEXT, "device");
            long compat = IbvLayouts.offset(IbvLayouts.CONTEXT, "abi_compat");
            ctx.set(ValueLayout.ADDRESS, devOff, dev);
            ctx.set(ValueLayout.JAVA_LONG, compat, -1L);
            block.set(ValueLayout.JAVA_LONG, 0, 648L);
            for (String slot : new String[] {"post_send", "post_recv", "post_srq_recv", "poll_cq", "req_notify_cq"}) {
                ctx.set(ValueLayout.JAVA_LONG, IbvLayouts.offset(IbvLayouts.CONTEXT, "ops." + slot), 0x1000L);
            }
            assertNull(IbvContext.checkAbi(d, ctx), "a context as rdma-core 44 builds it");

            ctx.set(ValueLayout.JAVA_LONG, IbvLayouts.offset(IbvLayouts.CONTEXT, "ops.poll_cq"), 0L);
            assertTrue(IbvContext.checkAbi(d, ctx).contains("ops.poll_cq (offset 96) is NULL"), IbvContext.checkAbi(d, ctx));
            ctx.set(ValueLayout.JAVA_LONG, IbvLayouts.offset(IbvLayouts.CONTEXT, "ops.poll_cq"), 0x1000L);

            block.set(ValueLayout.JAVA_LONG, 0, 64L);
            assertTrue(IbvContext.checkAbi(d, ctx).contains("verbs_context.sz is 64"), IbvContext.checkAbi(d, ctx));
            block.set(ValueLayout.JAVA_LONG, 0, 648L);

            ctx.set(ValueLayout.JAVA_LONG, compat, 0L);
            assertTrue(IbvContext.checkAbi(d, ctx).contains("no extended context (ibv_context.abi_compat at offset 320"),
                    IbvContext.checkAbi(d, ctx));
            ctx.set(ValueLayout.JAVA_LONG, compat, -1L);

            ctx.set(ValueLayout.JAVA_LONG, devOff, 0x1234L);
            assertTrue(IbvContext.checkAbi(d, ctx).contains("ibv_context.device at offset 0 is 0x1234"),
                    IbvContext.checkAbi(d, ctx));
        }
    }

    @Test
    void noDeviceListExplainsEachErrno() {
        assertTrue(IbvDevices.noList(38).contains("no RDMA stack"));
        assertEquals("ibv_get_device_list failed: EACCES (Permission denied)", IbvDevices.noList(13));
    }
}
