// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.math.BigDecimal;
import java.math.RoundingMode;

/**
 * The few C printf conversions the perftest and rdma-core tools use, with glibc's semantics where
 * Java's {@link java.util.Formatter} differs:
 * <ul>
 * <li>{@code %#0Nx}: the {@code 0x} prefix counts in the width, and a zero value gets no prefix
 * ({@code %#04x} of 0 is {@code 0000}, of 0x11 is {@code 0x11});</li>
 * <li>{@code %.Nf}: rounds the exact binary value of the double, ties to even (glibc), where Java
 * rounds its shortest decimal representation half-up ({@code 1.005} is {@code 1.00} in C).</li>
 * </ul>
 */
public final class CFormat {
    private CFormat() {
    }

    /**
     * C {@code %#0<width>x} (also {@code %#0<width>llx}).
     *
     * @param value the value, taken as unsigned
     * @param width the minimum field width, prefix included
     * @return the formatted text
     */
    public static String altHex(long value, int width) {
        if (value == 0) {
            return zeroPad("0", width);
        }
        String digits = Long.toHexString(value);
        return "0x" + zeroPad(digits, width - 2);
    }

    /**
     * C {@code %0<width>x}.
     *
     * @param value the value, taken as unsigned
     * @param width the minimum number of digits
     * @return the formatted text
     */
    public static String hex(long value, int width) {
        return zeroPad(Long.toHexString(value), width);
    }

    /**
     * C {@code %0<width>d} for a non-negative value.
     *
     * @param value the value
     * @param width the minimum number of digits
     * @return the formatted text
     */
    public static String dec(long value, int width) {
        if (value < 0) {
            return "-" + zeroPad(Long.toString(-value), width - 1);
        }
        return zeroPad(Long.toString(value), width);
    }

    /**
     * C {@code %.<precision>f} (glibc rounding).
     *
     * @param value     the value
     * @param precision digits after the point
     * @return the formatted text
     */
    public static String fixed(double value, int precision) {
        if (Double.isNaN(value)) {
            return "-nan";
        }
        if (Double.isInfinite(value)) {
            return value > 0 ? "inf" : "-inf";
        }
        String s = new BigDecimal(value).setScale(precision, RoundingMode.HALF_EVEN).toPlainString();
        if (value < 0 || (value == 0 && 1 / value < 0)) {
            // BigDecimal drops the sign of -0.0 and of values that round to zero; C keeps it.
            if (!s.startsWith("-")) {
                s = "-" + s;
            }
        }
        return s;
    }

    /**
     * C {@code %-<width>.<precision>f}.
     *
     * @param value     the value
     * @param width     minimum field width (left-justified)
     * @param precision digits after the point
     * @return the formatted text
     */
    public static String leftFixed(double value, int width, int precision) {
        return left(fixed(value, precision), width);
    }

    /**
     * C {@code %-<width>s} / {@code %-<width>lu}.
     *
     * @param text  the text
     * @param width the minimum width
     * @return the text padded on the right with spaces
     */
    public static String left(String text, int width) {
        if (text.length() >= width) {
            return text;
        }
        return text + " ".repeat(width - text.length());
    }

    /**
     * C {@code %<width>s}.
     *
     * @param text  the text
     * @param width the minimum width
     * @return the text padded on the left with spaces
     */
    public static String right(String text, int width) {
        if (text.length() >= width) {
            return text;
        }
        return " ".repeat(width - text.length()) + text;
    }

    /**
     * C {@code %lu} of a 64-bit unsigned value.
     *
     * @param value the value, taken as unsigned
     * @return its decimal text
     */
    public static String unsigned(long value) {
        return Long.toUnsignedString(value);
    }

    /**
     * C {@code %g} (precision 6, trailing zeros removed) for finite values, as perftest's {@code -U}/{@code -H}
     * sample lines print them.
     *
     * @param value the value
     * @return the formatted text
     */
    public static String general(double value) {
        if (value == 0) {
            return 1 / value < 0 ? "-0" : "0";
        }
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            return fixed(value, 0);
        }
        BigDecimal r = new BigDecimal(value).round(new java.math.MathContext(6, RoundingMode.HALF_EVEN));
        int x = r.precision() - r.scale() - 1;
        String s;
        if (x < -4 || x >= 6) {
            BigDecimal mant = r.movePointLeft(x);
            s = stripZeros(mant.setScale(5, RoundingMode.HALF_EVEN).toPlainString()) + (x < 0 ? "e-" : "e+")
                    + zeroPad(Integer.toString(Math.abs(x)), 2);
        } else {
            s = stripZeros(r.setScale(Math.max(5 - x, 0), RoundingMode.HALF_EVEN).toPlainString());
        }
        return s;
    }

    private static String stripZeros(String s) {
        if (s.indexOf('.') < 0) {
            return s;
        }
        int end = s.length();
        while (s.charAt(end - 1) == '0') {
            end--;
        }
        if (s.charAt(end - 1) == '.') {
            end--;
        }
        return s.substring(0, end);
    }

    private static String zeroPad(String digits, int width) {
        if (digits.length() >= width) {
            return digits;
        }
        return "0".repeat(width - digits.length()) + digits;
    }
}
