// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.awt.image.BufferedImage;
import java.nio.file.Path;

import javax.imageio.ImageIO;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChartTest {
    @Test
    void labelsAndScale() {
        assertEquals("2", Chart.sizeLabel(2));
        assertEquals("4K", Chart.sizeLabel(4096));
        assertEquals("8M", Chart.sizeLabel(8 << 20));
        assertEquals(50_000, Chart.niceCeil(37_000));
        assertEquals(2.5, Chart.niceCeil(2.1));
        assertEquals(1000, Chart.niceCeil(1000));
    }

    @Test
    void drawsTheCurveWhereTheDataIs(@TempDir Path dir) throws Exception {
        long[] sizes = new long[23];
        double[] bw = new double[23];
        for (int i = 0; i < 23; i++) {
            sizes[i] = 2L << i;
            bw[i] = i < 12 ? 100.0 * (i + 1) : 1200;
        }
        Path f = dir.resolve("c.png");
        Chart.write(f, "t", "bandwidth [MiB/sec]", sizes, new double[][] {bw}, new String[] {"BW average"}, false);
        BufferedImage img = ImageIO.read(f.toFile());
        assertEquals(1000, img.getWidth());
        // The first series is drawn in blue (0x1f77b4, antialiased). The y axis runs 0..2000 (niceCeil of
        // 1200 * 1.05) over 470 px from y = 530 up, so 1200 sits at y = 530 - 470 * 0.6 = 248 at the right end,
        // and nothing of the curve is in the bottom-right corner.
        int blueTopRight = 0;
        int blueBottomRight = 0;
        for (int x = 850; x < 970; x++) {
            for (int y = 60; y < 530; y++) {
                int rgb = img.getRGB(x, y);
                int r = (rgb >> 16) & 0xFF;
                int b = rgb & 0xFF;
                if (b > 120 && b - r > 60) { // bluish, whatever the antialiasing made of the edge
                    if (y >= 240 && y <= 256) {
                        blueTopRight++;
                    } else if (y > 400) {
                        blueBottomRight++;
                    }
                }
            }
        }
        assertTrue(blueTopRight > 20, "curve at 1200 near the right end: " + blueTopRight);
        assertEquals(0, blueBottomRight);
    }
}
