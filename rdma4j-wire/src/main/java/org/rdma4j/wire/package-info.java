/** RoCEv2 wire format. */
package org.rdma4j.wire;
