// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import org.rdma4j.tools.impair.Impairer;
import org.rdma4j.tools.impair.NetemSpec;
import org.rdma4j.tools.impair.NfQueue;
import org.rdma4j.tools.impair.RawSender;

/**
 * {@code rdma4j impair}: netem for a kernel without {@code sch_netem}. Takes the packets an iptables
 * NFQUEUE rule queues, impairs them in netem's order (loss, duplication, corruption, delay/reorder;
 * {@link Impairer}) and gives each its verdict. One process impairs one direction: run one per queue.
 * Seeded, so a run is repeated by its seed and its traffic.
 */
final class ImpairCommand {
    /** Netfilter mark of the copies duplication makes ("LR"). */
    static final int DEFAULT_MARK = 0x4c52;

    private ImpairCommand() {
    }

    static void usage(PrintStream s) {
        s.println("Usage: rdma4j impair [--queue N] [--seed S] [--duration SECONDS] [--max-queued N] [--mark M]");
        s.println("                     [NETEM PARAMETERS]");
        s.println("Impairs the packets an iptables NFQUEUE rule sends to queue N (default 0) as tc-netem(8) would,");
        s.println("in netem's order: loss, duplication, corruption, then delay or reordering. Runs until Ctrl-C or");
        s.println("--duration, then prints what it did. Needs root (CAP_NET_ADMIN, CAP_NET_RAW). Parameters, as");
        s.println("netem writes them: loss [random] P, duplicate P, corrupt P, delay T, reorder P [gap N]");
        s.println("(P: percent, e.g. 5%; T: e.g. 1ms, 500us; reorder needs a delay). No parameters: pass through.");
        s.println("  iptables -A OUTPUT -p udp --dport 4791 -j NFQUEUE --queue-num 0");
        s.println("  rdma4j impair --queue 0 --seed 1 loss 5% duplicate 2% corrupt 1% delay 1ms reorder 5%");
        s.println("A copy made by duplication is re-sent through a raw socket with netfilter mark M (default 0x4c52):");
        s.println("when the rule queues it again it is impaired on its own, but not duplicated again.");
    }

    static int main(String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        int queue = 0;
        long seed = 1;
        double duration = 0;
        int maxQueued = 16384;
        int mark = DEFAULT_MARK;
        List<String> netem = new ArrayList<>();
        NetemSpec spec;
        try {
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "-h", "--help" -> {
                        usage(out);
                        return 0;
                    }
                    case "--queue" -> queue = Integer.parseInt(value(args, ++i, a));
                    case "--seed" -> seed = Long.decode(value(args, ++i, a));
                    case "--duration" -> duration = Double.parseDouble(value(args, ++i, a));
                    case "--max-queued" -> maxQueued = Integer.parseInt(value(args, ++i, a));
                    case "--mark" -> mark = Integer.decode(value(args, ++i, a));
                    default -> {
                        if (a.startsWith("-")) {
                            throw new IllegalArgumentException("unknown option " + a);
                        }
                        netem.add(a);
                    }
                }
            }
            if (queue < 0 || queue > 0xFFFF || maxQueued < 1 || mark == 0 || duration < 0) {
                throw new IllegalArgumentException("--queue 0..65535, --max-queued >= 1, --mark != 0, --duration >= 0");
            }
            spec = NetemSpec.parse(netem);
        } catch (IllegalArgumentException e) {
            err.println("impair: " + e.getMessage());
            usage(err);
            return 1;
        }
        stop.enter();
        try (NfQueue q = NfQueue.open(queue, maxQueued, 16 << 20, 100); RawSender dups = new RawSender(mark)) {
            out.println("impair: queue " + queue + ": " + spec + " (seed " + seed + ")");
            out.flush();
            Run run = new Run(q, dups, new Impairer(spec, seed), mark);
            long end = duration > 0 ? System.nanoTime() + (long) (duration * 1e9) : Long.MAX_VALUE;
            String why = run.loop(stop, end);
            Impairer.Counts c = run.impairer.counts();
            out.println("impair: queue " + queue + ": " + c.packets + " packets, " + c.lost + " lost, " + c.duplicated
                    + " duplicated, " + c.corrupted + " corrupted, " + c.delayed + " delayed, " + c.reordered
                    + " reordered, " + q.overruns() + " dropped by the kernel (socket buffer full)" + why);
            return why.isEmpty() ? 0 : 1;
        } catch (IOException e) {
            err.println("impair: " + e.getMessage()
                    + (e.getMessage() != null && e.getMessage().contains("EPERM") ? " (needs root)" : ""));
            return 1;
        } finally {
            stop.exit();
        }
    }

    private static String value(String[] args, int i, String opt) {
        if (i >= args.length) {
            throw new IllegalArgumentException(opt + " needs a value");
        }
        return args[i];
    }

    /** The receiving thread decides; a second thread sends the verdicts of the packets held for the delay. */
    private static final class Run {
        final NfQueue q;
        final RawSender dups;
        final Impairer impairer;
        final int mark;
        final NfQueue.Sender now;
        final ReentrantLock lock = new ReentrantLock();
        final Condition changed = lock.newCondition();
        final ArrayDeque<Held> held = new ArrayDeque<>();
        final MemorySegment scratch = MemorySegment.ofArray(new byte[65536]);
        volatile boolean running = true;
        volatile IOException failure;

        record Held(int id, long dueNs, byte[] payload) {
        }

        Run(NfQueue q, RawSender dups, Impairer impairer, int mark) {
            this.q = q;
            this.dups = dups;
            this.impairer = impairer;
            this.mark = mark;
            this.now = q.sender();
        }

        /** @return "" when stopped normally, else why it ended */
        String loop(StopSignal stop, long endNs) {
            Thread releaser = Thread.ofPlatform().name("rdma4j-impair-delay").daemon().start(this::release);
            try {
                while (!stop.stopped() && System.nanoTime() - endNs < 0 && failure == null) {
                    q.receive(this::onPacket);
                }
            } catch (IOException e) {
                failure = e;
            } finally {
                running = false;
                lock.lock();
                try {
                    changed.signalAll();
                } finally {
                    lock.unlock();
                }
                try {
                    releaser.join(TimeUnit.SECONDS.toMillis(5));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            IOException f = failure;
            return f == null ? "" : "; stopped: " + f.getMessage();
        }

        private void onPacket(NfQueue.Packet p) throws IOException {
            int len = (int) p.payload.byteSize();
            long t = System.nanoTime();
            Impairer.Decision d = impairer.decide(len, p.mark == mark, t);
            if (d.fate() == Impairer.Fate.DROP) {
                now.verdict(p.id, false, null);
                return;
            }
            if (d.duplicate()) {
                dups.send(p.payload); // before corruption: netem corrupts the original only
            }
            MemorySegment body = null;
            if (d.corruptAt() >= 0) {
                body = scratch.asSlice(0, len);
                MemorySegment.copy(p.payload, 0, body, 0, len);
                byte b = body.get(ValueLayout.JAVA_BYTE, d.corruptAt());
                body.set(ValueLayout.JAVA_BYTE, d.corruptAt(), (byte) (b ^ (1 << d.corruptBit())));
            }
            if (d.dueNs() - t <= 0) {
                now.verdict(p.id, true, body);
                return;
            }
            Held h = new Held(p.id, d.dueNs(), body == null ? null : body.toArray(ValueLayout.JAVA_BYTE));
            lock.lock();
            try {
                held.add(h);
                if (held.size() == 1) {
                    changed.signal();
                }
            } finally {
                lock.unlock();
            }
        }

        /** The delay thread: sends each held packet's verdict when its time comes, in order. */
        private void release() {
            NfQueue.Sender later = q.sender();
            try {
                for (;;) {
                    Held h;
                    lock.lock();
                    try {
                        for (;;) {
                            h = held.peek();
                            if (h == null) {
                                if (!running) {
                                    return;
                                }
                                changed.await(100, TimeUnit.MILLISECONDS);
                                continue;
                            }
                            long wait = h.dueNs() - System.nanoTime();
                            if (wait <= 0 || !running) {
                                held.poll();
                                break;
                            }
                            changed.awaitNanos(wait);
                        }
                    } finally {
                        lock.unlock();
                    }
                    // When stopping, the packets still held go at once (the queue's end would drop them).
                    later.verdict(h.id(), true, h.payload() == null ? null : MemorySegment.ofArray(h.payload()));
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (IOException e) {
                failure = e;
            }
        }
    }
}
