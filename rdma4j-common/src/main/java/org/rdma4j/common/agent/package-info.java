// SPDX-License-Identifier: Apache-2.0
/**
 * Agents: background work as duty cycles run by an {@link org.rdma4j.common.agent.AgentRunner}, with a
 * user-chosen {@link org.rdma4j.common.agent.IdleStrategy} between cycles and an
 * {@link org.rdma4j.common.agent.ErrorHandler} that keeps a failing cycle from ending the thread (after
 * Agrona's {@code org.agrona.concurrent} agents).
 */
package org.rdma4j.common.agent;
