#!/bin/sh
# The soak on a soft-RoCE device through udat's libdat2 plug-in, as a
# thread-safe provider: `soak-rxe.sh PLUGIN.so SOAK SECONDS WINDOW`, under
# `cargo xtask softroce` (which exports UDAT_RDMA_DEVICE). SOAK is
# tests/soak/soak.c linked with -ldat2; `cargo xtask soak` runs this.
USAGE="usage: soak-rxe.sh PLUGIN.so SOAK SECONDS WINDOW"
PLUGIN=${1:?$USAGE}
SOAK=${2:?$USAGE}
SECONDS_=${3:?$USAGE}
WINDOW=${4:?$USAGE}
DEV=${UDAT_RDMA_DEVICE:?}
DIR=$(mktemp -d /tmp/soak-rxe.XXXXXX)
echo "udat u2.0 threadsafe default $PLUGIN dapl.2.0 \"verbs $DEV\" \"\"" > "$DIR/dat.conf"
export DAT_OVERRIDE="$DIR/dat.conf"
ulimit -l unlimited
# Capacities the soak's objects fit in with room to spare: the slots are
# written once each within minutes, after which the resident set must
# stay flat (docs/c-abi.md, "Resident memory under churn"). At the
# default capacities rxe's slower cycles would still be writing new slots
# when the check looks.
export UDAT_CAPACITY=ias=8,pzs=32,lmrs=32,rmrs=32,evds=64,cnos=8,eps=32,psps=16,rsps=8,crs=32,srqs=8,events=4096
exec "$SOAK" udat "$SECONDS_" "$WINDOW"
