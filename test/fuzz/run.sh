#!/bin/sh
# Run one libFuzzer target: run.sh BUILD_DIR NAME SECONDS.
# The seeds of test/fuzz/corpus/NAME/ are read, what is found goes to
# BUILD_DIR/corpus/NAME/, with the dictionary of the input's format
# (json.dict, http.dict). Prints one line; on a failure the fuzzer's
# report too, and exits 1.
set -u
build=$1 name=$2 secs=$3
bin=$build/fuzz_$name
work=$build/corpus/$name
log=$build/fuzz_$name.log
mkdir -p "$work"
case $name in
desc|hs_body|hs_frame|file_doc) dict=-dict=test/fuzz/json.dict ;;
metad_http) dict=-dict=test/fuzz/http.dict ;;
*) dict="" ;;
esac
start=$(date +%s)
# -timeout: one input over 10 s is a hang; -rss_limit_mb: a leak or a
# blow-up; ASan checks leaks at the end of each input that leaked.
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	-max_len=8192 -print_final_stats=1 \
	-artifact_prefix="$build/crash-$name-" $dict \
	"$work" "test/fuzz/corpus/$name" >"$log" 2>&1
rc=$?
end=$(date +%s)
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
if [ $rc -ne 0 ]; then
	echo "fuzz $name: FAILED (exit $rc) after $((end - start)) s; report:"
	tail -n 60 "$log"
	ls "$build"/crash-"$name"-* 2>/dev/null
	exit 1
fi
echo "fuzz $name: ok, ${runs:-?} runs in $((end - start)) s, $cov, corpus $(ls "$work" | wc -l)"
