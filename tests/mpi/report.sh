# Sourced by run.sh and fabric.sh: the result lines of one OSU benchmark.

# retries: the transport retransmissions this host's RDMA device has made
# so far (rxe's completer_retry_err, over its ports); nothing where the
# device keeps no such counter. rxe's retransmission timer runs out
# about once an ACK timeout under steady traffic, with no packet lost,
# and the message then in flight is sent again (docs/mpi.md), so a figure
# of one size means little without the retries beside it.
retries() {
	cat /sys/class/infiniband/"$UDAT_RDMA_DEVICE"/ports/*/hw_counters/completer_retry_err 2>/dev/null |
		awk '{ s += $1 } END { if (NR) print s }'
}

# retried PROVIDER TEST BEFORE: the retries since BEFORE, one result line
#   mpi retries PROVIDER TEST COUNT
retried() {
	[ -n "$3" ] && echo "mpi retries $1 $2 $(( $(retries) - $3 ))"
	true
}

# report PROVIDER TEST OUTPUT STATUS LIMIT: OUTPUT is the benchmark's
# output, STATUS the exit status of `timeout LIMIT mpiexec ...`.
report() {
	awk -v p="$1" -v t="$2" '/^[0-9]+[ \t]+[0-9.]+/ { print "mpi osu", p, t, $1, $2 }' "$3"
	last=$(awk '/^[0-9]+[ \t]+[0-9.]+/ { s = $1 } END { print s }' "$3")
	where=${last:+after $last B}
	where=${where:-before any size}
	if [ "$4" -eq 0 ]; then
		echo "mpi case $1 osu $2 2 ok"
	elif [ "$4" -eq 124 ] || [ "$4" -eq 137 ]; then
		echo "mpi case $1 osu $2 2 hang no exit within $5 s, $where"
	else
		why=$(grep -m1 -i -E "shouldn't|error|abort|fatal|signal|fail|assert" "$3" | tr -s ' \t' ' ' | cut -c1-160)
		echo "mpi case $1 osu $2 2 fail exit $4 $where: ${why:-no message}"
		tail -15 "$3"
	fi
}
