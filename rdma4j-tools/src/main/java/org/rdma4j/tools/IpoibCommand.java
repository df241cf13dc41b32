// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.function.BooleanSupplier;

/**
 * {@code rdma4j ipoib}: runs the IPoIB daemon of rdma4j-ipoib, a run-time dependency of the tools (as the
 * device provider is), until Ctrl-C; the launcher's shutdown hook waits for its exit report.
 */
final class IpoibCommand {
    private static final String MAIN = "org.rdma4j.ipoib.IpoibMain";

    private IpoibCommand() {
    }

    static int main(String[] args, PrintStream out, PrintStream err, StopSignal stop) {
        MethodHandle run;
        try {
            Class<?> c = Class.forName(MAIN);
            run = MethodHandles.publicLookup().findStatic(c, "run", MethodType.methodType(int.class, String[].class,
                    PrintStream.class, PrintStream.class, BooleanSupplier.class));
        } catch (ReflectiveOperationException | LinkageError e) {
            err.println("rdma4j ipoib: the rdma4j-ipoib module is not on the class path (" + e + "); rebuild with"
                    + " './rdma4j build'");
            return 1;
        }
        stop.enter();
        try {
            return (int) run.invokeExact(args, out, err, (BooleanSupplier) stop::stopped);
        } catch (Throwable t) {
            err.println("rdma4j ipoib: " + t);
            return 1;
        } finally {
            stop.exit();
        }
    }
}
