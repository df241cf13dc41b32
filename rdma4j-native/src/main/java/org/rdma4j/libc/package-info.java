// SPDX-License-Identifier: Apache-2.0
/**
 * The one libc binding: {@link org.rdma4j.libc.Libc}, {@link org.rdma4j.libc.Errors},
 * {@link org.rdma4j.libc.NativeIOException} and {@link org.rdma4j.libc.NativeFd}.
 */
package org.rdma4j.libc;
