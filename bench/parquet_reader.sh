#!/usr/bin/env bash
# Reader throughput on the same rows as TSV and as Parquet (issue 40):
# `pstrain gen` writes ROWS Criteo-layout rows (label, 13 integers, 26
# tokens); a Node.js script (parquet-wasm 0.8.0 + apache-arrow 21.2.0, as
# tests/data/parquet/fixtures/make_fixtures.mjs) writes the same rows as
# Parquet in four variants: snappy or zstd, with or without dictionaries,
# row groups of ROW_GROUP rows (empty fields become nulls, so every variant
# reads as the TSV does: same ids, same values). Then `pstrain_bench reader`
# reads each input with a DataReader end to end (batches built), for each
# THREADS value, interleaved (TSV, then each variant) for ROUNDS rounds.
#
# Prints each measurement as a JSON line (round added), then one summary
# line per input and threads value: the medians over the rounds, the ratio
# to the TSV at the same threads (vs_tsv), and whether the batches'
# checksum is the TSV's (same_rows).
#
# A bench, not CI. Run from the repository root once build/bin/pstrain and
# build/bin/pstrain_bench are built, with nothing else running:
#   bench/parquet_reader.sh [ROWS] [ROUNDS] > results.jsonl
# Environment: WORK (scratch folder, /tmp/pstrain_parquet_reader: the data
# is kept there and reused), NPM_DIR (where the npm packages are installed,
# /tmp/pstrain_parquet_npm; never the repository), ROW_GROUP (131072),
# THREADS (1,2), PASSES (timed passes per measurement, 1), BENCH (the
# pstrain_bench binary, build/bin/pstrain_bench: another build to compare).
set -euo pipefail

ROWS=${1:-1000000}
ROUNDS=${2:-5}
WORK=${WORK:-/tmp/pstrain_parquet_reader}
NPM_DIR=${NPM_DIR:-/tmp/pstrain_parquet_npm}
ROW_GROUP=${ROW_GROUP:-131072}
THREADS=${THREADS:-1,2}
PASSES=${PASSES:-1}
BENCH=${BENCH:-build/bin/pstrain_bench}
VARIANTS=(snappy_dict snappy_plain zstd_dict zstd_plain)
BIN=build/bin

for tool in node npm python3 "$BIN/pstrain" "$BENCH"; do
  command -v "$tool" >/dev/null || { echo "parquet_reader.sh: $tool is missing" >&2; exit 2; }
done
mkdir -p "$WORK" "$NPM_DIR"
log() { echo "parquet_reader.sh: $*" >&2; }

# The rows, once per ROWS.
TSV="$WORK/rows-$ROWS.tsv"
if [[ ! -s "$TSV" ]]; then
  log "generating $ROWS rows into $TSV"
  "$BIN/pstrain" gen --rows="$ROWS" --out="$TSV" >&2
fi

# The npm writer, outside the repository.
if [[ ! -d "$NPM_DIR/node_modules/parquet-wasm" || ! -d "$NPM_DIR/node_modules/apache-arrow" ]]; then
  log "installing parquet-wasm 0.8.0 and apache-arrow 21.2.0 in $NPM_DIR"
  (cd "$NPM_DIR" && npm install --no-audit --no-fund parquet-wasm@0.8.0 apache-arrow@21.2.0 >&2)
fi
# In NPM_DIR, so that its imports resolve to NPM_DIR/node_modules.
cat > "$NPM_DIR/tsv_to_parquet.mjs" <<'EOF'
// node tsv_to_parquet.mjs IN.tsv ROW_GROUP OUT_PREFIX VARIANT...: the rows
// of a Criteo-layout TSV (label, I1..I13 integers, C1..C26 tokens; an empty
// field is a null) as OUT_PREFIX<VARIANT>.parquet, VARIANT one of
// snappy_dict, snappy_plain, zstd_dict, zstd_plain.
import fs from 'fs';
import * as arrow from 'apache-arrow';
import * as pw from 'parquet-wasm/node';

const [input, rowGroupText, prefix, ...variants] = process.argv.slice(2);
const lines = fs.readFileSync(input, 'latin1').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
const n = lines.length;
const label = new Int32Array(n);
const ints = Array.from({ length: 13 }, () => new Array(n));
const toks = Array.from({ length: 26 }, () => new Array(n));
for (let r = 0; r < n; ++r) {
  const f = lines[r].split('\t');
  if (f.length !== 40) throw new Error(`${input}:${r + 1}: ${f.length} fields, not 40`);
  label[r] = Number(f[0]);
  for (let i = 0; i < 13; ++i) ints[i][r] = f[1 + i] === '' ? null : BigInt(f[1 + i]);
  for (let c = 0; c < 26; ++c) toks[c][r] = f[14 + c] === '' ? null : f[14 + c];
}
const columns = { label: arrow.makeVector(label) };
for (let i = 0; i < 13; ++i) columns[`I${i + 1}`] = arrow.vectorFromArray(ints[i], new arrow.Int64);
for (let c = 0; c < 26; ++c) columns[`C${c + 1}`] = arrow.vectorFromArray(toks[c], new arrow.Utf8);
const ipc = arrow.tableToIPC(new arrow.Table(columns), 'stream');
const codecs = { snappy: pw.Compression.SNAPPY, zstd: pw.Compression.ZSTD };
for (const v of variants) {
  const [codec, encoding] = v.split('_');
  if (!(codec in codecs) || !['dict', 'plain'].includes(encoding)) throw new Error(`variant ${v}`);
  const props = new pw.WriterPropertiesBuilder()
      .setCompression(codecs[codec])
      .setDictionaryEnabled(encoding === 'dict')
      .setMaxRowGroupSize(Number(rowGroupText))
      .setCreatedBy('parquet-wasm 0.8.0 (pstrain bench/parquet_reader.sh)')
      .build();
  const bytes = pw.writeParquet(pw.Table.fromIPCStream(ipc), props);
  fs.writeFileSync(`${prefix}${v}.parquet`, bytes);
  console.error(`${prefix}${v}.parquet: ${n} rows, ${bytes.length} bytes`);
}
EOF
PREFIX="$WORK/rows-$ROWS-rg$ROW_GROUP-"
missing=()
for v in "${VARIANTS[@]}"; do [[ -s "$PREFIX$v.parquet" ]] || missing+=("$v"); done
if (( ${#missing[@]} > 0 )); then
  log "writing ${missing[*]} (a few minutes for a million rows)"
  node --max-old-space-size=8192 "$NPM_DIR/tsv_to_parquet.mjs" "$TSV" "$ROW_GROUP" "$PREFIX" \
    "${missing[@]}" >&2
fi

# The schema of the Parquet files: the Criteo layout's columns by name.
SCHEMA="$WORK/criteo_parquet.json"
python3 - "$SCHEMA" <<'EOF'
import json, sys
json.dump({"format": "parquet", "label": "label", "dense_transform": "log1p_clamp",
           "dense": [f"I{i}" for i in range(1, 14)],
           "sparse": [f"C{i}" for i in range(1, 27)]}, open(sys.argv[1], "w"))
EOF

# The measurements, interleaved.
RAW="$WORK/raw.jsonl"
: > "$RAW"
for ((round = 1; round <= ROUNDS; ++round)); do
  for input in tsv "${VARIANTS[@]}"; do
    if [[ $input == tsv ]]; then
      args=(--reader_data="$TSV")  # the Criteo layout, no schema
    else
      args=(--reader_data="$PREFIX$input.parquet" --reader_schema="$SCHEMA")
    fi
    "$BENCH" reader "${args[@]}" --reader_threads="$THREADS" \
      --reader_passes="$PASSES" --log_level=warn |
      python3 -c 'import json, sys
for line in sys.stdin:
    j = json.loads(line); j["round"] = int(sys.argv[1]); j["variant"] = sys.argv[2]
    print(json.dumps(j, separators=(",", ":")))' "$round" "$input" | tee -a "$RAW"
  done
done

# Medians per input and threads; vs_tsv at the same threads.
python3 - "$RAW" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
groups = {}
for r in rows:
    groups.setdefault((r["variant"], r["threads"]), []).append(r)
def med(rs, key):
    return statistics.median(r[key] for r in rs)
for (variant, threads), rs in groups.items():
    tsv = groups[("tsv", threads)]
    print(json.dumps({
        "summary": "reader", "input": variant, "threads": threads, "rounds": len(rs),
        "rows": rs[0]["rows"], "file_bytes": rs[0]["file_bytes"],
        "rows_per_sec": round(med(rs, "rows_per_sec")),
        "min_rows_per_sec": round(min(r["rows_per_sec"] for r in rs)),
        "max_rows_per_sec": round(max(r["rows_per_sec"] for r in rs)),
        "vs_tsv": round(med(rs, "rows_per_sec") / med(tsv, "rows_per_sec"), 3),
        "rows_per_cpu_sec": round(med(rs, "rows_per_cpu_sec")),
        "vs_tsv_cpu": round(med(rs, "rows_per_cpu_sec") / med(tsv, "rows_per_cpu_sec"), 3),
        "same_rows": all(r["checksum"] == tsv[0]["checksum"] for r in rs),
    }, separators=(",", ":")))
EOF
