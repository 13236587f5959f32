#!/usr/bin/env bash
# scripts/fetch_data.sh against local mirrors built at test time from the copy this machine has
# (found as a user's a2sgd-train finds it: the data home's ptb folder) and from Debian's
# Fashion-MNIST package: a verified fetch lands where a2sgd-train reads without --data-dir; a
# corrupt, a partial and an unreachable source each fail with their exit code, naming the file,
# and leave nothing where a2sgd-train reads, nor lose a data set that was there.
# Usage: check_fetch_data.sh FETCH_SCRIPT A2SGD_TRAIN WORKDIR
set -u
script=$1 train=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# run NAME EXPECTED_RC CMD...: runs CMD, keeps its output in $work/NAME.out, checks the exit code.
run() {
  local name=$1 want=$2; shift 2
  "$@" > "$work/$name.out" 2>&1
  local rc=$?
  [[ $rc -eq $want ]] || { fail "$name: exit $rc, expected $want"; sed 's/^/    /' "$work/$name.out"; }
}
expect_text() { grep -qF -- "$2" "$work/$1.out" || { fail "$1: output lacks '$2'"; sed 's/^/    /' "$work/$1.out"; }; }
nothing_left() {  # nothing at the destination, no staging folder next to it
  [[ ! -e $1 ]] || fail "$2: $1 exists after a failed fetch"
  local left
  left=$(find "$(dirname "$1")" -maxdepth 1 -name ".$(basename "$1").*" 2>/dev/null)
  [[ -z $left ]] || fail "$2: staging left behind: $left"
}

if [[ -n ${A2SGD_DATA_DIR:-} ]]; then home=$A2SGD_DATA_DIR
elif [[ -n ${XDG_DATA_HOME:-} ]]; then home=$XDG_DATA_HOME/a2sgd
else home=$HOME/.local/share/a2sgd; fi
have=$home/ptb
if ! "$script" ptb --check --dest "$have" > /dev/null 2>&1; then
  if [[ ${CI:-} == true ]]; then
    echo "FAIL: no verified Penn Treebank in $have: CI fills the data home before the tests (.ci/run)"
    exit 1
  fi
  echo "SKIPPED: no verified Penn Treebank in $have (scripts/fetch_data.sh ptb)"
  exit 0
fi

# A mirror as a site would keep one, read through file://.
mkdir -p "$work/mirror"
cp "$have"/ptb.{train,valid,test}.txt "$work/mirror/"
run fetch 0 env A2SGD_DATA_DIR="$work/home" "$script" ptb --from "file://$work/mirror"
run check 0 env A2SGD_DATA_DIR="$work/home" "$script" ptb --check
for f in ptb.train.txt ptb.valid.txt ptb.test.txt; do
  cmp -s "$work/mirror/$f" "$work/home/ptb/$f" || fail "fetch: $work/home/ptb/$f differs from the mirror's"
done
run again 0 env A2SGD_DATA_DIR="$work/home" "$script" ptb --from "file://$work/nowhere"
expect_text again "already in"

# a2sgd-train finds the fetched corpus without --data-dir (a tiny model: the point is the lookup).
run train 0 env A2SGD_DATA_DIR="$work/home" "$train" --model lstm --hidden 8 --layers 1 --steps 1 --eval-every 0 \
  --eval-batch 200 --no-progress-bar
expect_text train "ptb"
# ... and says where it looked, and how to fetch, when the data home is empty.
run train_missing 2 env A2SGD_DATA_DIR="$work/empty" "$train" --model lstm --steps 1 --no-progress-bar
expect_text train_missing "$work/empty/ptb"
expect_text train_missing "a2sgd-fetch-data ptb"

# A corrupt file (one byte changed): exit 4, the file named, nothing written.
mkdir -p "$work/corrupt"
cp "$work/mirror"/* "$work/corrupt/"
printf 'X' | dd of="$work/corrupt/ptb.valid.txt" bs=1 seek=1000 conv=notrunc status=none
run corrupt 4 env A2SGD_DATA_DIR="$work/home2" "$script" ptb --from "file://$work/corrupt"
expect_text corrupt "ptb.valid.txt"
nothing_left "$work/home2/ptb" corrupt

# A partial download (a truncated file): exit 4, nothing written.
mkdir -p "$work/partial"
cp "$work/mirror"/* "$work/partial/"
head -c 100000 "$work/mirror/ptb.train.txt" > "$work/partial/ptb.train.txt"
run partial 4 env A2SGD_DATA_DIR="$work/home3" "$script" ptb --from "$work/partial"
expect_text partial "ptb.train.txt"
nothing_left "$work/home3/ptb" partial

# Offline (nothing listens on the discard port): exit 3, the file and the way out named.
run offline 3 env A2SGD_DATA_DIR="$work/home4" "$script" ptb --from "http://127.0.0.1:9/ptb"
expect_text offline "ptb.train.txt"
expect_text offline "--from"
nothing_left "$work/home4/ptb" offline

# A forced fetch from a corrupt source keeps the verified data set that was there.
run force_corrupt 4 env A2SGD_DATA_DIR="$work/home" "$script" ptb --force --from "$work/corrupt"
run still_there 0 env A2SGD_DATA_DIR="$work/home" "$script" ptb --check
# A damaged data set in place is found by --check and replaced by a verified fetch.
chmod u+w "$work/home/ptb/ptb.test.txt" && echo damaged > "$work/home/ptb/ptb.test.txt"
run check_damaged 4 env A2SGD_DATA_DIR="$work/home" "$script" ptb --check
expect_text check_damaged "ptb.test.txt"
run repair 0 env A2SGD_DATA_DIR="$work/home" "$script" ptb --from "$work/mirror"
run repaired 0 env A2SGD_DATA_DIR="$work/home" "$script" ptb --check

# Mikolov's simple-examples.tgz layout.
mkdir -p "$work/tgz/simple-examples/data"
cp "$work/mirror"/* "$work/tgz/simple-examples/data/"
tar -czf "$work/simple-examples.tgz" -C "$work/tgz" simple-examples
run tarball 0 "$script" ptb --from "file://$work/simple-examples.tgz" --dest "$work/home5/ptb"
run tarball_check 0 "$script" ptb --check --dest "$work/home5/ptb"

# Bad usage: exit 2.
run no_dataset 2 "$script"
run unknown_dataset 2 "$script" cifar10
run unknown_option 2 "$script" ptb --bogus

# Fashion-MNIST from Debian's package, recompressed (the sums are of the decompressed data), and
# a corrupt image file.
debian=/usr/share/datasets/fashion-mnist
if [[ -f $debian/train-images-idx3-ubyte.gz ]]; then
  mkdir -p "$work/fm" "$work/fm_bad"
  for f in "$debian"/*-ubyte.gz; do gzip -dc "$f" | gzip -1 > "$work/fm/$(basename "$f")"; done
  run fm 0 env A2SGD_DATA_DIR="$work/home6" "$script" fashion-mnist --from "file://$work/fm"
  run fm_check 0 env A2SGD_DATA_DIR="$work/home6" "$script" fashion-mnist --check
  cp "$work/fm"/* "$work/fm_bad/"
  gzip -dc "$work/fm/t10k-labels-idx1-ubyte.gz" | head -c 5000 | gzip > "$work/fm_bad/t10k-labels-idx1-ubyte.gz"
  run fm_bad 4 env A2SGD_DATA_DIR="$work/home7" "$script" fashion-mnist --from "$work/fm_bad"
  expect_text fm_bad "t10k-labels-idx1-ubyte.gz"
  nothing_left "$work/home7/fashion-mnist" fm_bad
else
  echo "note: no $debian (Debian's dataset-fashion-mnist): the Fashion-MNIST cases are not run"
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "fetch_data: every case behaved as specified"
