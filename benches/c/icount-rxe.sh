#!/bin/sh
# Instructions per dat_ep_post_rdma_write on a soft-RoCE device, through
# udat's libdat2 plug-in and through OFA's cma provider, from callgrind
# (user space only: the application, libdat2, the provider, libibverbs
# and librxe).
#
# Usage: icount-rxe.sh PLUGIN.so BENCH K...   (under `cargo xtask
# softroce`, which exports UDAT_RDMA_DEVICE and UDAT_RDMA_ADDR; `cargo
# xtask icount-rxe` runs it). BENCH is benches/c/icount.c linked with
# -ldat2. For each provider (`ofa`, `udat`) and each K, BENCH makes K
# signalled 4 KiB RDMA writes between two Endpoints of one IA connected
# through a PSP, under callgrind collecting only inside
# dat_ep_post_rdma_write, and this prints, on stdout:
#   ICOUNT PROVIDER K INSTRUCTIONS      callgrind's total for the run
#   SELF PROVIDER K LINE                callgrind_annotate's self costs
#   INCLUSIVE PROVIDER K LINE           its inclusive costs
# A provider that fails to open, connect or post stops the run with the
# bench's output and a non-zero status.

PLUGIN=${1:?usage: icount-rxe.sh PLUGIN.so BENCH K...}
BENCH=${2:?usage: icount-rxe.sh PLUGIN.so BENCH K...}
shift 2
[ $# -gt 0 ] || { echo "usage: icount-rxe.sh PLUGIN.so BENCH K..." >&2; exit 2; }
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

# count PROVIDER K: one run under callgrind, and its figures.
count() {
	out="$DIR/callgrind.$1.$2"
	log="$DIR/log.$1.$2"
	started=$(date +%s)
	if ! timeout 600 valgrind --tool=callgrind --toggle-collect=dat_ep_post_rdma_write \
		--callgrind-out-file="$out" "$BENCH" -P "$1" write_4k "$2" > "$log" 2>&1 ||
		! grep -q "^icount: write_4k x $2 .*: ok" "$log"; then
		echo "icount-rxe: $1, K = $2, failed; its output:"
		cat "$log"
		exit 1
	fi
	echo "icount-rxe: $1, K = $2: $(($(date +%s) - started)) s" >&2
	echo "ICOUNT $1 $2 $(sed -n 's/^summary: *//p' "$out")"
	callgrind_annotate --inclusive=no --auto=no --threshold=100 "$out" | sed "s/^/SELF $1 $2 /"
	callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$out" | sed "s/^/INCLUSIVE $1 $2 /"
}

for provider in ofa udat; do
	for k in "$@"; do
		count "$provider" "$k"
	done
done
