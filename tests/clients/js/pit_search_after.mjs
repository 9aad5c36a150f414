// Deep paging of INDEX (made by bulk_load.mjs, so it holds d0..d<count-1>) with `search_after`:
//   byN:       over a point in time, sorted by `n`; the index is changed after the PIT was opened
//              (d0 deleted, `late` added, refreshed), which the PIT must not show.
//   byGroup:   over the same PIT, sorted by a low-cardinality keyword: the implicit `_shard_doc`
//              tiebreaker is what keeps every document exactly once.
//   stateless: no PIT, sorted by `n` descending, against the changed index.
//   afterClose: a search on the closed PIT, which Elasticsearch answers 404.
import { args, client, duplicates, ordered, report } from './common.mjs'

const { url, index } = args('url', 'index')
const es = client(url)

/** Every page of a search_after walk; `request` is the search without `search_after`. */
async function walk (request, size) {
  const hits = []
  const pitIds = new Set()
  const sortLengths = new Set()
  let pages = 0
  let searchAfter
  for (;;) {
    const page = await es.search({ ...request, size, search_after: searchAfter })
    if (page.pit_id !== undefined) pitIds.add(page.pit_id)
    if (page.hits.hits.length === 0) break
    pages++
    for (const hit of page.hits.hits) {
      hits.push(hit)
      sortLengths.add(hit.sort.length)
    }
    searchAfter = page.hits.hits.at(-1).sort
    if (request.pit) request = { ...request, pit: { id: page.pit_id, keep_alive: '1m' } }
  }
  const ids = hits.map((hit) => hit._id)
  return { hits, pages, pitIds: [...pitIds], sortLengths: [...sortLengths], ids, count: ids.length, unique: new Set(ids).size, duplicates: duplicates(ids) }
}

await report(async () => {
  const opened = await es.openPointInTime({ index, keep_alive: '1m' })
  const pit = { id: opened.id, keep_alive: '1m' }
  await es.delete({ index, id: 'd0' })
  await es.index({ index, id: 'late', document: { n: -1, group: 'g0', title: 'written after the PIT' }, refresh: true })

  const byN = await walk({ pit, sort: [{ n: 'asc' }], track_total_hits: false }, 300)
  const byGroup = await walk({ pit, sort: [{ group: 'asc' }] }, 400)
  const closed = await es.closePointInTime({ id: opened.id })
  const stateless = await walk({ index, sort: [{ n: { order: 'desc' } }] }, 500)

  let afterClose
  try {
    await es.search({ pit, size: 1 })
    afterClose = { status: 200 }
  } catch (err) {
    afterClose = { status: err.meta?.statusCode, type: err.meta?.body?.error?.type }
  }

  const summary = ({ hits, ids, ...rest }) => ({ ...rest, hasD0: ids.includes('d0'), hasLate: ids.includes('late') })
  return {
    openShards: opened._shards,
    byN: { ...summary(byN), ordered: ordered(byN.hits.map((h) => h._source.n)) },
    byGroup: { ...summary(byGroup), ordered: ordered(byGroup.hits.map((h) => h._source.group)) },
    stateless: { ...summary(stateless), ordered: ordered(stateless.hits.map((h) => h._source.n), true) },
    closed,
    afterClose
  }
})
