#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run1.sh LABEL JARDIR N : one serve + latency pair, as bench/cm-bench part 1; SOPTS/COPTS extra JVM flags
set -uo pipefail
label=$1; jar=$2/benchmarks.jar; n=$3
out=/tmp/cmh/out; mkdir -p $out
J=/usr/lib/jvm/temurin-25-jdk-amd64/bin/java
export RDMA4J_LINKS=/nonexistent
for attempt in 1 2 3 4; do
udp=$((20000 + RANDOM % 10000)); cmport=$((7000 + RANDOM % 1000)); tcpport=$((30000 + RANDOM % 2000))
coproc SERVER { RDMA4J_DEVICES="rxe0=127.0.0.1@$udp" exec $J --enable-native-access=ALL-UNNAMED ${SOPTS:-} -cp $jar -Drdma4j.soft.devices=0 \
    org.rdma4j.benchmarks.CmBench serve $cmport $tcpport 2>$out/$label.serve.err; }
spid=$SERVER_PID
if read -r -t 60 line <&"${SERVER[0]}"; then break; fi
echo "serve did not start (attempt $attempt)"; kill $spid 2>/dev/null; wait $spid 2>/dev/null
done
echo "$label load $(cut -d' ' -f1-3 /proc/loadavg)" > $out/$label.txt
if [[ -n "${RENICE:-}" ]]; then /tmp/cmh/renice.sh $RENICE > $out/$label.renice 2>&1 & fi
RDMA4J_DEVICES="rxe1=127.0.0.2@$udp" timeout 300 $J --enable-native-access=ALL-UNNAMED ${COPTS:-} -cp $jar -Drdma4j.soft.devices=0 \
    org.rdma4j.benchmarks.CmBench latency $n 127.0.0.1 $cmport $tcpport >> $out/$label.txt 2>$out/$label.client.err || echo "client failed rc=$?" >> $out/$label.txt
echo "end load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/$label.txt
eval "exec ${SERVER[1]}>&-"
for _ in $(seq 1 100); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
kill $spid 2>/dev/null || true
grep -E "load|connect|disconnect|tcp" $out/$label.txt
