// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools.impair;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The part of tc-netem(8)'s parameters the impairer implements, written as netem writes them:
 * {@code loss 5% duplicate 2% corrupt 1% delay 1ms reorder 5% gap 1}. Percentages take an optional
 * {@code %}; times take {@code s}, {@code ms}, {@code us} or {@code ns} (no unit: microseconds, as tc
 * reads it). Correlations, jitter, distributions, rates and loss models other than {@code random} are
 * refused with a message rather than ignored.
 *
 * @param loss      probability that a packet is lost
 * @param duplicate probability that a packet is sent twice (the copy is impaired on its own, but never
 *                  duplicated again)
 * @param corrupt   probability that one random bit of the packet is flipped
 * @param delayNs   time every packet is held, unless it is picked for reordering
 * @param reorder   probability that a packet is sent at once instead of after the delay
 * @param gap       netem's reorder gap: only every {@code gap}-th packet may be sent at once (tc sets
 *                  1 when reorder is given without a gap)
 */
public record NetemSpec(double loss, double duplicate, double corrupt, long delayNs, double reorder, int gap) {
    /** No impairment: every packet passes at once. */
    public static final NetemSpec NONE = new NetemSpec(0, 0, 0, 0, 0, 0);

    /** Checks the ranges and netem's rule that reordering needs a delay. */
    public NetemSpec {
        for (double p : new double[] {loss, duplicate, corrupt, reorder}) {
            if (!(p >= 0 && p <= 1)) {
                throw new IllegalArgumentException("probability " + p + " is outside 0..100 %");
            }
        }
        if (delayNs < 0 || gap < 0) {
            throw new IllegalArgumentException("negative delay or gap");
        }
        if (reorder > 0 && delayNs == 0) {
            throw new IllegalArgumentException("reordering is not possible without a delay (as in tc-netem)");
        }
    }

    /**
     * Parses netem's parameters.
     *
     * @param words netem's words, e.g. {@code ["loss", "5%", "delay", "1ms"]}; empty for no impairment
     * @return the parameters
     * @throws IllegalArgumentException with a message naming the word that is wrong or not supported
     */
    public static NetemSpec parse(List<String> words) {
        double loss = 0;
        double duplicate = 0;
        double corrupt = 0;
        long delay = 0;
        double reorder = 0;
        int gap = -1;
        for (int i = 0; i < words.size(); i++) {
            String w = words.get(i);
            switch (w) {
                case "loss" -> {
                    if (i + 1 < words.size() && words.get(i + 1).equals("random")) {
                        i++;
                    }
                    loss = percent(words, ++i, w);
                    i = noCorrelation(words, i, w);
                }
                case "duplicate" -> {
                    duplicate = percent(words, ++i, w);
                    i = noCorrelation(words, i, w);
                }
                case "corrupt" -> {
                    corrupt = percent(words, ++i, w);
                    i = noCorrelation(words, i, w);
                }
                case "reorder" -> {
                    reorder = percent(words, ++i, w);
                    i = noCorrelation(words, i, w);
                }
                case "gap" -> gap = integer(words, ++i, w);
                case "delay" -> {
                    delay = time(words, ++i, w);
                    if (i + 1 < words.size() && isNumber(words.get(i + 1))) {
                        throw new IllegalArgumentException("delay jitter (" + words.get(i + 1) + ") is not supported");
                    }
                }
                default -> throw new IllegalArgumentException("'" + w + "' is not a supported netem parameter"
                        + " (supported: loss [random] P, duplicate P, corrupt P, delay T, reorder P, gap N)");
            }
        }
        if (gap < 0) {
            gap = reorder > 0 ? 1 : 0;
        }
        return new NetemSpec(loss, duplicate, corrupt, delay, reorder, gap);
    }

    /** {@return true if nothing is impaired} */
    public boolean isNone() {
        return loss == 0 && duplicate == 0 && corrupt == 0 && delayNs == 0;
    }

    /** @return the parameters in netem's words ({@code "none"} for no impairment) */
    @Override
    public String toString() {
        List<String> w = new ArrayList<>();
        if (loss > 0) {
            w.add("loss " + pct(loss));
        }
        if (duplicate > 0) {
            w.add("duplicate " + pct(duplicate));
        }
        if (corrupt > 0) {
            w.add("corrupt " + pct(corrupt));
        }
        if (delayNs > 0) {
            w.add("delay " + (delayNs % 1_000_000 == 0 ? delayNs / 1_000_000 + "ms"
                    : delayNs % 1000 == 0 ? delayNs / 1000 + "us" : delayNs + "ns"));
        }
        if (reorder > 0) {
            w.add("reorder " + pct(reorder) + (gap != 1 ? " gap " + gap : ""));
        }
        return w.isEmpty() ? "none" : String.join(" ", w);
    }

    private static String pct(double p) {
        String s = String.format(Locale.ROOT, "%.4f", p * 100).replaceAll("0+$", "").replaceAll("\\.$", "");
        return s + "%";
    }

    private static String word(List<String> words, int i, String after) {
        if (i >= words.size()) {
            throw new IllegalArgumentException("'" + after + "' needs a value");
        }
        return words.get(i);
    }

    private static boolean isNumber(String s) {
        return !s.isEmpty() && (Character.isDigit(s.charAt(0)) || s.charAt(0) == '.');
    }

    private static int noCorrelation(List<String> words, int i, String what) {
        if (i + 1 < words.size() && isNumber(words.get(i + 1))) {
            throw new IllegalArgumentException("a correlation for '" + what + "' (" + words.get(i + 1)
                    + ") is not supported");
        }
        return i;
    }

    static double percent(List<String> words, int i, String what) {
        String s = word(words, i, what);
        String n = s.endsWith("%") ? s.substring(0, s.length() - 1) : s;
        double v;
        try {
            v = Double.parseDouble(n);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + s + "' is not a percentage (for " + what + ")");
        }
        if (!(v >= 0 && v <= 100)) {
            throw new IllegalArgumentException("'" + s + "' is outside 0..100 % (for " + what + ")");
        }
        return v / 100;
    }

    private static int integer(List<String> words, int i, String what) {
        String s = word(words, i, what);
        try {
            int v = Integer.parseInt(s);
            if (v < 0) {
                throw new NumberFormatException();
            }
            return v;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + s + "' is not a count (for " + what + ")");
        }
    }

    static long time(List<String> words, int i, String what) {
        String s = word(words, i, what).toLowerCase(Locale.ROOT);
        long scale;
        String n;
        if (s.endsWith("ms") || s.endsWith("msec")) {
            scale = 1_000_000;
            n = s.substring(0, s.indexOf('m'));
        } else if (s.endsWith("us") || s.endsWith("usec")) {
            scale = 1_000;
            n = s.substring(0, s.indexOf('u'));
        } else if (s.endsWith("ns") || s.endsWith("nsec")) {
            scale = 1;
            n = s.substring(0, s.indexOf('n'));
        } else if (s.endsWith("s") || s.endsWith("sec")) {
            scale = 1_000_000_000;
            n = s.substring(0, s.indexOf('s'));
        } else {
            scale = 1_000; // tc: a bare number is microseconds
            n = s;
        }
        try {
            double v = Double.parseDouble(n);
            if (!(v >= 0)) {
                throw new NumberFormatException();
            }
            return Math.round(v * scale);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + s + "' is not a time (for " + what + ")");
        }
    }
}
