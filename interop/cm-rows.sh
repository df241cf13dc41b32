# SPDX-License-Identifier: Apache-2.0
# interop/cm-rows.sh: the connection-manager rows of issue 12 item 7 that are about the CM itself, not a
# tool: a connect to a port nobody listens on (REJECTED with reason 8 on the connecting side, whichever
# side that is), a disconnect started by each side (the other side reports DISCONNECTED), and connects
# under netem loss (the CM's MAD retransmissions recover). Sourced by interop/run after its matrix, with
# its helpers (spawn, reap, host_cmd, guest_cmd, selected, netem_on/off) and counters (N, PASSED, FAILED).
# rping is the probe on both sides (rdma4j's and rdma-core's); a server's readiness is the absence of
# REJECTED error 8 at the client, so no TCP port is involved.

CM_PORT=17174
declare -A CM_HOST=([ipv4]=10.99.0.1 [ipv6]=fd99::1)
declare -A CM_GUEST=([ipv4]=10.99.0.2 [ipv6]=fd99::2)

cm_list() {
    local fam
    for fam in ipv4 ipv6; do
        echo "cm nobody-listens rping $fam rdma4j-client/rxe"
        echo "cm nobody-listens rping $fam rxe-client/rdma4j"
        echo "cm disconnect-by-client rping -C 3 $fam rdma4j-server/rxe-client"
        echo "cm disconnect-by-client rping -C 3 $fam rxe-server/rdma4j-client"
    done
    echo "cm disconnect-by-server ucmatose ipv4 rdma4j-server/rxe-client"
    echo "cm disconnect-by-server ucmatose ipv4 rxe-server/rdma4j-client"
    echo "cm netem-loss 20% connect x5 rping -C 2 ipv4 rdma4j-server/rxe-client"
    echo "cm netem-loss 20% connect x5 rping -C 2 ipv4 rxe-server/rdma4j-client"
}

# Prints a row's line and counts it: cm_result NAME T0 OK DETAIL
cm_result() {
    if [ "$3" = 1 ]; then
        printf 'PASS  %-70s %3ds  %s\n' "$1" $((SECONDS - $2)) "$4"
        PASSED=$((PASSED + 1))
    else
        printf 'FAIL  %-70s %3ds  %s\n' "$1" $((SECONDS - $2)) "${4:0:160}"
        FAILED=$((FAILED + 1))
    fi
}

# Runs a client until its server answers (no REJECTED error 8), at most $1 tries; the last try's status.
# cm_client_until_up TRIES SIDE LOG ARGS...   (SIDE host: rdma4j, guest: rdma-core)
cm_client_until_up() {
    local tries=$1 side=$2 log=$3 rc=1 i
    shift 3
    for ((i = 0; i < tries; i++)); do
        if [ "$side" = host ]; then
            host_cmd "$ROW_TIMEOUT" "$@" >"$log" 2>&1
        else
            guest_cmd "$ROW_TIMEOUT" "$*" >"$log" 2>&1
        fi
        rc=$?
        grep -q 'REJECTED, error 8' "$log" || return $rc
        sleep 1
    done
    return $rc
}

# Nobody listens: the connecting side must see REJECTED with reason 8 and fail as rping does (exit 255
# when rdma4j connects; rdma-core's rping exits non-zero too). rdma4j's device is served by an rdma4j
# rping server on another port, as a host whose CM runs (rdma4j's QP1 lives in the process using it).
cm_row_nobody() {
    local name=$1 fam=$2 dir=$3 t0=$SECONDS log="$LOGDIR/cm-$N" rc ok=0 spid detail
    if [ "$dir" = host-client ]; then
        host_cmd 60 rping -c -a "${CM_GUEST[$fam]}" -p $((CM_PORT + 99)) -C 1 >"$log.client" 2>&1
        rc=$?
        if [ $rc = 255 ] && grep -q 'cma event RDMA_CM_EVENT_REJECTED, error 8' "$log.client"; then ok=1; fi
        detail="rdma4j rping exit $rc: $(grep -m1 'cma event' "$log.client")"
    else
        # a persistent server: once one probe connect to it works, rdma4j's CM serves rxe0
        spawn spid "$log.server" timeout -k 5 "$ROW_TIMEOUT" ip netns exec "$NS" "$RDMA4J" rping -s -P -a "${CM_HOST[$fam]}" -p "$CM_PORT"
        cm_client_until_up 30 guest "$log.probe" rping -c -a "${CM_HOST[$fam]}" -p "$CM_PORT" -C 1
        guest_cmd 60 "rping -c -a ${CM_HOST[$fam]} -p $((CM_PORT + 99)) -C 1" >"$log.client" 2>&1
        rc=$?
        kill "$spid" 2>/dev/null
        reap "$spid" 10 >/dev/null
        if [ $rc != 0 ] && grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$log.client"; then ok=1; fi
        detail="rxe rping exit $rc: $(grep -m1 'cma event' "$log.client")"
    fi
    cm_result "$name" $t0 $ok "$detail"
}

# A disconnect started by the client (rping's client disconnects after its pings): the server must
# report it ("server DISCONNECT EVENT...") and both must exit 0.
cm_row_disc_client() {
    local name=$1 fam=$2 dir=$3 t0=$SECONDS log="$LOGDIR/cm-$N" crc src spid ok=0
    if [ "$dir" = host ]; then
        spawn spid "$log.server" timeout -k 5 "$ROW_TIMEOUT" ip netns exec "$NS" "$RDMA4J" rping -s -v -a "${CM_HOST[$fam]}" -p "$CM_PORT" -C 3
        cm_client_until_up 30 guest "$log.client" rping -c -v -a "${CM_HOST[$fam]}" -p "$CM_PORT" -C 3
    else
        spawn spid "$log.server" timeout -k 5 $((ROW_TIMEOUT + 10)) "$GUEST" -t "$ROW_TIMEOUT" "rping -s -v -a ${CM_GUEST[$fam]} -p $CM_PORT -C 3"
        cm_client_until_up 30 host "$log.client" rping -c -v -a "${CM_GUEST[$fam]}" -p "$CM_PORT" -C 3
    fi
    crc=$?
    reap "$spid" 30
    src=$?
    if [ $crc = 0 ] && [ $src = 0 ] && grep -q 'server DISCONNECT EVENT' "$log.server" \
        && [ "$(grep -c 'ping data: rdma-ping-' "$log.client")" -ge 3 ]; then ok=1; fi
    cm_result "$name" $t0 $ok "exit client=$crc server=$src; $(grep -h -m1 'DISCONNECT' "$log.server")"
}

# A disconnect started by the server (ucmatose's server disconnects after the transfers): the client
# must see it and both must end with "return status 0".
cm_row_disc_server() {
    local name=$1 dir=$2 t0=$SECONDS log="$LOGDIR/cm-$N" crc src spid ok=0
    if ! have_tool ucmatose; then
        cm_result "$name" $t0 0 "tool not available: rdma4j has no ucmatose yet"
        return
    fi
    if [ "$dir" = host ]; then
        spawn spid "$log.server" timeout -k 5 "$ROW_TIMEOUT" ip netns exec "$NS" "$RDMA4J" ucmatose -b "${CM_HOST[ipv4]}" -p "$CM_PORT"
        cm_client_until_up 30 guest "$log.client" ucmatose -s "${CM_HOST[ipv4]}" -p "$CM_PORT"
    else
        spawn spid "$log.server" timeout -k 5 $((ROW_TIMEOUT + 10)) "$GUEST" -t "$ROW_TIMEOUT" "ucmatose -b ${CM_GUEST[ipv4]} -p $CM_PORT"
        cm_client_until_up 30 host "$log.client" ucmatose -s "${CM_GUEST[ipv4]}" -p "$CM_PORT"
    fi
    crc=$?
    reap "$spid" 30
    src=$?
    if [ $crc = 0 ] && [ $src = 0 ] && grep -q 'return status 0' "$log.client" && grep -q '^disconnected' "$log.server"; then ok=1; fi
    cm_result "$name" $t0 $ok "exit client=$crc server=$src"
}

# Five connects in a row under 20 % loss each way: every MAD may be lost, the CM retransmits. A connect
# passes when the client exits 0 having pinged twice and the server pinged twice too (it was connected).
# rping's client destroys its ID right after rdma_disconnect, which stops the DREQ's retransmissions
# (cm_destroy_id in DREQ_SENT), so when that one DREQ is lost the server waits for a DISCONNECTED that
# never comes, Linux's rping server as ours: such a server is ended after 20 s and counted, not failed.
cm_row_loss() {
    local name=$1 dir=$2 t0=$SECONDS log="$LOGDIR/cm-$N" i crc src spid ok=1 detail="" lost=0
    for i in 1 2 3 4 5; do
        if [ "$dir" = host ]; then
            spawn spid "$log.$i.server" timeout -k 5 "$ROW_TIMEOUT" ip netns exec "$NS" "$RDMA4J" rping -s -v -a "${CM_HOST[ipv4]}" -p "$CM_PORT" -C 2
            cm_client_until_up 30 guest "$log.$i.client" rping -c -v -a "${CM_HOST[ipv4]}" -p "$CM_PORT" -C 2
        else
            spawn spid "$log.$i.server" timeout -k 5 $((ROW_TIMEOUT + 10)) "$GUEST" -t "$ROW_TIMEOUT" "rping -s -v -a ${CM_GUEST[ipv4]} -p $CM_PORT -C 2"
            cm_client_until_up 30 host "$log.$i.client" rping -c -v -a "${CM_GUEST[ipv4]}" -p "$CM_PORT" -C 2
        fi
        crc=$?
        reap "$spid" 20
        src=$?
        detail="$detail $i:$crc/$src"
        if [ $crc != 0 ] || [ "$(grep -c '^ping data: rdma-ping-' "$log.$i.client")" -lt 2 ] \
            || [ "$(grep -c 'server ping data: rdma-ping-' "$log.$i.server")" -lt 2 ]; then
            ok=0
        elif [ $src != 0 ]; then
            lost=$((lost + 1))
        fi
    done
    cm_result "$name" $t0 $ok "client/server exit per connect:$detail; servers still waiting for a lost DREQ: $lost"
}

cm_rows() {
    local fam name dir
    for fam in ipv4 ipv6; do
        name="cm nobody-listens rping $fam rdma4j-client/rxe"
        selected "$name" && { N=$((N + 1)); cm_row_nobody "$name" $fam host-client; }
        name="cm nobody-listens rping $fam rxe-client/rdma4j"
        selected "$name" && { N=$((N + 1)); cm_row_nobody "$name" $fam guest-client; }
        name="cm disconnect-by-client rping -C 3 $fam rdma4j-server/rxe-client"
        selected "$name" && { N=$((N + 1)); cm_row_disc_client "$name" $fam host; }
        name="cm disconnect-by-client rping -C 3 $fam rxe-server/rdma4j-client"
        selected "$name" && { N=$((N + 1)); cm_row_disc_client "$name" $fam guest; }
    done
    name="cm disconnect-by-server ucmatose ipv4 rdma4j-server/rxe-client"
    selected "$name" && { N=$((N + 1)); cm_row_disc_server "$name" host; }
    name="cm disconnect-by-server ucmatose ipv4 rxe-server/rdma4j-client"
    selected "$name" && { N=$((N + 1)); cm_row_disc_server "$name" guest; }
    if [ "${INTEROP_LOSS:-1}" = 1 ] && { selected "cm netem-loss 20% connect x5 rping -C 2 ipv4 rdma4j-server/rxe-client" \
        || selected "cm netem-loss 20% connect x5 rping -C 2 ipv4 rxe-server/rdma4j-client"; }; then
        local saved_out=$NETEM_SPEC saved_in=$NETEM_IN_SPEC
        NETEM_SPEC="loss 20%"
        NETEM_IN_SPEC="loss 20%"
        if netem_on >"$LOGDIR/cm-netem-on.log" 2>&1; then
            for dir in host guest; do
                name="cm netem-loss 20% connect x5 rping -C 2 ipv4 $( [ $dir = host ] && echo rdma4j-server/rxe-client || echo rxe-server/rdma4j-client)"
                selected "$name" && { N=$((N + 1)); cm_row_loss "$name" $dir; }
            done
            netem_off
        else
            cm_result "cm netem-loss rows" $SECONDS 0 "netem could not be set up (see $LOGDIR/cm-netem-on.log)"
        fi
        NETEM_SPEC=$saved_out
        NETEM_IN_SPEC=$saved_in
    fi
}
