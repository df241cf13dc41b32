// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.verbs;

/** IB path MTU values (ibv_mtu): enum value n stands for 128 &lt;&lt; n bytes. */
public enum Mtu {
    /** 256 bytes. */
    MTU_256(1, 256),
    /** 512 bytes. */
    MTU_512(2, 512),
    /** 1024 bytes. */
    MTU_1024(3, 1024),
    /** 2048 bytes. */
    MTU_2048(4, 2048),
    /** 4096 bytes. */
    MTU_4096(5, 4096);

    private final int value;
    private final int bytes;

    Mtu(int value, int bytes) {
        this.value = value;
        this.bytes = bytes;
    }

    /** {@return the ibv_mtu enum value (1..5)} */
    public int value() {
        return value;
    }

    /** {@return the MTU in bytes} */
    public int bytes() {
        return bytes;
    }

    /**
     * {@return the MTU}
     *
     * @param bytes 256, 512, 1024, 2048 or 4096
     * @throws VerbsException EINVAL for any other size
     */
    public static Mtu ofBytes(int bytes) {
        for (Mtu m : values()) {
            if (m.bytes == bytes) {
                return m;
            }
        }
        throw new VerbsException(Errno.EINVAL, "MTU " + bytes + " (expected 256, 512, 1024, 2048 or 4096)");
    }

    /**
     * {@return the MTU}
     *
     * @param value ibv_mtu value 1..5
     */
    public static Mtu ofValue(int value) {
        for (Mtu m : values()) {
            if (m.value == value) {
                return m;
            }
        }
        throw new VerbsException(Errno.EINVAL, "ibv_mtu value " + value + " (expected 1..5)");
    }
}
