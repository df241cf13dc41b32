// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

import java.time.Duration;

/**
 * An open device (ibv_context). The root of the ownership tree: PDs, CQs and completion channels
 * are created here. Closing fails with EBUSY while any of them is still open. Thread-safe.
 */
public interface Context extends AutoCloseable {
    /** {@return the device} */
    Device device();

    /** {@return ibv_query_device} */
    DeviceAttributes queryDevice();

    /**
     * {@return ibv_query_port}
     *
     * @param port port number, 1-based
     */
    PortAttributes queryPort(int port);

    /**
     * {@return ibv_query_gid; {@link Gid#ZERO} for an empty entry}
     *
     * @param port  port number
     * @param index GID table index
     */
    Gid queryGid(int port, int index);

    /**
     * The port's hardware counters, as Linux exposes a driver's rdma_hw_stats
     * ({@code /sys/class/infiniband/<dev>/ports/<port>/hw_counters/}, {@code rdma statistic show}),
     * named as rdma_rxe names them (rxe_hw_counters.c: {@code sent_pkts}, {@code rcvd_pkts},
     * {@code duplicate_request}, ...). A snapshot: each value counts up from the device's creation.
     *
     * @param port port number
     * @return counter name to value; empty when the provider keeps no counters
     */
    default java.util.Map<String, Long> queryPortCounters(int port) {
        return java.util.Map.of();
    }

    /**
     * The DMA-mapping calls for per-I/O buffers of this device (Linux ib_dma_* on the ib_device).
     * Mappings belong to this context: any still live when it closes are leaks.
     *
     * @return the device's mapping layer; the same object on every call
     */
    Dma dma();

    /** {@return a new protection domain (ibv_alloc_pd)} */
    ProtectionDomain allocPd();

    /** {@return a new completion channel (ibv_create_comp_channel)} */
    CompletionChannel createCompChannel();

    /**
     * ibv_create_cq.
     *
     * @param cqe        minimum number of entries
     * @param channel    completion channel for notifications, or null
     * @param compVector completion vector (ignored by software devices)
     * @return the CQ
     */
    CompletionQueue createCq(int cqe, CompletionChannel channel, int compVector);

    /**
     * Waits for the next asynchronous event (ibv_get_async_event).
     *
     * @param timeout how long to wait; zero polls
     * @return the event, or null on timeout
     * @throws VerbsException EINVAL if the context is closed, also when that happens while the thread waits
     */
    AsyncEvent getAsyncEvent(Duration timeout);

    /**
     * Acknowledges an event (ibv_ack_async_event). Objects cannot be destroyed while they have
     * unacknowledged events.
     *
     * @param event the event returned by {@link #getAsyncEvent}
     */
    void ackAsyncEvent(AsyncEvent event);

    /**
     * ibv_close_device.
     *
     * @throws VerbsException EBUSY while PDs, CQs or channels are open
     */
    @Override
    void close();
}
