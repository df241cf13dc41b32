// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.testkit.model;

import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

import net.jqwik.api.AfterFailureMode;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.RandomDistribution;
import net.jqwik.api.Tag;
import net.jqwik.api.statistics.Statistics;

import org.rdma4j.common.ManualClock;
import org.rdma4j.testkit.Fabric;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.WrOpcode;

/**
 * Property-based tests every device runs: random sequences of data-path operations between two
 * devices, checked against a plain Java model of both registered regions (a byte[] each) and of the
 * receive queues. A subclass supplies the fabric.
 *
 * <p>Each try picks a QP type (RC, UC or UD) and 1..32 operations valid for it (SEND, SEND_WITH_IMM,
 * RDMA_WRITE, RDMA_WRITE_WITH_IMM, RDMA_READ, CMP_AND_SWP, FETCH_AND_ADD), in both directions, with
 * sizes 0..9000 (UD: up to the active MTU), random offsets, 1..3 gather entries in shuffled order,
 * inline for small sends and writes (sometimes with a garbage L_Key, which inline must not check, and
 * with the buffer overwritten right after the post), random signaling and immediate data. Operations
 * go out in batches of up to {@value ModelRun#MAX_BATCH}; the last one per direction in a batch is
 * signaled. After each batch: every status SUCCESS, opcodes, byte_len, immediate data and the
 * WITH_IMM flag, wr_id order, nothing extra on any CQ, and both regions byte for byte.
 *
 * <p>{@code -Pslow} runs the long variants ({@code ...AtLength}, tagged {@code slow}): more tries, longer
 * sequences.
 *
 * <p>Seeds: jqwik prints the seed and the shrunk sample of a failure; with
 * {@link AfterFailureMode#SAMPLE_FIRST} the next run starts with that sample.
 */
public abstract class AbstractRandomOpsProperties {
    /** Constructor for subclasses. */
    protected AbstractRandomOpsProperties() {
    }


    /** Ways to make an operation fail at the responder with a remote access error. */
    public enum BadKind {
        /** The R_Key of the target region with its 8-bit variant changed. */
        FLIPPED_RKEY,
        /** The R_Key of a region deregistered before the run. */
        STALE_RKEY,
        /** The right R_Key, a range that ends past the region. */
        OUT_OF_BOUNDS_HIGH,
        /** The right R_Key, a range that starts before the region. */
        OUT_OF_BOUNDS_LOW,
        /** The R_Key of a region registered with LOCAL_WRITE only. */
        NO_REMOTE_ACCESS
    }

    /**
     * One generated operation, before it is resolved against the run (see {@code ModelRun.plan}).
     *
     * @param opcode       operation
     * @param length       bytes (8 for atomics; modulo MTU+1 on UD)
     * @param localOffset  offset in the local area, taken modulo what fits
     * @param remoteOffset offset in the peer's target area, taken modulo what fits (×8 for atomics)
     * @param sgeCount     gather entries (0 = none when the length is 0, else 1)
     * @param splitSeed    where the gather list is cut and how its entries are ordered
     * @param inline       send inline when the operation and size allow it
     * @param badLkey      with inline: give a garbage L_Key, which must not be checked
     * @param signaled     request a completion (forced for the last of a batch)
     * @param imm          immediate data for the _WITH_IMM opcodes
     * @param reverse      B to A instead of A to B
     * @param endBatch     check completions and memory after this operation
     * @param operand      compare value or addend
     * @param compareHits  CMP_AND_SWP: compare with the current value (so the swap happens)
     */
    public record OpGene(WrOpcode opcode, int length, int localOffset, int remoteOffset, int sgeCount, long splitSeed,
                         boolean inline, boolean badLkey, boolean signaled, int imm, boolean reverse, boolean endBatch,
                         long operand, boolean compareHits) {
        @Override
        public String toString() {
            return opcode + "(len=" + length + " loc=" + localOffset + " rem=" + remoteOffset + " sge=" + sgeCount
                    + " split=" + splitSeed + (inline ? " inline" : "") + (badLkey ? " badLkey" : "")
                    + (signaled ? " sig" : "") + " imm=" + imm + (reverse ? " B->A" : "") + (endBatch ? " END" : "")
                    + " operand=" + operand + (compareHits ? " hits" : "") + ")";
        }
    }

    /**
     * A try of {@link #randomOperationsMatchTheModel}.
     *
     * @param type QP type
     * @param ops  operations
     * @param seed initial memory contents and receive scatter lists
     * @param psnA A's first send PSN
     * @param psnB B's first send PSN
     * @param mtu  path MTU wanted for RC/UC (lowered to the active MTU)
     * @param rdAtomic RDMA READ/atomic depth wanted (1 and 2 make the requester wait for credits)
     */
    public record Scenario(QpType type, List<OpGene> ops, long seed, int psnA, int psnB, int mtu, int rdAtomic) {
    }

    /**
     * A deliberately bad operation.
     *
     * @param position index among the good operations where it goes
     * @param kind     what is wrong with it
     * @param opcode   RDMA_WRITE, RDMA_READ or an atomic
     * @param length   bytes (at least 1: zero-length RDMA skips the R_Key check)
     * @param offset   local offset and remote displacement
     * @param signaled whether it asks for a completion (errors complete anyway)
     */
    public record BadGene(int position, BadKind kind, WrOpcode opcode, int length, int offset, boolean signaled) {
    }

    /**
     * A try of {@link #remoteAccessErrorFlushesTheRest}.
     *
     * @param good good operations (all A to B)
     * @param bad  bad ones mixed in
     * @param seed memory contents and receive scatter lists
     * @param psnA A's first send PSN
     * @param psnB B's first send PSN
     * @param mtu  path MTU wanted (lowered to the active MTU)
     * @param rdAtomic RDMA READ/atomic depth wanted
     */
    public record ErrScenario(List<OpGene> good, List<BadGene> bad, long seed, int psnA, int psnB, int mtu,
                              int rdAtomic) {
    }

    private record Shape(WrOpcode opcode, int length, int localOffset, int remoteOffset, int sgeCount, long splitSeed) {
    }

    private record Flags(boolean inline, boolean badLkey, boolean signaled, int imm, boolean reverse, boolean endBatch,
                         long operand, boolean compareHits) {
    }

    /**
     * {@return a new fabric with at least two devices, connected to each other}
     *
     * @param clock the clock the devices' timers must use
     */
    protected abstract Fabric createFabric(ManualClock clock);

    /**
     * {@return the byte order in which the device reads and writes the 8-byte atomic operands in memory (rxe:
     * host order)}
     *
     */
    protected ByteOrder atomicByteOrder() {
        return ByteOrder.nativeOrder();
    }

    /**
     * {@return whether a responder that rejects a request with a remote access error also moves its QP to ERR and
     * flushes its receives (IBA responder class C errors, as rxe does)}
     *
     */
    protected boolean responderEntersErrorOnRemoteAccessError() {
        return true;
    }

    /**
     * {@return the QP types the scenarios of {@link #randomOperationsMatchTheModel} use: RC, UC and UD} A device
     * with fewer (iWARP: RC only) returns those it has.
     */
    protected List<QpType> qpTypes() {
        return List.of(QpType.RC, QpType.UC, QpType.UD);
    }

    /**
     * {@return whether the generated operations may use {@code opcode} (every opcode valid for the QP type by
     * default)} A device that lacks some says which: iWARP has no immediate data (RDMAP, RFC 5040) and siw no
     * atomics ({@code atomic_cap} ATOMIC_NONE).
     *
     * @param opcode an opcode
     */
    protected boolean offers(WrOpcode opcode) {
        return true;
    }

    /**
     * {@return whether the device completes an RC send queue's requests in post order (IBA; rxe and the soft
     * device do)} A device that does not (siw completes an RDMA READ after the WRITEs and SENDs posted behind
     * it) returns false: its send completions are then matched by wr_id, each still exactly once, and the
     * requests behind a READ are fenced ({@code IBV_SEND_FENCE}: on iWARP a READ may return what a later WRITE
     * wrote, RFC 5040 ordering).
     */
    protected boolean sendCompletionsInPostOrder() {
        return true;
    }

    /** {@return how long to wait for completions and for memory to settle before failing} */
    protected Duration completionTimeout() {
        return Duration.ofSeconds(10);
    }

    /**
     * Random valid operations on RC, UC and UD match the model.
     *
     * @param s the generated scenario
     */
    @Property(tries = 100, afterFailure = AfterFailureMode.SAMPLE_FIRST)
    public void randomOperationsMatchTheModel(@ForAll("scenarios") Scenario s) {
        Statistics.label("qp type").collect(s.type());
        try (Fabric fabric = createFabric(new ManualClock()); Closer closer = new Closer()) {
            ModelRun run = new ModelRun(fabric, s.type(), s.seed(), s.psnA(), s.psnB(), s.mtu(), s.rdAtomic(),
                    atomicByteOrder(), completionTimeout().toNanos(), closer);
            run.sendCompletionsByWrId = !sendCompletionsInPostOrder();
            List<PlannedOp> ops = new ArrayList<>();
            for (OpGene g : s.ops()) {
                ops.add(run.plan(g, ops.size(), false));
            }
            for (List<PlannedOp> batch : ModelRun.batches(ops)) {
                run.runBatch(batch);
                Statistics.label("batch size").collect(batch.size() < 4 ? "1-3" : batch.size() < 8 ? "4-7" : "8-16");
            }
            for (PlannedOp p : ops) {
                Statistics.label("operations").collect(s.type() + " " + p.opcode + (p.inline ? " inline" : "")
                        + (p.length > run.mtu ? " multi-MTU" : ""));
            }
            run.assertNoErrorEvents();
        }
    }

    /**
     * On RC, the first operation with a bad R_Key or range completes with REM_ACCESS_ERR; every later one
     * and every posted receive is flushed (WR_FLUSH_ERR); the QP ends in ERR; memory holds exactly the
     * effects of the operations before it. Unless {@link #responderEntersErrorOnRemoteAccessError()} says
     * otherwise, the responder QP ends in ERR too, its remaining receives flushed in order. Zero-length
     * bad operations are never generated (the R_Key of a zero-length RDMA operation is not checked).
     *
     * @param s the generated scenario
     */
    @Property(tries = 100, afterFailure = AfterFailureMode.SAMPLE_FIRST)
    public void remoteAccessErrorFlushesTheRest(@ForAll("errScenarios") ErrScenario s) {
        Statistics.label("first bad").collect(s.bad().stream().min(Comparator.comparingInt(BadGene::position))
                .orElseThrow().kind());
        try (Fabric fabric = createFabric(new ManualClock()); Closer closer = new Closer()) {
            ModelRun run = new ModelRun(fabric, QpType.RC, s.seed(), s.psnA(), s.psnB(), s.mtu(), s.rdAtomic(),
                    atomicByteOrder(), completionTimeout().toNanos(), closer);
            run.prepareBadTargets(closer);
            List<BadGene> bad = new ArrayList<>(s.bad());
            bad.sort(Comparator.comparingInt(BadGene::position));
            List<PlannedOp> ops = new ArrayList<>();
            int firstBad = -1;
            int bi = 0;
            for (int gi = 0; gi <= s.good().size(); gi++) {
                while (bi < bad.size() && Math.min(bad.get(bi).position(), s.good().size()) == gi) {
                    if (firstBad < 0) {
                        firstBad = ops.size();
                    }
                    ops.add(run.planBad(bad.get(bi++), ops.size()));
                }
                if (gi < s.good().size()) {
                    ops.add(run.plan(s.good().get(gi), ops.size(), true));
                }
            }
            run.runWithError(ops, firstBad, responderEntersErrorOnRemoteAccessError());
        }
    }

    /**
     * The long run of {@link #randomOperationsMatchTheModel} for {@code ./rdma4j test -Pslow}: fifty times
     * the tries, of up to 128 operations each (four times the default tier's longest sequence, so that the
     * send and receive queues wrap).
     *
     * @param s the generated scenario
     */
    @Tag("slow")
    @Property(tries = 5000, afterFailure = AfterFailureMode.SAMPLE_FIRST)
    public void randomOperationsMatchTheModelAtLength(@ForAll("longScenarios") Scenario s) {
        randomOperationsMatchTheModel(s);
    }

    /**
     * The long run of {@link #remoteAccessErrorFlushesTheRest} for {@code ./rdma4j test -Pslow}: fifty times
     * the tries.
     *
     * @param s the generated scenario
     */
    @Tag("slow")
    @Property(tries = 5000, afterFailure = AfterFailureMode.SAMPLE_FIRST)
    public void remoteAccessErrorFlushesTheRestAtLength(@ForAll("errScenarios") ErrScenario s) {
        remoteAccessErrorFlushesTheRest(s);
    }

    /** {@return scenarios for {@link #randomOperationsMatchTheModel}} */
    @Provide
    public Arbitrary<Scenario> scenarios() {
        return scenarios(32);
    }

    /** {@return scenarios for {@link #randomOperationsMatchTheModelAtLength}} */
    @Provide
    public Arbitrary<Scenario> longScenarios() {
        return scenarios(128);
    }

    private Arbitrary<Scenario> scenarios(int maxOps) {
        return Arbitraries.of(qpTypes()).flatMap(type -> Combinators.combine(
                opGenes(type, this::offers).list().ofMinSize(1).ofMaxSize(maxOps).withSizeDistribution(RandomDistribution.uniform()),
                Arbitraries.longs(), psns(), psns(), mtus(),
                rdAtomics()).as((ops, seed, pa, pb, mtu, rd) -> new Scenario(type, ops, seed, pa, pb, mtu, rd)));
    }

    /** {@return scenarios for {@link #remoteAccessErrorFlushesTheRest}} */
    @Provide
    public Arbitrary<ErrScenario> errScenarios() {
        Arbitrary<BadGene> bad = Combinators.combine(
                Arbitraries.integers().between(0, 12),
                Arbitraries.of(BadKind.class),
                Arbitraries.of(WrOpcode.RDMA_WRITE, WrOpcode.RDMA_READ, WrOpcode.ATOMIC_CMP_AND_SWP,
                        WrOpcode.ATOMIC_FETCH_AND_ADD),
                Arbitraries.oneOf(Arbitraries.integers().between(1, 64), Arbitraries.integers().between(1, 9000)),
                Arbitraries.integers().between(0, ModelSide.AREA),
                chance(2)).as(BadGene::new);
        return Combinators.combine(
                opGenes(QpType.RC).list().ofMinSize(0).ofMaxSize(12).withSizeDistribution(RandomDistribution.uniform()),
                bad.list().ofMinSize(1).ofMaxSize(3), Arbitraries.longs(), psns(), psns(), mtus(), rdAtomics())
                .as(ErrScenario::new);
    }

    /** {@return generated operations valid for {@code type}} */
    static Arbitrary<OpGene> opGenes(QpType type) {
        return opGenes(type, o -> true);
    }

    /** {@return generated operations valid for {@code type} among those {@code offered}} */
    static Arbitrary<OpGene> opGenes(QpType type, java.util.function.Predicate<WrOpcode> offered) {
        List<WrOpcode> valid = Arrays.stream(WrOpcode.values()).filter(o -> o.validFor(type) && offered.test(o))
                .toList();
        Arbitrary<Integer> length = Arbitraries.oneOf(
                Arbitraries.integers().between(0, 64),
                Arbitraries.integers().between(0, 300),
                Arbitraries.integers().between(0, 4200),
                Arbitraries.integers().between(4000, 9000));
        Arbitrary<Shape> shape = Combinators.combine(
                Arbitraries.of(valid),
                length,
                Arbitraries.integers().between(0, ModelSide.AREA),
                Arbitraries.integers().between(0, ModelSide.AREA),
                Arbitraries.integers().between(0, 3),
                Arbitraries.longs()).as(Shape::new);
        Arbitrary<Flags> flags = Combinators.combine(
                chance(2),
                chance(4),
                Arbitraries.integers().between(0, 2).map(i -> i != 2),
                Arbitraries.integers(),
                chance(2),
                chance(4),
                Arbitraries.longs(),
                chance(2)).as(Flags::new);
        return Combinators.combine(shape, flags).as((s, f) -> new OpGene(s.opcode(), s.length(), s.localOffset(),
                s.remoteOffset(), s.sgeCount(), s.splitSeed(), f.inline(), f.badLkey(), f.signaled(), f.imm(),
                f.reverse(), f.endBatch(), f.operand(), f.compareHits()));
    }

    /** {@return true with probability 1/n, shrinking to false} */
    private static Arbitrary<Boolean> chance(int n) {
        return Arbitraries.integers().between(0, n - 1).map(i -> i == n - 1);
    }

    /** {@return path MTUs in bytes, shrinking to the largest} */
    private static Arbitrary<Integer> mtus() {
        return Arbitraries.of(4096, 2048, 1024, 512, 256);
    }

    /** {@return READ/atomic depths, shrinking to 16} */
    private static Arbitrary<Integer> rdAtomics() {
        return Arbitraries.integers().between(0, 15).map(i -> 16 - i);
    }

    /** {@return PSNs, often close to the 24-bit wrap} */
    private static Arbitrary<Integer> psns() {
        return Arbitraries.oneOf(Arbitraries.integers().between(0, 0xFF_FFFF),
                Arbitraries.integers().between(0xFF_FFF0, 0xFF_FFFF));
    }
}
