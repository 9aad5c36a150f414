// SLICES sliced scrolls over INDEX, consumed concurrently with `scrollDocuments`, one per slice,
// and the same slices over a point in time with `search_after` (the way Elasticsearch recommends).
import { args, client, duplicates, report } from './common.mjs'

const { url, index, slices } = args('url', 'index', 'slices')
const es = client(url)
const max = Number(slices)
const sliceIds = [...Array(max).keys()]

async function scrollSlice (id) {
  const ns = []
  const params = { index, size: 200, sort: ['_doc'], slice: { id, max } }
  for await (const source of es.helpers.scrollDocuments(params)) ns.push(source.n)
  return ns
}

async function pitSlice (pit, id) {
  const ns = []
  let searchAfter
  for (;;) {
    const page = await es.search({
      pit: { id: pit, keep_alive: '1m' },
      slice: { id, max },
      size: 250,
      sort: ['_shard_doc'],
      track_total_hits: false,
      search_after: searchAfter
    })
    if (page.hits.hits.length === 0) return ns
    for (const hit of page.hits.hits) ns.push(hit._source.n)
    searchAfter = page.hits.hits.at(-1).sort
  }
}

function summary (perSlice) {
  const all = perSlice.flat()
  return { sizes: perSlice.map((ns) => ns.length), count: all.length, unique: new Set(all).size, duplicates: duplicates(all) }
}

await report(async () => {
  const scroll = summary(await Promise.all(sliceIds.map(scrollSlice)))
  const { id } = await es.openPointInTime({ index, keep_alive: '1m' })
  let pit, closed
  try {
    pit = summary(await Promise.all(sliceIds.map((slice) => pitSlice(id, slice))))
  } finally {
    closed = await es.closePointInTime({ id })
  }
  return { scroll, pit: { ...pit, closed } }
})
