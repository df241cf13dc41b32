# SPDX-License-Identifier: Apache-2.0
# interop/cm-rows.sh: every connection-management row of interop/run (issue 12 item 7). Sourced by
# interop/run, whose helpers it uses (spawn, reap, host_cmd, guest_cmd, selected, have_tool, rxe_counters,
# counter, netem_on/off) with its counters (N, PASSED, FAILED). Two kinds of rows:
#  - CM_ROWS, a table: an rdma_cm tool pair, the server on one side and the client on the other, run by
#    cm_row through cm_attempt (interop/run runs them after its verbs rows);
#  - CM_OWN_ROWS, the rows about the CM itself, run by cm_rows_own after the loss rows: a connect to a
#    port nobody listens on (REJECTED with reason 8 on the connecting side, either side), a connect to a
#    peer that never answers (UNREACHABLE, error -110, either side), and connects under netem loss (the
#    CM's MAD retransmissions recover).

CM_SERVER_WAIT=60    # seconds a server may take to end after its client passed
CM_SERVER_MAY_HANG=0 # 1: a server killed after CM_SERVER_WAIT is not a failure (sets CM_SERVER_HUNG)

# True if the log $1 contains every ERE of $2 (EREs joined by '&&').
cm_has() {
    local log=$1 rest=$2 re
    while :; do
        re=${rest%%&&*}
        grep -Eq -- "$re" "$log" || return 1
        [ "$re" = "$rest" ] && return 0
        rest=${rest#*&&}
    done
}

# Rows of the rdma_cm tools (issue 12 item 7): the IB CM's MADs on QP1, then the data. Each row:
# NAME|FAMILY|SERVER|SERVER_TOOL|SERVER_ARGS|CLIENT_TOOL|CLIENT_ARGS|CM_PORT|CLIENT_CHECK|SERVER_CHECK|TIMEOUT
# (a CHECK is one or more EREs joined by '&&', each of which the side's output must contain). The rping rows
# are also the rows of a disconnect started by the client (rping's client disconnects after its pings; the
# server must print its DISCONNECT line), the ucmatose rows those of a disconnect started by the server
# (cmatose's server disconnects after its transfers; the client's "return status 0" comes only after
# disconnect_events() has seen a DISCONNECTED on each of its connections).
# @S is the server's IP address of the row's family, @D the rdma4j device flag (-d rxe0) for perftest on
# both sides. The server is ready when it listens on CM_PORT (guest: `rdma res show cm_id`; rdma4j: its
# device holds UDP 4791, i.e. its CM has opened QP1, and the client runs again while it is rejected as
# "nobody listens yet": REJ reason 8, SIDR status 1). perftest -R resolves the server with AF_INET only
# (perftest 4.5 and 6.x: "Address family for hostname not supported" for an IPv6 name), so its rows are
# IPv4 only.
CM_ROWS=()
CM_NOT_YET='(REJECTED, error:? 8$|UNREACHABLE, error: 1$|Connection refused|Unexpected CM event( bl blka)? 8)'
cm_add() { CM_ROWS+=("$1|$2|$3|$4|$5|$6|$7|$8|$9|${10}|${11}"); }
cm_matrix() {
    local fam dir tag
    for dir in host guest; do
        for fam in ipv4 ipv6; do
            tag="$fam $( [ $dir = host ] && echo 'rdma4j-server/rxe-client' || echo 'rxe-server/rdma4j-client')"
            cm_add "rping -v -C 100 $tag" $fam $dir rping "-s -a @S -v -C 100" rping "-c -a @S -v -C 100" 7174 \
                'ping data: rdma-ping-99: ' 'server ping data: rdma-ping-99: &&server DISCONNECT EVENT' "$ROW_TIMEOUT"
            cm_add "ucmatose -c 4 -C 20 $tag" $fam $dir ucmatose "-b @S -c 4 -C 20" ucmatose "-s @S -c 4 -C 20" 7471 \
                '^return status 0$' '^disconnected$' "$ROW_TIMEOUT"
            cm_add "udaddy -c 2 $tag" $fam $dir udaddy "-b @S -c 2" udaddy "-s @S -c 2" 7174 \
                '^return status 0$' '^data transfers complete$' "$ROW_TIMEOUT"
            cm_add "rdma_server/rdma_client $tag" $fam $dir rdma_server "-s @S" rdma_client "-s @S" 7471 \
                '^rdma_client: end 0$' '^rdma_server: end 0$' "$ROW_TIMEOUT"
            if [ $fam = ipv4 ]; then
                cm_add "ib_write_bw -R -a -n 5 $tag" $fam $dir ib_write_bw "-R @D -F -a -n 5" ib_write_bw "-R @D -F -a -n 5 @S" \
                    18515 "$ALL_CHECK" '' "$ROW_TIMEOUT"
                cm_add "ib_send_lat -R -n 100 $tag" $fam $dir ib_send_lat "-R @D -F -n 100" ib_send_lat "-R @D -F -n 100 @S" \
                    18515 "$LAT_CHECK" '' "$ROW_TIMEOUT"
                cm_add "ib_read_lat -R -n 100 $tag" $fam $dir ib_read_lat "-R @D -F -n 100" ib_read_lat "-R @D -F -n 100 @S" \
                    18515 "$LAT_CHECK" '' "$ROW_TIMEOUT"
            fi
        done
    done
    # once: a long rping (10000 pings of RDMA READ + WRITE + 2 SENDs each way)
    cm_add "rping -v -C 10000 ipv4 rdma4j-server/rxe-client" ipv4 host rping "-s -a @S -v -C 10000" rping \
        "-c -a @S -v -C 10000" 7174 'ping data: rdma-ping-9999: ' 'server ping data: rdma-ping-9999: &&server DISCONNECT EVENT' 1800
}
cm_matrix

# True once a CM ID listens on port $2 on side $1 (guest: the kernel's cm_id table; rdma4j: its device
# holds UDP 4791 in the namespace, i.e. its CM has opened QP1; the client's retries cover the moment
# between that and rdma_listen).
cm_listening() {
    if [ "$1" = host ]; then
        [ -n "$(ip netns exec "$NS" ss -lunH 'sport = :4791' 2>/dev/null)" ]
    else
        timeout 15 "$GUEST" -t 10 "rdma res show cm_id" 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]*:$2( |\$)"
    fi
}

# One attempt of a CM row; sets WHY on failure.
cm_attempt() {
    local dir=$1 stool=$2 sargs=$3 ctool=$4 cargs=$5 fam=$6 port=$7 check=$8 scheck=$9 t=${10} log=${11}
    local sip spid crc src n
    if [ "$fam" = ipv4 ]; then
        sip=$([ "$dir" = host ] && echo "$HOST_IP" || echo "$GUEST_IP")
    else
        sip=$([ "$dir" = host ] && echo fd99::1 || echo "$RXE_GUEST_IP6")
    fi
    sargs=${sargs//@S/$sip}
    cargs=${cargs//@S/$sip}
    sargs=${sargs//@D/-d rxe0}
    cargs=${cargs//@D/-d rxe0}
    WHY=""
    local free_by=$((SECONDS + 90))
    while cm_listening host "$port" || cm_listening guest "$port"; do
        if [ $SECONDS -ge $free_by ]; then
            WHY="CM port $port (or UDP 4791) still in use from an earlier row"
            return 1
        fi
        sleep 0.5
    done
    if [ "$dir" = host ]; then
        # shellcheck disable=SC2086
        spawn spid "$log.server" timeout -k 5 "$t" ip netns exec "$NS" "$RDMA4J" $stool $sargs
    else
        spawn spid "$log.server" timeout -k 5 $((t + 10)) "$GUEST" -t "$t" "$stool $sargs"
    fi
    local deadline=$((SECONDS + 90))
    until cm_listening "$dir" "$port"; do
        if ! kill -0 "$spid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            reap "$spid" 5
            WHY="server did not listen: $(tail -n 2 "$log.server" | tr '\n' ' ')"
            return 1
        fi
        sleep 0.3
    done
    for n in 1 2 3 4 5 6 7 8 9 10; do
        if [ "$dir" = host ]; then
            guest_cmd "$t" "$ctool $cargs" >"$log.client" 2>&1
        else
            # shellcheck disable=SC2086
            host_cmd "$t" $ctool $cargs >"$log.client" 2>&1
        fi
        crc=$?
        # rejected because the server does not listen yet: again, while it runs
        grep -Eq -- "$CM_NOT_YET" "$log.client" && kill -0 "$spid" 2>/dev/null || break
        cp "$log.client" "$log.client.notyet$n"
        sleep 1
    done
    if [ $crc -eq 0 ]; then reap "$spid" "$CM_SERVER_WAIT"; else reap "$spid" 5; fi
    src=$?
    # a server still waiting for the DISCONNECTED of a DREQ that loss took (the rows under loss allow it)
    CM_SERVER_HUNG=0
    if [ $crc -eq 0 ] && [ $src -eq 124 ] && [ "$CM_SERVER_MAY_HANG" = 1 ]; then
        CM_SERVER_HUNG=1
        src=0
    fi
    if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
        WHY="exit client=$crc server=$src: $(grep -hv '^ *$' "$log.client" "$log.server" | grep -iE 'error|fail|couldn|unable|invalid|timeout|refused|unexpected|not |event' | head -n 2 | tr '\n' ' ')"
        return 1
    fi
    if ! cm_has "$log.client" "$check"; then
        WHY="client printed no '$check'"
        return 1
    fi
    if [ -n "$scheck" ] && ! cm_has "$log.server" "$scheck"; then
        WHY="server printed no '$scheck'"
        return 1
    fi
    return 0
}

# Runs one CM row, prints its line.
cm_row() {
    local name fam dir stool sargs ctool cargs port check scheck t t0 res log c0 c1 notes
    IFS='|' read -r name fam dir stool sargs ctool cargs port check scheck t <<<"$1"
    selected "$name" || return 0
    N=$((N + 1))
    log="$LOGDIR/$(printf '%03d' $N)"
    echo "$name" >"$log.name"
    t0=$SECONDS
    if ! have_tool "$stool" || ! have_tool "$ctool"; then
        printf 'FAIL  %-70s tool not available: rdma4j has no %s or %s yet\n' "$name" "$stool" "$ctool"
        FAILED=$((FAILED + 1))
        return
    fi
    c0="$(rxe_counters)"
    if cm_attempt "$dir" "$stool" "$sargs" "$ctool" "$cargs" "$fam" "$port" "$check" "$scheck" "$t" "$log"; then
        res="pass"
    elif [ "$RETRY" = 1 ] && { local why1=$WHY; cm_attempt "$dir" "$stool" "$sargs" "$ctool" "$cargs" "$fam" "$port" \
            "$check" "$scheck" "$t" "$log.retry"; }; then
        res="pass (retried; first try: ${why1:0:80})"
    else
        printf 'FAIL  %-70s %3ds  %s\n' "$name" $((SECONDS - t0)) "${WHY:0:160}"
        FAILED=$((FAILED + 1))
        return
    fi
    c1="$(rxe_counters)"
    notes=""
    for k in duplicate_request out_of_seq_request rcvd_seq_err completer_retry_err rcvd_rnr_err retry_exceeded_err \
        guest_rx_dropped tap_tx_dropped; do
        local d=$(( $(counter "$c1" $k) - $(counter "$c0" $k) ))
        [ $d -ne 0 ] && notes="$notes $k+$d"
    done
    [ -n "$notes" ] && res="$res  rxe:$notes"
    printf 'PASS  %-70s %3ds  %s\n' "$name" $((SECONDS - t0)) "${res#pass}"
    PASSED=$((PASSED + 1))
}


# ---------------------------------------------------------------------------------------------
# The rows about the CM itself. rping is the probe on both sides (rdma4j's and rdma-core's).
CM_PORT=17174
CM_DEAD_PORT=17273   # nobody listens here
declare -A CM_HOST=([ipv4]=10.99.0.1 [ipv6]=fd99::1)
declare -A CM_GUEST=([ipv4]=10.99.0.2 [ipv6]=fd99::2)
CM_LOSS=${INTEROP_CM_LOSS:-20%}
CM_OWN_ROWS=()
for fam in ipv4 ipv6; do
    CM_OWN_ROWS+=("cm nobody-listens rping $fam rdma4j-client/rxe")
    CM_OWN_ROWS+=("cm nobody-listens rping $fam rxe-client/rdma4j")
done
CM_OWN_ROWS+=("cm unreachable rping ipv4 rxe-client/rdma4j-not-serving")
CM_OWN_ROWS+=("cm unreachable rping ipv4 rdma4j-client/rxe-answers-lost")
CM_OWN_ROWS+=("cm netem-loss $CM_LOSS connect x5 rping -C 2 ipv4 rdma4j-server/rxe-client")
CM_OWN_ROWS+=("cm netem-loss $CM_LOSS connect x5 rping -C 2 ipv4 rxe-server/rdma4j-client")
unset fam

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

# Waits (at most 90 s) until rdma4j's CM serves rxe0 in the namespace (UDP 4791 bound) while $1 runs.
cm_host_serving() {
    local deadline=$((SECONDS + 90))
    until cm_listening host "$CM_PORT"; do
        kill -0 "$1" 2>/dev/null && [ $SECONDS -lt $deadline ] || return 1
        sleep 0.3
    done
}

# A client that connects to a port nobody listens on: it must see REJECTED with status 8 (invalid service
# ID: cm.c cm_match_req finds no listener and cm_issue_rej sends IB_CM_REJ_INVALID_SERVICE_ID) and fail as
# rping does (rdma4j's rping exits 255 as rping 44; Linux's exits non-zero). rdma4j's QP1 lives in the
# process using the device, so for the Linux client an rdma4j rping server on another port serves rxe0.
cm_row_nobody() {
    local name=$1 fam=$2 dir=$3 t0=$SECONDS log="$LOGDIR/cm-$N" rc ok=0 spid detail
    if [ "$dir" = host-client ]; then
        host_cmd 60 rping -c -a "${CM_GUEST[$fam]}" -p $CM_DEAD_PORT -C 1 >"$log.client" 2>&1
        rc=$?
        if [ $rc = 255 ] && grep -q 'cma event RDMA_CM_EVENT_REJECTED, error 8' "$log.client"; then ok=1; fi
        detail="rdma4j rping exit $rc: $(grep -m1 'cma event' "$log.client")"
    else
        spawn spid "$log.server" timeout -k 5 "$ROW_TIMEOUT" ip netns exec "$NS" "$RDMA4J" rping -s -P -a "${CM_HOST[$fam]}" -p "$CM_PORT"
        if cm_host_serving "$spid"; then
            guest_cmd 60 "rping -c -a ${CM_HOST[$fam]} -p $CM_DEAD_PORT -C 1" >"$log.client" 2>&1
            rc=$?
            if [ $rc != 0 ] && grep -q 'cma event RDMA_CM_EVENT_REJECTED, error 8' "$log.client"; then ok=1; fi
            detail="rxe rping exit $rc: $(grep -m1 'cma event' "$log.client")"
        else
            detail="the rdma4j server never bound rxe0: $(tail -n 2 "$log.server" | tr '\n' ' ')"
        fi
        kill "$spid" 2>/dev/null
        reap "$spid" 10 >/dev/null
    fi
    cm_result "$name" $t0 $ok "$detail"
}

# A client whose REQ is never answered must end UNREACHABLE with status -110 (ETIMEDOUT) after the REQ's
# retransmissions (cm.c cm_send_handler -> cm_process_send_error, cma.c IB_CM_REQ_ERROR -> UNREACHABLE):
#  - rxe-client: Linux's rping to rdma4j's address while no rdma4j process serves rxe0 (nothing binds UDP
#    4791 in the namespace: the REQs go nowhere);
#  - rdma4j-client: rdma4j's rping to Linux while netem drops everything the guest sends (its REJs).
cm_row_unreachable() {
    local name=$1 dir=$2 t0=$SECONDS log="$LOGDIR/cm-$N" rc ok=0 detail
    if [ "$dir" = guest-client ]; then
        guest_cmd "$ROW_TIMEOUT" "rping -c -a ${CM_HOST[ipv4]} -p $CM_PORT -C 1" >"$log.client" 2>&1
        rc=$?
        if [ $rc != 0 ] && grep -q 'cma event RDMA_CM_EVENT_UNREACHABLE, error -110' "$log.client"; then ok=1; fi
        detail="rxe rping exit $rc after $((SECONDS - t0)) s: $(grep -m1 'cma event' "$log.client")"
    else
        host_cmd "$ROW_TIMEOUT" rping -c -a "${CM_GUEST[ipv4]}" -p $CM_DEAD_PORT -C 1 >"$log.client" 2>&1
        rc=$?
        if [ $rc = 255 ] && grep -q 'cma event RDMA_CM_EVENT_UNREACHABLE, error -110' "$log.client"; then ok=1; fi
        detail="rdma4j rping exit $rc after $((SECONDS - t0)) s: $(grep -m1 'cma event' "$log.client")"
    fi
    cm_result "$name" $t0 $ok "$detail"
}

# Five connects in a row under loss each way: any MAD may be lost, the CM retransmits. A connect passes
# when both sides pinged twice and the client exited 0. rping's client destroys its ID right after
# rdma_disconnect, which ends the DREQ's retransmissions (cm_destroy_id in DREQ_SENT), so when that one
# DREQ is lost the server waits for a DISCONNECTED that never comes (Linux's rping server as rdma4j's):
# such a server is ended after 20 s and counted, not failed.
cm_row_loss() {
    local name=$1 dir=$2 t0=$SECONDS log="$LOGDIR/cm-$N" i ok=1 detail="" hung=0 stool=rping
    # A server whose DREQ loss took is killed after CM_SERVER_WAIT (Linux leaves it waiting too: a client that
    # destroys its ID cancels the DREQ's retries, cm.c cm_destroy_id). Linux rping's printf output to a pipe is
    # block-buffered and dies with it: line-buffer it, so that its ping lines are still checked.
    [ "$dir" = guest ] && stool="stdbuf -oL rping"
    for i in 1 2 3 4 5; do
        CM_SERVER_WAIT=20 CM_SERVER_MAY_HANG=1
        if cm_attempt "$dir" "$stool" "-s -v -a @S -p $CM_PORT -C 2" rping "-c -v -a @S -p $CM_PORT -C 2" ipv4 "$CM_PORT" \
            'ping data: rdma-ping-1: ' 'server ping data: rdma-ping-1: ' "$ROW_TIMEOUT" "$log.$i"; then
            detail="$detail $i:pass"
            [ "$CM_SERVER_HUNG" = 1 ] && hung=$((hung + 1))
        else
            detail="$detail $i:FAIL(${WHY:0:60})"
            ok=0
        fi
        CM_SERVER_WAIT=60 CM_SERVER_MAY_HANG=0
    done
    cm_result "$name" $t0 $ok "connects:$detail; servers left waiting for a lost DREQ: $hung"
}

# Runs the rows about the CM itself (after the loss rows: the last ones switch netem on).
cm_rows_own() {
    local fam name dir
    for fam in ipv4 ipv6; do
        name="cm nobody-listens rping $fam rdma4j-client/rxe"
        selected "$name" && { N=$((N + 1)); cm_row_nobody "$name" $fam host-client; }
        name="cm nobody-listens rping $fam rxe-client/rdma4j"
        selected "$name" && { N=$((N + 1)); cm_row_nobody "$name" $fam guest-client; }
    done
    name="cm unreachable rping ipv4 rxe-client/rdma4j-not-serving"
    selected "$name" && { N=$((N + 1)); cm_row_unreachable "$name" guest-client; }
    local saved_out=$NETEM_SPEC saved_in=$NETEM_IN_SPEC
    name="cm unreachable rping ipv4 rdma4j-client/rxe-answers-lost"
    if selected "$name"; then
        N=$((N + 1))
        NETEM_SPEC="loss 100%" NETEM_IN_SPEC="loss 0%"
        if netem_on >"$LOGDIR/cm-netem-on.log" 2>&1; then
            cm_row_unreachable "$name" host-client
            netem_off
        else
            cm_result "$name" $SECONDS 0 "netem could not be set up (see $LOGDIR/cm-netem-on.log)"
        fi
    fi
    if [ "$INTEROP_LOSS" = 1 ] && for name in "${CM_OWN_ROWS[@]}"; do [[ $name = "cm netem-loss"* ]] && selected "$name" && break; done; then
        NETEM_SPEC="loss $CM_LOSS" NETEM_IN_SPEC="loss $CM_LOSS"
        if netem_on >"$LOGDIR/cm-netem-on.log" 2>&1; then
            for dir in host guest; do
                name="cm netem-loss $CM_LOSS connect x5 rping -C 2 ipv4 $([ $dir = host ] && echo rdma4j-server/rxe-client || echo rxe-server/rdma4j-client)"
                selected "$name" && { N=$((N + 1)); cm_row_loss "$name" $dir; }
            done
            timeout 20 "$GUEST" -t 15 'tc -s qdisc show dev eth0; tc -s qdisc show dev ifb0' >"$LOGDIR/cm-netem-stats.txt" 2>&1
            echo "# CM loss rows: netem drops (guest->host, host->guest): $(grep -o 'dropped [0-9]*' "$LOGDIR/cm-netem-stats.txt" | tr '\n' ' ')" >&2
            netem_off
        else
            cm_result "cm netem-loss rows" $SECONDS 0 "netem could not be set up (see $LOGDIR/cm-netem-on.log)"
        fi
    fi
    NETEM_SPEC=$saved_out NETEM_IN_SPEC=$saved_in
}
