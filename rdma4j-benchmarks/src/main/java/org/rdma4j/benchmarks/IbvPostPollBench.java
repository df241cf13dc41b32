// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.benchmarks;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.rdma4j.ibverbs.IbvProvider;
import org.rdma4j.verbs.AccessFlag;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpCapabilities;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SendFlags;
import org.rdma4j.verbs.SendWorkRequest;
import org.rdma4j.verbs.WorkCompletion;
import org.rdma4j.verbs.WrOpcode;

/**
 * What rdma4j-ibverbs costs per operation: one {@code postSend} of a one-SGE SEND plus one {@code poll} of one
 * completion through the provider ({@link #provider}) against the same two native functions called bare
 * through FFM ({@link #baseline}). The native side is a no-op stand-in for libibverbs
 * ({@code fakeverbs.c}, built here with gcc at setup and loaded with {@code -Drdma4j.ibverbs.library}):
 * {@code post_send} reads the request and returns 0, {@code poll_cq} writes one {@code ibv_wc} and returns 1,
 * so the difference is the provider's own work: the QP's use count and lock, writing the
 * {@code ibv_send_wr}/{@code ibv_sge}, and reading the {@code ibv_wc} into a {@link WorkCompletion}.
 * Ratio = provider / baseline. Needs gcc.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class IbvPostPollBench {
    private static final Path LIB = build();
    private static final SymbolLookup FAKE = SymbolLookup.libraryLookup(LIB, Arena.global());
    private static final Linker LINKER = Linker.nativeLinker();
    /** Bound as the provider binds its ops slots: post not critical, poll critical. */
    private static final MethodHandle POST = LINKER.downcallHandle(FAKE.find("fake_post_send").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    private static final MethodHandle POLL = LINKER.downcallHandle(FAKE.find("fake_poll_cq").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.ADDRESS),
            Linker.Option.critical(false));

    private Arena arena;
    private MemorySegment rawQp;
    private MemorySegment rawWr;
    private MemorySegment rawBad;
    private MemorySegment rawWc;

    private Context ctx;
    private ProtectionDomain pd;
    private CompletionQueue cq;
    private QueuePair qp;
    private MemoryRegion mr;
    private final SendWorkRequest wr = new SendWorkRequest(1);
    private final WorkCompletion wc = new WorkCompletion();

    private static Path build() {
        try {
            Path dir = Files.createTempDirectory("rdma4j-fakeverbs");
            for (String f : List.of("fakeverbs.c", "fakeverbs.map")) {
                try (InputStream in = IbvPostPollBench.class.getResourceAsStream(f)) {
                    Files.copy(in, dir.resolve(f));
                }
            }
            Path so = dir.resolve("libfakeverbs.so");
            Process p = new ProcessBuilder("gcc", "-std=gnu11", "-O2", "-shared", "-fPIC",
                    "-Wl,--version-script=" + dir.resolve("fakeverbs.map"), "-o", so.toString(),
                    dir.resolve("fakeverbs.c").toString()).inheritIO().start();
            if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new IllegalStateException("gcc could not build " + so);
            }
            System.setProperty("rdma4j.ibverbs.library", so.toString());
            return so;
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException("building the no-op libibverbs stand-in (needs gcc)", e);
        }
    }

    @Setup
    public void setUp() {
        arena = Arena.ofConfined();
        rawQp = arena.allocate(160, 8);
        rawWr = arena.allocate(128, 8);
        rawBad = arena.allocate(ValueLayout.ADDRESS);
        rawWc = arena.allocate(48, 8);
        Device d = new IbvProvider().devices().stream().filter(x -> x.name().equals("fake0")).findFirst()
                .orElseThrow(() -> new IllegalStateException("no fake0: " + new IbvProvider().status()));
        ctx = d.open();
        pd = ctx.allocPd();
        cq = ctx.createCq(64, null, 0);
        qp = pd.createQp(new QpInitAttributes().type(QpType.RC).sendCq(cq).recvCq(cq)
                .cap(new QpCapabilities(64, 64, 1, 1, 0)));
        mr = pd.regMr(Arena.ofAuto().allocate(4096, 4096), AccessFlag.of(AccessFlag.LOCAL_WRITE));
        wr.opcode(WrOpcode.SEND).sendFlags(SendFlags.SIGNALED).singleSge(mr.address(), 64, mr.lkey());
    }

    @TearDown
    public void tearDown() {
        qp.close();
        mr.close();
        cq.close();
        pd.close();
        ctx.close();
        arena.close();
    }

    /** @return what the two bare downcalls returned */
    @Benchmark
    public int baseline() throws Throwable {
        rawWr.set(ValueLayout.JAVA_LONG, 0, 7L);
        int rc = (int) POST.invokeExact(rawQp, rawWr, rawBad);
        int n = (int) POLL.invokeExact(rawQp, 1, rawWc);
        return rc + n + (int) rawWc.get(ValueLayout.JAVA_LONG, 0);
    }

    /** @return the completion's wr_id, so nothing is dead code */
    @Benchmark
    public long provider() {
        wr.wrId(7);
        if (!qp.postSend(wr) || !cq.poll(wc)) {
            throw new IllegalStateException("post or poll failed: " + wr.postErrorMessage());
        }
        return wc.wrId();
    }
}
