// SPDX-License-Identifier: Apache-2.0
package org.rdma4j.ibverbs;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import org.rdma4j.verbs.AddressHandle;
import org.rdma4j.verbs.AhAttributes;
import org.rdma4j.verbs.VerbsException;

/**
 * An address handle ({@code struct ibv_ah}). A UD post enters its use count for the duration of the
 * downcall (the provider reads the handle then), so destroying it while a post runs waits for the post.
 */
final class IbvAh extends IbvObject implements AddressHandle {
    final IbvPd pd;
    private final AhAttributes attrs;

    private IbvAh(IbvPd pd, MemorySegment ptr, AhAttributes attrs) {
        super(ptr);
        this.pd = pd;
        this.attrs = attrs;
    }

    static IbvAh create(IbvPd pd, AhAttributes attrs) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            MemorySegment attr = a.allocate(IbvLayouts.AH_ATTR);
            IbvAttrs.ahAttr(attr, 0, attrs);
            MemorySegment p = (MemorySegment) Ibv.CREATE_AH.invokeExact(st, pd.ptr, attr);
            if (p.equals(MemorySegment.NULL)) {
                throw IbvErrors.failed("ibv_create_ah", Ibv.errno(st), attrs + " on " + pd.ctx.device.name());
            }
            return new IbvAh(pd, p.reinterpret(IbvLayouts.AH.byteSize()), attrs.copy());
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
    }

    @Override
    String describe() {
        return "AH to " + attrs.dgid() + " on " + pd.ctx.device.name();
    }

    @Override
    public IbvPd pd() {
        return pd;
    }

    @Override
    public AhAttributes attributes() {
        return attrs.copy();
    }

    @Override
    public void close() {
        if (!beginDestroy("ibv_destroy_ah")) {
            return;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment st = Ibv.newCallState(a);
            int rc = (int) Ibv.DESTROY_AH.invokeExact(st, ptr);
            if (rc != 0) {
                destroyFailed();
                throw IbvErrors.failed("ibv_destroy_ah", Ibv.err(rc, st), describe());
            }
        } catch (VerbsException e) {
            throw e;
        } catch (Throwable t) {
            throw Ibv.rethrow(t);
        }
        pd.children.remove(this);
    }
}
