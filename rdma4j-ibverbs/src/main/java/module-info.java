// SPDX-License-Identifier: Apache-2.0
/**
 * A verbs provider over Linux's libibverbs ({@code libibverbs.so.1}) through FFM, for real RDMA NICs and the
 * kernel's rxe and siw, and the CM API over {@code librdmacm.so.1}: no JNI, no C to build. Found with {@link java.util.ServiceLoader}; callers need
 * {@code --enable-native-access=org.rdma4j.ibverbs,org.rdma4j.libc} (or ALL-UNNAMED on the class path).
 */
module org.rdma4j.ibverbs {
    requires transitive org.rdma4j.verbs;
    requires org.rdma4j.libc;
    requires org.rdma4j.common;

    exports org.rdma4j.ibverbs;

    provides org.rdma4j.verbs.spi.VerbsProvider with org.rdma4j.ibverbs.IbvProvider;
    provides org.rdma4j.verbs.spi.CmProvider with org.rdma4j.ibverbs.RdmaCmProvider;
}
