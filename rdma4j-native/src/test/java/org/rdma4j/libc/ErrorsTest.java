// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.libc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.channels.ClosedChannelException;
import org.junit.jupiter.api.Test;

class ErrorsTest {
    @Test
    void namesFollowTheLinuxHeaders() {
        assertEquals("EPERM", Errors.name(1));
        assertEquals("EBADF", Errors.name(9));
        assertEquals("ECHILD", Errors.name(10));
        assertEquals("EAGAIN", Errors.name(Errors.EAGAIN));
        assertEquals("ENOSYS", Errors.name(38));
        assertEquals("ENOMSG", Errors.name(42)); // 41 is unused: the table must not shift
        assertEquals("EOPNOTSUPP", Errors.name(95));
        assertEquals("EADDRINUSE", Errors.name(98));
        assertEquals("ETIMEDOUT", Errors.name(110));
        assertEquals("EHWPOISON", Errors.name(133));
        assertEquals("errno 0", Errors.name(0));
        assertEquals("errno 9999", Errors.name(9999));
        assertEquals("errno -5", Errors.name(-5));
    }

    @Test
    void describeAddsLibcsText() {
        assertEquals("EADDRINUSE (Address already in use)", Errors.describe(98));
        NativeIOException e = Errors.newIOException("bind", 98, "127.0.0.1:4791");
        assertEquals("bind failed: EADDRINUSE (Address already in use): 127.0.0.1:4791", e.getMessage());
        assertEquals(98, e.errno());
        assertEquals("open failed: ENOENT (No such file or directory)", Errors.newIOException("open", 2, "").getMessage());
    }

    @Test
    void ioResultTranslatesOnce() throws Exception {
        assertEquals(-1, Errors.ioResult("recvfrom", Errors.EAGAIN, ""));
        ClosedChannelException closed = assertThrows(ClosedChannelException.class,
                () -> Errors.ioResult("recvfrom", Errors.EBADF, ""));
        assertInstanceOf(NativeIOException.class, closed.getCause());
        NativeIOException other = assertThrows(NativeIOException.class,
                () -> Errors.ioResult("sendto", 90, "10.0.0.1:4791"));
        assertEquals(90, other.errno());
        assertTrue(other.getMessage().startsWith("sendto failed: EMSGSIZE"), other.getMessage());
    }
}
