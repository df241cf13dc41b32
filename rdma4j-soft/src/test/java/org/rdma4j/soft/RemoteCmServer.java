// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.soft;

import static org.rdma4j.soft.RemoteProtocol.*;

import java.io.DataInputStream;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.rdma4j.verbs.CompletionQueue;
import org.rdma4j.verbs.Context;
import org.rdma4j.verbs.ProtectionDomain;
import org.rdma4j.verbs.QpInitAttributes;
import org.rdma4j.verbs.QpState;
import org.rdma4j.verbs.QpType;
import org.rdma4j.verbs.QueuePair;
import org.rdma4j.verbs.SharedReceiveQueue;
import org.rdma4j.verbs.cm.CmAddress;
import org.rdma4j.verbs.cm.CmOption;
import org.rdma4j.verbs.cm.PortSpace;
import org.rdma4j.verbs.spi.CmEventInfo;
import org.rdma4j.verbs.spi.CmEventSink;
import org.rdma4j.verbs.spi.CmIdSpi;

/**
 * The remote peer's side of the CM ops ({@link RemoteProtocol#CM_OPEN} ...): hosts the CM providers the
 * test JVM opens on the child's devices ({@link RemoteCmFactory}) and runs their {@link CmIdSpi} calls.
 * A provider's events for the front go back as callbacks inside the call that caused them
 * ({@link RemoteProtocol#CB_CM_EVENT}, {@link RemoteProtocol#CB_CM_CONNECT_REQUEST}): the CMs are driven
 * (no threads of their own), so every event happens inside a call (a progress, a clock advance, an ID's
 * call). An event that cannot reach the test JVM is printed and fails the CM's next progress or its close.
 */
final class RemoteCmServer {
    private static final List<CmOption<?>> OPTIONS = List.of(CmOption.TOS, CmOption.REUSEADDR, CmOption.AFONLY,
            CmOption.ACK_TIMEOUT, CmOption.CM_RESPONSE_TIMEOUT, CmOption.MAX_CM_RETRIES);

    private final RemotePeerMain main;
    /** Open CMs by handle, and the fabric each is on. */
    private final Map<Integer, RemoteCmFactory.Hosted> cms = new HashMap<>();
    private final Map<Integer, Integer> fabricOf = new HashMap<>();
    private final List<String> lost = new ArrayList<>();

    RemoteCmServer(RemotePeerMain main) {
        this.main = main;
    }

    /** Closes the CMs of a fabric the test JVM closes without closing them first. */
    void fabricClosing(int fabric) {
        for (Integer h : new ArrayList<>(cms.keySet())) {
            if (fabricOf.get(h) == fabric) {
                System.err.println("remote CM " + h + " still open when its fabric closes: closing it first");
                fabricOf.remove(h);
                cms.remove(h).close();
            }
        }
    }

    /** The sink of one provider ID: its events become callbacks of its CM. */
    private final class Sink implements CmEventSink {
        private final int cm;
        private final int id;

        Sink(int cm, int id) {
            this.cm = cm;
            this.id = id;
        }

        @Override
        public void post(CmEventInfo event) {
            try {
                main.callback(cm, CB_CM_EVENT, o -> {
                    o.writeInt(id);
                    writeEventInfo(o, event);
                }, in -> null);
            } catch (IOException | RuntimeException e) {
                lose(event, e);
            }
        }

        @Override
        public CmEventSink connectRequest(CmIdSpi newId, CmEventInfo event) {
            int h = main.register(newId);
            try {
                int sink = main.callback(cm, CB_CM_CONNECT_REQUEST, o -> {
                    o.writeInt(id);
                    o.writeInt(h);
                    writeEventInfo(o, event);
                }, DataInputStream::readInt);
                return sink == 0 ? null : new Sink(cm, sink);
            } catch (IOException | RuntimeException e) {
                lose(event, e);
                return null;
            }
        }

        private void lose(CmEventInfo event, Exception e) {
            String what = "the CM event " + event.type() + " of sink " + id + " did not reach the test JVM: " + e;
            System.err.println(what);
            e.printStackTrace();
            synchronized (lost) {
                lost.add(what);
            }
        }
    }

    private void checkNothingLost() {
        synchronized (lost) {
            if (!lost.isEmpty()) {
                String first = lost.getFirst();
                int n = lost.size();
                lost.clear();
                throw new IllegalStateException(n + " CM event(s) could not be delivered to the test JVM; first: "
                        + first);
            }
        }
    }

    private RemoteCmFactory.Hosted cm(int h) {
        RemoteCmFactory.Hosted c = cms.get(h);
        if (c == null) {
            throw new IllegalStateException("remote handle " + h + " is not an open CM");
        }
        return c;
    }

    RemotePeerMain.Body parse(int op, int h, DataInputStream in) throws IOException {
        return switch (op) {
            case CM_OPEN -> {
                int device = in.readInt();
                String factory = in.readUTF();
                long seed = in.readLong();
                yield o -> {
                    SoftDevice d = main.obj(device, SoftDevice.class);
                    RemoteCmFactory f;
                    try {
                        f = (RemoteCmFactory) Class.forName(factory).getDeclaredConstructor().newInstance();
                    } catch (ReflectiveOperationException | ClassCastException e) {
                        throw new IllegalArgumentException("cannot make the CM factory " + factory + ": " + e, e);
                    }
                    RemoteCmFactory.Hosted c = f.open(d, main.clock(h), seed);
                    int ch = main.register(c);
                    cms.put(ch, c);
                    fabricOf.put(ch, h);
                    o.writeInt(ch);
                    o.writeUTF(c.provider().name());
                };
            }
            case CM_CLOSE -> o -> {
                RemoteCmFactory.Hosted c = cms.remove(h);
                fabricOf.remove(h);
                if (c != null) {
                    c.close();
                }
                checkNothingLost();
            };
            case CM_PROGRESS -> o -> {
                boolean any = cm(h).progress();
                checkNothingLost();
                o.writeBoolean(any);
            };
            case CM_COUNTERS -> o -> {
                Map<String, Long> m = cm(h).counters();
                o.writeInt(m.size());
                for (Map.Entry<String, Long> e : m.entrySet()) {
                    o.writeUTF(e.getKey());
                    o.writeLong(e.getValue());
                }
            };
            case CM_ADDRESSES -> o -> {
                List<CmAddress> as = cm(h).provider().addresses();
                o.writeInt(as.size());
                for (CmAddress a : as) {
                    writeAddress(o, a);
                }
            };
            case CM_SOURCE_FOR -> {
                var dst = readInet(in);
                yield o -> {
                    CmAddress a = cm(h).provider().sourceFor(dst);
                    o.writeBoolean(a != null);
                    if (a != null) {
                        writeAddress(o, a);
                    }
                };
            }
            case CM_CREATE_ID -> {
                int sink = in.readInt();
                PortSpace ps = readEnum(in, PortSpace.class);
                QpType type = readEnum(in, QpType.class);
                yield o -> o.writeInt(main.register(cm(h).provider().createId(new Sink(h, sink), ps, type)));
            }
            default -> parseId(op, h, in);
        };
    }

    private void writeAddress(java.io.DataOutputStream o, CmAddress a) throws IOException {
        writeInet(o, a.address());
        o.writeInt(main.handleOf(a.device()));
        o.writeInt(a.port());
        o.writeInt(a.gidIndex());
    }

    private RemotePeerMain.Body parseId(int op, int h, DataInputStream in) throws IOException {
        return switch (op) {
            case ID_BIND -> {
                var a = readSocketAddress(in);
                yield o -> id(h).bind(a);
            }
            case ID_LOCAL_ADDRESS -> o -> writeSocketAddress(o, id(h).localAddress());
            case ID_REMOTE_ADDRESS -> o -> writeSocketAddress(o, id(h).remoteAddress());
            case ID_LISTEN -> {
                int backlog = in.readInt();
                yield o -> id(h).listen(backlog);
            }
            case ID_RESOLVE_ADDR -> {
                var src = readSocketAddress(in);
                var dst = readSocketAddress(in);
                long ns = in.readLong();
                yield o -> id(h).resolveAddr(src, dst, Duration.ofNanos(ns));
            }
            case ID_RESOLVE_ROUTE -> {
                long ns = in.readLong();
                yield o -> id(h).resolveRoute(Duration.ofNanos(ns));
            }
            case ID_CONTEXT -> o -> {
                Context c = id(h).context();
                o.writeInt(main.handleOrRegister(c));
                o.writeInt(c == null ? 0 : main.handleOf(c.device()));
            };
            case ID_PORT_NUM -> o -> o.writeInt(id(h).portNum());
            case ID_ROUTE -> o -> writeRoute(o, id(h).route());
            case ID_CREATE_QP -> {
                int pdH = in.readInt();
                QpType type = readEnum(in, QpType.class);
                int scqH = in.readInt();
                int rcqH = in.readInt();
                int srqH = in.readInt();
                var cap = readCap(in);
                boolean sigAll = in.readBoolean();
                yield o -> {
                    ProtectionDomain pd = main.obj(pdH, ProtectionDomain.class);
                    QueuePair qp = id(h).createQp(pd, new QpInitAttributes().type(type)
                            .sendCq(main.obj(scqH, CompletionQueue.class)).recvCq(main.obj(rcqH, CompletionQueue.class))
                            .srq(main.obj(srqH, SharedReceiveQueue.class)).cap(cap).sqSigAll(sigAll));
                    o.writeInt(main.handleOrRegister(qp));
                    o.writeInt(qp.qpNum());
                };
            }
            case ID_QP -> o -> {
                QueuePair qp = id(h).qp();
                o.writeInt(main.handleOrRegister(qp));
                if (qp != null) {
                    o.writeInt(qp.qpNum());
                    writeEnum(o, qp.type());
                    o.writeInt(main.handleOf(qp.pd()));
                }
            };
            case ID_DESTROY_QP -> o -> id(h).destroyQp();
            case ID_INIT_QP_ATTR -> {
                QpState state = readEnum(in, QpState.class);
                yield o -> writeQpAttrs(o, id(h).initQpAttr(state));
            }
            case ID_CONNECT -> {
                var p = readConnParam(in);
                yield o -> id(h).connect(p);
            }
            case ID_ACCEPT -> {
                var p = readConnParam(in);
                yield o -> id(h).accept(p);
            }
            case ID_REJECT -> {
                byte[] data = readBytes(in);
                yield o -> id(h).reject(data);
            }
            case ID_DISCONNECT -> o -> id(h).disconnect();
            case ID_ESTABLISH -> o -> id(h).establish();
            case ID_SET_OPTION -> {
                String name = in.readUTF();
                int kind = in.readInt();
                Object value = switch (kind) {
                    case -1 -> null;
                    case 0 -> in.readInt();
                    case 1 -> in.readBoolean();
                    default -> throw new IOException("bad option value kind " + kind);
                };
                yield o -> setOption(id(h), name, value);
            }
            case ID_CLOSE -> o -> id(h).close();
            default -> throw new IOException("unknown remote CM op " + op);
        };
    }

    @SuppressWarnings("unchecked")
    private static <T> void setOption(CmIdSpi id, String name, Object value) {
        for (CmOption<?> opt : OPTIONS) {
            if (opt.name().equals(name)) {
                CmOption<T> o = (CmOption<T>) opt;
                id.setOption(o, o.type().cast(value));
                return;
            }
        }
        throw new IllegalArgumentException("CM option " + name + " is not one the remote peer knows");
    }

    private CmIdSpi id(int h) {
        return main.obj(h, CmIdSpi.class);
    }
}
