// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.SplittableRandom;

/**
 * A file copy over TCP for the namespace test, run in its own JVM inside a namespace:
 * {@code server ADDR PORT} accepts one connection and prints "received N sha256 H";
 * {@code client ADDR PORT BYTES SEED} sends BYTES seeded random bytes and prints "sent N sha256 H".
 */
public final class TcpCopy {
    private TcpCopy() {
    }

    /**
     * @param args as in the class comment
     * @throws Exception on any failure (non-zero exit)
     */
    public static void main(String[] args) throws Exception {
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        byte[] buf = new byte[64 * 1024];
        long total = 0;
        if (args[0].equals("server")) {
            try (ServerSocket ss = new ServerSocket()) {
                ss.bind(new InetSocketAddress(InetAddress.getByName(args[1]), Integer.parseInt(args[2])));
                System.out.println("listening");
                System.out.flush();
                ss.setSoTimeout(30_000);
                try (Socket s = ss.accept(); InputStream in = s.getInputStream()) {
                    s.setSoTimeout(30_000);
                    int n;
                    while ((n = in.read(buf)) > 0) {
                        md.update(buf, 0, n);
                        total += n;
                    }
                }
            }
            System.out.println("received " + total + " sha256 " + HexFormat.of().formatHex(md.digest()));
        } else {
            long bytes = Long.parseLong(args[3]);
            SplittableRandom r = new SplittableRandom(Long.parseLong(args[4]));
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(InetAddress.getByName(args[1]), Integer.parseInt(args[2])), 10_000);
                s.setSoTimeout(30_000);
                OutputStream out = s.getOutputStream();
                while (total < bytes) {
                    int n = (int) Math.min(buf.length, bytes - total);
                    for (int i = 0; i < n; i++) {
                        buf[i] = (byte) r.nextInt();
                    }
                    out.write(buf, 0, n);
                    md.update(buf, 0, n);
                    total += n;
                }
                s.shutdownOutput();
            }
            System.out.println("sent " + total + " sha256 " + HexFormat.of().formatHex(md.digest()));
        }
    }
}
