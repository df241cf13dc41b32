# SPDX-License-Identifier: Apache-2.0
# Sourced by interop/run and interop/rxe-netem: the guest kernel has netem, ifb and act_mirred as modules
# that the VM image leaves out (veth too); these copy them in from the harness's extracted kernel and load them.
# Needs RDMAVM_DIR (the harness's common.sh) and GUEST (its guest.sh).
guest_netem_modules() {
    guest_kernel_modules net/sched/sch_netem net/sched/act_mirred drivers/net/ifb
}
# Copies the named modules (paths under the kernel's module tree, without .ko) into the guest and loads
# those not loaded yet.
guest_kernel_modules() {
    local kmods m f kroot
    # An instance of its own (RDMAVM_DIR) links only out/ to the shared build: the kernel is beside it.
    for kroot in "$RDMAVM_DIR" "$(dirname "$(readlink -f "$RDMAVM_DIR/out")")"; do
        kmods="$(ls -d "$kroot"/kernel/*/image/lib/modules/*/kernel 2>/dev/null | head -n 1)"
        [ -n "$kmods" ] && break
    done
    [ -n "$kmods" ] || { echo "no extracted guest kernel modules under $RDMAVM_DIR/kernel or beside its out/"; return 1; }
    for m in "$@"; do
        f="$kmods/$m.ko"
        [ -f "$f" ] || { echo "missing $f"; return 1; }
        timeout 60 "$GUEST" -t 50 -i "cat > /tmp/${m##*/}.ko" <"$f" || return 1
        timeout 30 "$GUEST" -t 20 "grep -q '^${m##*/} ' /proc/modules || insmod /tmp/${m##*/}.ko" || return 1
    done
}
