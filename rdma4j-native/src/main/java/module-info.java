// SPDX-License-Identifier: Apache-2.0
/**
 * The one libc binding of rdma4j: {@link org.rdma4j.libc.Libc} (downcall handles bound once, errno captured
 * per call), {@link org.rdma4j.libc.Errors} (errno names and the one translation of a failed call into an
 * exception) and {@link org.rdma4j.libc.NativeFd} (a descriptor that is never closed while a call is inside
 * it). The socket layer of rdma4j-wire, the TUN device of rdma4j-ipoib and the libibverbs provider sit on it.
 * Callers need {@code --enable-native-access=org.rdma4j.libc} (or ALL-UNNAMED on the class path).
 */
module org.rdma4j.libc {
    exports org.rdma4j.libc;
}
