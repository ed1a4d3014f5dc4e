#!/bin/sh
# MVAPICH2's OSU benchmarks and MPICH's test/mpi suites over DAT providers
# on a soft-RoCE device, every message through DAT (shared memory off).
# Run by `cargo xtask mpi` under `cargo xtask softroce`, which exports
# UDAT_RDMA_DEVICE and UDAT_RDMA_ADDR; the rest comes from the xtask:
#
#   MPI_PREFIX      MVAPICH2's install prefix (bin/mpiexec, libexec/...)
#   MPI_TESTS       its configured and built test/mpi directory
#   MPI_PLUGIN      udat's libdat2 plug-in (libudat_dapl.so)
#   MPI_PROVIDERS   which providers: udat, udat2 (udat's plug-in under a
#                   second name, to run udat against itself), ofa (OFA
#                   dapl's cma)
#   MPI_OSU         the OSU benchmarks to run, 2 ranks each
#   MPI_ROUNDS      how many times each runs over each provider (1)
#   MPI_SUITES      test/mpi directories, each through runtests/testlist
#   MPI_RANKS       the rank counts runtests runs each suite at
#   MPI_TIMEOUT     seconds an OSU benchmark may take
#   MPITEST_TIMEOUT seconds a test/mpi program may take (runtests' default)
#   MPI_FLAGPOLL    tests/mpi/flagpoll, built (optional)
#   MPI_LISTS       the testlist of each suite's run at each count, as
#                   SUITE.NP.testlist: the entries that run takes
#
# Every result is one line on stdout, for the xtask's table:
#   mpi osu PROVIDER TEST SIZE VALUE
#   mpi case PROVIDER SUITE TEST NP ok|fail|hang DETAIL
#   mpi retries PROVIDER TEST COUNT   (the device's transport retries)
# A hang is a run that outlived its time limit and was killed.

: "${MPI_PREFIX:?}" "${MPI_TESTS:?}" "${MPI_LISTS:?}" "${MPI_PLUGIN:?}" "${UDAT_RDMA_DEVICE:?}" "${UDAT_RDMA_ADDR:?}"
# osu_bw and osu_bibw move about 12 GB at their 20 rounds of 64 messages
# from 16 KiB to 4 MiB: four minutes at rxe's 50 MB/s under TCG, half an
# hour on a busy host. The limit names a hang, not a slow run.
MPI_TIMEOUT=${MPI_TIMEOUT:-1200}
export MPITEST_TIMEOUT=${MPITEST_TIMEOUT:-120}
LOG=/tmp/mpi
. "$(dirname "$0")/report.sh"
mkdir -p "$LOG"
NETDEV=$(ip -o -4 addr show | awk -v a="$UDAT_RDMA_ADDR" 'index($4, a"/") == 1 { print $2; exit }')

cat > "$LOG/dat.conf" <<CONF
udat u2.0 nonthreadsafe default $MPI_PLUGIN dapl.2.0 "verbs $UDAT_RDMA_DEVICE" ""
udat2 u2.0 nonthreadsafe default $MPI_PLUGIN dapl.2.0 "verbs $UDAT_RDMA_DEVICE" ""
ofa u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "$NETDEV 0" ""
CONF
export DAT_OVERRIDE="$LOG/dat.conf" MV2_USE_SHARED_MEM=0
ulimit -l unlimited

# What runtests calls for mpiexec: hydra's fork launcher (one host), under
# a time limit of its own a little past the one runtests gives hydra, so
# that a run hydra fails to stop is still stopped and named.
cat > "$LOG/mpiexec" <<WRAP
#!/bin/sh
limit=\$(( \${MPIEXEC_TIMEOUT:-$MPITEST_TIMEOUT} + 15 ))
timeout -k 5 \$limit "$MPI_PREFIX/bin/mpiexec" -launcher fork "\$@"
rc=\$?
[ \$rc -eq 124 ] && echo "mpi-harness: hang: no exit within \$limit s"
exit \$rc
WRAP
chmod +x "$LOG/mpiexec"

# osu PROVIDER TEST: one benchmark, two ranks.
osu() {
	out="$LOG/$1.$2"
	before=$(retries)
	timeout -k 5 "$MPI_TIMEOUT" "$MPI_PREFIX/bin/mpiexec" -launcher fork -n 2 \
		"$MPI_PREFIX/libexec/osu-micro-benchmarks/$2" > "$out" 2>&1
	rc=$?
	report "$1" "$2" "$out" $rc "$MPI_TIMEOUT"
	retried "$1" "$2" "$before"
}

# suite PROVIDER DIR NP: one test/mpi directory through runtests, at NP
# ranks, from the testlist the xtask chose for that count. Past two ranks
# the guest's two CPUs are shared, and at 4 a program took up to 2.5 times
# runtests' default on either provider (docs/mpi.md), so there the default
# is three quarters of it a rank (360 s at 4); a program's own timeLimit=
# stands.
suite() {
	xml="$LOG/$1.$2.$3.xml"
	limit=$MPITEST_TIMEOUT
	[ "$3" -gt 2 ] && limit=$((MPITEST_TIMEOUT * $3 * 3 / 4))
	(cd "$MPI_TESTS/$2" && MPITEST_TIMEOUT=$limit perl ../runtests -srcdir=. -tests="$MPI_LISTS/$2.$3.testlist" \
		-mpiexec="$LOG/mpiexec" -np="$3" -maxnp="$3" -xmlfile="$xml") > "$LOG/$1.$2.$3.out" 2>&1
	tail -1 "$LOG/$1.$2.$3.out"
	# Each <MPITEST> is NAME, NP, WORKDIR, STATUS and, on failure, TESTDIFF
	# with the output.
	perl -0ne '
		while (/<MPITEST>\s*<NAME>(.*?)<\/NAME>\s*<NP>(\d+)<\/NP>.*?<STATUS>(\w+)<\/STATUS>(?:\s*<TESTDIFF>(.*?)<\/TESTDIFF>)?/sg) {
			my ($name, $np, $status, $diff) = ($1, $2, $3, $4 // "");
			if ($status eq "pass") { print "mpi case '"$1 $2"' $name $np ok\n"; next }
			my $hang = $diff =~ /APPLICATION TIMED OUT|mpi-harness: hang/;
			my ($why) = grep { /\S/ && !/^\s*No Errors/ } split /\n/, $diff;
			$why //= "no output"; $why =~ s/\s+/ /g; $why = substr($why, 0, 160);
			print "mpi case '"$1 $2"' $name $np ", ($hang ? "hang" : "fail"), " $why\n";
		}' "$xml"
}

# What MVAPICH2's RDMA fast path relies on, over raw verbs on this device:
# lengths of one byte, and of two (docs/conformance.md).
if [ -n "$MPI_FLAGPOLL" ]; then
	timeout -k 5 300 "$MPI_FLAGPOLL" "$UDAT_RDMA_ADDR" 500 252 300 1020 4000 || echo "flagpoll: failed ($?)"
fi

# Each OSU benchmark runs over every provider before the next begins, and
# again for each of MPI_ROUNDS rounds, so that a host whose load changes
# during the run weighs on both alike; every other round takes the
# providers in the opposite order, so that none always runs first.
reversed=
for p in $MPI_PROVIDERS; do
	reversed="$p $reversed"
done
round=0
while [ "$round" -lt "${MPI_ROUNDS:-1}" ]; do
	order=$MPI_PROVIDERS
	[ $((round % 2)) -eq 1 ] && order=$reversed
	for t in $MPI_OSU; do
		for p in $order; do
			export MV2_DAPL_PROVIDER=$p
			osu "$p" "$t"
		done
	done
	round=$((round + 1))
done
for p in $MPI_PROVIDERS; do
	export MV2_DAPL_PROVIDER=$p
	for d in $MPI_SUITES; do
		for n in $MPI_RANKS; do
			suite "$p" "$d" "$n"
		done
	done
done
echo "mpi done"
