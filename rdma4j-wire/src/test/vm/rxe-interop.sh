#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rxe-interop.sh — proves the RoCEv2 UDP hazards against a real rdma_rxe (RxeVmInteropTest):
# IPv4 ID inside the ICRC, and IPv6 UDP checksum 0 from rxe. Needs root and the VM harness.
# Boots the VM if it is not up (and then stops it again), runs the slow-tagged test inside the
# VM's network namespace, and exits with the test's status.
#   RDMAVM_HOME  the harness (default /work/shared/vm)
#   KEEP_VM=1    leave a VM this script booted running
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
VM=${RDMAVM_HOME:-/work/shared/vm}
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
export RDMAVM_HOME=$VM
started=0
if ! "$VM/guest.sh" -t 10 true >/dev/null 2>&1; then
    "$VM/build.sh"
    "$VM/up.sh"
    started=1
fi
rc=0
(cd "$ROOT" && "$VM/ns.sh" mvn -o -q -Pslow -pl rdma4j-wire -am test -Dtest=RxeVmInteropTest \
    -Dsurefire.failIfNoSpecifiedTests=false) || rc=$?
if [ $started = 1 ] && [ "${KEEP_VM:-0}" != 1 ]; then
    "$VM/down.sh"
fi
exit $rc
