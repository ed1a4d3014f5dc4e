#!/bin/sh
# udat-perf in loopback on a soft-RoCE device, beside perftest, with a
# dat.conf that names udat's plug-in and OFA dapl's cma provider, each
# twice: the client's line and a loopback server's, so that each side
# has a provider of its own (the lines say `nonthreadsafe`).
#
# Usage: rxe.sh PLUGIN.so UDAT-PERF ARGS...   (under `cargo xtask
# softroce`, which exports UDAT_RDMA_DEVICE and UDAT_RDMA_ADDR; `cargo
# xtask perf` runs it). Each ARGS is one run's options, as one word:
# `UDAT-PERF loopback ARGS --compare` runs for each, in turn. The IA
# names for `--api dat2:NAME:SERVER` are `udat` and `udat-server` (the
# plug-in on the device, and on its port 1), `ofa` and `ofa-server` (OFA's
# cma provider on the device's network interface). A run that fails
# makes the exit status 1, once the others have run.

USAGE="usage: rxe.sh PLUGIN.so UDAT-PERF ARGS..."
PLUGIN=${1:?$USAGE}
PERF=${2:?$USAGE}
shift 2
[ $# -gt 0 ] || { echo "$USAGE" >&2; exit 2; }
DEV=${UDAT_RDMA_DEVICE:?}
ADDR=${UDAT_RDMA_ADDR:?}
NETDEV=$(ls /sys/class/infiniband/"$DEV"/device/net 2>/dev/null | head -1)
[ -n "$NETDEV" ] || NETDEV=$(ip -o -4 addr show | awk -v a="$ADDR" 'index($4, a"/") == 1 { print $2; exit }')
DIR=$(mktemp -d /tmp/udat-perf.XXXXXX)

cat > "$DIR/dat.conf" <<CONF
udat u2.0 nonthreadsafe default $PLUGIN dapl.2.0 "verbs $DEV" ""
udat-server u2.0 nonthreadsafe default $PLUGIN dapl.2.0 "verbs $DEV:1" ""
ofa u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$NETDEV 0" ""
ofa-server u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$NETDEV 0" ""
CONF
# OFA's timers as its programs need them on rxe in an emulated guest.
export DAT_OVERRIDE="$DIR/dat.conf" DAPL_ACK_TIMER=21 DAPL_ACK_RETRY=7
ulimit -l unlimited

failed=0
for run in "$@"; do
	# ARGS unquoted: one word per option.
	"$PERF" loopback $run --compare || failed=1
done
rm -rf "$DIR"
exit $failed
