// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common.agent;

import java.util.Locale;

/**
 * Idle strategies by name, so that a user picks one with a system property or a configuration string:
 * <ul>
 * <li>{@code spin}: {@link BusySpinIdleStrategy};</li>
 * <li>{@code yield}: {@link YieldingIdleStrategy};</li>
 * <li>{@code park[:MIN[:MAX]]}: {@link ParkingIdleStrategy} (default {@code park:50us:1ms});</li>
 * <li>{@code backoff[:SPINS:YIELDS:MIN:MAX]}: {@link BackoffIdleStrategy} (default
 * {@code backoff:1000:100:50us:1ms}).</li>
 * </ul>
 * Durations are a number with {@code ns}, {@code us}, {@code ms} or {@code s} (no unit: nanoseconds).
 */
public final class IdleStrategies {
    /** The strategy of agents and waiting threads when nothing else is asked for. */
    public static final String DEFAULT = "backoff";

    private IdleStrategies() {
    }

    /**
     * Makes a strategy from its name.
     *
     * @param spec a strategy name with its parameters (see the class comment)
     * @return a new strategy (strategies hold per-thread state: one per thread)
     * @throws IllegalArgumentException with the accepted forms, for anything else
     */
    public static IdleStrategy parse(String spec) {
        return parse(spec, Parker.THREAD);
    }

    /**
     * Makes a strategy from its name, parking with the given parker.
     *
     * @param spec   a strategy name with its parameters (see the class comment)
     * @param parker how the parking strategies park (a thread park, or a wait for a descriptor)
     * @return a new strategy (strategies hold per-thread state: one per thread)
     * @throws IllegalArgumentException with the accepted forms, for anything else
     */
    public static IdleStrategy parse(String spec, Parker parker) {
        String s = spec == null ? "" : spec.trim().toLowerCase(Locale.ROOT);
        String[] p = s.split(":", -1);
        try {
            switch (p[0]) {
                case "spin", "busy-spin" -> {
                    args(p, 0);
                    return BusySpinIdleStrategy.INSTANCE;
                }
                case "yield" -> {
                    args(p, 0);
                    return YieldingIdleStrategy.INSTANCE;
                }
                case "park" -> {
                    args(p, 2);
                    long min = p.length > 1 ? parseNs(p[1]) : 50_000;
                    long max = p.length > 2 ? parseNs(p[2]) : Math.max(min, 1_000_000);
                    return new ParkingIdleStrategy(min, max, parker);
                }
                case "backoff" -> {
                    args(p, 4);
                    long spins = p.length > 1 ? Long.parseLong(p[1]) : 1_000;
                    long yields = p.length > 2 ? Long.parseLong(p[2]) : 100;
                    long min = p.length > 3 ? parseNs(p[3]) : 50_000;
                    long max = p.length > 4 ? parseNs(p[4]) : Math.max(min, 1_000_000);
                    return new BackoffIdleStrategy(spins, yields, min, max, parker);
                }
                default -> throw new IllegalArgumentException("unknown");
            }
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("idle strategy '" + spec + "': expected spin, yield, park[:MIN[:MAX]] or "
                    + "backoff[:SPINS:YIELDS:MIN:MAX] (durations like 50us, 1ms)"
                    + (e.getMessage() == null || e.getMessage().equals("unknown") ? "" : ": " + e.getMessage()), e);
        }
    }

    /**
     * Makes the strategy a system property names.
     *
     * @param property a system property naming a strategy
     * @param fallback the strategy when the property is not set
     * @return a new strategy
     */
    public static IdleStrategy fromProperty(String property, String fallback) {
        return parse(System.getProperty(property, fallback));
    }

    private static void args(String[] p, int max) {
        if (p.length - 1 > max) {
            throw new IllegalArgumentException("too many parameters");
        }
    }

    /**
     * Parses a duration.
     *
     * @param s a duration: a number and an optional unit ns, us, ms or s
     * @return nanoseconds
     */
    static long parseNs(String s) {
        String t = s.trim();
        long mult = 1;
        if (t.endsWith("ns")) {
            t = t.substring(0, t.length() - 2);
        } else if (t.endsWith("us")) {
            t = t.substring(0, t.length() - 2);
            mult = 1_000;
        } else if (t.endsWith("ms")) {
            t = t.substring(0, t.length() - 2);
            mult = 1_000_000;
        } else if (t.endsWith("s")) {
            t = t.substring(0, t.length() - 1);
            mult = 1_000_000_000;
        }
        long v = Long.parseLong(t.trim());
        if (v < 0) {
            throw new IllegalArgumentException("negative duration " + s);
        }
        return Math.multiplyExact(v, mult);
    }

    static String formatNs(long ns) {
        if (ns % 1_000_000_000 == 0) {
            return ns / 1_000_000_000 + "s";
        }
        if (ns % 1_000_000 == 0) {
            return ns / 1_000_000 + "ms";
        }
        if (ns % 1_000 == 0) {
            return ns / 1_000 + "us";
        }
        return ns + "ns";
    }
}
