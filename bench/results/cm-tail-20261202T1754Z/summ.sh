#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# summ.sh LABEL: load, connect p50/p90, disconnect, c+d, tcp
f=/tmp/cmh/out/$1.txt
echo "$1 $(head -1 $f | cut -d' ' -f3-5) | $(grep -E 'connect \(REQ|disconnect \(DREQ|REQ..DISC|tcp connect' $f | awk '{printf "%s/%s  ", $(NF-7), $(NF-4)}')"
