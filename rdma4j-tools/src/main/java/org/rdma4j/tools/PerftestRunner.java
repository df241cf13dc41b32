// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.IOException;
import java.io.PrintStream;

import org.rdma4j.tools.Perftest.RunException;
import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.MemoryRegion;
import org.rdma4j.verbs.QueuePair;

/**
 * What the bandwidth and the latency runner share: the connected {@link PerftestSide} and its resources, which
 * no longer change once the QPs are connected, read into final fields so the loops read them directly.
 */
abstract sealed class PerftestRunner permits PerftestBw, PerftestLat {
    final PerftestSide side;
    final PerftestOptions o;
    final PrintStream text;
    final PrintStream err;
    final StopSignal stop;
    final boolean client;
    final PerftestWire.Channel ch;
    final boolean withGid;
    final PerftestFormat.Dest[] my;
    final QueuePair[] qps;
    final MemoryRegion[] mrs;
    final CompletionQueue sendCq;
    final CompletionQueue recvCq;
    final int rxDepth;
    final int inline;
    final long bufSize;

    /** A runner on {@code side}, whose QPs are connected. */
    PerftestRunner(PerftestSide side) {
        this.side = side;
        this.o = side.o;
        this.text = side.text;
        this.err = side.err;
        this.stop = side.stop;
        this.client = side.client;
        this.ch = side.ch;
        this.withGid = side.withGid;
        this.my = side.my;
        this.qps = side.qps;
        this.mrs = side.mrs;
        this.sendCq = side.sendCq;
        this.recvCq = side.recvCq;
        this.rxDepth = side.rxDepth;
        this.inline = side.inline;
        this.bufSize = side.bufSize;
    }

    /** {@return perftest's {@code -f} margin (default a quarter of {@code -D}), checked against the duration} */
    int margin() {
        int margin = o.margin >= 0 ? o.margin : o.duration / 4;
        if (o.duration > 0 && !(o.duration > 2 * margin)) {
            throw new RunException("please check that DURATION > 2*MARGIN");
        }
        return margin;
    }

    /** Runs every size of the test, prints its table and what follows it. {@return the exit status} */
    abstract int run() throws IOException;
}
