// Writes the "same rows" fixtures of tests/integration/parquet_input_test.cc:
// one small click log as rows.tsv (text with a header) and as Parquet files
// of several codecs, encodings and page layouts, all holding the same
// values, so that training on any of them must give identical parameters.
//
// Writers (independent of pstrain, from npm):
//   parquet-wasm 0.8.0   (the Rust arrow-rs `parquet` crate in WebAssembly)
//   apache-arrow 21.2.0  (Arrow JS, builds the table parquet-wasm writes)
//
// Rerun (from any scratch folder outside the repository):
//   npm install parquet-wasm@0.8.0 apache-arrow@21.2.0
//   cp <repo>/tests/data/parquet/same_rows/make.mjs . &&
//   node make.mjs <repo>/tests/data/parquet/same_rows
// The output is deterministic (a seeded generator written below).
//
// The columns (their order is the same in the TSV and in every Parquet file):
//   clicked    Int8, 0/1: the label
//   converted  Int32, 0/1, null on most unclicked rows and a few others: a
//              second label (a missing label is no label)
//   price      Float64: a few NaN (text "NaN", a missing token), integral
//              values, tiny and huge magnitudes, negatives; rows 123 and
//              777 (0-based) hold +-Infinity ("Infinity" in the text): not a
//              number, so both readers skip these two rows as bad
//   dwell_ms   Int64: a few past 18 digits (the text reader's double path)
//   age        Int32, nullable: a few negative
//   ctr_est    Float32: one in four of full float precision
//   user       Utf8: Zipf-skewed ids, so that ids repeat
//   item_id    Int64: small ids and a few full-range ones (negative too)
//   city       Utf8, nullable: some "", " ", "NA" and "null" (missing in both
//              readers), UTF-8 names, one with inner spaces
//   tags       List<Utf8>: some null lists, some empty lists, null and ""
//              elements
//   history    List<Int64>: item ids, oldest first, up to 8 (the schema
//              keeps the last 5); a few null elements
//   session    Utf8: ignored by the schemas
// In rows.tsv a null is an empty field and a list is its elements joined by
// '|' (a null element is an empty token). Numbers are written as JavaScript
// writes them (String(x)): integers as integers, doubles as the shortest
// text that reads back as the same double (a Float32 value as the shortest
// text of the double it widens to).
import fs from 'fs';
import path from 'path';
import * as arrow from 'apache-arrow';
import * as pw from 'parquet-wasm/node';

const outDir = process.argv[2];
if (!outDir) throw new Error('usage: node make.mjs <output folder>');
const ROWS = 900;

// ---- deterministic data ----------------------------------------------------
let seed = 20261207n;
function rand() {  // 0 <= r < 1, a 64-bit LCG
  seed = (seed * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
  return Number(seed >> 11n) / 2 ** 53;
}
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));  // inclusive
const pick = (a) => a[randInt(0, a.length - 1)];
function randInt64() {  // full range, signed
  let v = 0n;
  for (let b = 0; b < 64; b += 16) v = (v << 16n) | BigInt(randInt(0, 0xffff));
  return BigInt.asIntN(64, v);
}
// Zipf(s) over ranks 1..n by the inverse of its cumulative distribution.
function zipfSampler(n, s) {
  const cdf = [];
  let total = 0;
  for (let r = 1; r <= n; r++) cdf.push(total += 1 / r ** s);
  return () => {
    const u = rand() * total;
    let lo = 0, hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < u) lo = mid + 1; else hi = mid;
    }
    return lo + 1;
  };
}

// The item catalogue: mostly small ids, one in ten a full-range int64.
const ITEMS = Array.from({ length: 300 }, (_, i) => i % 25 === 7 ? randInt64() : BigInt(1000 + i));
const itemRank = zipfSampler(ITEMS.length, 1.0);
const item = () => ITEMS[itemRank() - 1];
const userRank = zipfSampler(500, 1.1);
const CITIES = ['lyon', 'paris', 'São Paulo', '東京', 'new york', 'berlin', 'oslo', 'NA', '',
                ' ', 'null', 'kraków', 'a b  c'];
const TAGS = ['sport', 'news', 'music', 'tech', 'food', 'travel', 'kids', 'été', 'diy', ''];

function makeRows() {
  const rows = [];
  for (let i = 0; i < ROWS; i++) {
    const r = {};
    r.user = `u${userRank()}`;
    r.item_id = item();
    const u = rand();
    r.price = i === 123 ? Infinity : i === 777 ? -Infinity : i % 97 === 5 ? NaN
        : i % 11 === 0 ? randInt(0, 500)                      // integral: "42"
        : i % 53 === 3 ? (rand() - 0.5) * 10 ** randInt(-12, 25)  // "1.5e-7", "3.2e+21"
        : Math.round(rand() * 1e6) / 100 * (i % 41 === 9 ? -1 : 1);
    r.dwell_ms = i % 137 === 17 ? BigInt(randInt(1, 9)) * 10n ** 18n + BigInt(randInt(0, 1e9))
        : BigInt(Math.floor(-Math.log(1 - rand()) * 20000));
    r.age = i % 9 === 4 ? null : i % 101 === 50 ? -randInt(1, 5) : randInt(16, 80);
    r.ctr_est = i % 4 === 0 ? Math.fround(rand() * 0.2) : randInt(0, 255) / 1024;
    r.city = i % 13 === 6 ? null : pick(CITIES);
    if (i % 17 === 3) {
      r.tags = null;
    } else if (i % 7 === 2) {
      r.tags = [];
    } else {
      r.tags = Array.from({ length: randInt(1, 4) }, () => rand() < 0.05 ? null : pick(TAGS));
    }
    if (i % 23 === 11) {
      r.history = null;
    } else {
      r.history = Array.from({ length: randInt(0, 8) }, () => rand() < 0.03 ? null : item());
    }
    const logit = -1 + (r.user.length > 3 ? -0.5 : 0.5) + (r.tags && r.tags.includes('sport') ? 1 : 0);
    r.clicked = u < 1 / (1 + Math.exp(-logit)) ? 1 : 0;
    r.converted = r.clicked ? (i % 29 === 0 ? null : rand() < 0.3 ? 1 : 0)
        : (i % 5 === 0 ? 0 : null);
    r.session = `s${i >> 3}`;
    rows.push(r);
  }
  return rows;
}

// name, Arrow type, nullable
const COLUMNS = [
  ['clicked', new arrow.Int8, false],
  ['converted', new arrow.Int32, true],
  ['price', new arrow.Float64, false],
  ['dwell_ms', new arrow.Int64, false],
  ['age', new arrow.Int32, true],
  ['ctr_est', new arrow.Float32, false],
  ['user', new arrow.Utf8, false],
  ['item_id', new arrow.Int64, false],
  ['city', new arrow.Utf8, true],
  ['tags', new arrow.List(new arrow.Field('item', new arrow.Utf8, true)), true],
  ['history', new arrow.List(new arrow.Field('item', new arrow.Int64, true)), true],
  ['session', new arrow.Utf8, false],
];

// ---- rows.tsv ----------------------------------------------------------------
function text(v) {
  if (v === null) return '';
  if (Array.isArray(v)) return v.map(text).join('|');
  const s = String(v);
  if (/[\t\n\r|"]/.test(s)) throw new Error(`a value the TSV cannot hold: ${JSON.stringify(s)}`);
  return s;
}
function writeTsv(rows) {
  const lines = [COLUMNS.map((c) => c[0]).join('\t')];
  for (const r of rows) lines.push(COLUMNS.map(([name]) => text(r[name])).join('\t'));
  fs.writeFileSync(path.join(outDir, 'rows.tsv'), lines.join('\n') + '\n');
}

// ---- Parquet -----------------------------------------------------------------
// `types`: columns of another Arrow type than COLUMNS says.
function arrowTable(rows, types = {}) {
  const cols = COLUMNS.map(([name, type, nullable]) => [name, types[name] ?? type, nullable]);
  const fields = cols.map(([name, type, nullable]) => new arrow.Field(name, type, nullable));
  const children = cols.map(([name, type]) => {
    const v = arrow.vectorFromArray(rows.map((r) => r[name]), type);
    if (v.data.length !== 1) throw new Error(`${name}: several chunks`);
    return v.data[0];
  });
  const struct = arrow.makeData({ type: new arrow.Struct(fields), length: rows.length, children });
  return new arrow.Table([new arrow.RecordBatch(new arrow.Schema(fields), struct)]);
}
// opts: compression, dictionary, v2, rowGroup, pageBytes
function writeParquet(name, table, opts) {
  let b = new pw.WriterPropertiesBuilder()
      .setCompression(opts.compression ?? pw.Compression.UNCOMPRESSED)
      .setDictionaryEnabled(opts.dictionary ?? false)
      .setWriterVersion(opts.v2 ? pw.WriterVersion.V2 : pw.WriterVersion.V1)
      .setStatisticsEnabled(pw.EnabledStatistics.None)
      .setCreatedBy('parquet-wasm 0.8.0 (pstrain same_rows fixtures)');
  if (opts.rowGroup) b = b.setMaxRowGroupSize(opts.rowGroup);
  if (opts.pageBytes) b = b.setDataPageSizeLimit(opts.pageBytes);
  const t = pw.Table.fromIPCStream(arrow.tableToIPC(table, 'stream'));
  const bytes = pw.writeParquet(t, b.build());
  fs.writeFileSync(path.join(outDir, name + '.parquet'), bytes);
  console.log(`${name}.parquet: ${bytes.length} bytes`);
}

const rows = makeRows();
writeTsv(rows);
const table = arrowTable(rows);
const C = pw.Compression;
// v1 data pages unless named v2; dictionary pages where named dict.
writeParquet('snappy_dict', table, { compression: C.SNAPPY, dictionary: true });
writeParquet('zstd_dict', table, { compression: C.ZSTD, dictionary: true });
writeParquet('snappy_plain', table, { compression: C.SNAPPY });
writeParquet('zstd_plain', table, { compression: C.ZSTD });
writeParquet('gzip_dict', table, { compression: C.GZIP, dictionary: true });
// v2 pages without a dictionary: arrow-rs writes integers DELTA_BINARY_PACKED
// and strings DELTA_BYTE_ARRAY.
writeParquet('none_v2', table, { v2: true });
// Row groups of 250, 250, 250 and 150 rows, several pages per column chunk.
writeParquet('zstd_dict_row_groups', table, { compression: C.ZSTD, dictionary: true,
                                              rowGroup: 250, pageBytes: 1024 });
// tags and history as Utf8 strings joined with '|' (what converting the TSV
// to Parquet column by column gives): the schema's multi_hot splits them.
const joined = (l) => l === null ? null : l.map((v) => v === null ? '' : String(v)).join('|');
const textRows = rows.map((r) => ({ ...r, tags: joined(r.tags), history: joined(r.history) }));
const textTable = arrowTable(textRows, { tags: new arrow.Utf8, history: new arrow.Utf8 });
writeParquet('zstd_lists_as_text', textTable, { compression: C.ZSTD, dictionary: true });
console.log(`rows.tsv: ${ROWS} rows`);
