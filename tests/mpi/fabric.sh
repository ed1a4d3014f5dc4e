#!/bin/sh
# MVAPICH2's OSU benchmarks with one rank on each of two soft-RoCE hosts.
# Run by `cargo xtask mpi` under `cargo xtask fabric`, which runs it on
# both guests (UDAT_FABRIC_ROLE server at UDAT_RDMA_ADDR 10.0.0.1, client
# at 10.0.0.2); MPI_PREFIX, MPI_PLUGIN, MPI_PROVIDERS and MPI_OSU as for
# run.sh, whose result lines this prints (from the server).
#
# hydra starts its proxy on each host through a launcher; the guests have
# no ssh, so the server's launcher is this script's `rsh`: a command for
# the client goes over TCP to a shell the client serves (busybox nc), one
# per connection, and the client's output comes back the same way.

: "${MPI_PREFIX:?}" "${MPI_PLUGIN:?}" "${UDAT_FABRIC_ROLE:?}" "${UDAT_FABRIC_CTL:?}"
: "${UDAT_RDMA_DEVICE:?}" "${UDAT_RDMA_ADDR:?}" "${UDAT_PEER_ADDR:?}"
MPI_TIMEOUT=${MPI_TIMEOUT:-600}
PORT=7001
LOG=/tmp/mpi
. "$(dirname "$0")/report.sh"
mkdir -p "$LOG"
# hydra names hosts by their host names; make those the addresses.
hostname "$UDAT_RDMA_ADDR"

sync_peer() { # the fabric's barrier
	echo "sync $1" > "$UDAT_FABRIC_CTL/request.tmp" && mv "$UDAT_FABRIC_CTL/request.tmp" "$UDAT_FABRIC_CTL/request"
	while [ -e "$UDAT_FABRIC_CTL/request" ]; do sleep 0.1; done
}

cat > "$LOG/dat.conf" <<CONF
udat u2.0 nonthreadsafe default $MPI_PLUGIN dapl.2.0 "verbs $UDAT_RDMA_DEVICE" ""
udat2 u2.0 nonthreadsafe default $MPI_PLUGIN dapl.2.0 "verbs $UDAT_RDMA_DEVICE" ""
ofa u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "eth0 0" ""
CONF
export DAT_OVERRIDE="$LOG/dat.conf" MV2_USE_SHARED_MEM=0
ulimit -l unlimited

if [ "$UDAT_FABRIC_ROLE" = client ]; then
	busybox nc -ll -p $PORT -e /bin/sh &
	server=$!
	sync_peer listening
	sync_peer done
	kill "$server"
	exit 0
fi

# The launcher hydra calls: rsh [-x] HOST COMMAND... As ssh does, it
# hands the words of COMMAND, joined by spaces, to a shell on HOST:
# hydra quotes the words that need it for that shell.
cat > "$LOG/rsh" <<'RSH'
#!/bin/sh
while [ "${1#-}" != "$1" ]; do shift; done
host=$1; shift
if [ "$host" = "$(hostname)" ]; then exec sh -c "$*"; fi
{ echo "cd /tmp; $*; exit"; } | busybox nc "$host" 7001
RSH
chmod +x "$LOG/rsh"
sync_peer listening

for p in $MPI_PROVIDERS; do
	for t in $MPI_OSU; do
		out="$LOG/$p.$t"
		before=$(retries)
		MV2_DAPL_PROVIDER=$p timeout -k 5 "$MPI_TIMEOUT" "$MPI_PREFIX/bin/mpiexec" -launcher ssh \
			-launcher-exec "$LOG/rsh" -hosts "$UDAT_RDMA_ADDR,$UDAT_PEER_ADDR" -n 2 \
			-genv MV2_DAPL_PROVIDER "$p" "$MPI_PREFIX/libexec/osu-micro-benchmarks/$t" > "$out" 2>&1
		rc=$?
		report "$p" "$t" "$out" $rc "$MPI_TIMEOUT"
		retried "$p" "$t" "$before"
	done
done
echo "mpi done"
sync_peer done
