#!/bin/sh
# The OpenFabrics DAPL test programs (Debian dapl2-utils), unmodified,
# between two hosts: run by `cargo xtask fabric` on both guests, the
# server side of each case on the server, the client side on the client,
# over the cable between their rxe devices. udat's plug-in talks to
# itself and to OFA's cma provider in both directions. Then udat-perf
# across the cable, and the faults: the cable cut mid-transfer and
# restored, and last the server's machine killed mid-transfer
# (verbs-fallback/examples/fabric_stream.rs checks what the survivor sees).
#
# Usage: run.sh PLUGIN.so   (under `cargo xtask fabric`, which exports
# UDAT_FABRIC_ROLE, UDAT_RDMA_DEVICE, UDAT_RDMA_ADDR, UDAT_PEER_ADDR and
# UDAT_FABRIC_CTL)
#
# Each host reports its half of each case as `fabric NAME ... ok|FAILED`
# and ends with a `test result:` line.

PLUGIN=${1:?usage: run.sh PLUGIN.so}
ROLE=${UDAT_FABRIC_ROLE:?} DEV=${UDAT_RDMA_DEVICE:?} PEER=${UDAT_PEER_ADDR:?} CTL=${UDAT_FABRIC_CTL:?}
NETDEV=$(ls /sys/class/infiniband/"$DEV"/device/net 2>/dev/null | head -1)
[ -n "$NETDEV" ] || NETDEV=eth0
LOG=/tmp/fabric
mkdir -p "$LOG"

cat > "$LOG/dat.conf" <<CONF
udat u2.0 nonthreadsafe default $PLUGIN dapl.2.0 "verbs $DEV" ""
ofa u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$NETDEV 0" ""
CONF
export DAT_OVERRIDE="$LOG/dat.conf" DAPL_ACK_TIMER=21 DAPL_ACK_RETRY=7
ulimit -l unlimited

passed=0 failed=0

report() { # name ok(0/1) log
	if [ "$2" -eq 0 ]; then
		echo "fabric $1 ($ROLE) ... ok"; passed=$((passed + 1))
	else
		echo "fabric $1 ($ROLE) ... FAILED"; failed=$((failed + 1))
		echo "--- $3"; tail -25 "$3"
	fi
}

# barrier NAME: wait until the other host reaches the same barrier
# (`cargo xtask fabric` holds both until then).
barrier() {
	echo "sync $1" > "$CTL/request.tmp" && mv "$CTL/request.tmp" "$CTL/request"
	while [ -e "$CTL/request" ]; do sleep 0.1; done
}

wait_port() { # the dtest family exchanges the server's address on TCP 15828
	for _ in $(seq 100); do
		ss -Hltn "sport = :15828" | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

# across NAME SECS "SERVER ARGS" "CLIENT ARGS" PATTERN [READY]: the server
# side on the server host, the client side on the client host once the
# server listens (READY, by default wait_port, says when); each must exit
# 0 and print PATTERN (if not empty).
across() {
	name=$1 secs=$2 server=$3 client=$4 pattern=$5 ready=${6:-wait_port}
	if [ "$ROLE" = server ]; then
		out="$LOG/$name.server"
		# shellcheck disable=SC2086
		timeout "$secs" $server > "$out" 2>&1 &
		pid=$!
		$ready
		barrier "$name"
		wait $pid
		rc=$?
	else
		out="$LOG/$name.client"
		barrier "$name"
		# shellcheck disable=SC2086
		timeout "$secs" $client > "$out" 2>&1
		rc=$?
	fi
	ok=1
	if [ $rc -eq 0 ] && { [ -z "$pattern" ] || grep -q "$pattern" "$out"; }; then ok=0; fi
	report "$name" $ok "$out"
	barrier "$name-done"
}

across dtest 180 "dtest -P udat -s -b 65536 -B 100" "dtest -P udat -h $PEER -b 65536 -B 100" PASSED
across dtest-ofa-to-udat 180 "dtest -P udat -s -b 65536 -B 100" "dtest -P ofa -h $PEER -b 65536 -B 100" PASSED
across dtest-udat-to-ofa 180 "dtest -P ofa -s -b 65536 -B 100" "dtest -P udat -h $PEER -b 65536 -B 100" PASSED
across dtestcm 180 "dtestcm -P udat -s -c 20" "dtestcm -P udat -h $PEER -c 20" ""
across dtestx 180 "dtestx -P udat -s" "dtestx -P udat -c -h $PEER" "immed/atomic test PASSED"
across dtestx-u 180 "dtestx -P udat -s -u" "dtestx -P udat -c -h $PEER -u" "UD test PASSED"
across dtestx-U4 180 "dtestx -P udat -s -U 4" "dtestx -P udat -c -h $PEER -U 4" "UD test PASSED"
across dtestx-U4-m 180 "dtestx -P udat -s -U 4 -m" "dtestx -P udat -c -h $PEER -U 4 -m" "UD test PASSED"
across dtestx-p 180 "env UDAT_COUNTERS=1 dtestx -P udat -s -p" "env UDAT_COUNTERS=1 dtestx -P udat -c -h $PEER -p" "DCNT_IA_PZ_CREATE = 1"
# The fast query, on each host.
timeout 60 dtestx -P udat -q > "$LOG/dtestx-q.out" 2>&1
rc=$?
ok=1
if [ $rc -eq 0 ] && grep -q "Open_Query: Provider Specific Attribute.*DAT_COUNTERS=TRUE" "$LOG/dtestx-q.out"; then ok=0; fi
report dtestx-q $ok "$LOG/dtestx-q.out"
barrier dtestx-q-done

# dapltest: one server takes the transaction and performance tests, and
# the client's quit ends it. dapltest always exits 0, so its output is
# judged: any failure prints "error", "FAIL" or "not found".
if [ "$ROLE" = server ]; then
	timeout 400 dapltest -T S -D udat > "$LOG/dapltest.server" 2>&1 &
	dpid=$!
	sleep 2
fi
barrier dapltest-server
dapl() { # NAME ARGS...: the client side of a dapltest case
	name=$1
	shift
	if [ "$ROLE" = client ]; then
		timeout 180 dapltest "$@" > "$LOG/$name.client" 2>&1
		rc=$?
		ok=1
		if [ $rc -eq 0 ] && ! grep -qiE 'error|fail|not found' "$LOG/$name.client"; then ok=0; fi
		report "$name" $ok "$LOG/$name.client"
	fi
}
dapl dapltest-T-1x1 -T T -s "$PEER" -D udat -i 100 -t 1 -w 1 -V \
	client SR 256 server SR 256 client RW 4096 server RW 4096 client RR 4096 server RR 4096
dapl dapltest-T-2x2 -T T -s "$PEER" -D udat -i 100 -t 2 -w 2 -V \
	client SR 256 server SR 256 client RW 4096 server RW 4096 client RR 4096 server RR 4096
dapl dapltest-P-RW -T P -s "$PEER" -D udat -m p -i 1000 -p 1 RW 4096 1
dapl dapltest-P-RR -T P -s "$PEER" -D udat -m p -i 1000 -p 16 RR 65536 1
if [ "$ROLE" = client ]; then
	dapl dapltest-Q -T Q -s "$PEER" -D udat
fi
barrier dapltest-done
if [ "$ROLE" = server ]; then
	wait $dpid
	rc=$?
	report dapltest-server $rc "$LOG/dapltest.server"
fi

# udat-perf between the hosts, through both APIs. Its server says nothing
# a port would show (rdma_cm listens in the kernel): give it a moment.
PERF=target/release/udat-perf
settle() { sleep 3; }
across udat-perf-write-lat 180 "$PERF server -d $DEV" "$PERF client $PEER -d $DEV -t write_lat -n 500" \
	'served\|write_lat on' settle
across udat-perf-c-send-bw 180 "$PERF server -d $DEV --api c" \
	"$PERF client $PEER -d $DEV --api c -t send_bw -s 4096 -n 500" 'served\|send_bw on' settle

# The cable cut mid-transfer, then restored: the survivor's account, and a
# new connection over the restored cable. The client retries its connect
# until the server listens. udat honours DAPL_ACK_* as OFA's providers do,
# and the timer exported above is 8.6 s a try: the faults run with the
# defaults (7 tries of about 4.3 s on rxe), which fabric_stream's bound
# allows for.
unset DAPL_ACK_TIMER DAPL_ACK_RETRY
STREAM=target/debug/examples/fabric_stream
across fabric-cut 240 "$STREAM server" "$STREAM client $PEER --fault cut" 'server: done\|everything freed' true
[ "$ROLE" = client ] && grep "client:" "$LOG/fabric-cut.client"

summary() {
	echo "test result: $([ $failed -eq 0 ] && echo ok || echo FAILED). $passed passed; $failed failed; 0 ignored; 0 measured; 0 filtered out"
}

# Last, the server's machine dies mid-transfer: the server reports what
# it ran first, then serves until it is killed; the client checks what
# the survivor sees.
if [ "$ROLE" = server ]; then
	summary
	barrier kill-peer
	timeout 300 $STREAM server > "$LOG/fabric-kill-peer.server" 2>&1
	echo "fabric: the server outlived the kill it waited for"
	exit 1
fi
barrier kill-peer
out="$LOG/fabric-kill-peer.client"
timeout 240 $STREAM client "$PEER" --fault kill-peer > "$out" 2>&1
rc=$?
ok=1
if [ $rc -eq 0 ] && grep -q "everything freed" "$out"; then ok=0; fi
report fabric-kill-peer $ok "$out"
grep "client:" "$out"
summary
[ $failed -eq 0 ]
