#!/bin/sh
# Instructions per DAT call on a soft-RoCE device, through udat's libdat2
# plug-in and through OFA's cma provider, from callgrind (user space only:
# the application, libdat2, the provider, libibverbs and librxe).
#
# Usage: icount-rxe.sh PLUGIN.so BENCH K OP:CALL[:FLAG]...   (under `cargo
# xtask softroce`, which exports UDAT_RDMA_DEVICE and UDAT_RDMA_ADDR;
# `cargo xtask icount-rxe` runs it). BENCH is benches/c/icount.c linked
# with -ldat2; OP is one of its operations, CALL the DAT call it counts
# and FLAG a flag the bench takes for it. For each provider (`ofa`,
# `udat`), each OP and K and 2K, BENCH does OP that many times on two
# Endpoints of one IA connected through a PSP, under callgrind collecting
# only inside CALL, and this prints, on stdout:
#   ICOUNT PROVIDER OP K INSTRUCTIONS   callgrind's total for the run
#   SELF PROVIDER OP K LINE             callgrind_annotate's self costs
#   INCLUSIVE PROVIDER OP K LINE        its inclusive costs
# A provider that fails to open, connect or post stops the run with the
# bench's output and a non-zero status.

USAGE="usage: icount-rxe.sh PLUGIN.so BENCH K OP:CALL[:FLAG]..."
PLUGIN=${1:?$USAGE}
BENCH=${2:?$USAGE}
K=${3:?$USAGE}
shift 3
[ $# -gt 0 ] || { echo "$USAGE" >&2; exit 2; }
DEV=${UDAT_RDMA_DEVICE:?}
ADDR=${UDAT_RDMA_ADDR:?}
NETDEV=$(ls /sys/class/infiniband/"$DEV"/device/net 2>/dev/null | head -1)
[ -n "$NETDEV" ] || NETDEV=$(ip -o -4 addr show | awk -v a="$ADDR" 'index($4, a"/") == 1 { print $2; exit }')
DIR=$(mktemp -d /tmp/icount-rxe.XXXXXX)

cat > "$DIR/dat.conf" <<CONF
ofa u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$NETDEV 0" ""
udat u2.0 nonthreadsafe default $PLUGIN dapl.2.0 "verbs $DEV" ""
CONF
export DAT_OVERRIDE="$DIR/dat.conf" DAPL_ACK_TIMER=21 DAPL_ACK_RETRY=7
ulimit -l unlimited

# count PROVIDER OP CALL FLAG K: one run under callgrind, and its figures.
count() {
	out="$DIR/callgrind.$1.$2.$5"
	log="$DIR/log.$1.$2.$5"
	started=$(date +%s)
	# FLAG unquoted: when empty, no argument at all.
	if ! timeout 600 valgrind --tool=callgrind --toggle-collect="$3" \
		--callgrind-out-file="$out" "$BENCH" -P "$1" $4 "$2" "$5" > "$log" 2>&1 ||
		! grep -q "^icount: $2 x $5 .*: ok" "$log"; then
		echo "icount-rxe: $1, $2, K = $5, failed; its output:"
		cat "$log"
		exit 1
	fi
	echo "icount-rxe: $1, $2, K = $5: $(($(date +%s) - started)) s" >&2
	echo "ICOUNT $1 $2 $5 $(sed -n 's/^summary: *//p' "$out")"
	callgrind_annotate --inclusive=no --auto=no --threshold=100 "$out" | sed "s/^/SELF $1 $2 $5 /"
	callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$out" | sed "s/^/INCLUSIVE $1 $2 $5 /"
}

for provider in ofa udat; do
	for run in "$@"; do
		IFS=: read -r op call flag <<RUN
$run
RUN
		for k in "$K" $((2 * K)); do
			count "$provider" "$op" "$call" "$flag" "$k"
		done
	done
done
