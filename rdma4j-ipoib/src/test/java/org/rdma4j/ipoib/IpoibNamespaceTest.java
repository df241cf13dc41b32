// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ipoib;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * IPoIB end to end between two network namespaces this test creates (joined by a veth pair, nothing else):
 * in each, an IPoIB daemon in its own JVM ({@code ip netns exec}) over a RoCEv2 soft device bound to the
 * namespace's veth address. Proves ping both ways, a TCP file copy with its SHA-256 checked, iperf3 TCP and
 * UDP when iperf3 is installed, neighbour resolution after one side restarts (new QPN), and that wrong or
 * hostile messages from the fabric are dropped and counted. Needs root, {@code ip} and /dev/net/tun;
 * skipped with a message otherwise. Every process it starts is ended by its PID; the namespaces are deleted.
 */
class IpoibNamespaceTest {
    private static final long START_TIMEOUT_S = 60;
    private final String tag = Long.toString(ProcessHandle.current().pid() % 100_000);
    private final String nsA = "r4jipA" + tag;
    private final String nsB = "r4jipB" + tag;
    private final String vethA = "r4jva" + tag;
    private final String vethB = "r4jvb" + tag;
    private final List<Process> started = new CopyOnWriteArrayList<>();
    private boolean namespaces;

    /** A child process whose output goes to a file (a pipe reader can lose the last lines when the process ends). */
    private record Child(Process process, Path out) {
        List<String> lines() {
            try {
                return Files.readAllLines(out, StandardCharsets.UTF_8);
            } catch (IOException e) {
                return List.of("(cannot read " + out + ": " + e + ")");
            }
        }

        String text() {
            return String.join("\n", lines());
        }

        String await(Predicate<String> what, long seconds, String description) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
            while (System.nanoTime() < deadline) {
                boolean alive = process.isAlive();
                for (String l : lines()) {
                    if (what.test(l)) {
                        return l;
                    }
                }
                if (!alive) {
                    fail(description + ": process " + process.pid() + " ended with " + process.exitValue() + ":\n" + text());
                }
                Thread.sleep(20);
            }
            fail("no " + description + " within " + seconds + " s from process " + process.pid() + ":\n" + text());
            return null;
        }
    }

    @TempDir
    Path outDir;

    @BeforeEach
    void createNamespaces() throws Exception {
        boolean root = "root".equals(System.getProperty("user.name"));
        assumeTrue(root, "IpoibNamespaceTest needs root (network namespaces, TUN); skipped as "
                + System.getProperty("user.name"));
        assumeTrue(Files.exists(Path.of("/dev/net/tun")), "IpoibNamespaceTest needs /dev/net/tun; skipped");
        assumeTrue(exec(10, "ip", "-V").exit == 0, "IpoibNamespaceTest needs iproute2 (ip); skipped");
        assumeTrue(exec(10, "sh", "-c", "command -v ping").exit == 0, "IpoibNamespaceTest needs ping (iputils-ping); skipped");
        Result add = exec(20, "ip", "netns", "add", nsA);
        assumeTrue(add.exit() == 0, "IpoibNamespaceTest cannot create a network namespace here (" + add.out().strip()
                + "); skipped");
        namespaces = true;
        ok("ip", "netns", "add", nsB);
        ok("ip", "link", "add", vethA, "type", "veth", "peer", "name", vethB);
        ok("ip", "link", "set", vethA, "netns", nsA);
        ok("ip", "link", "set", vethB, "netns", nsB);
        for (String[] s : new String[][] {{nsA, vethA, "10.201.0.1/24"}, {nsB, vethB, "10.201.0.2/24"}}) {
            ok("ip", "-n", s[0], "link", "set", "lo", "up");
            // MTU 9000: the RoCE port MTU becomes 4096 (rxe_set_mtu), so IPoIB gets its 2044
            ok("ip", "-n", s[0], "link", "set", s[1], "mtu", "9000", "up");
            ok("ip", "-n", s[0], "addr", "add", s[2], "dev", s[1]);
        }
        ok("ip", "-n", nsB, "addr", "add", "10.201.0.3/24", "dev", vethB); // the hostile host's address
        ok("ip", "-n", nsB, "addr", "add", "10.201.0.4/24", "dev", vethB); // B after its restart
    }

    @AfterEach
    void cleanUp() throws Exception {
        for (Process p : started) {
            if (p.isAlive()) {
                p.destroy(); // SIGTERM to this PID
                if (!p.waitFor(10, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    p.waitFor(5, TimeUnit.SECONDS);
                }
            }
        }
        if (namespaces) {
            exec(10, "ip", "netns", "del", nsA);
            exec(10, "ip", "netns", "del", nsB);
        }
    }

    @Test
    void pingTcpRestartAndHostileInputOverIpoib() throws Exception {
        Child a = daemon(nsA, "10.201.0.1", "10.200.0.1/24");
        Child b = daemon(nsB, "10.201.0.2", "10.200.0.2/24");
        String aUp = a.await(l -> l.startsWith("ipoib: ib0 up"), START_TIMEOUT_S, "interface up line");
        String bUp = b.await(l -> l.startsWith("ipoib: ib0 up"), START_TIMEOUT_S, "interface up line");
        assertTrue(aUp.contains("mtu 2044"), aUp);

        ping(nsA, "10.200.0.2");
        ping(nsB, "10.200.0.1");
        a.await(l -> l.startsWith("neighbour 10.200.0.2 lladdr") && l.endsWith("learned"), 5, "neighbour line");

        tcpCopy(8 << 20);
        iperf3();

        // aging: an entry not confirmed by ARP for 3 s is forgotten, and the next packet resolves it again
        a.await(l -> l.equals("neighbour 10.200.0.2 expired"), 15, "expired neighbour line");
        ping(nsA, "10.200.0.2");
        // learned again after the (last) expiry: traffic still in flight when the entry expired may have
        // resolved it before the ping did, so count from the expiry line, not from now
        a.await(l -> learnedAfterLastExpiry(a.lines(), "10.200.0.2"), 5, "neighbour resolved again after expiry");

        // an address nobody answers for: three ARP requests a second apart, then the waiting packets are dropped
        Result unanswered = exec(15, "ip", "netns", "exec", nsA, "ping", "-c", "1", "-W", "5", "10.200.0.9");
        assertNotEquals(0, unanswered.exit(), unanswered.out());
        a.await(l -> l.equals("neighbour 10.200.0.9 failed (no ARP reply)"), 10, "failed resolution line");

        // restart B on another port GID (a soft device's first QPN is always 0x11, so the new hardware address
        // differs by its GID): A's entry is stale, and B's gratuitous ARP at start makes A re-learn it
        String oldB = lladdr(bUp);
        stop(b);
        Child b2 = daemon(nsB, "10.201.0.4", "10.200.0.2/24");
        String b2Up = b2.await(l -> l.startsWith("ipoib: ib0 up"), START_TIMEOUT_S, "restarted interface up line");
        String newB = lladdr(b2Up);
        assertNotEquals(oldB, newB, "the restarted daemon has a new hardware address");
        ping(nsA, "10.200.0.2");
        a.await(l -> l.equals("neighbour 10.200.0.2 lladdr " + newB + " learned"), 5, "re-learned neighbour");

        // hostile input from a third host (10.201.0.3): every message dropped and counted, none harms A
        int aQpn = Integer.parseInt(newQpn(lladdr(aUp)), 16);
        int bQpn = Integer.parseInt(newQpn(newB), 16);
        Child h = java(nsB, "rxe9=10.201.0.3", HostileSender.class.getName(), "rxe9", "10.201.0.1",
                Integer.toHexString(aQpn), "10.201.0.4", Integer.toHexString(bQpn));
        h.await(l -> l.startsWith("hostile sent 7"), START_TIMEOUT_S, "hostile sender report");
        assertEquals(0, h.process().waitFor(10, TimeUnit.SECONDS) ? h.process().exitValue() : -1, h.text());
        ping(nsA, "10.200.0.2"); // the spoofed ARP did not poison A's entry for B
        Map<String, Long> counters = stop(a);
        for (String expect : HostileSender.EXPECTED.split(" ")) {
            String[] kv = expect.split("=");
            assertEquals(Long.parseLong(kv[1]), counters.get(kv[0]), kv[0] + " in A's report:\n" + a.text());
        }
        assertTrue(counters.get("rx_packets") > 0 && counters.get("tx_packets") > 0, a.text());
        assertEquals(0L, counters.get("rx_errors"), a.text());
        assertTrue(counters.get("tx_drop_unresolved") >= 1, "the packet to 10.200.0.9 was dropped:\n" + a.text());
        assertTrue(counters.get("neighbours_expired") >= 2, "an expiry and a failure:\n" + a.text());
        stop(b2);
        for (Child c : List.of(a, b, b2)) {
            assertTrue(c.lines().stream().noneMatch(l -> l.startsWith("ipoib: close:") || l.contains("thread stopped")),
                    "clean shutdown, nothing leaked:\n" + c.text());
        }
    }

    /**
     * Connected mode (RFC 4755) end to end: both daemons connect to each other over RC after ARP; ping both
     * ways (also 30000-byte pings, one RC message each), the TCP copy with its SHA-256, iperf3 TCP and UDP;
     * B restarted on the same RoCE address (so the same hardware address: only its start-up announcement tells
     * A) is connected to again; hostile connection requests through the IB CM from a third host are refused
     * and counted, and a good one that disconnects at once is accepted and closed.
     */
    @Test
    void connectedModePingTcpRestartAndHostileConnectionRequests() throws Exception {
        Child a = daemon(nsA, "10.201.0.1", "10.200.0.1/24", "--mode", "connected", "--reachable-ms", "60000");
        Child b = daemon(nsB, "10.201.0.2", "10.200.0.2/24", "--mode", "connected", "--reachable-ms", "60000");
        String aUp = a.await(l -> l.startsWith("ipoib: ib0 up"), START_TIMEOUT_S, "interface up line");
        String bUp = b.await(l -> l.startsWith("ipoib: ib0 up"), START_TIMEOUT_S, "interface up line");
        assertTrue(aUp.contains("mode connected, mtu 65520"), aUp);
        assertTrue(lladdr(aUp).startsWith("80:"), "RFC 4755: the address offers connected mode: " + aUp);

        ping(nsA, "10.200.0.2");
        ping(nsB, "10.200.0.1");
        a.await(l -> l.startsWith("neighbour 10.200.0.2 connected"), 10, "A's connection to B");
        b.await(l -> l.startsWith("neighbour 10.200.0.1 connected"), 10, "B's connection to A");
        ping(nsA, "10.200.0.2", "-s", "30000");
        ping(nsB, "10.200.0.1", "-s", "30000");

        tcpCopy(8 << 20);
        iperf3();

        // restart B on the same address: same GID and first QPN, so the same hardware address; its gratuitous
        // ARP at start makes A drop the connection to the old B and connect to the new one
        String oldB = lladdr(bUp);
        stop(b);
        Child b2 = daemon(nsB, "10.201.0.2", "10.200.0.2/24", "--mode", "connected", "--reachable-ms", "60000");
        String b2Up = b2.await(l -> l.startsWith("ipoib: ib0 up"), START_TIMEOUT_S, "restarted interface up line");
        assertEquals(oldB, lladdr(b2Up), "the restarted daemon has the same hardware address");
        a.await(l -> a.lines().stream().filter(x -> x.startsWith("neighbour 10.200.0.2 connected")).count() >= 2,
                10, "A connected to the restarted B");
        ping(nsA, "10.200.0.2"); // the new B learns A from the ARP its first reply needs, and connects
        b2.await(l -> l.startsWith("neighbour 10.200.0.1 connected"), 10, "the new B's connection to A");
        ping(nsA, "10.200.0.2", "-s", "30000");
        ping(nsB, "10.200.0.1", "-s", "30000");
        tcpCopy(1 << 20);

        int aQpn = Integer.parseInt(newQpn(lladdr(aUp)), 16);
        Child h = java(nsB, "rxe9=10.201.0.3", HostileSender.class.getName(), "rxe9", "10.201.0.1",
                Integer.toHexString(aQpn), "10.201.0.2", Integer.toHexString(aQpn), "cm");
        h.await(l -> l.equals("hostile sent " + HostileSender.EXPECTED_CM_OUTCOMES), START_TIMEOUT_S,
                "hostile sender report");
        assertEquals(0, h.process().waitFor(10, TimeUnit.SECONDS) ? h.process().exitValue() : -1, h.text());
        ping(nsA, "10.200.0.2", "-s", "30000");
        Map<String, Long> counters = stop(a);
        for (String expect : HostileSender.EXPECTED_CM.split(" ")) {
            String[] kv = expect.split("=");
            assertEquals(Long.parseLong(kv[1]), counters.get(kv[0]), kv[0] + " in A's report:\n" + a.text());
        }
        assertTrue(counters.get("rx_cm_packets") > 0 && counters.get("tx_cm_packets") > 0, a.text());
        assertTrue(counters.get("cm_accepted") >= 3, "a connection from each B and the hostile host's good one:\n"
                + a.text());
        assertEquals(0L, counters.get("rx_errors"), a.text());
        stop(b2);
        for (Child c : List.of(a, b, b2)) {
            assertTrue(c.lines().stream().noneMatch(l -> l.startsWith("ipoib: close:") || l.contains("thread stopped")),
                    "clean shutdown, nothing leaked:\n" + c.text());
        }
    }

    private static String lladdr(String upLine) {
        Matcher m = Pattern.compile("lladdr ([0-9a-f:]+)").matcher(upLine);
        assertTrue(m.find(), upLine);
        return m.group(1);
    }

    /** @return the QPN (hex) of a printed hardware address: octets 2..4 */
    private static String newQpn(String lladdr) {
        String[] o = lladdr.split(":");
        return o[1] + o[2] + o[3];
    }

    /** Neighbours stay valid 3 s here, so the test sees entries expire and get resolved again. */
    private Child daemon(String ns, String roceAddr, String addr, String... more) throws IOException {
        List<String> args = new ArrayList<>(List.of("-d", "rxe0", "--ifname", "ib0", "--addr", addr, "--reachable-ms",
                "3000"));
        args.addAll(List.of(more));
        return java(ns, "rxe0=" + roceAddr, IpoibMain.class.getName(), args.toArray(String[]::new));
    }

    private Child java(String ns, String devices, String main, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", ns,
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                "-cp", System.getProperty("java.class.path"), main));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        if (devices != null) {
            pb.environment().put("RDMA4J_DEVICES", devices);
        }
        pb.environment().put("RDMA4J_LINKS", "/nonexistent-" + tag); // only the devices given here
        return start(pb);
    }

    private Child start(ProcessBuilder pb) throws IOException {
        Path out = Files.createTempFile(outDir, "child", ".out");
        Process p = pb.redirectErrorStream(true).redirectOutput(out.toFile()).start();
        started.add(p);
        return new Child(p, out);
    }

    /** Stops a daemon by its PID (SIGTERM) and returns the counters it printed on exit. */
    private static Map<String, Long> stop(Child c) throws InterruptedException {
        c.process().destroy();
        assertTrue(c.process().waitFor(15, TimeUnit.SECONDS), "daemon did not stop:\n" + c.text());
        c.await(l -> l.startsWith("rx_errors "), 5, "counters on exit");
        Map<String, Long> m = new HashMap<>();
        for (String l : c.lines()) {
            String[] kv = l.split(" ");
            if (kv.length == 2 && kv[1].matches("\\d+")) {
                m.put(kv[0], Long.parseLong(kv[1]));
            }
        }
        return m;
    }

    private void ping(String ns, String to, String... more) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", ns, "ping", "-c", "3", "-i", "0.2", "-W", "2"));
        cmd.addAll(List.of(more));
        cmd.add(to);
        Result r = exec(30, cmd.toArray(String[]::new));
        assertEquals(0, r.exit, "ping " + to + " from " + ns + ":\n" + r.out);
        assertTrue(r.out.contains("3 received"), r.out);
        System.out.println(r.out.lines().filter(l -> l.startsWith("rtt")).findFirst().orElse(r.out));
    }

    private void tcpCopy(long bytes) throws Exception {
        Child server = java(nsB, null, TcpCopy.class.getName(), "server", "10.200.0.2", "5001");
        server.await(l -> l.equals("listening"), START_TIMEOUT_S, "TCP server");
        Child client = java(nsA, null, TcpCopy.class.getName(), "client", "10.200.0.2", "5001",
                Long.toString(bytes), "42");
        String sent = client.await(l -> l.startsWith("sent "), START_TIMEOUT_S, "TCP client report");
        String received = server.await(l -> l.startsWith("received "), START_TIMEOUT_S, "TCP server report");
        assertEquals(sent.substring("sent ".length()), received.substring("received ".length()),
                "the file arrived whole (length and SHA-256)");
        assertTrue(sent.startsWith("sent " + bytes + " "), sent);
    }

    /** iperf3 TCP and UDP across, when installed (CI installs it); prints the summaries. */
    private void iperf3() throws Exception {
        if (exec(10, "sh", "-c", "command -v iperf3").exit != 0) {
            System.out.println("iperf3 not installed: TCP/UDP throughput step skipped (apt-get install iperf3)");
            return;
        }
        for (String[] mode : new String[][] {{}, {"-u", "-b", "200M"}}) {
            Child server = start(new ProcessBuilder("ip", "netns", "exec", nsB, "iperf3", "-s", "-1", "--forceflush",
                    "-B", "10.200.0.2"));
            server.await(l -> l.contains("Server listening"), 10, "iperf3 server");
            List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", nsA, "iperf3", "-c", "10.200.0.2", "-t", "2"));
            cmd.addAll(List.of(mode));
            Result r = exec(30, cmd.toArray(String[]::new));
            assertEquals(0, r.exit, "iperf3 " + String.join(" ", mode) + ":\n" + r.out);
            r.out.lines().filter(l -> l.contains("sender") || l.contains("receiver")).forEach(l ->
                    System.out.println("iperf3 " + (mode.length == 0 ? "TCP" : "UDP") + ": " + l.trim()));
            server.process().waitFor(10, TimeUnit.SECONDS);
        }
    }

    private record Result(int exit, String out) {
    }

    private Result exec(long timeoutS, String... cmd) throws IOException, InterruptedException {
        Child c = start(new ProcessBuilder(cmd));
        Process p = c.process();
        if (!p.waitFor(timeoutS, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            p.waitFor(5, TimeUnit.SECONDS);
            return new Result(-1, "timed out: " + String.join(" ", cmd) + "\n" + c.text());
        }
        return new Result(p.exitValue(), c.text());
    }

    private void ok(String... cmd) throws IOException, InterruptedException {
        Result r = exec(20, cmd);
        if (r.exit != 0) {
            fail(String.join(" ", cmd) + " failed (" + r.exit + "): " + r.out);
        }
    }

    /** @return whether a "learned" line for {@code ip} follows the last "expired" line for it */
    private static boolean learnedAfterLastExpiry(java.util.List<String> lines, String ip) {
        int expired = -1;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).equals("neighbour " + ip + " expired")) {
                expired = i;
            }
        }
        for (int i = expired + 1; expired >= 0 && i < lines.size(); i++) {
            String l = lines.get(i);
            if (l.startsWith("neighbour " + ip + " lladdr") && l.endsWith("learned")) {
                return true;
            }
        }
        return false;
    }
}
