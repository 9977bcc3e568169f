#!/usr/bin/env bash
# Prepares the real data sets of bench/init_quality.py in OUT (default
# /tmp/pstrain-datasets): OUT/flights and OUT/movielens, each with
# train.tsv, eval.tsv and schema.json. Fetches from Debian's and npm's
# registries only:
#   flights    npm vega-datasets 3.2.1 (data/flights-3m.parquet), read with
#              npm hyparquet 1.33.0 + hyparquet-compressors 1.1.2 (flights.mjs)
#   movielens  Debian r-cran-dslabs (data `movielens`), read with Rscript
#              (Debian r-base-core) (movielens.R)
# Needs node/npm and Rscript: apt-get install nodejs npm r-base-core.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-/tmp/pstrain-datasets}
mkdir -p "$OUT/fetch" "$OUT/flights" "$OUT/movielens"
cd "$OUT/fetch"
for tool in node npm Rscript apt-get dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "prepare: $tool is missing (apt-get install nodejs npm r-base-core)" >&2; exit 1; }
done
if [[ ! -s "$OUT/flights/eval.tsv" ]]; then
  [[ -f vega-datasets-3.2.1.tgz ]] || npm pack --silent vega-datasets@3.2.1 >/dev/null
  tar xzf vega-datasets-3.2.1.tgz package/data/flights-3m.parquet
  [[ -d node_modules/hyparquet-compressors ]] ||
    npm install --silent --no-save hyparquet@1.33.0 hyparquet-compressors@1.1.2 >/dev/null
  cp "$HERE/flights.mjs" .
  node flights.mjs package/data/flights-3m.parquet "$OUT/flights"
fi
if [[ ! -s "$OUT/movielens/eval.tsv" ]]; then
  ls r-cran-dslabs_*.deb >/dev/null 2>&1 || apt-get download r-cran-dslabs
  dpkg-deb -x r-cran-dslabs_*.deb dslabs
  Rscript "$HERE/movielens.R" dslabs/usr/lib/R/site-library/dslabs/data "$OUT/movielens"
fi
echo "prepare: data sets in $OUT/flights and $OUT/movielens"
