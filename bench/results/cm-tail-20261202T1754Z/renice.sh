#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# renice.sh PATTERN NICE: after 4 s, renice the threads of this user's CmBench JVMs whose comm matches PATTERN
sleep 4
for pid in $(pgrep -f "jar-[a-z]+/benchmarks.jar -Drdma4j.soft.devices=0 org.rdma4j.benchmarks.CmBench (serve|latency)"); do
  for t in /proc/$pid/task/*; do
    c=$(cat $t/comm 2>/dev/null)
    if [[ "$c" =~ $1 ]]; then renice -n $2 -p $(basename $t) >/dev/null; echo "$pid $(basename $t) $c"; fi
  done
done
