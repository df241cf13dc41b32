// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.tools;

import java.io.PrintStream;
import java.net.ServerSocket;
import java.util.concurrent.TimeUnit;

import org.rdma4j.tools.PingPong.RunException;
import org.rdma4j.verbs.Device;
import org.rdma4j.verbs.Verbs;

/** --loopback: the server on one device, the client on another, both in this process. */
final class PingPongLoopback {
    private PingPongLoopback() {
    }

    static int run(PingPongOptions o, PrintStream out, PrintStream err, StopSignal stop, boolean terminal) {
        Device client;
        Device server;
        try {
            client = PingPong.resolve(o.ibDev);
            if (o.serverIbDev != null) {
                server = PingPong.resolve(o.serverIbDev);
            } else {
                server = Verbs.devices().stream().filter(d -> !d.name().equals(client.name())).findFirst()
                        .orElse(client);
            }
        } catch (RunException e) {
            err.println(e.getMessage());
            return 1;
        }
        if (o.gidIndex < 0) {
            // Devices of a RoCE fabric route by GID, so loopback sends one unless told otherwise.
            o.gidIndex = 0;
        }
        ServerSocket listener;
        try {
            listener = PingPongExchange.listen(o.portGiven ? o.port : 0);
        } catch (PingPongExchange.ExchangeException e) {
            err.println(e.getMessage());
            return 1;
        }
        PingPongOptions so = copy(o, null, listener.getLocalPort());
        PingPongOptions co = copy(o, "127.0.0.1", listener.getLocalPort());
        PrefixStream sOut = new PrefixStream(out, "[server] ");
        PrefixStream sErr = new PrefixStream(err, "[server] ");
        PrefixStream cOut = new PrefixStream(out, "[client] ");
        PrefixStream cErr = new PrefixStream(err, "[client] ");
        PingPong serverSide = new PingPong(so, sOut, sErr, stop, false);
        PingPong clientSide = new PingPong(co, cOut, cErr, stop, terminal);
        serverSide.peer = clientSide;
        clientSide.peer = serverSide;
        int[] rc = new int[2];
        Thread t = Thread.ofPlatform().name("rdma4j-pingpong-server").start(() -> rc[0] = serverSide.run(server,
                listener));
        rc[1] = clientSide.run(client, null);
        if (rc[1] != 0 && rc[1] != 130) {
            // The server may be waiting for a client that will never come.
            try {
                listener.close();
            } catch (java.io.IOException e) {
                // Closing only unblocks accept().
            }
        }
        try {
            t.join(TimeUnit.SECONDS.toMillis(90));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (t.isAlive()) {
            stop.stop();
            err.println("[server] did not finish; stopping it");
            try {
                t.join(TimeUnit.SECONDS.toMillis(10));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        sOut.flush();
        cOut.flush();
        sErr.flush();
        cErr.flush();
        return rc[1] != 0 ? rc[1] : rc[0];
    }

    private static PingPongOptions copy(PingPongOptions o, String serverName, int port) {
        String[] none = {};
        PingPongOptions c = PingPongOptions.parse(o.kind, none);
        c.serverName = serverName;
        c.port = port;
        c.portGiven = true;
        c.ibDev = o.ibDev;
        c.ibPort = o.ibPort;
        c.size = o.size;
        c.mtu = o.mtu;
        c.rxDepth = o.rxDepth;
        c.iters = o.iters;
        c.sl = o.sl;
        c.events = o.events;
        c.gidIndex = o.gidIndex;
        c.gidGiven = o.gidGiven;
        c.numQp = o.numQp;
        c.validate = o.validate;
        c.newSend = o.newSend;
        c.verify = o.verify;
        return c;
    }
}
