// SPDX-License-Identifier: Apache-2.0
/**
 * rdma4j's command-line tools: {@code devices}, {@code devinfo} and the perftest-compatible
 * {@code ib_write_bw}, dispatched by {@link org.rdma4j.tools.Main}. Devices come from whatever
 * {@link org.rdma4j.verbs.spi.VerbsProvider} is on the path.
 */
module org.rdma4j.tools {
    requires transitive org.rdma4j.verbs;
    // RoceLinks: the links-file format `link` edits and the soft provider reads; statistic: the counter
    // files of running processes.
    requires org.rdma4j.common;
    // --chart: the PNG is drawn with java.awt (headless) and written with javax.imageio.
    requires java.desktop;
    // TCP keepalive timing on the perftest exchange (a vanished peer host ends a wait).
    requires jdk.net;
    // impair: netlink (nfnetlink_queue) and raw sockets through the one libc binding.
    requires org.rdma4j.libc;

    exports org.rdma4j.tools;

    uses org.rdma4j.verbs.spi.VerbsProvider;
}
