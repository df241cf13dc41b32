package org.rdma4j.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.DeviceAttributes;
import org.rdma4j.verbs.Mtu;
import org.rdma4j.verbs.PortAttributes;
import org.rdma4j.verbs.PortState;

class DevInfoTest {
    private static Device device(String name, long guid) {
        return new Device() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public long guid() {
                return guid;
            }

            @Override
            public String providerName() {
                return "test";
            }

            @Override
            public Context open() {
                throw new UnsupportedOperationException();
            }
        };
    }

    @Test
    void devicesListingIsIbvDevices() {
        String s = DevInfo.devices(List.of(device("soft0", 0x0200_00ff_fe00_0001L), device("soft1", 0x2)));
        assertEquals("    device          \t   node GUID\n"
                + "    ------          \t----------------\n"
                + "    soft0           \t020000fffe000001\n"
                + "    soft1           \t0000000000000002\n", s);
    }

    @Test
    void guidGroups() {
        assertEquals("0200:00ff:fe00:0001", DevInfo.guid(0x0200_00ff_fe00_0001L));
    }

    @Test
    void hcaCapBlock() {
        var attr = new DeviceAttributes("0.1.0", 0x0200_00ff_fe00_0001L, 0x0200_00ff_fe00_0001L, -1L, 4096, 0xFFFFFF,
                0, 0, 1024, 16384, 0, 32, 1024, 32768, 1024, 1024, 128, 128, 1024, 16384, 32, 1024, 256,
                "ATOMIC_HCA", 1, 15);
        var port = new PortAttributes(PortState.ACTIVE, Mtu.MTU_4096, Mtu.MTU_1024, 1024, 0, 1L << 31, 0, 0, 0, 5,
                "Ethernet", 1, 1, 1);
        String s = DevInfo.hcaCap("soft0", attr, new PortAttributes[] {port}, 0);
        assertEquals("hca_id:\tsoft0\n"
                + "\ttransport:\t\t\tInfiniBand (0)\n"
                + "\tfw_ver:\t\t\t\t0.1.0\n"
                + "\tnode_guid:\t\t\t0200:00ff:fe00:0001\n"
                + "\tsys_image_guid:\t\t\t0200:00ff:fe00:0001\n"
                + "\tvendor_id:\t\t\t0xffffff\n"
                + "\tvendor_part_id:\t\t\t0\n"
                + "\thw_ver:\t\t\t\t0x0\n"
                + "\tphys_port_cnt:\t\t\t1\n"
                + "\t\tport:\t1\n"
                + "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
                + "\t\t\tmax_mtu:\t\t4096 (5)\n"
                + "\t\t\tactive_mtu:\t\t1024 (3)\n"
                + "\t\t\tsm_lid:\t\t\t0\n"
                + "\t\t\tport_lid:\t\t0\n"
                + "\t\t\tport_lmc:\t\t0x00\n"
                + "\t\t\tlink_layer:\t\tEthernet\n"
                + "\n", s);
        assertTrue(s.endsWith("\n\n"));
    }
}
