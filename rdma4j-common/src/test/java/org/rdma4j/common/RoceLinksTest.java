// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.common;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The links-file format: one parser and one writer for the soft provider and {@code rdma4j link}. */
class RoceLinksTest {
    @TempDir
    Path dir;

    @Test
    void entriesParseAndFormatBackToTheSameText() {
        List<RoceLinks.Entry> l = RoceLinks.parseList(" rxe0=127.0.0.1; rxe1=127.0.0.2@14791\trxe2=10.99.0.1,fd99::1 ",
                "test");
        assertEquals(3, l.size());
        assertEquals("rxe0=127.0.0.1", l.get(0).toString());
        assertEquals("rxe1=127.0.0.2@14791", l.get(1).toString());
        assertEquals(14791, l.get(1).addresses().udpPort());
        assertEquals("rxe2=10.99.0.1,fd99::1", l.get(2).toString());
        assertEquals(RoceLinks.parseEntry(l.get(2).toString(), "again"), l.get(2));
        assertEquals(RoceLinks.DEFAULT_UDP_PORT, l.get(0).addresses().udpPort());
    }

    @Test
    void badEntriesNameTheTextAndTheSource() {
        var e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.parseList("rxe0", "RDMA4J_DEVICES"));
        assertTrue(e.getMessage().contains("'rxe0'") && e.getMessage().contains("RDMA4J_DEVICES"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.parseEntry("r/x=1.2.3.4", "f:3"));
        assertTrue(e.getMessage().contains("bad device name 'r/x' in f:3"), e.getMessage());
        // a host name is not looked up: only literals
        e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.parseEntry("rxe0=localhost", "f:1"));
        assertTrue(e.getMessage().contains("'localhost' is not an IP address"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.parseEntry("rxe0=127.0.0.1@0", "f:1"));
        assertTrue(e.getMessage().contains("UDP port 0"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.parseEntry("rxe0=127.0.0.1@x", "f:1"));
        assertTrue(e.getMessage().contains("bad UDP port"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.parseEntry("rxe0=::", "f:1"));
        assertTrue(e.getMessage().contains("specific address"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.parseEntry("rxe0=239.1.1.1", "f:1"));
        assertTrue(e.getMessage().contains("multicast"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.parseEntry("rxe0=fd99::1,fd99::2", "f:1"));
        assertTrue(e.getMessage().contains("at most one IPv4 and one IPv6"), e.getMessage());
    }

    @Test
    void theFileKeepsCommentsAndOtherLinesWhenEdited() throws Exception {
        Path f = dir.resolve("sub/links");
        RoceLinks.put(f, RoceLinks.parseEntry("rxe0=127.0.0.1", "t"));
        Files.writeString(f, "# my devices\nrxe0=127.0.0.1   # the server\n\nrxe1=127.0.0.2\n");
        RoceLinks.put(f, RoceLinks.parseEntry("rxe0=127.0.0.3@14791", "t"));
        assertEquals("# my devices\nrxe0=127.0.0.3@14791\n\nrxe1=127.0.0.2\n", Files.readString(f));
        RoceLinks.put(f, RoceLinks.parseEntry("rxe2=127.0.0.4", "t"));
        assertEquals(List.of("rxe0", "rxe1", "rxe2"), RoceLinks.read(f).stream().map(RoceLinks.Entry::name).toList());
        assertTrue(RoceLinks.remove(f, "rxe1"));
        assertFalse(RoceLinks.remove(f, "rxe1"));
        assertEquals("# my devices\nrxe0=127.0.0.3@14791\n\nrxe2=127.0.0.4\n", Files.readString(f));
        assertTrue(RoceLinks.read(dir.resolve("none")).isEmpty());
    }

    @Test
    void aBadLineInTheFileIsNamedByFileAndLine() throws Exception {
        Path f = dir.resolve("links");
        Files.writeString(f, "rxe0=127.0.0.1\n# fine\nrxe1=nonsense\n");
        var e = assertThrows(IllegalArgumentException.class, () -> RoceLinks.read(f));
        assertTrue(e.getMessage().contains(f + ":3"), e.getMessage());
    }

    @Test
    void ipv6IsWrittenShortAsRfc5952Says() {
        assertEquals("fd99::1", RoceLinks.text(InetAddress.ofLiteral("fd99:0:0:0:0:0:0:1")));
        assertEquals("::1", RoceLinks.text(InetAddress.ofLiteral("::1")));
        assertEquals("2001:db8::1:0:0:1", RoceLinks.text(InetAddress.ofLiteral("2001:db8:0:0:1:0:0:1")));
        assertEquals("2001:db8:0:1:1:1:1:1", RoceLinks.text(InetAddress.ofLiteral("2001:db8:0:1:1:1:1:1")));
        assertEquals("fe80::", RoceLinks.text(InetAddress.ofLiteral("fe80::")));
        assertEquals("10.99.0.1", RoceLinks.text(InetAddress.ofLiteral("10.99.0.1")));
    }

    @Test
    void theFileIsNamedByTheEnvironment() {
        assertEquals(Path.of("/x/links"), RoceLinks.file(k -> k.equals("RDMA4J_LINKS") ? "/x/links" : null));
        assertEquals(Path.of(System.getProperty("user.home"), ".config", "rdma4j", "links"), RoceLinks.file(k -> null));
    }

    @Test
    void localAddressesAreThoseThisHostCanBind() {
        assertTrue(RoceLinks.isLocal(InetAddress.ofLiteral("127.0.0.1")));
        assertTrue(RoceLinks.isLocal(InetAddress.ofLiteral("127.0.0.2")), "all of 127/8 is on lo");
        assertFalse(RoceLinks.isLocal(InetAddress.ofLiteral("203.0.113.254")), "TEST-NET-3 is on no interface");
        RoceLinks.checkLocal("rxe0", RoceLinks.parseAddresses("127.0.0.1", ""));
        var e = assertThrows(IllegalArgumentException.class,
                () -> RoceLinks.checkLocal("rxe9", RoceLinks.parseAddresses("203.0.113.254", "")));
        assertTrue(e.getMessage().contains("203.0.113.254 is not an address of this host")
                && e.getMessage().contains("127.0.0.1 (lo)"), e.getMessage());
    }
}
