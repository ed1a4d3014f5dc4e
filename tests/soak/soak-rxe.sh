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
exec "$SOAK" udat "$SECONDS_" "$WINDOW"
