#!/bin/sh
# The OpenFabrics DAPL test programs (Debian dapl2-utils), unmodified,
# against udat's libdat2 plug-in on a soft-RoCE device: server and client
# both on udat, dapltest's function tests (-T F), then dtest across udat
# and OFA's own cma provider.
#
# Usage: run.sh PLUGIN.so   (under `cargo xtask softroce`, which exports
# UDAT_RDMA_DEVICE and UDAT_RDMA_ADDR)
#
# Each case prints `peer NAME ... ok|FAILED|expected failure|XPASS`; a case
# listed in XFAIL is one that fails for the reason written beside it,
# counted and shown, and a pass of it fails the run so the list is kept
# true. The last line is a `test result:` summary.

PLUGIN=${1:?usage: run.sh PLUGIN.so}
DEV=${UDAT_RDMA_DEVICE:?}
S=${UDAT_RDMA_ADDR:?}
NETDEV=$(ls /sys/class/infiniband/"$DEV"/device/net 2>/dev/null | head -1)
[ -n "$NETDEV" ] || NETDEV=$(ip -o -4 addr show | awk -v a="$S" 'index($4, a"/") == 1 { print $2; exit }')
LOG=${PEER_LOG:-/tmp/peers}
mkdir -p "$LOG"

# Expected failures, each with its reason:
# - dapltest-F-queryinfo-case13 and -case15 (the program's): each passes
#   dapltest's IA handle as a CNO (EVD) handle, and libdat2 makes IA handles
#   indices (this one is 1), not pointers; libdat2's dat_cno_query
#   (dat_evd_query) reads the provider through the handle and dies with
#   SIGSEGV at address 1 before any provider runs, on OFA's provider too
#   (gdb: rdi = 0x1 at dat_cno_query+5, `mov (%rdi),%rax`).
XFAIL="dapltest-F-queryinfo-case13 dapltest-F-queryinfo-case15"

cat > "$LOG/dat.conf" <<CONF
udat u2.0 nonthreadsafe default $PLUGIN dapl.2.0 "verbs $DEV" ""
udat-mlx5 u2.0 nonthreadsafe default $PLUGIN dapl.2.0 "mlx5 $DEV" ""
udat-auto u2.0 nonthreadsafe default $PLUGIN dapl.2.0 "auto $DEV" ""
ofa u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$NETDEV 0" ""
CONF
export DAT_OVERRIDE="$LOG/dat.conf" DAPL_ACK_TIMER=21 DAPL_ACK_RETRY=7
ulimit -l unlimited

passed=0 failed=0 xfailed=0

report() { # name ok(0/1)
	case " $XFAIL " in
	*" $1 "*)
		if [ "$2" -eq 0 ]; then
			echo "peer $1 ... XPASS (remove it from XFAIL)"; failed=$((failed + 1))
		else
			echo "peer $1 ... expected failure"; xfailed=$((xfailed + 1))
		fi ;;
	*)
		if [ "$2" -eq 0 ]; then
			echo "peer $1 ... ok"; passed=$((passed + 1))
		else
			echo "peer $1 ... FAILED"; failed=$((failed + 1))
			for f in "$LOG/$1".*; do echo "--- $f"; tail -25 "$f"; done
		fi ;;
	esac
}

wait_port() { # the dtest family exchanges the server's address on TCP 15828
	for _ in $(seq 100); do
		ss -Hltn "sport = :15828" | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

# wait_line FILE TEXT: until the server's log says TEXT (dtestsrq takes the
# server's address on its command line and opens no TCP port; waiting for
# one would spend most of its time limit, `ss` being slow under TCG).
wait_line() {
	for _ in $(seq 300); do
		grep -q "$2" "$1" && return 0
		sleep 0.1
	done
	return 1
}

# pair NAME SECS "SERVER ARGS" "CLIENT ARGS" PATTERN [READY]: run a
# dtest-family server and client; both must exit 0 and print PATTERN (if
# not empty). The client starts once the server listens on TCP 15828, or
# once its log shows READY when given.
pair() {
	name=$1 secs=$2 server=$3 client=$4 pattern=$5 ready=${6:-}
	# shellcheck disable=SC2086
	timeout "$secs" $server > "$LOG/$name.server" 2>&1 &
	spid=$!
	if [ -n "$ready" ]; then
		wait_line "$LOG/$name.server" "$ready"
	else
		wait_port
	fi
	# shellcheck disable=SC2086
	timeout "$secs" $client > "$LOG/$name.client" 2>&1
	c=$?
	wait $spid
	s=$?
	ok=1
	if [ $c -eq 0 ] && [ $s -eq 0 ]; then
		ok=0
		if [ -n "$pattern" ]; then
			grep -q "$pattern" "$LOG/$name.server" && grep -q "$pattern" "$LOG/$name.client" || ok=1
		fi
	fi
	report "$name" $ok
}

pair dtest 120 "dtest -P udat -s -b 65536 -B 100" "dtest -P udat -h $S -b 65536 -B 100" PASSED

# `mlx5` names udat's mlx5 path, which an rxe device does not have: the
# open fails with DAT_PROVIDER_NOT_FOUND and a line saying why. `auto`
# takes the device over verbs.
timeout 60 dtest -P udat-mlx5 -s > "$LOG/mlx5-refuses-rxe.server" 2>&1
rc=$?
ok=1
if [ $rc -ne 0 ] && grep -q "$DEV is not an mlx5 device" "$LOG/mlx5-refuses-rxe.server" &&
	grep -q 'DAT_PROVIDER_NOT_FOUND' "$LOG/mlx5-refuses-rxe.server"; then ok=0; fi
report mlx5-refuses-rxe $ok
pair dtest-auto 120 "dtest -P udat-auto -s -b 65536 -B 100" "dtest -P udat-auto -h $S -b 65536 -B 100" PASSED
pair dtest-latency 120 "dtest -P udat -s -W" "dtest -P udat -h $S -W" PASSED
pair dtestcm 120 "dtestcm -P udat -s -c 50" "dtestcm -P udat -h $S -c 50" ""
pair dtestsrq-no-srq 120 "dtestsrq -S 0 -P udat -s" "dtestsrq -S 0 -P udat -h $S" "" "server ready"
pair dtestsrq 60 "dtestsrq -P udat -s" "dtestsrq -P udat -h $S" "" "server ready"
pair dtestx 60 "dtestx -P udat -s" "dtestx -P udat -c -h $S" "immed/atomic test PASSED"
# UD: one EP (-u), four EPs each resolving every peer (-U 4), and a
# message per EP pair (-m). A UD client is `-c -h`.
pair dtestx-u 60 "dtestx -P udat -s -u" "dtestx -P udat -c -h $S -u" "UD test PASSED"
pair dtestx-U4 60 "dtestx -P udat -s -U 4" "dtestx -P udat -c -h $S -U 4" "UD test PASSED"
pair dtestx-U4-m 60 "dtestx -P udat -s -U 4 -m" "dtestx -P udat -c -h $S -U 4 -m" "UD test PASSED"
# The fast query (-q) runs in one process and prints the provider's
# attributes, DAT_COUNTERS among them. The counters (-p) count where
# UDAT_COUNTERS asks it (dtestx never starts them): each side prints its
# IA's, its one PZ among them.
timeout 60 dtestx -P udat -q > "$LOG/dtestx-q.out" 2>&1
rc=$?
ok=1
if [ $rc -eq 0 ] && grep -q "Open_Query: Provider Specific Attribute.*DAT_COUNTERS=TRUE" "$LOG/dtestx-q.out"; then ok=0; fi
report dtestx-q $ok
pair dtestx-p 60 "env UDAT_COUNTERS=1 dtestx -P udat -s -p" "env UDAT_COUNTERS=1 dtestx -P udat -c -h $S -p" "DCNT_IA_PZ_CREATE = 1"

# dapltest always exits 0, so its output is judged: any failure prints
# "error", "FAIL" or "not found".
dapl() { # NAME ARGS...
	name=$1
	shift
	timeout 120 dapltest "$@" > "$LOG/$name.client" 2>&1
	rc=$?
	ok=1
	if [ $rc -eq 0 ] && ! grep -qiE 'error|fail|not found' "$LOG/$name.client"; then ok=0; fi
	report "$name" $ok
}

# The limit test exhausts each object up to -m, printing the count it
# reached. A create that fails before -m is reported with "fails" but is
# no error to dapltest, so the counts themselves are judged: every object
# reaches 20, and receives stop at the 16 the default EP attributes allow
# (DAT_INSUFFICIENT_RESOURCES at the 17th, as on OFA's provider).
timeout 120 dapltest -T L -D udat -w 2 -m 20 limit_ia limit_pz limit_evd limit_ep limit_psp limit_lmr limit_rpost \
	> "$LOG/dapltest-L.client" 2>&1
rc=$?
cat > "$LOG/dapltest-L.want" <<WANT
LimitTest: IAs opened: 20
LimitTest: PZs created: 20
LimitTest: EVDs created: 20
LimitTest: EPs created: 20
LimitTest: PSPs created: 20
LimitTest: LMRs created: 20
LimitTest: recv buffers posted per EP: 16
WANT
{ # the first receive count is the limit; dapltest repeats it one too high
	grep -E 'opened:|created:' "$LOG/dapltest-L.client"
	grep -m1 'posted per EP:' "$LOG/dapltest-L.client"
} > "$LOG/dapltest-L.got"
ok=1
if [ $rc -eq 0 ] && ! grep -q 'error occurs' "$LOG/dapltest-L.client" &&
	cmp -s "$LOG/dapltest-L.want" "$LOG/dapltest-L.got"; then ok=0; fi
report dapltest-L $ok

# The function tests (-T F), one process each, no server: each selected case
# must print "Result: PASS". This dapltest prints PASS even when one of its
# checks has failed (it prints "CHECK failed in file F, line N" and goes on
# to the case's cleanup), so such a line fails the case too.
fft() { # NAME FEATURE CASE...
	name=$1 feature=$2
	shift 2
	timeout 60 dapltest -T F -D udat -f "$feature" "$@" > "$LOG/$name.client" 2>&1
	rc=$?
	ok=1
	if [ $rc -eq 0 ] && [ "$(grep -c 'Result: PASS' "$LOG/$name.client")" -eq $# ] &&
		! grep -q 'failed in file' "$LOG/$name.client"; then ok=0; fi
	report "$name" $ok
}
fft dapltest-F-hwconn hwconn case0 case1 case2 case3
fft dapltest-F-endpoint endpoint case0 case1 case2
fft dapltest-F-pz pz case0 case1 case2
fft dapltest-F-mem mem case0 case1 case3 case4
fft dapltest-F-connmgt connmgt case0 case1
# queryinfo's case5 (dat_cr_query) only prints UNSUPP: dapltest leaves it to
# connmgt, which does not do it either.
fft dapltest-F-queryinfo queryinfo case0 case1 case2 case3 case4 case6 case7 case8 case9 case11 case12 case14 case16 case17
fft dapltest-F-queryinfo-case10 queryinfo case10
fft dapltest-F-queryinfo-case13 queryinfo case13
fft dapltest-F-queryinfo-case15 queryinfo case15

# mem's case2 registers 0 bytes and wants DAT_LENGTH_ERROR, which
# dat_lmr_create(3DAT) does not list (it is the RDMA posts' code); the
# spec's answer is DAT_INVALID_PARAMETER, for the length (the 4th argument),
# and that is what udat must return (OFA's provider returns
# DAT_INSUFFICIENT_RESOURCES, from ibv_reg_mr). dapltest's own check of the
# code fails, and is the only one that may.
timeout 60 dapltest -T F -D udat -f mem case2 > "$LOG/dapltest-F-mem-case2.client" 2>&1
rc=$?
ok=1
if [ $rc -eq 0 ] && grep -q 'Result: PASS' "$LOG/dapltest-F-mem-case2.client" &&
	grep -q '^Error = .*, DAT_INVALID_PARAMETER DAT_INVALID_ARG4' "$LOG/dapltest-F-mem-case2.client" &&
	[ "$(grep -c 'failed in file' "$LOG/dapltest-F-mem-case2.client")" -eq 1 ] &&
	grep -q '== expect failed in file test/dapl_fft_mem.c' "$LOG/dapltest-F-mem-case2.client"; then ok=0; fi
report dapltest-F-mem-case2 $ok

# Transactions over one and several threads and EPs, performance, then
# quit: one server takes them all and must end on its own.
timeout 300 dapltest -T S -D udat > "$LOG/dapltest-server.server" 2>&1 &
dpid=$!
sleep 1
dapl dapltest-T-1x1 -T T -s "$S" -D udat -i 100 -t 1 -w 1 -V \
	client SR 256 server SR 256 client RW 4096 server RW 4096 client RR 4096 server RR 4096
dapl dapltest-T-2x2 -T T -s "$S" -D udat -i 100 -t 2 -w 2 -V \
	client SR 256 server SR 256 client RW 4096 server RW 4096 client RR 4096 server RR 4096
dapl dapltest-P-RW -T P -s "$S" -D udat -m p -i 1000 -p 1 RW 4096 1
dapl dapltest-P-RR -T P -s "$S" -D udat -m p -i 1000 -p 16 RR 65536 1
dapl dapltest-Q -T Q -s "$S" -D udat
wait $dpid
report dapltest-server $?

# Interoperation over rdma_cm: udat and OFA's cma provider on either side.
pair interop-ofa-server 120 "dtest -P ofa -s -b 65536 -B 100" "dtest -P udat -h $S -b 65536 -B 100" PASSED
pair interop-udat-server 120 "dtest -P udat -s -b 65536 -B 100" "dtest -P ofa -h $S -b 65536 -B 100" PASSED

result=ok
[ $failed -eq 0 ] || result=FAILED
echo "peer programs: $passed passed, $failed failed, $xfailed expected failures (listed above)"
echo "test result: $result. $passed passed; $failed failed; 0 ignored; 0 measured; 0 filtered out"
[ $failed -eq 0 ]
