// Flights (vega-datasets 3.2.1's flights-3m.parquet: 3,000,000 US domestic
// flights of January-June 2001, in time order) as a CTR-like task: will the
// flight arrive more than 15 minutes late (20 % do)? Writes, into OUT_DIR,
// train.tsv (the first 90 % of the rows in time) and eval.tsv (the last
// 10 %), tab-separated without a header: label, then the dense columns
// distance (miles) and dep_hour (0-23), then the categorical columns origin,
// dest, route (origin-dest), hour, weekday; and schema.json for pstrain.
//
// Reader: hyparquet 1.33.0 with hyparquet-compressors 1.1.2 (npm), run by
// bench/datasets/prepare.sh, which fetches them and the data.
//   node flights.mjs FLIGHTS_PARQUET OUT_DIR
import { createWriteStream, writeFileSync } from 'node:fs'
import { asyncBufferFromFile, parquetReadObjects } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'

const [input, out] = process.argv.slice(2)
const file = await asyncBufferFromFile(input)
const rows = await parquetReadObjects({ file, compressors })
const cut = Math.floor(rows.length * 0.9)
const write = (path, part) => new Promise((resolve) => {
  const s = createWriteStream(path)
  let buf = []
  for (const r of part) {
    if (r.delay == null || r.date == null || r.origin == null || r.destination == null) continue
    const hour = r.date.getUTCHours()
    buf.push([Number(r.delay) > 15 ? 1 : 0, Number(r.distance), hour, r.origin, r.destination,
              `${r.origin}-${r.destination}`, hour, r.date.getUTCDay()].join('\t'))
    if (buf.length === 10000) { s.write(buf.join('\n') + '\n'); buf = [] }
  }
  if (buf.length) s.write(buf.join('\n') + '\n')
  s.end(resolve)
})
await write(`${out}/train.tsv`, rows.slice(0, cut))
await write(`${out}/eval.tsv`, rows.slice(cut))
writeFileSync(`${out}/schema.json`, JSON.stringify({
  separator: 'tab', num_columns: 8, label: 0,
  dense: [{ column: 1, transform: 'log1p' }, { column: 2, transform: 'log1p' }],
  sparse: [3, 4, 5, 6, 7],
}, null, 1) + '\n')
console.log(`flights: ${cut} training rows, ${rows.length - cut} eval rows in ${out}`)
