// Creates INDEX with COUNT documents through `client.helpers.bulk`, then counts them back.
// Document i has _id `d<i>`, `n: i` (a unique sort key), `group: i % 7` and a short text.
import { args, client, report } from './common.mjs'

const { url, index, count } = args('url', 'index', 'count')
const es = client(url)
const total = Number(count)

async function * documents () {
  for (let n = 0; n < total; n++) {
    yield { id: `d${n}`, n, group: `g${n % 7}`, title: `document number ${n}` }
  }
}

await report(async () => {
  const info = await es.info() // the first request: the client's product check runs on it
  await es.indices.create({
    index,
    settings: { number_of_shards: 2 },
    mappings: {
      properties: { n: { type: 'integer' }, group: { type: 'keyword' }, title: { type: 'text' } }
    }
  })
  const failures = []
  const stats = await es.helpers.bulk({
    datasource: documents(),
    flushBytes: 64 * 1024,
    concurrency: 2,
    refreshOnCompletion: index,
    onDocument: ({ id, ...source }) => [{ index: { _index: index, _id: id } }, source],
    onDrop: (dropped) => failures.push(dropped)
  })
  const counted = await es.count({ index })
  return {
    version: info.version.number,
    total: stats.total,
    successful: stats.successful,
    failed: stats.failed,
    aborted: stats.aborted,
    failures: failures.slice(0, 3),
    count: counted.count
  }
})
