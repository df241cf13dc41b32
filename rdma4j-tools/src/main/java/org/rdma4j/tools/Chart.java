// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.FontMetrics;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.geom.AffineTransform;
import java.awt.geom.Path2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import javax.imageio.ImageIO;

/**
 * A PNG line chart of a perftest run over all sizes ({@code -a}): message size on a log2 x axis,
 * bandwidth (linear) or latency (log10) on the y axis, labelled ticks, one curve per series. Drawn with
 * java.awt in headless mode, so it needs no display.
 */
public final class Chart {
    private static final int W = 1000;
    private static final int H = 600;
    private static final int LEFT = 90;
    private static final int RIGHT = 30;
    private static final int TOP = 60;
    private static final int BOTTOM = 70;
    private static final Color[] COLORS = {new Color(0x1f77b4), new Color(0xd62728), new Color(0x2ca02c)};

    private Chart() {
    }

    /**
     * Draws and writes the chart.
     *
     * @param file   the PNG to write
     * @param title  the title line
     * @param yLabel the y axis label, with its unit
     * @param sizes  message sizes (x), ascending
     * @param series values per series, each as long as {@code sizes}
     * @param names  the series' names for the legend
     * @param logY   a log10 y axis (latency) instead of a linear one from 0 (bandwidth)
     * @throws IOException when the file cannot be written
     */
    public static void write(Path file, String title, String yLabel, long[] sizes, double[][] series,
                             String[] names, boolean logY) throws IOException {
        System.setProperty("java.awt.headless", "true");
        BufferedImage img = render(title, yLabel, sizes, series, names, logY);
        Path parent = file.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        if (!ImageIO.write(img, "png", file.toFile())) {
            throw new IOException("no PNG writer in this JDK");
        }
    }

    static BufferedImage render(String title, String yLabel, long[] sizes, double[][] series, String[] names,
                                boolean logY) {
        BufferedImage img = new BufferedImage(W, H, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = img.createGraphics();
        try {
            g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
            g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON);
            g.setColor(Color.WHITE);
            g.fillRect(0, 0, W, H);
            int pw = W - LEFT - RIGHT;
            int ph = H - TOP - BOTTOM;

            double xMin = log2(sizes[0]);
            double xMax = log2(sizes[sizes.length - 1]);
            if (xMax <= xMin) {
                xMax = xMin + 1;
            }
            double yMin;
            double yMax;
            double max = 0;
            double min = Double.POSITIVE_INFINITY;
            for (double[] s : series) {
                for (double v : s) {
                    if (v > 0 && Double.isFinite(v)) {
                        max = Math.max(max, v);
                        min = Math.min(min, v);
                    }
                }
            }
            if (max == 0) {
                max = 1;
                min = 1;
            }
            if (logY) {
                yMin = Math.floor(Math.log10(min));
                yMax = Math.ceil(Math.log10(max));
                if (yMax <= yMin) {
                    yMax = yMin + 1;
                }
            } else {
                yMin = 0;
                yMax = niceCeil(max * 1.05);
            }

            // grid and y ticks
            g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 13));
            FontMetrics fm = g.getFontMetrics();
            g.setStroke(new BasicStroke(1f));
            int yTicks = logY ? (int) (yMax - yMin) : 5;
            for (int i = 0; i <= yTicks; i++) {
                double v = logY ? Math.pow(10, yMin + i) : yMin + (yMax - yMin) * i / yTicks;
                int y = TOP + ph - (int) Math.round(ph * i / (double) yTicks);
                g.setColor(new Color(0xe6e6e6));
                g.drawLine(LEFT, y, LEFT + pw, y);
                g.setColor(Color.DARK_GRAY);
                String lbl = number(v);
                g.drawString(lbl, LEFT - 8 - fm.stringWidth(lbl), y + fm.getAscent() / 2 - 1);
            }
            // x ticks: every power of two, labels every other one when crowded
            int span = (int) Math.round(xMax - xMin);
            int step = span > 12 ? 2 : 1;
            for (int e = (int) Math.round(xMin); e <= (int) Math.round(xMax); e++) {
                int x = LEFT + (int) Math.round(pw * (e - xMin) / (xMax - xMin));
                g.setColor(new Color(0xf0f0f0));
                g.drawLine(x, TOP, x, TOP + ph);
                g.setColor(Color.DARK_GRAY);
                g.drawLine(x, TOP + ph, x, TOP + ph + 5);
                if ((e - (int) Math.round(xMin)) % step == 0) {
                    String lbl = sizeLabel(1L << e);
                    g.drawString(lbl, x - fm.stringWidth(lbl) / 2, TOP + ph + 8 + fm.getAscent());
                }
            }
            // axes
            g.setColor(Color.BLACK);
            g.setStroke(new BasicStroke(1.5f));
            g.drawLine(LEFT, TOP, LEFT, TOP + ph);
            g.drawLine(LEFT, TOP + ph, LEFT + pw, TOP + ph);

            // curves
            for (int s = 0; s < series.length; s++) {
                g.setColor(COLORS[s % COLORS.length]);
                g.setStroke(new BasicStroke(s == 0 ? 2.5f : 1.5f, BasicStroke.CAP_ROUND, BasicStroke.JOIN_ROUND, 10f,
                        s == 0 ? null : new float[] {6f, 4f}, 0f));
                Path2D.Double path = new Path2D.Double();
                boolean started = false;
                for (int i = 0; i < sizes.length; i++) {
                    double v = series[s][i];
                    if (!(v > 0) || !Double.isFinite(v)) {
                        continue;
                    }
                    double x = LEFT + pw * (log2(sizes[i]) - xMin) / (xMax - xMin);
                    double yv = logY ? (Math.log10(v) - yMin) / (yMax - yMin) : (v - yMin) / (yMax - yMin);
                    double y = TOP + ph - ph * yv;
                    if (started) {
                        path.lineTo(x, y);
                    } else {
                        path.moveTo(x, y);
                        started = true;
                    }
                    if (s == 0) {
                        g.fillOval((int) Math.round(x) - 3, (int) Math.round(y) - 3, 7, 7);
                    }
                }
                g.draw(path);
            }

            // legend
            g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 13));
            int lx = LEFT + 16;
            int ly = TOP + 14;
            for (int s = 0; s < series.length; s++) {
                g.setColor(COLORS[s % COLORS.length]);
                g.setStroke(new BasicStroke(s == 0 ? 2.5f : 1.5f));
                g.drawLine(lx, ly + 18 * s, lx + 24, ly + 18 * s);
                g.setColor(Color.BLACK);
                g.drawString(names[s], lx + 30, ly + 18 * s + 5);
            }

            // title and labels
            g.setColor(Color.BLACK);
            g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 17));
            fm = g.getFontMetrics();
            g.drawString(title, (W - fm.stringWidth(title)) / 2, 32);
            g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 14));
            fm = g.getFontMetrics();
            String xl = "message size [bytes, log2 scale]";
            g.drawString(xl, LEFT + (pw - fm.stringWidth(xl)) / 2, H - 18);
            AffineTransform at = g.getTransform();
            g.rotate(-Math.PI / 2);
            String yl = yLabel + (logY ? " (log scale)" : "");
            g.drawString(yl, -(TOP + (ph + fm.stringWidth(yl)) / 2), 22);
            g.setTransform(at);
        } finally {
            g.dispose();
        }
        return img;
    }

    private static double log2(long v) {
        return Math.log(Math.max(v, 1)) / Math.log(2);
    }

    /** The smallest 1, 2, 2.5 or 5 times a power of ten at or above {@code v}. */
    static double niceCeil(double v) {
        if (v <= 0) {
            return 1;
        }
        double p = Math.pow(10, Math.floor(Math.log10(v)));
        for (double m : new double[] {1, 2, 2.5, 5, 10}) {
            if (m * p >= v) {
                return m * p;
            }
        }
        return 10 * p;
    }

    static String sizeLabel(long bytes) {
        if (bytes >= 1 << 20 && bytes % (1 << 20) == 0) {
            return (bytes >> 20) + "M";
        }
        if (bytes >= 1 << 10 && bytes % (1 << 10) == 0) {
            return (bytes >> 10) + "K";
        }
        return Long.toString(bytes);
    }

    private static String number(double v) {
        if (v == Math.rint(v) && Math.abs(v) < 1e12) {
            return String.format("%,d", (long) v);
        }
        return v >= 1 ? String.format("%.1f", v) : String.format("%.2g", v);
    }
}
